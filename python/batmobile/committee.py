"""Committees for model deviation (docs/pair_style.md, "Committees").

Train K members that differ only in their random seed (initial weights and data order), export each:

    batmobile-committee train --members 3 --out runs/committee [--jobs 3] [batmobile-train options ...]

writes OUT/member_K/ (each a batmobile.train run directory) and OUT/member_K.pt (--jobs N: N members train at once,
each in its own process, its output in OUT/member_K.log; small models share one GPU well), for

    pair_style batmobile out_freq 100 out_file model_devi.out
    pair_coeff * * OUT/member_0.pt OUT/member_1.pt OUT/member_2.pt O H

Pick the frames of a trajectory whose maximum force deviation lies in [lo, hi] for labelling:

    batmobile-committee select --devi model_devi.out --dump traj.dump --species O H \
        --lo 0.05 --hi 0.20 --out candidates.extxyz

--dump is a LAMMPS `dump custom` file with at least `id type x y z` (any order; one snapshot per written step),
--species names the LAMMPS types in order. The selected frames are written as extended XYZ (Lattice, pbc, species,
positions), sorted by atom id; frames whose step has no deviation line are skipped.

(`python -m batmobile.committee ...` is the same command without the installed package; --version prints the
version; `train --help` and `select --help` list the options.)
"""
import os
import sys

from .cli import ArgumentParser, run as run_cli
from .io_utils import InputError
from .lammps_dump import read_dump, write_extxyz


def train_members(argv):
    p = ArgumentParser(prog="batmobile-committee train")
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--out", required=True)
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1, help="members trained at once, one process each")
    a, rest = p.parse_known_args(argv)
    if a.jobs < 1:
        raise SystemExit("--jobs must be at least 1")
    if a.members < 2:
        raise SystemExit("a committee needs at least 2 members (--members)")
    if any(opt == "--seed" or opt.startswith("--seed=") for opt in rest):
        raise SystemExit("--seed is set per member: use --first-seed")
    if any(opt == "--out" or opt.startswith("--out=") for opt in rest):
        raise SystemExit("--out is the committee's directory")
    from . import export, train
    paths = []
    runs = [os.path.join(a.out, f"member_{k}") for k in range(a.members)]
    if a.jobs > 1:
        train_in_processes(runs, rest, a.first_seed, a.jobs)
    for k, run in enumerate(runs):
        if a.jobs == 1:
            print(f"committee member {k + 1}/{a.members}: seed {a.first_seed + k}, {run}", flush=True)
            train.main(rest + ["--out", run, "--seed", str(a.first_seed + k)])
        path = os.path.join(a.out, f"member_{k}.pt")
        export.main([os.path.join(run, "checkpoint.pt"), path])
        paths.append(path)
    print("pair_coeff * * " + " ".join(paths) + " <species>")
    return paths


def train_in_processes(runs, train_args, first_seed, jobs):
    """Trains run k with seed first_seed + k, `jobs` processes at a time; each one's output goes to RUN.log."""
    import subprocess
    os.makedirs(os.path.dirname(runs[0]) or ".", exist_ok=True)
    # the children import this package from where this process found it
    parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [parent, os.environ.get("PYTHONPATH")])))
    pending = list(enumerate(runs))
    active = []
    while pending or active:
        while pending and len(active) < jobs:
            k, run = pending.pop(0)
            cmd = [sys.executable, "-m", "batmobile.train", *train_args, "--out", run, "--seed", str(first_seed + k)]
            print(f"committee member {k + 1}/{len(runs)}: seed {first_seed + k}, {run} (log {run}.log)", flush=True)
            log = open(run + ".log", "w")
            active.append((k, run, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log))
        k, run, proc, log = active.pop(0)
        rc = proc.wait()
        log.close()
        if rc != 0:
            for _, _, other, _ in active:
                other.terminate()
            raise SystemExit(f"committee member {k + 1} failed (exit {rc}): see {run}.log")
        print(f"committee member {k + 1}/{len(runs)} done", flush=True)


def read_devi(path):
    """model_devi.out -> {step: max_devi_f}."""
    out = {}
    for number, line in enumerate(open(path), 1):
        if line.startswith("#") or not line.strip():
            continue
        cols = line.split()
        if len(cols) < 7:
            raise SystemExit(f"{path}: a line with {len(cols)} columns, expected 7 (step, 3 virial, 3 force)")
        try:
            out[int(float(cols[0]))] = float(cols[4])
        except ValueError:
            raise SystemExit(f"{path}: line {number} is not numbers; give the model_devi.out that pair_style "
                             f"batmobile writes (out_file)") from None
    return out


def select_frames(argv):
    p = ArgumentParser(prog="batmobile-committee select")
    p.add_argument("--devi", required=True, help="model_devi.out of pair_style batmobile")
    p.add_argument("--dump", required=True, help="LAMMPS dump custom with id type x y z")
    p.add_argument("--species", nargs="+", required=True, help="species name of each LAMMPS type, in type order")
    p.add_argument("--lo", type=float, required=True, help="lowest max_devi_f selected (eV/A)")
    p.add_argument("--hi", type=float, required=True, help="highest max_devi_f selected (eV/A)")
    p.add_argument("--out", required=True, help="extended XYZ file of the selected frames")
    a = p.parse_args(argv)
    if not a.lo <= a.hi:
        raise SystemExit(f"--lo {a.lo} is above --hi {a.hi}")
    for option, path in (("--devi", a.devi), ("--dump", a.dump)):
        if not os.path.isfile(path):
            raise InputError(f"{option} {path}: no such file" + ("" if not os.path.isdir(path) else " (a directory)"))
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
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__)
        return None
    if not argv or argv[0] not in ("train", "select"):
        given = f"unknown command {argv[0]!r}" if argv else "no command"
        raise SystemExit(f"{given}: use `train` or `select` (see --help)")
    return (train_members if argv[0] == "train" else select_frames)(argv[1:])


if __name__ == "__main__":
    sys.exit(run_cli(main))
