#!/usr/bin/env python3
"""Summarises scripts/gpu/compare_builds.sh runs into one JSON.

Input lines (compare_raw.txt): `NAME ATOMS REPEAT STEPS_PER_S |STEP TEMP PE ETOTAL PRESS`, NAME old or new.
Output per case: each build's runs, mean and standard error of steps/s, new/old ratio, and whether the two builds
printed the same last thermo line (same inputs, deterministic kernels: a difference means changed behaviour).
  collect_compare_builds.py RAW OUT.json --old SHA --new SHA --machine NAME --command CMD
"""
import argparse
import json
import math
import statistics
import sys


def parse(lines):
    cases = {}
    for line in lines:
        if not line.strip():
            continue
        head, _, thermo = line.partition("|")
        name, atoms, _repeat, sps = head.split()
        case = cases.setdefault(int(atoms), {"old": [], "new": [], "thermo": {"old": set(), "new": set()}})
        value = float(sps)
        if math.isfinite(value):
            case[name].append(value)
        case["thermo"][name].add(" ".join(thermo.split()))
    return cases


def summary(runs):
    if not runs:
        return {"runs": [], "mean": None, "stderr": None}
    err = statistics.stdev(runs) / math.sqrt(len(runs)) if len(runs) > 1 else None
    return {"runs": runs, "mean": statistics.fmean(runs), "stderr": err}


def summarise(cases):
    out = []
    for atoms in sorted(cases):
        c = cases[atoms]
        old, new = summary(c["old"]), summary(c["new"])
        ratio = new["mean"] / old["mean"] if old["mean"] and new["mean"] else None
        t_old, t_new = sorted(c["thermo"]["old"]), sorted(c["thermo"]["new"])
        out.append({"atoms": atoms, "old_steps_per_second": old, "new_steps_per_second": new,
                    "ratio_new_over_old": ratio,
                    "atom_steps_per_second_new": new["mean"] * atoms if new["mean"] else None,
                    "same_thermo": t_old == t_new and len(t_old) == 1 and t_old[0] != "",
                    "thermo_old": t_old, "thermo_new": t_new})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("raw")
    p.add_argument("out")
    p.add_argument("--old", required=True)
    p.add_argument("--new", required=True)
    p.add_argument("--machine", required=True)
    p.add_argument("--command", required=True)
    a = p.parse_args(argv)
    with open(a.raw) as f:
        cases = summarise(parse(f))
    doc = {"provenance": {"old_commit": a.old, "new_commit": a.new, "machine": a.machine, "command": a.command},
           "settings": "bench/md/in.md_bench, batmobile/kk fp32 kernels, newton off, one rank, builds alternating",
           "cases": cases}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    for c in cases:
        print(f"{c['atoms']:>8} atoms: old {c['old_steps_per_second']['mean']} new {c['new_steps_per_second']['mean']} "
              f"ratio {c['ratio_new_over_old']} same_thermo {c['same_thermo']}")
    return 0 if all(c["same_thermo"] for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
