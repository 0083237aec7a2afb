#!/usr/bin/env python3
"""Collects the same-call MD A/B runs of scripts/gpu/md_ab.sh (OUTDIR/<name>/md_raw.txt, one line per case:
atoms, exit code, steps/s, peak MiB, ..., precision) into one JSON record per (run, case), in run order, with a
per-setting summary (runs of the same settings group together; a dummy variable X=N, used to repeat the defaults,
counts as "defaults").

  collect_ab_runs.py --out FILE --device TEXT [--note TEXT] CALL:BUILD:OUTDIR:LOG [...]

LOG is the md_ab.sh output of that call (its "A/B VARS (name)" lines give the run order and the settings); runs
missing from it are left out.
"""
import argparse
import json
import re
import statistics
import sys
from pathlib import Path


def runs_of(log_text):
    """(name, settings) of each 'A/B SETTINGS (name): ...' line, in order."""
    return [(m.group(2), m.group(1)) for m in re.finditer(r"A/B (\S+) \((\w+)\):", log_text)]


def parse_raw(path):
    rows = []
    for line in Path(path).read_text().splitlines():
        f = line.split()
        if len(f) < 4:
            continue
        sps = float(f[2]) if f[2] != "nan" else None
        rows.append({"atoms": int(f[0]), "rc": int(f[1]), "steps_per_second": sps, "peak_MiB": int(f[3]),
                     "precision": f[-1]})
    return rows


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--note", default="")
    ap.add_argument("calls", nargs="+", help="CALL:BUILD:OUTDIR:LOG")
    a = ap.parse_args(argv)
    records = []
    for spec in a.calls:
        call, build, outdir, log = spec.split(":", 3)
        for name, settings in runs_of(Path(log).read_text()):
            raw = Path(outdir) / name / "md_raw.txt"
            if not raw.exists():
                continue
            for row in parse_raw(raw):
                records.append({"call": call, "build": build, "run": name, "settings": settings, **row})
    summary = {}
    for r in records:
        settings = "defaults" if re.fullmatch(r"X=\w+", r["settings"]) else r["settings"]
        key = f'{r["call"]}:{r["atoms"]}:{settings}'
        s = summary.setdefault(key, {"settings": settings, "steps_per_second": [], "failed_runs": 0})
        if r["rc"] != 0 or r["steps_per_second"] is None:
            s["failed_runs"] += 1
        else:
            s["steps_per_second"].append(r["steps_per_second"])
    for s in summary.values():
        v = s["steps_per_second"]
        s["mean"] = round(statistics.mean(v), 1) if v else None
    out = {"device": a.device, "note": a.note, "runs": records, "summary": summary}
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    for k, s in summary.items():
        print(f'{k:60s} mean {s["mean"]}  {s["steps_per_second"]} failed {s["failed_runs"]}')


if __name__ == "__main__":
    main(sys.argv[1:])
