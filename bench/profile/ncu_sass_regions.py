#!/usr/bin/env python3
"""Where a kernel's instructions go, from Nsight Compute's SASS source page.

Input: the CSV of `ncu -i REPORT --page source --csv --print-source sass` (scripts/gpu/md_ab.sh writes it as
ncu_sass_<atoms>.csv with BATMOBILE_MD_NCU_SOURCE=1). Each profiled kernel appears as a "Kernel Name" row followed
by one row per SASS instruction with its "Instructions Executed" (warp level) and stall samples.

For every kernel it prints the warp instructions executed, the opcode mix, and the hottest "regions": runs of
consecutive instructions that executed the same number of times, i.e. straight-line code of one loop body. The
execution count tells which loop it is (per edge, per prepare-pass item, per MMA tile and chain, ...); --dump
prints one region's instructions.

  python3 bench/profile/ncu_sass_regions.py ncu_sass_10368.csv [--top 12] [--kernel 0] [--dump START]
"""
import argparse
import collections
import csv
import re


def read_kernels(path):
    """[(kernel name, header, [rows])] in the file's order."""
    kernels, header = [], None
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if not row:
                continue
            if row[0] == "Kernel Name":
                kernels.append([row[1], None, []])
            elif row[0] == "Address":
                header = row
            elif kernels:
                kernels[-1][1] = header
                kernels[-1][2].append(row)
    return kernels


def short_name(name):
    m = re.search(r"InteractionKernel<([^>]*)>::(\w+)<", name)
    return f"InteractionKernel<{m.group(1)}>::{m.group(2)}" if m else name[:120]


def opcode(sass):
    m = re.match(r"\s*(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", sass)
    return m.group(1) if m else "?"


def regions(rows, ie, ss):
    """Runs of consecutive instructions with equal execution counts: [start, count, length, samples]."""
    out = []
    for idx, r in enumerate(rows):
        c, s = int(r[ie] or 0), int(r[ss] or 0)
        if out and out[-1][1] == c:
            out[-1][2] += 1
            out[-1][3] += s
        else:
            out.append([idx, c, 1, s])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=12, help="regions to list per kernel")
    ap.add_argument("--kernel", type=int, help="only this kernel (index in the file)")
    ap.add_argument("--dump", type=int, help="print the region starting at this instruction index (needs --kernel)")
    a = ap.parse_args()
    previous = None
    for k, (name, hdr, rows) in enumerate(read_kernels(a.csv)):
        if a.kernel is not None and k != a.kernel:
            continue
        if a.kernel is None and (name, rows) == previous:
            continue  # ncu 2025.3 printed every kernel's page twice
        previous = (name, rows)
        ie, ss = hdr.index("Instructions Executed"), hdr.index("Warp Stall Sampling (All Samples)")
        total = sum(int(r[ie] or 0) for r in rows)
        if total == 0:
            continue
        mix = collections.Counter()
        for r in rows:
            mix[opcode(r[1])] += int(r[ie] or 0)
        print(f"[{k}] {short_name(name)}: {len(rows)} SASS instructions, {total / 1e6:.1f} M warp instructions")
        print("    opcodes: " + ", ".join(f"{o} {v / total * 100:.1f}%" for o, v in mix.most_common(16)))
        for start, count, n, samples in sorted(regions(rows, ie, ss), key=lambda x: -x[1] * x[2])[: a.top]:
            print(f"    @{start:5d}: {n:4d} instructions x {count:9d} = {count * n / total * 100:5.1f} %"
                  f" (stall samples {samples})")
        if a.dump is not None:
            reg = next((x for x in regions(rows, ie, ss) if x[0] == a.dump), None)
            for r in rows[a.dump: a.dump + (reg[2] if reg else 40)]:
                print(f"      {r[ie]:>9} {r[ss]:>6}  {r[1].strip()}")


if __name__ == "__main__":
    main()
