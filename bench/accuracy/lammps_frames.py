#!/usr/bin/env python3
"""Validation errors of a potential as LAMMPS evaluates it, for each pair_style precision: the frames of a DeePMD set
(default the validation set data_2/set.000) are re-run through LAMMPS (`rerun`), and their energies and forces are
compared with the DFT labels and with the first precision given (the gate of precision mixed: docs/performance.md).

  bench/accuracy/lammps_frames.py --lmp LMP --model potentials/water_fast.pt --out OUTDIR \\
      [--precision double single mixed] [--set data_2/set.000] [--lmp-args "-k on g 1 -sf kk"] [--commit HASH]

Writes OUTDIR/frames_<precision>.json per precision and OUTDIR/lammps_frames.json: per precision the force RMSE
(meV/A) and energy RMSE (meV/atom) against DFT, and the RMS and largest force difference to the first precision.
Orthogonal cells only (the water sets).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from batmobile.data import DEFAULT_ROOT, read_set  # noqa: E402

SPECIES = ["O", "H"]


def write_inputs(frames, out):
    """frames.data (the first frame: box and types) and frames.dump (every frame, with its box) for `rerun`."""
    for k, fr in enumerate(frames):
        if np.abs(fr.cell - np.diag(np.diag(fr.cell))).max() > 0:
            raise SystemExit(f"frame {k}: lammps_frames.py takes orthogonal cells only")
    first = frames[0]
    L = np.diag(first.cell)
    with open(os.path.join(out, "frames.data"), "w") as f:
        f.write(f"first validation frame\n\n{len(first.positions)} atoms\n{len(SPECIES)} atom types\n\n")
        for a, name in enumerate("xyz"):
            f.write(f"0 {float(L[a]):.12g} {name}lo {name}hi\n")
        f.write("\nMasses\n\n1 15.999\n2 1.008\n\nAtoms # atomic\n\n")
        for i, (s, x) in enumerate(zip(first.species, first.positions)):
            f.write(f"{i + 1} {int(s) + 1} {float(x[0]):.12g} {float(x[1]):.12g} {float(x[2]):.12g}\n")
    with open(os.path.join(out, "frames.dump"), "w") as f:
        for k, fr in enumerate(frames):
            L = np.diag(fr.cell)
            f.write(f"ITEM: TIMESTEP\n{k}\nITEM: NUMBER OF ATOMS\n{len(fr.positions)}\nITEM: BOX BOUNDS pp pp pp\n")
            f.write("".join(f"0 {float(v):.12g}\n" for v in L))
            f.write("ITEM: ATOMS id type x y z\n")
            for i, (s, x) in enumerate(zip(fr.species, fr.positions)):
                f.write(f"{i + 1} {int(s) + 1} {float(x[0]):.12g} {float(x[1]):.12g} {float(x[2]):.12g}\n")


def lammps_script(model, precision):
    return f"""units metal
