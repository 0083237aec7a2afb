"""Committees for model deviation (docs/pair_style.md, "Committees").

Train K members that differ only in their random seed (initial weights and data order), export each:

    python -m batmobile.committee train --members 3 --out runs/committee [batmobile.train options ...]

writes OUT/member_K/ (each a batmobile.train run directory) and OUT/member_K.pt, for

    pair_style batmobile out_freq 100 out_file model_devi.out
    pair_coeff * * OUT/member_0.pt OUT/member_1.pt OUT/member_2.pt O H

Pick the frames of a trajectory whose maximum force deviation lies in [lo, hi] for labelling:

    python -m batmobile.committee select --devi model_devi.out --dump traj.dump --species O H \
        --lo 0.05 --hi 0.20 --out candidates.extxyz

--dump is a LAMMPS `dump custom` file with at least `id type x y z` (any order; one snapshot per written step),
--species names the LAMMPS types in order. The selected frames are written as extended XYZ (Lattice, pbc, species,
positions), sorted by atom id; frames whose step has no deviation line are skipped.
"""
import argparse
import os
import sys

import numpy as np

from .lammps_dump import read_dump, write_extxyz


def train_members(argv):
    p = argparse.ArgumentParser(prog="python -m batmobile.committee train")
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--out", required=True)
    p.add_argument("--first-seed", type=int, default=0)
    a, rest = p.parse_known_args(argv)
    if a.members < 2:
        raise SystemExit("a committee needs at least 2 members (--members)")
    if any(opt == "--seed" or opt.startswith("--seed=") for opt in rest):
        raise SystemExit("--seed is set per member: use --first-seed")
    if any(opt == "--out" or opt.startswith("--out=") for opt in rest):
        raise SystemExit("--out is the committee's directory")
    from . import export, train
    paths = []
    for k in range(a.members):
        run = os.path.join(a.out, f"member_{k}")
        print(f"committee member {k + 1}/{a.members}: seed {a.first_seed + k}, {run}", flush=True)
        train.main(rest + ["--out", run, "--seed", str(a.first_seed + k)])
        path = os.path.join(a.out, f"member_{k}.pt")
        export.main([os.path.join(run, "checkpoint.pt"), path])
        paths.append(path)
    print("pair_coeff * * " + " ".join(paths) + " <species>")
    return paths


def read_devi(path):
    """model_devi.out -> {step: max_devi_f}."""
    out = {}
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        cols = line.split()
        if len(cols) < 7:
            raise SystemExit(f"{path}: a line with {len(cols)} columns, expected 7 (step, 3 virial, 3 force)")
        out[int(float(cols[0]))] = float(cols[4])
    return out


def select_frames(argv):
    p = argparse.ArgumentParser(prog="python -m batmobile.committee select")
    p.add_argument("--devi", required=True, help="model_devi.out of pair_style batmobile")
    p.add_argument("--dump", required=True, help="LAMMPS dump custom with id type x y z")
    p.add_argument("--species", nargs="+", required=True, help="species name of each LAMMPS type, in type order")
    p.add_argument("--lo", type=float, required=True, help="lowest max_devi_f selected (eV/A)")
    p.add_argument("--hi", type=float, required=True, help="highest max_devi_f selected (eV/A)")
    p.add_argument("--out", required=True, help="extended XYZ file of the selected frames")
    a = p.parse_args(argv)
    if not a.lo <= a.hi:
        raise SystemExit(f"--lo {a.lo} is above --hi {a.hi}")
    devi = read_devi(a.devi)
    picked = seen = 0
    with open(a.out, "w") as f:
        for snap in read_dump(a.dump, need=("id", "type", "x", "y", "z")):
            step, cell, pbc = snap.step, snap.cell, snap.pbc
            types, pos = snap.column("type").astype(int), snap.columns("x", "y", "z")
            if step not in devi:
                continue
            seen += 1
            if not a.lo <= devi[step] <= a.hi:
                continue
            if types.min() < 1 or types.max() > len(a.species):
                raise SystemExit(f"{a.dump}: step {step} has atom type {types.max()}, but --species names "
                                 f"{len(a.species)} types")
            names = [a.species[t - 1] for t in types]
            write_extxyz(f, cell, pbc, names, pos, info=f"step={step} max_devi_f={devi[step]:.6g}")
            picked += 1
    print(f"{picked} of {seen} frames with a deviation line have max_devi_f in [{a.lo}, {a.hi}] eV/A: {a.out}")
    return picked


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("train", "select"):
        raise SystemExit(__doc__)
    return (train_members if argv[0] == "train" else select_frames)(argv[1:])


if __name__ == "__main__":
    main()
