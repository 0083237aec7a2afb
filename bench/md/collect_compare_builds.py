#!/usr/bin/env python3
"""Summarises scripts/gpu/compare_builds.sh runs into one JSON.

Input lines (compare_raw.txt): timed runs `NAME ATOMS REPEAT STEPS_PER_S [POTENTIAL]` and checks `check NAME ATOMS
[POTENTIAL] |STEP TEMP PE ETOTAL PRESS` (the `run 0` thermo line with fp64 kernels), NAME old or new, POTENTIAL the
model file's name (default water_fast).
Output per case (atoms, potential): each build's runs, mean and standard error of steps/s, ratio = new / old, and
whether the two builds gave the same energy and pressure (relative difference at most --rtol; a larger one means
changed behaviour).
  collect_compare_builds.py RAW OUT.json --old SHA --new SHA --machine NAME --command CMD
"""
import argparse
import json
import math
import statistics
import sys


def parse(lines):
    cases = {}

    def case(atoms, potential="water_fast"):
        return cases.setdefault((int(atoms), potential), {"old": [], "new": [], "check": {}})

    for line in lines:
        if not line.strip():
            continue
        head, _, thermo = line.partition("|")
        words = head.split()
        if words[0] == "check":
            case(*words[2:4])["check"][words[1]] = [float(v) for v in thermo.split()]
            continue
        name, atoms, _repeat, sps = words[:4]
        value = float(sps)
        if math.isfinite(value):
            case(atoms, *words[4:5])[name].append(value)
    return cases


def same_values(a, b, rtol):
    if not a or not b or len(a) != len(b):
        return False
    return all(abs(x - y) <= rtol * max(abs(x), abs(y), 1e-300) for x, y in zip(a, b))


def summary(runs):
    if not runs:
        return {"runs": [], "mean": None, "stderr": None}
    err = statistics.stdev(runs) / math.sqrt(len(runs)) if len(runs) > 1 else None
    return {"runs": runs, "mean": statistics.fmean(runs), "stderr": err}


def summarise(cases, rtol):
    out = []
    for atoms, potential in sorted(cases):
        c = cases[(atoms, potential)]
        old, new = summary(c["old"]), summary(c["new"])
        ratio = new["mean"] / old["mean"] if old["mean"] and new["mean"] else None
        check_old, check_new = c["check"].get("old"), c["check"].get("new")
        out.append({"atoms": atoms, "potential": potential, "old_steps_per_second": old,
                    "new_steps_per_second": new, "ratio": ratio,
                    "atom_steps_per_second_new": new["mean"] * atoms if new["mean"] else None,
                    "same_energy_and_pressure": same_values(check_old, check_new, rtol),
                    "run0_fp64_old": check_old, "run0_fp64_new": check_new})
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("raw")
    p.add_argument("out")
    p.add_argument("--old", required=True)
    p.add_argument("--new", required=True)
    p.add_argument("--machine", required=True)
    p.add_argument("--command", required=True)
    p.add_argument("--precision", default="single", help="the timed runs' pair_style precision")
    p.add_argument("--rtol", type=float, default=1e-10, help="largest relative difference of the run-0 values")
    a = p.parse_args(argv)
    with open(a.raw) as f:
        cases = summarise(parse(f), a.rtol)
    doc = {"provenance": {"commit": a.new, "machine": a.machine, "command": a.command}, "compared_with": a.old,
           "settings": "bench/md/in.md_bench, batmobile/kk, newton off, one rank; timed runs: precision "
                       f"{a.precision}, builds alternating; check: run 0 with fp64 kernels (step temp pe etotal press)", "rtol": a.rtol,
           "cases": cases}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)
    for c in cases:
        print(f"{c['atoms']:>8} atoms {c['potential']}: old {c['old_steps_per_second']['mean']} "
              f"new {c['new_steps_per_second']['mean']} ratio {c['ratio']} "
              f"same energy and pressure {c['same_energy_and_pressure']}")
    return 0 if all(c["same_energy_and_pressure"] for c in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
