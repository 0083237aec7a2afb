#!/usr/bin/env python3
"""Summary of a kernel-benchmark A/B of scripts/gpu/kernels_quick.sh (BATMOBILE_QUICK_BASE: baseline trees "base",
"base2", ...; BATMOBILE_QUICK_AB_VARIANTS: this build "new" with other benchmark options, sides "v-NAME"): per case
and benchmark row, every side's median time (ms) and its ratio to the reference side's, the first baseline's or,
without baselines, this build's; a ratio below 1 is faster.

    bench/kernels_ab.py OUTDIR       (reads OUTDIR/ab_<side>_<N>_<k>_<C>.jsonl; OUTDIR/bases.txt names the sides)
"""
import json
import os
import re
import sys

FILE = re.compile(r"^ab_(base\d*|new|v-[A-Za-z0-9.+-]+)_(\d+_\d+_\d+)\.jsonl$")


def side_order(side):
    """base, base2, base3, ..., then new, then the variants v-NAME by name."""
    if side == "new":
        return (1, 0, "")
    if side.startswith("v-"):
        return (2, 0, side)
    return (0, int(side[4:] or 1), "")


def load(outdir):
    """{case: {side: {op: ms}}} from the A/B files in outdir (rows without a time are left out)."""
    cases = {}
    for name in sorted(os.listdir(outdir)):
        m = FILE.match(name)
        if not m:
            continue
        rows = {}
        with open(os.path.join(outdir, name)) as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                row = json.loads(line)
                if row.get("batmobile_ms") is not None:
                    rows[row["op"]] = float(row["batmobile_ms"])
        cases.setdefault(m.group(2).replace("_", ":"), {})[m.group(1)] = rows
    return cases


def table(cases):
    """Lines of text: per case a header and one line per op of the reference side (base if there is one, else new)."""
    lines = []
    for case, sides in cases.items():
        order = sorted(sides, key=side_order)
        ref = "base" if "base" in sides else "new"
        lines.append(f"case {case}: " + "  ".join(f"{s} ms" for s in order) + f"  (ratio to {ref})")
        for op, ms0 in sides.get(ref, {}).items():
            cells = []
            for s in order:
                ms = sides[s].get(op)
                if ms is None:
                    cells.append(f"{s} -")
                elif s == ref:
                    cells.append(f"{ms:.4f}")
                else:
                    cells.append(f"{ms:.4f} ({ms / ms0:.3f})" if ms0 > 0 else f"{ms:.4f}")
            lines.append(f"  {op}: " + "  ".join(cells))
    return lines


def main(argv):
    if len(argv) != 2 or not os.path.isdir(argv[1]):
        sys.exit(__doc__)
    cases = load(argv[1])
    if not cases:
        sys.exit(f"no ab_<side>_<case>.jsonl files in {argv[1]}")
    bases = os.path.join(argv[1], "bases.txt")
    if os.path.exists(bases):
        with open(bases) as f:
            print(f.read().rstrip())
    print("\n".join(table(cases)))


if __name__ == "__main__":
    main(sys.argv)
