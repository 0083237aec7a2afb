#!/usr/bin/env python3
"""examples/lammps_inputs/nialh/generate_frames.py end to end with a core LAMMPS style (lj/cut, tiny boxes and runs):
every frame it writes reads back through the training reader (batmobile.sources), and its forces and virial
equal ASE's Lennard-Jones calculator on the same configuration and cell (orthogonal and sheared cells), so the
labels' units, signs and Voigt order are right. The Ni-Al-H labels themselves use eam/alloy (docs/training.md).

    run_frames_test.py --build LAMMPS_BUILD_DIR --ref REFDIR lj
Exit codes: 0 pass, 1 fail, 77 skip.
"""
import argparse
import json
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


def require_ase():
    """Skips unless ASE imports: the training reader needs it for extended XYZ, the lj check for its calculator."""
    try:
        import ase.io  # noqa: F401
        from ase.calculators.lj import LennardJones  # noqa: F401
    except ImportError:
        skip("ASE (python3-ase) is not installed")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="")
    ap.add_argument("--ref", required=True)
    ap.add_argument("variant", choices=["lj", "pipeline", "rerun"])
    a = ap.parse_args()
    env = Env(a.build, a.ref)
    if a.variant == "pipeline":
        return pipeline(env)
    if a.variant == "rerun":
        return rerun(env)
    require_ase()
    import ase.io
    from ase.calculators.lj import LennardJones
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


def pipeline(env):
    """generate (lj/cut) -> train (tiny, 20 steps) -> export -> compare.py: the plumbing of the Ni-Al-H example end to
    end (the model is far from converged, so only shapes and presence are checked)."""
    import json
    import subprocess
    require_ase()
    import generate_frames
    out = tempfile.mkdtemp(prefix="bm_pipeline_")
    lj = ["--pair-style", f"pair_style lj/cut {RC}", "--pair-coeff", f"pair_coeff * * {EPS} {SIGMA}"]
    generate_frames.main(["--lmp", env.lmp, "--out", out, *lj, "--cells", "3", "--neq", "30", "--every", "10",
                          "--frames", "2", "--jobs", "2"])
    py = os.path.join(HERE, "..", "..", "..", "python")
    run = lambda *args: subprocess.run([sys.executable, "-m", *args], cwd=py, check=True,
                                       env=dict(os.environ, PYTHONPATH=py))
    run("batmobile.train", "--train", os.path.join(out, "train.extxyz"), "--val", os.path.join(out, "val.extxyz"),
        "--species", "Ni", "Al", "H", "--C", "8", "--T", "1", "--H", "8", "--Hr", "8", "--A", "2", "--dk", "4",
        "--r_c", "4.0", "--steps", "20", "--device", "cpu", "--threads", "1", "--out", os.path.join(out, "run"),
        "--progress", "lines", "--no-parity-plots")
    run("batmobile.export", os.path.join(out, "run", "checkpoint.pt"), os.path.join(out, "model.pt"))
    import compare
    cmp_out = os.path.join(out, "compare")
    r = compare.main(["--lmp", env.lmp, "--model", os.path.join(out, "model.pt"), *lj, "--cells", "3", "--T", "50",
                      "--melt-T", "50", "--neq", "10", "--nprod", "20", "--jobs", "2", "--out", cmp_out])
    ok = (len(r["energy_volume"]["batmobile"]["energy_eV_per_atom"]) == 9 and "max_abs_difference_meV_per_atom"
          in r["energy_volume"] and len(r["liquid_rdf"]["batmobile"]["g"]) == 3
          and os.path.getsize(os.path.join(cmp_out, "compare.png")) > 1000
          and json.load(open(os.path.join(cmp_out, "compare.json")))["liquid_rdf"]["pairs"] == ["Ni-Ni", "Al-Al",
                                                                                               "Ni-Al"])
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


def rerun(env):
    """bench/accuracy/lammps_frames.py (the validation frames through LAMMPS's rerun, per precision) on three frames
    of data_2 with the bundled water model: LAMMPS's double energies and forces equal the PyTorch model's in float64
    (forces to 1e-8 relative: the rerun dump keeps 12 digits of each position; energies to 1e-9), so its RMSEs are those of the model; single agrees to 1e-4, and the reported differences to
    double are the ones computed here."""
    import torch
    import batmobile
    from batmobile.data import DEFAULT_ROOT, read_set
    from batmobile.model import evaluate_structure
    sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench", "accuracy"))
    import lammps_frames
    out = tempfile.mkdtemp(prefix="bm_rerun_")
    model_path = os.path.join(HERE, "..", "..", "..", "potentials", "water_fast.pt")
    doc = lammps_frames.main(["--lmp", env.lmp, "--model", model_path, "--out", out, "--max-frames", "3",
                              "--precision", "double", "single"])
    model = batmobile.load_potential(model_path)
    frames = read_set(DEFAULT_ROOT, "data_2/set.000", ["O", "H"])[:3]
    got_f = lammps_frames.read_forces(os.path.join(out, "forces_double.dump"), len(frames[0].positions))
    single_f = lammps_frames.read_forces(os.path.join(out, "forces_single.dump"), len(frames[0].positions))
    got_e = lammps_frames.read_energies(open(os.path.join(out, "log_double.lammps")).read())
    worst_f = worst_e = 0.0
    for k, fr in enumerate(frames):
        fr.build_neighbors(model.hp.r_c)
        t = lambda v, dt=torch.float64: torch.as_tensor(v, dtype=dt)
        ref = evaluate_structure(model, t(fr.positions), t(fr.species, torch.long), t(fr.cell),
                                 t(fr.sender, torch.long), t(fr.receiver, torch.long), t(fr.shifts, torch.long))
        f_ref = ref["forces"].detach().numpy()
        worst_f = max(worst_f, np.abs(got_f[k] - f_ref).max() / np.abs(f_ref).max())
        worst_e = max(worst_e, abs(got_e[k] - float(ref["energy"])) / abs(float(ref["energy"])))
    d = single_f - got_f
    rms = 1e3 * float(np.sqrt(np.mean(d ** 2)))
    single = doc["precisions"]["single"]
    print(f"double vs PyTorch: forces {worst_f:.2e}, energy {worst_e:.2e}; single vs double RMS {rms:.4f} meV/A "
          f"(reported {single['force_rms_difference_meV_per_A']:.4f}); {json.dumps(doc['precisions'])}")
    ok = (worst_f < 1e-8 and worst_e < 1e-9 and doc["frames"] == 3 and abs(single["force_rms_difference_meV_per_A"]
          - rms) <= 1e-9 * max(rms, 1.0) and np.abs(d).max() / np.abs(got_f).max() < 1e-4
          and 0 < doc["precisions"]["double"]["force_rmse_meV_per_A"] < 200)
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
