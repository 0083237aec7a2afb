"""LAMMPS `dump custom` snapshots (any columns, orthogonal or triclinic boxes) and an extended XYZ writer."""
from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence

import numpy as np


@dataclass
class Snapshot:
    step: int
    cell: np.ndarray        # (3, 3) rows = lattice vectors
    pbc: List[bool]
    names: List[str]        # column names
    data: np.ndarray        # (N, columns), rows sorted by atom id when the dump has an id column

    def column(self, name: str) -> np.ndarray:
        return self.data[:, self.names.index(name)]

    def columns(self, *names: str) -> np.ndarray:
        return self.data[:, [self.names.index(n) for n in names]]


def cell_from_bounds(bounds: np.ndarray, triclinic: bool) -> np.ndarray:
    """Cell vectors from a dump's box bounds (xlo xhi / ylo yhi / zlo zhi, or the *_bound values and xy, xz, yz)."""
    if not triclinic:
        return np.diag(bounds[:, 1] - bounds[:, 0])
    xy, xz, yz = bounds[0, 2], bounds[1, 2], bounds[2, 2]
    xlo = bounds[0, 0] - min(0.0, xy, xz, xy + xz)
    xhi = bounds[0, 1] - max(0.0, xy, xz, xy + xz)
    ylo, yhi = bounds[1, 0] - min(0.0, yz), bounds[1, 1] - max(0.0, yz)
    return np.array([[xhi - xlo, 0, 0], [xy, yhi - ylo, 0], [xz, yz, bounds[2, 1] - bounds[2, 0]]])


def read_dump(path: str, need: Sequence[str] = ()) -> Iterator[Snapshot]:
    """The snapshots of a dump file; a missing column of `need` is an error naming the file."""
    lines = open(path).read().splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("ITEM: TIMESTEP"):
            i += 1
            continue
        step, n = int(lines[i + 1]), int(lines[i + 3])
        box_head = lines[i + 4].split()
        bounds = np.array([[float(v) for v in lines[i + 5 + d].split()] for d in range(3)])
        names = lines[i + 8].split()[2:]
        for c in need:
            if c not in names:
                raise SystemExit(f"{path}: the dump lacks the column '{c}' (it has {' '.join(names)})")
        data = np.array([[float(v) for v in lines[i + 9 + r].split()] for r in range(n)]).reshape(n, len(names))
        if "id" in names:
            data = data[np.argsort(data[:, names.index("id")])]
        yield Snapshot(step, cell_from_bounds(bounds, "xy" in box_head), [f == "pp" for f in box_head[-3:]], names,
                       data)
        i += 9 + n


def write_extxyz(f, cell, pbc, symbols, positions, forces: Optional[np.ndarray] = None,
                 energy: Optional[float] = None, virial: Optional[np.ndarray] = None, info: str = "") -> None:
    """One frame in extended XYZ (the keys batmobile's reader and ASE take: energy, virial (9 values), forces)."""
    props = "species:S:1:pos:R:3" + (":forces:R:3" if forces is not None else "")
    head = [f'Lattice="{" ".join(f"{v:.10f}" for v in np.asarray(cell).reshape(-1))}"', f"Properties={props}",
            f'pbc="{" ".join("T" if b else "F" for b in pbc)}"']
    if energy is not None:
        head.append(f"energy={energy:.10f}")
    if virial is not None:
        head.append(f'virial="{" ".join(f"{v:.10f}" for v in np.asarray(virial).reshape(-1))}"')
    if info:
        head.append(info)
    f.write(f"{len(symbols)}\n{' '.join(head)}\n")
    for k, name in enumerate(symbols):
        row = list(positions[k]) + (list(forces[k]) if forces is not None else [])
        f.write(name + " " + " ".join(f"{v:.10f}" for v in row) + "\n")
