#!/usr/bin/env python3
"""One MD step's GPU timeline as a PNG: every kernel and copy of a kokkos_cupti_trace.cpp step CSV (BM_TRACE_CSV) as a
bar at its GPU start and duration, coloured by the part of the step it belongs to, with the GPU's idle time summed in
the title.

    python3 bench/profile/plot_timeline.py STEP.csv OUT.png [--title TEXT]

Lines of the CSV that start with '#' are comments (provenance)."""
import argparse
import csv

# (part of the step, colour, substrings of the operation name that select it), first match wins
PARTS = [
    ("fused interaction kernels", "#d62728", ["InteractionKernel", "interaction_fwd", "interaction_pair_adj"]),
    ("node kernels", "#1f77b4", ["node_forward", "node_adjoint", "bm_layer_node", "bm_node"]),
    ("edge-list build", "#2ca02c", ["build_graph", "count_edges", "fill_edges", "bm_kk_"]),
    ("other model kernels", "#9467bd", ["batmobile", "bm_"]),
    ("copies", "#7f7f7f", ["memcpy", "memset"]),
    ("LAMMPS", "#ff7f0e", [""]),
]


def part_of(name):
    for i, (_, _, keys) in enumerate(PARTS):
        if any(k in name for k in keys):
            return i
    return len(PARTS) - 1


def read_step(path):
    with open(path) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    return [(float(r["start_us"]), float(r["duration_us"]), float(r["idle_before_us"]), r["operation"]) for r in rows]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("png")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = read_step(a.csv)
    if not ops:
        raise SystemExit(f"{a.csv}: no operations")
    busy = {}
    fig, ax = plt.subplots(figsize=(12, 2.8))
    for start, dur, _, name in ops:
        p = part_of(name)
        busy[p] = busy.get(p, 0.0) + dur
        ax.broken_barh([(start, max(dur, 0.3))], (10 * p, 8), color=PARTS[p][1])
    end = max(s + d for s, d, _, _ in ops)
    idle = sum(i for _, _, i, _ in ops)
    ax.set_yticks([10 * i + 4 for i in range(len(PARTS))])
    ax.set_yticklabels([f"{n} ({busy.get(i, 0.0):.0f} us)" for i, (n, _, _) in enumerate(PARTS)], fontsize=8)
    ax.set_xlabel("time in the step (us, GPU clock)")
    ax.set_xlim(0, end * 1.01)
    ax.grid(axis="x", alpha=0.3)
    head = f"{a.title}: " if a.title else ""
    ax.set_title(f"{head}GPU busy {sum(busy.values()):.0f} us, idle {idle:.0f} us between operations "
                 f"({len(ops)} operations)", fontsize=9)
    fig.tight_layout()
    fig.savefig(a.png, dpi=120)
    print(f"{a.png}: {len(ops)} operations over {end:.1f} us, busy {sum(busy.values()):.1f} us, idle {idle:.1f} us")


if __name__ == "__main__":
    main()
