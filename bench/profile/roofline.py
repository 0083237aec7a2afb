#!/usr/bin/env python3
"""Per-kernel time account and roofline fractions of an MD step from Nsight Compute counters.

  python3 bench/profile/roofline.py ncu_648_single.csv [ncu_97200_mixed.csv ...] --out roofline.json [--commit HASH]

Input: `ncu --csv --page raw --print-units base --metrics ...` of an MD run (scripts/gpu/precision_gpu.sh roofline:
bench/md/in.md_bench, 0 warm-up and 2 timed steps), named ncu_<atoms>_<precision>.csv. Kernels are grouped by role
(the fused forward / receiver adjoint / sender adjoint of each layer role, the other kernels by their functor's
name); each group's counters are divided by the number of force evaluations in the file (the launches of the first
layer's fused forward), so that the figures are per MD step (the set-up evaluations' extra launches, e.g. the first
neighbour-list build, are averaged in).

Per group: launches, GPU time (ncu runs kernels one at a time, unclocked: --clock-control none), FLOP (FP32 and FP64
from the FMA / add / mul thread instructions, an FMA counting 2; tensor-core FLOP from the fused kernels' HMMA
instructions as executed, 2,048 per TF32 m16n8k8 and 4,096 per f16 m16n8k16: 3xTF32 runs three products per useful
one), DRAM / L2 / L1 bytes, warp instructions, and the fractions of the H200's peaks over the kernel's own time: FP32
CUDA cores (132 SMs x 128 lanes x 2 FLOP per cycle at the measured SM clock), tensor cores (dense TF32 495 / f16 989
TFLOP/s at 1.83 GHz, scaled to the measured clock), HBM (4.8 TB/s), and the instruction issue slots (4 per SM and
cycle).
"""
import argparse
import csv
import io
import json
import os
import re
import sys
from collections import OrderedDict

SMS = 132
HBM_BYTES_PER_S = 4.8e12
TENSOR_PEAK_AT_1830MHZ = {"tf32": 494.7e12, "f16": 989.4e12}


