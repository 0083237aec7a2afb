#!/usr/bin/env python3
"""Collects scripts/gpu/multigpu_scaling.sh's LAMMPS logs into md_h200_multigpu.json.

  bench/md/collect_multigpu.py OUTDIR --gpus 1 2 4 --commit C --machine M --command CMD --out FILE

Per GPU count N (keys are strings, as the issue asks): strong scaling of 97,200 and 1,049,760 atoms (steps/s,
atom-steps/s, efficiency = steps/s(N) / (N * steps/s(1))), weak scaling at the per-GPU box (efficiency =
atom-steps/s(N) / (N * atom-steps/s(1))), LAMMPS's timing breakdown (% of the loop in Pair, Comm, Neigh, Modify;
batmobile/kk's own ghost-feature exchange runs inside Pair), and the largest relative difference of the
correctness runs' thermo (pe, etotal, press every 10 steps) and final forces against N = 1, for fp64 and fp32 kernels.
"""
import argparse
import json
import os
import re

import numpy as np



def parse_log(path):
    """steps/s, atoms, steps and the MPI timing breakdown (% of total) of a LAMMPS log; None where it did not run."""
    if not os.path.isfile(path):
        return None
    text = open(path).read()
    loops = re.findall(r"Loop time of ([0-9.eE+-]+) on (\d+) procs for (\d+) steps with (\d+) atoms", text)
    perf = re.findall(r"([0-9.eE+-]+) timesteps/s", text)
    if not loops or not perf:
        return None
    seconds, procs, steps, atoms = loops[-1]
    breakdown = {}
    tail = text[text.rfind("MPI task timing breakdown"):]
    for name in ("Pair", "Neigh", "Comm", "Output", "Modify", "Other"):
        m = re.search(rf"^{name}\s*\|.*\|\s*([0-9.]+)\s*$", tail, re.M)
        if m:
            breakdown[name] = float(m.group(1))
    return {"steps_per_second": float(perf[-1]), "atoms": int(atoms), "steps": int(steps), "ranks": int(procs),
            "loop_seconds": float(seconds), "atom_steps_per_second": float(perf[-1]) * int(atoms),
            "percent_of_loop": breakdown}


def thermo_table(path):
    """Rows (step, pe, etotal, press) of every thermo block of a log."""
    rows, cols = [], None
    for line in open(path):
        s = line.split()
        if s[:1] == ["Step"]:
            cols = s
            continue
        if cols and len(s) == len(cols):
            try:
                vals = dict(zip(cols, map(float, s)))
            except ValueError:
                cols = None
                continue
            rows.append([vals["Step"], vals["PotEng"], vals["TotEng"], vals["Press"]])
        elif cols and s[:2] == ["Loop", "time"]:
            cols = None
    return np.array(rows)


def forces(path):
    lines = open(path).read().splitlines()
    start = lines.index(next(l for l in lines if l.startswith("ITEM: ATOMS"))) + 1
    return np.array([[float(v) for v in l.split()[1:4]] for l in lines[start:]])


def rel_diff(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        return float("inf")
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def correctness(out, gpus, prec):
    """Largest relative difference of N ranks against one, thermo and final forces (None where a run is missing)."""
    base_log, base_f = os.path.join(out, f"check_{prec}_1.log"), os.path.join(out, f"forces_{prec}_1.txt")
    if not (os.path.isfile(base_log) and os.path.isfile(base_f)):
        return None
    t1, f1 = thermo_table(base_log), forces(base_f)
    per = {}
    for n in gpus:
        log, ff = os.path.join(out, f"check_{prec}_{n}.log"), os.path.join(out, f"forces_{prec}_{n}.txt")
        if n == 1 or not (os.path.isfile(log) and os.path.isfile(ff)):
            continue
        # per column: pe, etotal and press have different scales
        t = thermo_table(log)
        thermo = max(rel_diff(t[:, k], t1[:, k]) for k in (1, 2, 3)) if t.shape == t1.shape else float("inf")
        per[str(n)] = {"thermo": thermo, "forces": rel_diff(forces(ff), f1), "thermo_rows": int(len(t))}
    return per


def scaling(out, gpus):
    strong, weak = {}, {}
    for name in sorted(os.listdir(out)):
        m = re.fullmatch(r"strong_(\d+)_(\d+)\.log", name)
        if m:
            strong.setdefault(m.group(1), {})[m.group(2)] = parse_log(os.path.join(out, name))
    for n in gpus:
        weak[str(n)] = parse_log(os.path.join(out, f"weak_{n}.log"))
    for cases in strong.values():
        one = cases.get("1")
        for n, r in cases.items():
            if r and one:
                r["efficiency"] = r["steps_per_second"] / (int(n) * one["steps_per_second"])
    one = weak.get("1")
    for n, r in weak.items():
        if r and one:
            r["efficiency"] = r["atom_steps_per_second"] / (int(n) * one["atom_steps_per_second"])
    return strong, weak


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("out")
    p.add_argument("--gpus", nargs="+", type=int, required=True)
    p.add_argument("--commit", required=True)
    p.add_argument("--machine", required=True)
    p.add_argument("--command", required=True)
    p.add_argument("--out", dest="json", required=True)
    a = p.parse_args(argv)
    strong, weak = scaling(a.out, a.gpus)
    checks = {prec: correctness(a.out, a.gpus, prec) for prec in ("double", "single")}
    worst = {prec: (max((max(v["thermo"], v["forces"]) for v in c.values()), default=None) if c else None)
             for prec, c in checks.items()}
    largest = max(strong, key=int) if strong else None
    result = {
        "what": "batmobile/kk on several GPUs of one host, one MPI rank per GPU, water_fast.pt, fp32 kernels for "
                "speed; correctness of fp64 (and fp32) kernels against one GPU with atoms migrating",
        "provenance": {"commit": a.commit, "machine": a.machine, "command": a.command},
        "commit": a.commit, "machine": a.machine, "gpus": [str(n) for n in a.gpus],
        "strong": strong, "weak": weak,
        "weak_efficiency": {n: r.get("efficiency") for n, r in weak.items() if r},
        f"strong_efficiency_{largest}" if largest else "strong_efficiency":
            {n: r.get("efficiency") for n, r in (strong.get(largest) or {}).items() if r},
        "correctness": checks,
        "max_rel_diff_fp64": worst["double"], "max_rel_diff_fp32": worst["single"],
    }
    with open(a.json, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({k: result[k] for k in result if k.endswith("efficiency") or k.startswith("strong_eff")
                      or k.startswith("max_rel")}, indent=1))
    return result


if __name__ == "__main__":
    main()
