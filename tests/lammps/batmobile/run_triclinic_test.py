#!/usr/bin/env python3
"""Triclinic (non-orthogonal) periodic boxes in pair_style batmobile and batmobile/kk against the PyTorch reference.

    run_triclinic_test.py --build LAMMPS_BUILD_DIR --ref REFDIR VARIANT

The 216-water box of REFDIR (make_lammps_reference.py) sheared into a triclinic cell (tilts xy, xz, yz of 5-7 % of
the edge, positions mapped with the cell so that molecules stay intact), written as a LAMMPS data file with a tilt
line; the float64 PyTorch reference of the same model on that cell. VARIANT: serial | mpi2 | mpi4 | kk | kk_mpi2.
Energy, per-atom energies, forces, virial and per-atom virial within 1e-9 relative (1e-8 on a GPU build).
Exit codes: 0 pass, 1 fail, 77 skip.
"""
import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "model"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
from run_batmobile_test import Env, compare, fail, observe, skip  # noqa: E402

TILTS = (0.06, -0.05, 0.07)  # xy, xz, yz as fractions of the edge length


def read_orthogonal(path):
    lines = open(path).read().splitlines()
    box = [next(l for l in lines if l.split()[2:4] == [f"{a}lo", f"{a}hi"]) for a in "xyz"]
    lo = np.array([float(b.split()[0]) for b in box])
    lengths = np.array([float(b.split()[1]) for b in box]) - lo
    start = lines.index(next(l for l in lines if l.startswith("Atoms"))) + 2
    rows = [l.split() for l in lines[start:] if l.strip()]
    atoms = sorted((int(r[0]), int(r[1]), [float(v) for v in r[2:5]]) for r in rows)
    return np.array([a[2] for a in atoms]) - lo, np.array([a[1] for a in atoms]), lengths


def write_triclinic(path, pos, types, cell):
    with open(path, "w") as f:
        f.write(f"216 water in a triclinic cell (Batmobile LAMMPS test)\n\n{len(pos)} atoms\n2 atom types\n\n")
        for k, ax in enumerate("xyz"):
            f.write(f"0.0 {cell[k, k]:.17g} {ax}lo {ax}hi\n")
        f.write(f"{cell[1, 0]:.17g} {cell[2, 0]:.17g} {cell[2, 1]:.17g} xy xz yz\n")
        f.write("\nMasses\n\n1 15.9994\n2 1.00794\n\nAtoms # atomic\n\n")
        for i, (t, p) in enumerate(zip(types, pos)):
            f.write(f"{i + 1} {t} {p[0]:.17g} {p[1]:.17g} {p[2]:.17g}\n")


def triclinic_case(env, tmp):
    """(data file, float64 reference) of the sheared water box."""
    import make_reference as mr
    pos, types, lengths = read_orthogonal(os.path.join(env.ref, "water.data"))
    cell = np.diag(lengths)   # rows: a, b, c
    cell[1, 0] = TILTS[0] * lengths[0]
    cell[2, 0] = TILTS[1] * lengths[0]
    cell[2, 1] = TILTS[2] * lengths[1]
    frac = np.mod(pos / lengths, 1.0)
    tri = frac @ cell
    path = os.path.join(tmp, "triclinic.data")
    write_triclinic(path, tri, types, cell)
    model = mr.make_model()
    ref = mr.reference(model, tri, cell, (True, True, True), types - 1)
    want = {"energy": ref["energy"][0], "atomic_energies": ref["atomic_energies"],
            "forces": ref["forces"].reshape(-1, 3), "virial": ref["virial"],
            "atomic_virial": ref["atomic_virial"].reshape(-1, 6)}
    return path, want


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="")
    ap.add_argument("--ref", required=True)
    ap.add_argument("variant", choices=["serial", "mpi2", "mpi4", "kk", "kk_mpi2"])
    a = ap.parse_args()
    env = Env(a.build, a.ref)
    try:
        import torch  # noqa: F401
    except ImportError:
        skip("the reference needs torch, which this python lacks")
    kw = {}
    if a.variant.startswith("kk"):
        if not env.has_style("batmobile/kk"):
            skip("this lmp has no batmobile/kk")
        kw.update(kokkos=True, threads=1)
    if a.variant.endswith(("mpi2", "mpi4")):
        kw["nranks"] = int(a.variant[-1])
    tmp = tempfile.mkdtemp(prefix="bm_triclinic_")
    data, want = triclinic_case(env, tmp)
    got = observe(env, data=data, **kw)
    if "triclinic box" not in got["log"]:
        fail("LAMMPS did not read a triclinic box")
    tol = 1e-8 if a.variant.startswith("kk") and env.vars.get("BACKEND") == "cuda" else 1e-9
    if not compare(a.variant, got, want, tol):
        fail(f"triclinic box ({a.variant}) differs from the PyTorch reference")
    print("PASS")


if __name__ == "__main__":
    main()