def read_ncu_csv(path):
    """The kernel rows of an ncu --csv --page raw file as dicts (metric values as floats where numeric)."""
    lines = [ln for ln in open(path, errors="replace").read().splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, data = rows[0], rows[2:]  # rows[1]: units
    out = []
    for r in data:
        if len(r) != len(header):
            continue
        d = {}
        for k, v in zip(header, r):
            s = v.replace(",", "")
            try:
                d[k] = float(s)
            except ValueError:
                d[k] = v
        out.append(d)
    return out


def kernel_group(name):
    """A short role name for a kernel's demangled name (full, or ncu's --kernel-name-base demangled form, which drops
    the namespaces and the template arguments' casts). Lambdas are named by their enclosing function and lambda
    instance, the other kernels by their functor."""
    m = re.search(r"InteractionKernel<(?:float|double), [^,]+, (?:\(int\))?(\d+), (?:\(bool\))?\w+, (?:\(int\))?\d+, "
                  r"(?:\(int\))?(\d+)>::(ForwardT|RecvAdjT|SendAdjT|PairAdjT)", name)
    if m:
        role = {"0": "general layer", "1": "first layer", "2": "last layer", "3": "single layer"}.get(m.group(2),
                                                                                                   m.group(2))
        what = {"ForwardT": "fused forward", "RecvAdjT": "fused receiver adjoint", "SendAdjT": "fused sender adjoint",
                "PairAdjT": "fused pair adjoint"}
        return f"{what[m.group(3)]} ({role})"
    m = re.search(r"Parallel(For|Reduce|Scan)(?:WithTotal)?<(?:(?:Kokkos::Impl::)?CudaFunctorAdapter<)?(?:void )?"
                  r"([\w:]+)", name)
    if m:
        what = m.group(2).split("::")[-1]
        lam = re.search(r"\[lambda\([^]]*\) \(instance (\d+)\)\]", name)
        if lam:
            return f"{what} {m.group(1).lower()} #{lam.group(1)}"
        return what
    return re.split(r"[<(]", name.replace("void ", ""), maxsplit=1)[0].split("::")[-1] or name[:60]


def metric(row, key):
    v = row.get(key, 0.0)
    return v if isinstance(v, float) else 0.0


def account(rows, tensor_kind):
    """Per-step totals per kernel group (see the module docstring)."""
    computes = sum(1 for r in rows if kernel_group(str(r.get("Kernel Name", ""))) == "fused forward (first layer)")
    computes = max(computes, 1)
    groups = OrderedDict()
    for r in rows:
        g = groups.setdefault(kernel_group(str(r.get("Kernel Name", ""))), {
            "launches": 0, "time_s": 0.0, "fp32_flop": 0.0, "fp64_flop": 0.0, "tensor_flop": 0.0, "dram_bytes": 0.0,
            "l2_bytes": 0.0, "l1_bytes": 0.0, "warp_instructions": 0.0, "sm_cycles": 0.0})
        g["launches"] += 1
        g["time_s"] += metric(r, "gpu__time_duration.sum") * 1e-9
        g["fp32_flop"] += (2 * metric(r, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum")
                           + metric(r, "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum")
                           + metric(r, "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"))
        g["fp64_flop"] += (2 * metric(r, "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum")
                           + metric(r, "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum")
                           + metric(r, "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum"))
        # only the fused kernels issue MMA instructions (the counter reads small non-zero values on copy kernels)
        if "InteractionKernel" in str(r.get("Kernel Name")):
            hmma = (metric(r, "sm__inst_executed_pipe_tensor_op_hmma.sum")
                    or metric(r, "sm__inst_executed_pipe_tensor.sum"))
            g["tensor_flop"] += hmma * (4096 if tensor_kind == "f16" else 2048)
        g["dram_bytes"] += metric(r, "dram__bytes_read.sum") + metric(r, "dram__bytes_write.sum")
        g["l2_bytes"] += metric(r, "lts__t_bytes.sum")
        g["l1_bytes"] += metric(r, "l1tex__t_bytes.sum")
        g["warp_instructions"] += metric(r, "smsp__inst_executed.sum")
        g["sm_cycles"] += metric(r, "sm__cycles_elapsed.avg")
    total_time = sum(g["time_s"] for g in groups.values())
    out = []
    for name, g in groups.items():
        per = {k: v / computes for k, v in g.items()}
        t, cyc = per["time_s"], per["sm_cycles"]
        clock = cyc / t if t > 0 else 0.0
        row = {"kernel": name, "launches_per_step": round(per["launches"], 2), "time_us_per_step": 1e6 * t,
               "share_of_kernel_time": t / (total_time / computes) if total_time else 0.0,
               "fp32_gflop": per["fp32_flop"] * 1e-9, "fp64_gflop": per["fp64_flop"] * 1e-9,
               "tensor_gflop": per["tensor_flop"] * 1e-9, "dram_mb": per["dram_bytes"] * 1e-6,
               "l2_mb": per["l2_bytes"] * 1e-6, "l1_mb": per["l1_bytes"] * 1e-6,
               "warp_instructions_m": per["warp_instructions"] * 1e-6, "sm_clock_ghz": clock * 1e-9}
        if t > 0 and clock > 0:
            row["fp32_fraction_of_peak"] = per["fp32_flop"] / (t * SMS * 256 * clock)
            peak_t = TENSOR_PEAK_AT_1830MHZ[tensor_kind] * clock / 1.83e9
            row["tensor_fraction_of_peak"] = per["tensor_flop"] / (t * peak_t)
            row["dram_fraction_of_peak"] = per["dram_bytes"] / (t * HBM_BYTES_PER_S)
            row["issue_fraction"] = per["warp_instructions"] / (cyc * SMS * 4) if cyc > 0 else 0.0
        out.append(row)
    out.sort(key=lambda r: -r["time_us_per_step"])
    return {"evaluations_in_file": computes, "kernel_time_us_per_step": 1e6 * total_time / computes, "kernels": out}


def table(acc, top=14):
    lines = ["| kernel | launches | time/step (us) | share | FP32 GFLOP | tensor GFLOP | DRAM MB | L2 MB | "
             "FP32 peak | tensor peak | HBM peak | issue slots |", "|" + "---|" * 12]
    for r in acc["kernels"][:top]:
        lines.append(f"| {r['kernel']} | {r['launches_per_step']:g} | {r['time_us_per_step']:.1f} | "
                     f"{100 * r['share_of_kernel_time']:.1f} % | {r['fp32_gflop']:.3f} | {r['tensor_gflop']:.3f} | "
                     f"{r['dram_mb']:.2f} | {r['l2_mb']:.1f} | {100 * r.get('fp32_fraction_of_peak', 0):.1f} % | "
                     f"{100 * r.get('tensor_fraction_of_peak', 0):.2f} % | {100 * r.get('dram_fraction_of_peak', 0):.1f} % | "
                     f"{100 * r.get('issue_fraction', 0):.1f} % |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--commit", default="unknown")
    a = p.parse_args(argv)
    doc = {"provenance": {"commit": a.commit, "machine": "NVIDIA H200 (Nsight Compute, one kernel at a time)",
                          "command": "scripts/gpu/precision_gpu.sh roofline OUTDIR; bench/profile/roofline.py "
                                     + " ".join(os.path.basename(c) for c in a.csv)},
           "cases": {}}
    for path in a.csv:
        m = re.search(r"ncu_(\d+)_(\w+)\.csv$", os.path.basename(path))
        if not m:
            print(f"skipping {path}: not ncu_<atoms>_<precision>.csv", file=sys.stderr)
            continue
        rows = read_ncu_csv(path)
        if not rows:
            print(f"skipping {path}: no kernel rows", file=sys.stderr)
            continue
        acc = account(rows, "f16" if m.group(2) == "mixed" else "tf32")
        doc["cases"][f"{m.group(1)} {m.group(2)}"] = acc
        print(f"\n## {m.group(1)} atoms, {m.group(2)}: {acc['kernel_time_us_per_step']:.1f} us of kernel time per step"
              f" ({acc['evaluations_in_file']} evaluations)\n")
        print(table(acc))
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
