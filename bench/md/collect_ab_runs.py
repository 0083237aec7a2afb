#!/usr/bin/env python3
"""Collects the same-call MD comparison runs of scripts/gpu/md_ab.sh (its "A/B SETTINGS (name): ..." lines, which carry
the run's md_raw.txt: per case atoms, exit code, steps/s, peak MiB, reference flag, precision) into one JSON record per
(run, case), in run order, with a per-setting summary (runs of the same settings group together; a dummy variable
X=N, used to repeat the current build, counts as "defaults"; LD_LIBRARY_PATH=DIR names a saved build).

  collect_ab_runs.py --out FILE --device TEXT [--note TEXT] CALL:BUILD:LOG [...]

LOG is the md_ab.sh output of that call (OUTDIR/md_ab.out, or the call's printed output).
"""
import argparse
import json
import re
import statistics
import sys
from pathlib import Path


def runs_of(log_text):
    """(name, settings, md_raw fields) of each 'A/B SETTINGS (name): FIELDS' line, in order."""
    return [(m.group(2), m.group(1), m.group(3).split())
            for m in re.finditer(r"A/B (\S+) \((\w+)\): ([^\n]*)", log_text)]


def parse_raw(fields):
    """md_raw.txt rows, 6 fields each (atoms, exit code, steps/s, peak MiB, reference flag, precision)."""
    rows = []
    for k in range(0, len(fields) - 5, 6):
        f = fields[k:k + 6]
        sps = float(f[2]) if f[2] != "nan" else None
        rows.append({"atoms": int(f[0]), "rc": int(f[1]), "steps_per_second": sps, "peak_MiB": int(f[3]),
                     "precision": f[5]})
    return rows


def summarize(records):
    """Per (call, atoms, precision, settings): the runs' steps/s, their mean and standard error, failed runs. Keys
    'CALL:ATOMS:PRECISION:SETTINGS' ("defaults" for a dummy X=N), in first-seen order."""
    summary = {}
    for r in records:
        settings = "defaults" if re.fullmatch(r"X=\w+", r["settings"]) else r["settings"]
        key = f'{r["call"]}:{r["atoms"]}:{r["precision"]}:{settings}'
        s = summary.setdefault(key, {"settings": settings, "precision": r["precision"], "steps_per_second": [],
                                     "failed_runs": 0})
        if r["rc"] != 0 or r["steps_per_second"] is None:
            s["failed_runs"] += 1
        else:
            s["steps_per_second"].append(r["steps_per_second"])
    for s in summary.values():
        v = s["steps_per_second"]
        s["mean"] = round(statistics.mean(v), 1) if v else None
        s["standard_error"] = round(statistics.stdev(v) / len(v) ** 0.5, 1) if len(v) > 1 else None
    return summary


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--note", default="")
    ap.add_argument("calls", nargs="+", help="CALL:BUILD:LOG")
    a = ap.parse_args(argv)
    records = []
    for spec in a.calls:
        call, build, log = spec.split(":", 2)
        for name, settings, fields in runs_of(Path(log).read_text()):
            for row in parse_raw(fields):
                records.append({"call": call, "build": build, "run": name, "settings": settings, **row})
    summary = summarize(records)
    out = {"device": a.device, "note": a.note, "runs": records, "summary": summary}
    Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    for k, s in summary.items():
        print(f'{k:68s} mean {s["mean"]} (se {s["standard_error"]}, {len(s["steps_per_second"])} runs) '
              f'failed {s["failed_runs"]}')


if __name__ == "__main__":
    main(sys.argv[1:])
