"""Input of LAMMPS's own force-style harness (unittest/force-styles/test_pair_style, LAMMPS 4 Feb 2025) for
pair_style batmobile: a 64-water DFT frame with the bundled potential, and a YAML file whose reference values come
from the PyTorch model (float64), not from the style under test.

    PYTHONPATH=python /usr/bin/python3 tests/lammps/harness/make_harness_yaml.py OUTDIR

Writes OUTDIR/in.batmobile-water, OUTDIR/data.batmobile-water and OUTDIR/batmobile-water.yaml. The harness runs
`run 0` (init_*) and then 4 steps of fix nve (run_*); the run_* values here come from the same 4 velocity-Verlet
steps, integrated in numpy with the PyTorch forces.
"""
import os
import sys
import time

import numpy as np
import torch

from batmobile.export import load_potential
from batmobile.model import evaluate_structure, virial_voigt
from batmobile.neighbors import neighbor_list

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
POTENTIAL = os.path.join(REPO, "potentials", "water_fast.pt")
FRAMES = os.path.join(REPO, "data", "water", "dft_train", "data_2")
MASSES = np.array([15.9994, 1.00794])  # O, H (atom types 1, 2)
FTM2V = 1.0 / 1.0364269e-4            # LAMMPS metal units: force/mass -> velocity per time
MVV2E = 1.0364269e-4
KB = 8.617343e-5
DT = 0.0005                           # ps
STEPS = 4                             # the harness's `run 4`
EPSILON = 5e-10

NOTES = """\
# Notes (pair_style batmobile in LAMMPS's force-style harness):
# - Reference values: the PyTorch model (python/batmobile, float64) on this frame; run_* after 4 velocity-Verlet
#   steps integrated with the PyTorch forces (tests/lammps/harness/make_harness_yaml.py), so the harness compares
#   the C++ style against an independent implementation, not against its own earlier output.
# - newton_pair is forced on in pre_commands: the style needs newton on (batmobile/kk alone can run without it), so
#   the harness's newton-off passes run with newton on, as for styles that force it.
# - single: skipped; a many-body model has no pairwise energy (single_enable = 0).
# - extract: skipped; the style exposes no per-type coefficients (one model file covers all type pairs).
# - restart / write_data: the style writes no coefficients (restartinfo = 0), the harness re-issues pair_style and
#   pair_coeff after read_restart and read_data, as it does for other many-body styles.
# - kokkos_omp: runs batmobile/kk (-k on t 4 -sf kk) against the same reference values.
# - omp, gpu, intel, opt: no such variants of batmobile; the harness skips them because those packages are not
#   installed.
"""


def frame():
    box = np.load(os.path.join(FRAMES, "set.000", "box.npy"))[0].reshape(3, 3).astype(np.float64)
    pos = np.load(os.path.join(FRAMES, "set.000", "coord.npy"))[0].reshape(-1, 3).astype(np.float64)
    species = np.array([int(t) for t in open(os.path.join(FRAMES, "type.raw")).read().split()])
    if not np.allclose(box, np.diag(np.diag(box))):
        raise ValueError("expected an orthogonal box")
    pos = np.mod(pos, np.diag(box))
    return pos, species, box


def evaluate(model, pos, species, cell):
    sender, receiver, shifts = neighbor_list(pos, cell, model.hp.r_c, (True, True, True))
    out = evaluate_structure(model, torch.tensor(pos), torch.tensor(species), torch.tensor(cell), torch.tensor(sender),
                             torch.tensor(receiver), torch.tensor(shifts), virial=True)
    return (out["energy"].item(), out["forces"].detach().numpy().astype(np.float64),
            virial_voigt(out["virial"]).detach().numpy().astype(np.float64).ravel())


