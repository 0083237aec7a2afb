"""Frames written as DeePMD npy systems, readable without ASE (e.g. on a machine that has torch but not ASE):

    python -m batmobile.deepmd_io SOURCE [SOURCE ...] --out DIR

SOURCE as for batmobile.train (an extended XYZ file, DeePMD set or system, with optional @START:STOP). Frames with
the same atoms in the same order form one system, DIR/sys_NNN (type_map.raw, type.raw, set.000/ with box, coord,
energy, force and, where every frame of the system has one, virial); frames keep their order within a system.
Non-periodic frames (no direction periodic) get a `nopbc` file; partly periodic frames cannot be written (DeePMD has
no per-direction pbc) and are an error.
"""
import argparse
import os
import sys
from typing import Dict, List, Sequence, Tuple

import numpy as np

from .data import DataError, Frame


def write_systems(frames: Sequence[Frame], out: str) -> List[str]:
    """Writes the frames as DeePMD systems under `out` (see the module docstring); returns the system directories."""
    groups: Dict[Tuple[str, ...], List[Frame]] = {}
    for fr in frames:
        if fr.symbols is None:
            raise DataError(f"{fr.origin}: a frame without element names cannot be written as DeePMD data")
        if len(set(fr.pbc)) != 1:
            raise DataError(f"{fr.origin}: pbc {fr.pbc} is periodic along some directions only, which DeePMD npy "
                            f"data cannot say")
        groups.setdefault(tuple(fr.symbols.tolist()), []).append(fr)
    paths = []
    for k, (symbols, group) in enumerate(groups.items()):
        system = os.path.join(out, f"sys_{k:03d}")
        set_dir = os.path.join(system, "set.000")
        os.makedirs(set_dir, exist_ok=True)
        type_map = list(dict.fromkeys(symbols))
        with open(os.path.join(system, "type_map.raw"), "w") as f:
            f.write("\n".join(type_map) + "\n")
        with open(os.path.join(system, "type.raw"), "w") as f:
            f.write("\n".join(str(type_map.index(s)) for s in symbols) + "\n")
        periodic = group[0].pbc[0]
        if not periodic:
            open(os.path.join(system, "nopbc"), "w").close()
        else:
            np.save(os.path.join(set_dir, "box.npy"), np.array([fr.cell.reshape(9) for fr in group]))
        np.save(os.path.join(set_dir, "coord.npy"), np.array([fr.positions.reshape(-1) for fr in group]))
        np.save(os.path.join(set_dir, "energy.npy"), np.array([fr.energy for fr in group]))
        np.save(os.path.join(set_dir, "force.npy"), np.array([fr.forces.reshape(-1) for fr in group]))
        if all(fr.virial is not None for fr in group):
            np.save(os.path.join(set_dir, "virial.npy"), np.array([fr.virial.reshape(9) for fr in group]))
        paths.append(system)
    return paths


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m batmobile.deepmd_io", description=__doc__.split("\n\n")[0])
    p.add_argument("sources", nargs="+", metavar="SOURCE")
    p.add_argument("--out", required=True, help="directory for the systems (sys_NNN)")
    a = p.parse_args(argv)
    from .sources import read_source
    try:
        frames = [fr for spec in a.sources for fr in read_source(spec)]
        paths = write_systems(frames, a.out)
    except DataError as e:
        raise SystemExit(f"error: {e}")
    print(f"wrote {len(frames)} frames as {len(paths)} DeePMD systems in {a.out}")
    return paths


if __name__ == "__main__":
    main(sys.argv[1:])
