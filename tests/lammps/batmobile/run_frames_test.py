#!/usr/bin/env python3
"""examples/lammps_inputs/nialh/generate_frames.py end to end with a core LAMMPS style (lj/cut, tiny boxes and runs):
every frame it writes reads back through the training reader (batmobile.sources), and its forces and virial
equal ASE's Lennard-Jones calculator on the same configuration and cell (orthogonal and sheared cells), so the
labels' units, signs and Voigt order are right. The Ni-Al-H labels themselves use eam/alloy (docs/training.md).

    run_frames_test.py --build LAMMPS_BUILD_DIR --ref REFDIR lj
Exit codes: 0 pass, 1 fail, 77 skip.
"""
import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "examples", "lammps_inputs", "nialh"))
from run_batmobile_test import Env, fail, skip  # noqa: E402

EPS, SIGMA, RC = 0.02, 1.2, 4.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="")
    ap.add_argument("--ref", required=True)
    ap.add_argument("variant", choices=["lj"])
    a = ap.parse_args()
    env = Env(a.build, a.ref)
    try:
        import ase.io
        from ase.calculators.lj import LennardJones
    except ImportError:
        skip("ASE (python3-ase) is not installed")
    import generate_frames
    from batmobile.sources import read_sources
    out = tempfile.mkdtemp(prefix="bm_frames_")
    counts = generate_frames.main(["--lmp", env.lmp, "--out", out, "--pair-style", f"pair_style lj/cut {RC}",
                                   "--pair-coeff", f"pair_coeff * * {EPS} {SIGMA}", "--cells", "3", "--neq", "30",
                                   "--every", "10", "--frames", "2", "--jobs", "2"])
    n_train = sum(c[-1] == "train" for c in generate_frames.CONDITIONS)
    if counts != {"train": 2 * n_train, "val": 2 * (len(generate_frames.CONDITIONS) - n_train)}:
        fail(f"unexpected frame counts {counts}")
    worst_f = worst_w = 0.0
    tilted = 0
    for split in ("train", "val"):
        path = os.path.join(out, f"{split}.extxyz")
        frames = read_sources([path])
        for k, atoms in enumerate(ase.io.read(path, index=":")):
            ref_f, ref_w = frames[k].forces, frames[k].virial
            a_ = atoms.copy()
            a_.calc = LennardJones(sigma=SIGMA, epsilon=EPS, rc=RC, smooth=False)
            w = -a_.get_volume() * a_.get_stress(voigt=False)
            worst_f = max(worst_f, np.abs(a_.get_forces() - ref_f).max() / np.abs(ref_f).max())
            worst_w = max(worst_w, np.abs(w - ref_w).max() / np.abs(ref_w).max())
            tilted += abs(atoms.cell.array[1, 0]) > 1e-6
    print(f"forces rel err {worst_f:.2e}, virial rel err {worst_w:.2e}, {tilted} sheared frames")
    if worst_f > 1e-8 or worst_w > 1e-8 or tilted == 0:
        fail("the written labels do not match ASE's Lennard-Jones on the same frames")
    print("PASS")


if __name__ == "__main__":
    main()
