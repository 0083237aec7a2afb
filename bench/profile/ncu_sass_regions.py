#!/usr/bin/env python3
"""Where a kernel's instructions go, from Nsight Compute's SASS source page.

Input: the CSV of `ncu -i REPORT --page source --csv --print-source sass` (scripts/gpu/md_ab.sh writes it as
ncu_sass_<atoms>.csv with BATMOBILE_MD_NCU_SOURCE=1). Each profiled kernel appears as a "Kernel Name" row followed
by one row per SASS instruction with its "Instructions Executed" (warp level) and stall samples.

For every kernel it prints the warp instructions executed, the opcode mix, the warp stall reasons (shares of the
stall samples), the shared-memory wavefronts beyond the conflict-free ideal with the instructions that cause the most
of them, and the hottest "regions": runs of consecutive instructions that executed the same number of times, i.e.
straight-line code of one loop body, each with the opcodes it holds. The execution count tells which loop it is (per
edge, per prepare-pass item, per MMA tile and chain, ...); --dump prints one region's instructions.

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
    """InteractionKernel<template arguments>::Tag of a fused kernel's launch wrapper (else the name's start)."""
    start = name.find("InteractionKernel<")
    if start < 0:
        return name[:120]
    depth, i = 0, start + len("InteractionKernel")
    for i in range(i, len(name)):  # the template arguments nest (FixedDims<...>)
        depth += {"<": 1, ">": -1}.get(name[i], 0)
        if depth == 0:
            break
    m = re.search(r">::(\w+)<", name)  # the tag (ForwardT, RecvAdjT, SendAdjT) in the policy's arguments
    args = re.sub(r"\(\w+\)|batmobile::kernels::|Kokkos::", "", name[start + len("InteractionKernel<"):i])
    return f"InteractionKernel<{args}>" + (f"::{m.group(1)}" if m else "")


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


def region_opcodes(rows, start, length, top=6):
    """[(opcode, static count)] of the region's instructions, most frequent first (ties in first-seen order)."""
    return collections.Counter(opcode(r[1]) for r in rows[start:start + length]).most_common(top)


def column(hdr, rows, name):
    """The integer column `name` of rows (zeros where the report lacks it)."""
    if name not in hdr:
        return [0] * len(rows)
    i = hdr.index(name)
    return [int(r[i]) if r[i].isdigit() else 0 for r in rows]


def stall_shares(hdr, rows, top=6):
    """[(reason, share of all stall samples)] of the stall_* columns (all samples, not only the not-issued ones)."""
    sums = {c[len("stall_"):]: sum(column(hdr, rows, c)) for c in hdr
            if c.startswith("stall_") and "Not Issued" not in c}
    total = sum(sums.values())
    return [(k, v / total) for k, v in sorted(sums.items(), key=lambda kv: -kv[1])[:top]] if total else []


def shared_excess(hdr, rows, top=3):
    """(excessive wavefronts, all wavefronts, [(instruction index, excess, wavefronts / ideal)]) of shared memory."""
    excess = column(hdr, rows, "L1 Wavefronts Shared Excessive")
    waves = column(hdr, rows, "L1 Wavefronts Shared")
    ideal = column(hdr, rows, "L1 Wavefronts Shared Ideal")
    worst = sorted(range(len(rows)), key=lambda i: -excess[i])[:top]
    return sum(excess), sum(waves), [(i, excess[i], waves[i] / ideal[i]) for i in worst if excess[i] and ideal[i]]


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
        stalls = stall_shares(hdr, rows)
        if stalls:
            print("    stalls: " + ", ".join(f"{k} {v * 100:.0f}%" for k, v in stalls))
        excess, waves, worst = shared_excess(hdr, rows)
        if waves:
            print(f"    shared memory: {excess / 1e6:.1f} M of {waves / 1e6:.1f} M wavefronts beyond the ideal"
                  f" ({excess / waves * 100:.0f} %)"
                  + "".join(f"; @{i} {rows[i][1].strip()} {x:.0f}x" for i, _, x in worst))
        for start, count, n, samples in sorted(regions(rows, ie, ss), key=lambda x: -x[1] * x[2])[: a.top]:
            print(f"    @{start:5d}: {n:4d} instructions x {count:9d} = {count * n / total * 100:5.1f} %"
                  f" (stall samples {samples}): "
                  + ", ".join(f"{o} {c}" for o, c in region_opcodes(rows, start, n)))
        if a.dump is not None:
            reg = next((x for x in regions(rows, ie, ss) if x[0] == a.dump), None)
            for r in rows[a.dump: a.dump + (reg[2] if reg else 40)]:
                print(f"      {r[ie]:>9} {r[ss]:>6}  {r[1].strip()}")


if __name__ == "__main__":
    main()
