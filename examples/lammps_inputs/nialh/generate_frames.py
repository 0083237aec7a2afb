#!/usr/bin/env python3
"""Labelled Ni-Al-H frames from LAMMPS itself: B2 NiAl with dissolved H, solid at several temperatures and strains
(one sheared, triclinic), and its melt, labelled by the reference potential (default: LAMMPS's NiAlH_jea.eam.alloy
with pair_style eam/alloy, MANYBODY package). Writes OUT/train.extxyz and OUT/val.extxyz (energy, forces, virial) and
OUT/conditions.json; validation frames come from trajectories of their own (conditions marked val), never from a
random split.

  examples/lammps_inputs/nialh/generate_frames.py --lmp LMP --potential NiAlH_jea.eam.alloy --out OUT [--jobs N]

--pair-style / --pair-coeff replace the reference potential's two lines (a smoke test with a core style, e.g.
"pair_style lj/cut 5.0" and "pair_coeff * * 0.1 2.5").
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
from batmobile.lammps_dump import read_dump, write_extxyz  # noqa: E402

SPECIES = ("Ni", "Al", "H")
# name, T (K), Tstart (K; above T: a melt), linear strain, xy tilt (fraction of lx), H atoms, seed, split
CONDITIONS = [
    ("solid_300", 300, 300, 0.0, 0.0, 4, 11, "train"),
    ("solid_300_compressed", 300, 300, -0.03, 0.0, 4, 12, "train"),
    ("solid_300_stretched", 300, 300, 0.03, 0.0, 4, 13, "train"),
    ("solid_900", 900, 900, 0.0, 0.0, 6, 14, "train"),
    ("solid_900_sheared", 900, 900, 0.0, 0.04, 6, 15, "train"),
    ("solid_1500", 1500, 1500, 0.01, 0.0, 8, 16, "train"),
    ("liquid_2000", 2000, 3000, 0.03, 0.0, 6, 17, "train"),
    ("liquid_2400", 2400, 3000, 0.04, 0.0, 4, 18, "train"),
    ("solid_600_val", 600, 600, -0.015, 0.02, 5, 21, "val"),
    ("solid_1200_val", 1200, 1200, 0.02, 0.0, 6, 22, "val"),
    ("liquid_2200_val", 2200, 3000, 0.035, 0.0, 5, 23, "val"),
]


def run_condition(lmp, out, cond, pair_style, pair_coeff, cells, neq, every, nframes):
    name, T, Tstart, eps, xy, nh, seed, _ = cond
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    # H on distinct face-centre (octahedral) sites of the B2 cells, chosen by the condition's seed
    rng = np.random.default_rng(seed)
    cells_xyz = rng.choice(cells ** 3, size=nh, replace=False)
    with open(os.path.join(d, "h_sites.lmp"), "w") as f:
        for c in cells_xyz:
            i, j, k = c // (cells * cells), (c // cells) % cells, c % cells
            f.write(f"create_atoms 3 single {i + 0.5} {j + 0.5} {k} units lattice\n")
    args = [lmp, "-in", os.path.join(HERE, "in.nialh_frames"), "-log", "log.lammps", "-screen", "none",
            "-var", "pair_style_line", pair_style, "-var", "pair_coeff_line", pair_coeff,
            "-var", "nx", str(cells), "-var", "ny", str(cells), "-var", "nz", str(cells),
            "-var", "T", str(T), "-var", "Tstart", str(Tstart), "-var", "eps", str(eps), "-var", "xy", str(xy),
            "-var", "seed", str(seed), "-var", "neq", str(neq), "-var", "every", str(every),
            "-var", "nframes", str(nframes)]
    p = subprocess.run(args, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"))
    if p.returncode != 0:
        log = open(os.path.join(d, "log.lammps")).read() if os.path.isfile(os.path.join(d, "log.lammps")) else ""
        raise SystemExit(f"{name}: LAMMPS failed ({p.returncode}):\n{(log + p.stdout)[-2000:]}")
    return d


def frames_of(d):
    """(snapshot, energy, virial 3x3) for each sampled step found in both the dump and the thermo file."""
    thermo = {}
    for line in open(os.path.join(d, "frames_thermo.txt")):
        if line.startswith("#") or not line.strip():
            continue
        v = [float(x) for x in line.split()]
        xx, yy, zz, xy, xz, yz = v[2:8]
        thermo[int(v[0])] = (v[1], np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]]))
    out = []
    for snap in read_dump(os.path.join(d, "frames.dump"), need=("id", "type", "x", "y", "z", "fx", "fy", "fz")):
        if snap.step in thermo:
            out.append((snap, *thermo[snap.step]))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lmp", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--potential", default=None, help="NiAlH_jea.eam.alloy (LAMMPS's potentials/ folder)")
    p.add_argument("--pair-style", default="pair_style eam/alloy")
    p.add_argument("--pair-coeff", default=None, help="default: pair_coeff * * POTENTIAL Ni Al H")
    p.add_argument("--cells", type=int, default=4, help="B2 cells per edge (4: 128 metal atoms)")
    p.add_argument("--neq", type=int, default=2000, help="equilibration steps (1 fs), twice")
    p.add_argument("--every", type=int, default=100)
    p.add_argument("--frames", type=int, default=25, help="frames per condition")
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    a = p.parse_args(argv)
    if a.pair_coeff is None:
        if not a.potential or not os.path.isfile(a.potential):
            raise SystemExit("--potential NiAlH_jea.eam.alloy is needed (or --pair-coeff with another style)")
        a.pair_coeff = f"pair_coeff * * {os.path.abspath(a.potential)} {' '.join(SPECIES)}"
    os.makedirs(a.out, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        futures = {c[0]: pool.submit(run_condition, a.lmp, a.out, c, a.pair_style, a.pair_coeff, a.cells, a.neq,
                                     a.every, a.frames) for c in CONDITIONS}
        dirs = {name: f.result() for name, f in futures.items()}
    counts = {"train": 0, "val": 0}
    files = {split: open(os.path.join(a.out, f"{split}.extxyz"), "w") for split in counts}
    summary = []
    for cond in CONDITIONS:
        name, split = cond[0], cond[-1]
        frames = frames_of(dirs[name])
        for snap, energy, virial in frames:
            names = [SPECIES[int(t) - 1] for t in snap.column("type")]
            write_extxyz(files[split], snap.cell, snap.pbc, names, snap.columns("x", "y", "z"),
                         forces=snap.columns("fx", "fy", "fz"), energy=energy, virial=virial,
                         info=f'condition={name} step={snap.step}')
        counts[split] += len(frames)
        summary.append({"name": name, "split": split, "T_K": cond[1], "Tstart_K": cond[2], "strain": cond[3],
                        "xy_tilt": cond[4], "H_atoms": cond[5], "frames": len(frames)})
        print(f"{name}: {len(frames)} frames ({split})", flush=True)
    for f in files.values():
        f.close()
    with open(os.path.join(a.out, "conditions.json"), "w") as f:
        json.dump({"reference": [a.pair_style, a.pair_coeff], "cells": a.cells, "neq": a.neq, "every": a.every,
                   "conditions": summary, "frames": counts}, f, indent=1)
    print(f"{counts['train']} training and {counts['val']} validation frames in {a.out}")
    return counts


if __name__ == "__main__":
    main()
