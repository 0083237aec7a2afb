#!/usr/bin/env python3
"""Summarises bench/md/run_committee_bench.sh's runs (lines: atoms kind repeat steps_per_second) into
committee_h200.json: per size the single model's and the committee's mean steps/s, each run, and
overhead_fraction = 1 - committee / single; the top-level overhead_fraction is the larger over the sizes."""
import argparse
import json
import math
import statistics


def summarise(lines):
    runs = {}
    for line in lines:
        s = line.split()
        if len(s) != 4:
            continue
        n, kind, _, sps = s
        runs.setdefault(int(n), {"single": [], "committee": []})[kind].append(float(sps))
    cases = {}
    for n, r in sorted(runs.items()):
        ok = {k: [v for v in vals if math.isfinite(v)] for k, vals in r.items()}
        case = {"single_runs": r["single"], "committee_runs": r["committee"]}
        if ok["single"] and ok["committee"]:
            single, com = statistics.mean(ok["single"]), statistics.mean(ok["committee"])
            case.update(single_steps_per_second=single, committee_steps_per_second=com,
                        overhead_fraction=1.0 - com / single)
        cases[str(n)] = case
    fractions = [c["overhead_fraction"] for c in cases.values() if "overhead_fraction" in c]
    return cases, (max(fractions) if fractions else None)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("runs")
    p.add_argument("--members", type=int, required=True)
    p.add_argument("--out-freq", type=int, required=True)
    p.add_argument("--commit", required=True)
    p.add_argument("--machine", required=True)
    p.add_argument("--command", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    cases, worst = summarise(open(a.runs).read().splitlines())
    result = {"what": f"MD steps/s of one model against a committee of {a.members} (the others every {a.out_freq} "
                      "steps), alternating runs, batmobile/kk, fp32 kernels",
              "provenance": {"commit": a.commit, "machine": a.machine, "command": a.command},
              "members": a.members, "out_freq": a.out_freq, "cases": cases, "overhead_fraction": worst}
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps({"overhead_fraction": worst, **{n: c.get("overhead_fraction") for n, c in cases.items()}}))
    return result


if __name__ == "__main__":
    main()
