#!/usr/bin/env python3
"""Writes the two start configurations of the size/temperature g_OO study (rdf_study.sh), both at the density of
the DFT frames (64 H2O in a cubic 12.444661 A box, 0.9934 g/cm3):

  water64_start.lmp       64 H2O, box 12.444661 A: one DFT frame (default data_0/set.000 frame 0), atoms wrapped
                          into the box and reordered into O H H molecules.
  water216_dftrho_start.lmp  216 H2O, box 12.444661 * (216/64)^(1/3) = 18.666992 A (exactly 1.5 x the DFT box):
                          water216_start.lmp (18.64 A, 0.9977 g/cm3) with its box rescaled to that length.

Why the 216-water start is rescaled rather than built from a DFT frame: 216/64 = 3.375 = 1.5^3 is not the cube of
an integer, so no replication of the 64-water frame gives 216 molecules (2x2x2 gives 512), and a cut-out of a
replicated frame would leave voids and clashes at the faces. The existing 216-water start is an equilibrated liquid
whose box is only 0.145 % shorter than the target; its molecule centres (oxygens) are scaled by 18.666992 / 18.64
and each molecule is moved rigidly with its oxygen, so O-H bonds and H-O-H angles are unchanged and the closest
O-O distance grows by 0.145 %. Both starts are equilibrated for 10 ps in NVT before the RDF is sampled.

usage: make_rdf_study_starts.py [--frame data_0/set.000:0] [--data DIR] [--out DIR]
The frames are read by python/batmobile/data.py (read_deepmd_set; --data defaults to its DEFAULT_ROOT).
"""
import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
from batmobile.data import DEFAULT_ROOT, read_deepmd_set  # noqa: E402

MASS = {"O": 15.9994, "H": 1.00794}
TYPE = {"O": 1, "H": 2}  # LAMMPS types of every water input here: 1 = O, 2 = H


def read_frame(data_dir, spec):
    """(symbols[N], positions[N, 3], box_length) of frame `spec` = 'data_K/set.NNN:F' (a cubic box)."""
    set_path, f = spec.rsplit(":", 1)
    frame = read_deepmd_set(os.path.join(data_dir, set_path))[int(f)]
    L = frame.cell[0, 0]
    if not np.allclose(frame.cell, L * np.eye(3)):
        raise SystemExit(f"{spec}: the box is not cubic: {frame.cell.tolist()}")
    return frame.symbols, frame.positions, float(L)


def molecules(symbols, x, L):
    """Atom indices as (O, H, H) rows: each H goes to its nearest O (minimum image); every O must get two H within
    1.3 A (an intact molecule)."""
    o, h = np.where(symbols == "O")[0], np.where(symbols == "H")[0]
    d = x[h][:, None, :] - x[o][None, :, :]
    d -= L * np.round(d / L)
    r = np.linalg.norm(d, axis=-1)
    owner = np.argmin(r, axis=1)
    rows = []
    for k, oi in enumerate(o):
        hs = h[owner == k]
        if len(hs) != 2 or r[owner == k, k].max() > 1.3:
            raise SystemExit(f"oxygen {oi}: {len(hs)} hydrogens within reach (not an intact water molecule)")
        rows.append([oi, *hs])
    return np.array(rows)


def whole(x, mol, L):
    """Positions with each molecule's hydrogens at the minimum image of their oxygen (molecules not split)."""
    x = x.copy()
    for k in (1, 2):
        d = x[mol[:, k]] - x[mol[:, 0]]
        x[mol[:, k]] = x[mol[:, 0]] + d - L * np.round(d / L)
    return x


def write_data(path, title, symbols, x, mol, L):
    order = mol.reshape(-1)
    x = np.mod(x[order], L)   # wrapped into [0, L)
    x[x >= L] = 0.0
    with open(path, "w") as f:
        f.write(f"# {title}. type 1=O, type 2=H\n\n{len(order)} atoms\n2 atom types\n\n")
        for a in "xyz":
            f.write(f"0.0 {L:.6f} {a}lo {a}hi\n")
        f.write(f"\nMasses\n\n1 {MASS['O']}\n2 {MASS['H']}\n\nAtoms # atomic\n\n")
        for i, (s, p) in enumerate(zip(symbols[order], x)):
            f.write(f"{i + 1} {TYPE[s]} {p[0]:.8f} {p[1]:.8f} {p[2]:.8f}\n")


def read_data(path):
    """(symbols, positions, box length) of a cubic atom_style atomic data file of this folder."""
    lines = open(path).read().splitlines()
    L = next(float(l.split()[1]) - float(l.split()[0]) for l in lines if l.endswith("xlo xhi"))
    start = next(i for i, l in enumerate(lines) if l.startswith("Atoms")) + 2
    rows = np.array([[float(v) for v in l.split()[:5]] for l in lines[start:] if l.strip()])
    rows = rows[np.argsort(rows[:, 0])]
    symbols = np.array(["O" if t == 1 else "H" for t in rows[:, 1].astype(int)])
    return symbols, rows[:, 2:5], L


def density(n_water, L):
    return n_water * (MASS["O"] + 2 * MASS["H"]) / 6.02214076e23 / (L * 1e-8) ** 3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frame", default="data_0/set.000:0", help="DFT frame of the 64-water start: SET:INDEX")
    ap.add_argument("--data", default=DEFAULT_ROOT, help="DeePMD water frames (data/water/dft_train)")
    ap.add_argument("--out", default=HERE)
    a = ap.parse_args()

    sym, x, L64 = read_frame(a.data, a.frame)
    mol = molecules(sym, x, L64)
    x = whole(x, mol, L64)
    write_data(os.path.join(a.out, "water64_start.lmp"),
               f"64 H2O (192 atoms), cubic L={L64:.6f} A ({density(64, L64):.4f} g/cm3): DFT frame "
               f"data/water/dft_train/{a.frame.replace(':', ' frame ')} (DeePMD-kit examples, LGPL-3.0), molecules "
               f"as O H H, wrapped; written by make_rdf_study_starts.py", sym, x, mol, L64)

    sym, x, L0 = read_data(os.path.join(HERE, "water216_start.lmp"))
    L216 = L64 * (216 / 64) ** (1 / 3)
    mol = molecules(sym, x, L0)
    x = whole(x, mol, L0)
    shift = (L216 / L0 - 1.0) * x[mol[:, 0]]          # each molecule moves with its oxygen
    x[mol.reshape(-1)] += np.repeat(shift, 3, axis=0)
    write_data(os.path.join(a.out, "water216_dftrho_start.lmp"),
               f"216 H2O (648 atoms), cubic L={L216:.6f} A ({density(216, L216):.4f} g/cm3, the DFT frames' "
               f"density): water216_start.lmp (L={L0:.2f} A) with molecule centres scaled by {L216 / L0:.6f}, "
               f"molecules rigid; written by make_rdf_study_starts.py", sym, x, mol, L216)
    print(f"water64_start.lmp: L = {L64:.6f} A, {density(64, L64):.4f} g/cm3; water216_dftrho_start.lmp: "
          f"L = {L216:.6f} A, {density(216, L216):.4f} g/cm3 (water216_start.lmp: {density(216, L0):.4f})")


if __name__ == "__main__":
    main()