atom_style atomic
boundary p p p
read_data frames.data
pair_style batmobile precision {precision}
pair_coeff * * {model} {' '.join(SPECIES)}
neighbor 1.0 bin
thermo_style custom step pe
thermo 1
thermo_modify format float %.15g
dump f all custom 1 forces_{precision}.dump id fx fy fz
dump_modify f sort id format float %.12g
rerun frames.dump dump x y z box yes
"""


def read_forces(path, n_atoms):
    """(frames, N, 3) from a sorted custom dump of id fx fy fz."""
    rows, out = open(path).read().splitlines(), []
    i = 0
    while i < len(rows):
        if rows[i].startswith("ITEM: ATOMS"):
            out.append(np.array([[float(v) for v in r.split()[1:4]] for r in rows[i + 1:i + 1 + n_atoms]]))
            i += n_atoms
        i += 1
    return np.array(out)


def read_energies(log):
    """Potential energy of every rerun frame from the thermo table (columns Step PotEng)."""
    energies, inside = [], False
    for line in log.splitlines():
        s = line.split()
        if s[:2] == ["Step", "PotEng"]:
            inside = True
            continue
        if inside and len(s) == 2:
            try:
                energies.append(float(s[1]))
                continue
            except ValueError:
                pass
        inside = False
    return np.array(energies)


def evaluate(lmp, lmp_args, model, precision, frames, out):
    with open(os.path.join(out, f"in.frames_{precision}"), "w") as f:
        f.write(lammps_script(os.path.abspath(model), precision))
    cmd = [lmp, *lmp_args, "-in", f"in.frames_{precision}", "-log", f"log_{precision}.lammps", "-screen", "none"]
    print(f"[lammps_frames] {precision}: {' '.join(cmd)}", flush=True)
    p = subprocess.run(cmd, cwd=out, capture_output=True, text=True)
    log = open(os.path.join(out, f"log_{precision}.lammps")).read() if os.path.exists(
        os.path.join(out, f"log_{precision}.lammps")) else ""
    if p.returncode != 0:
        raise SystemExit(f"lmp failed ({p.returncode}) for precision {precision}:\n{log[-2000:]}{p.stderr[-2000:]}")
    n = len(frames[0].positions)
    forces = read_forces(os.path.join(out, f"forces_{precision}.dump"), n)
    energies = read_energies(log)
    if len(forces) != len(frames) or len(energies) != len(frames):
        raise SystemExit(f"{precision}: {len(forces)} force and {len(energies)} energy frames for {len(frames)} frames")
    return energies, forces


def metrics(energies, forces, frames, ref_forces=None):
    n = len(frames[0].positions)
    df = forces - np.array([fr.forces for fr in frames])
    de = (energies - np.array([fr.energy for fr in frames])) / n
    m = {"force_rmse_meV_per_A": 1e3 * float(np.sqrt(np.mean(df ** 2))),
         "energy_rmse_meV_per_atom": 1e3 * float(np.sqrt(np.mean(de ** 2)))}
    if ref_forces is not None:
        d = forces - ref_forces
        m["force_rms_difference_meV_per_A"] = 1e3 * float(np.sqrt(np.mean(d ** 2)))
        m["force_max_difference_meV_per_A"] = 1e3 * float(np.abs(d).max())
    return m


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lmp", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--precision", nargs="+", default=["double", "single", "mixed"],
                   choices=["double", "single", "mixed"])
    p.add_argument("--set", default="data_2/set.000")
    p.add_argument("--data", default=DEFAULT_ROOT)
    p.add_argument("--max-frames", type=int, default=0, help="the first N frames only (0: all)")
    p.add_argument("--lmp-args", default="", help="accelerator arguments, e.g. '-k on g 1 -sf kk'")
    p.add_argument("--commit", default="unknown")
    p.add_argument("--machine", default="unknown")
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    frames = read_set(a.data, a.set, SPECIES)
    if a.max_frames > 0:
        frames = frames[:a.max_frames]
    write_inputs(frames, a.out)
    results, first = {}, None
    for prec in a.precision:
        energies, forces = evaluate(a.lmp, shlex.split(a.lmp_args), a.model, prec, frames, a.out)
        results[prec] = metrics(energies, forces, frames, None if first is None else first)
        if first is None:
            first = forces
        print(f"[lammps_frames] {prec}: {json.dumps(results[prec])}", flush=True)
    doc = {"provenance": {"commit": a.commit, "machine": a.machine,
                          "command": "bench/accuracy/lammps_frames.py " + " ".join(
                              shlex.quote(s) for s in (argv if argv is not None else sys.argv[1:]))},
           "model": os.path.basename(a.model), "set": a.set, "frames": len(frames),
           "atoms_per_frame": len(frames[0].positions), "reference_precision": a.precision[0], "precisions": results}
    with open(os.path.join(a.out, "lammps_frames.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps(doc, indent=1))
    return doc


if __name__ == "__main__":
    main()