def write_data(path, pos, vel, species, cell):
    with open(path, "w") as f:
        f.write(f"64 water (DFT frame, data/water/dft_train/data_2), pair_style batmobile harness\n\n{len(pos)} atoms\n"
                "2 atom types\n\n")
        for k, ax in enumerate("xyz"):
            f.write(f"0.0 {cell[k, k]:.17g} {ax}lo {ax}hi\n")
        f.write(f"\nMasses\n\n1 {MASSES[0]}\n2 {MASSES[1]}\n\nAtoms # atomic\n\n")
        for i, (s, p) in enumerate(zip(species, pos)):
            f.write(f"{i + 1} {s + 1} {p[0]:.17g} {p[1]:.17g} {p[2]:.17g}\n")
        f.write("\nVelocities\n\n")
        for i, v in enumerate(vel):
            f.write(f"{i + 1} {v[0]:.17g} {v[1]:.17g} {v[2]:.17g}\n")


INPUT = """variable  newton_pair     index  on
variable  input_dir       index  .
variable  data_file       index  ${input_dir}/data.batmobile-water
variable  pair_style      index  'zero 5.0'
atom_style       atomic
atom_modify      map array
neigh_modify     delay 0 every 1 check yes
units            metal
timestep         %g
newton           ${newton_pair} on
pair_style       ${pair_style}
read_data        ${data_file}
""" % DT


def block(rows):
    return "".join(rows)


def yaml_text(natoms, init, run):
    def forces(f):
        return "".join(f"  {i + 1:3d} {x[0]: .16e} {x[1]: .16e} {x[2]: .16e}\n" for i, x in enumerate(f))

    def stress(w):
        return "  " + " ".join(f"{x: .16e}" for x in w) + "\n"

    return (NOTES + "---\n"
            f"lammps_version: 4 Feb 2025\n"
            f"date_generated: {time.strftime('%a %b %d %H:%M:%S %Y', time.gmtime())}\n"
            f"epsilon: {EPSILON}\n"
            "skip_tests: single extract\n"
            "prerequisites: ! |\n  atom atomic\n  pair batmobile\n"
            "pre_commands: ! |\n  variable newton_pair delete\n  variable newton_pair index on\n"
            "post_commands: ! \"\"\n"
            "input_file: in.batmobile-water\n"
            "pair_style: batmobile\n"
            f"pair_coeff: ! |\n  * * {POTENTIAL} O H\n"
            "extract: ! \"\"\n"
            f"natoms: {natoms}\n"
            f"init_vdwl: {init[0]!r}\n"
            "init_coul: 0\n"
            f"init_stress: ! |2-\n{stress(init[2])}"
            f"init_forces: ! |2\n{forces(init[1])}"
            f"run_vdwl: {run[0]!r}\n"
            "run_coul: 0\n"
            f"run_stress: ! |2-\n{stress(run[2])}"
            f"run_forces: ! |2\n{forces(run[1])}"
            "...\n")


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    model = load_potential(POTENTIAL, torch.float64)
    pos, species, cell = frame()
    mass = MASSES[species][:, None]
    # 300 K Maxwell velocities (seeded), so that the 4 steps move the atoms
    vel = np.random.default_rng(31).normal(size=pos.shape) * np.sqrt(KB * 300.0 / (mass * MVV2E))
    write_data(os.path.join(outdir, "data.batmobile-water"), pos, vel, species, cell)
    with open(os.path.join(outdir, "in.batmobile-water"), "w") as f:
        f.write(INPUT)
    init = evaluate(model, pos, species, cell)
    # fix nve: v += dt/2 f/m; x += dt v; forces; v += dt/2 f/m
    x, v, f = pos.copy(), vel.copy(), init[1]
    for _ in range(STEPS):
        v = v + 0.5 * DT * FTM2V * f / mass
        x = x + DT * v
        run = evaluate(model, np.mod(x, np.diag(cell)), species, cell)
        f = run[1]
        v = v + 0.5 * DT * FTM2V * f / mass
    with open(os.path.join(outdir, "batmobile-water.yaml"), "w") as out:
        out.write(yaml_text(len(pos), init, run))
    print("wrote", outdir, f"(E0 {init[0]:.10f} eV, E{STEPS} {run[0]:.10f} eV)")


if __name__ == "__main__":
    main(sys.argv[1])
