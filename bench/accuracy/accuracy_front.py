#!/usr/bin/env python3
"""Speed/accuracy front: validation force RMSE against MD steps/s at 648 and 10,368 atoms, ours and e3nn's.

  bench/accuracy/accuracy_front.py --ours water_fast potentials/water_fast.json bench/results/md_h200_fp32.json \
      --e3nn bench/results/e3nn_water.json --commit HASH --machine "NVIDIA H200" \
      --out-json bench/results/accuracy_front.json --out-png bench/results/accuracy_front.png

--ours NAME CARD MD (repeatable): a model card (python -m batmobile.evaluate --card) or metrics file (--json), and
an MD benchmark JSON (bench/md collect_md_bench.py output), or `card` for the card's own md_h200 block
(bench/accuracy/add_md_speed.py), or - where the model's MD speed is not measured yet (drawn
as a line at its force RMSE); speed = the fp32 `batmobile/kk` cases at 648 and 10,368 atoms.
--e3nn JSON (repeatable): bench/accuracy/e3nn_train.py output; its speed is 1 / (one energy + force evaluation),
neighbour list and time integration left out, so it bounds an MD step rate from above. --e3nn-speed-from JSON takes
every e3nn point's speed from that e3nn_train.py result instead (same model size: the speed does not depend on the
weights), for points whose own timings ran on a busy machine.
--external JSON (repeatable): a point measured outside this repository (e.g. bench/accuracy/results/mace_external.json),
with its label, force and energy RMSE on data_2, speeds, what the speeds mean and where the figures come from.
"""
import argparse
import json
import os
import shlex
import sys

SIZES = (648, 10368)
TARGETS = {"fast model": 22.0, "accurate model": 14.0}   # force RMSE aims on data_2 [meV/A]
EXTERNAL_KEYS = ("label", "force_rmse_meV_per_A", "energy_rmse_meV_per_atom", "steps_per_second", "speed_what",
                 "device", "source")


def our_point(name, card_path, md_path):
    card = json.load(open(card_path))
    metrics = card.get("validation", card)
    speed, what = {}, "LAMMPS MD, batmobile/kk, fp32 kernels, one GPU"
    if md_path == "card":
        md = card["md_h200"]
        what = md.get("what", what)
        md_path = card["md_h200"].get("source", "card")
        speed = {str(n): md[f"steps_per_second_{n}"] for n in SIZES if md.get(f"steps_per_second_{n}")}
        md = {"device": md["provenance"]["machine"], "provenance": md["provenance"]}
    else:
        md = json.load(open(md_path)) if md_path != "-" else {"cases": []}
        for case in md["cases"]:
            if case["atoms"] in SIZES and case["precision"] == "single" and case.get("steps_per_second"):
                speed[str(case["atoms"])] = case["steps_per_second"]
    return {"label": f"Batmobile {name}", "kind": "batmobile", "force_rmse_meV_per_A": metrics["force_rmse_meV_per_A"],
            "energy_rmse_meV_per_atom": metrics["energy_rmse_meV_per_atom"],
            "steps_per_second": speed, "speed_what": what if speed else "not measured yet",
            "hyperparameters": card.get("hyperparameters"), "train_seconds": card.get("train_seconds"),
            "device": md.get("device"), "sources": {"card": card_path, "md": md_path, "md_commit": md.get("provenance", {}).get("commit", md.get("commit"))}}


def e3nn_point(path, speed_path=None):
    r = json.load(open(path))
    m = r["model"]
    timing = json.load(open(speed_path))["timing_float32"] if speed_path else r["timing_float32"]
    return {"label": f"e3nn NequIP-style (T={m['T']}, L={m['L']}, C={m['C']}, {r['training']['minutes_budget']:g} min)",
            "kind": "e3nn",
            "force_rmse_meV_per_A": r["validation"]["force_rmse_meV_per_A"],
            "energy_rmse_meV_per_atom": r["validation"]["energy_rmse_meV_per_atom"],
            "steps_per_second": {n: t["evaluations_per_second"] for n, t in timing.items()},
            "speed_what": "1 / (energy + forces by autograd, fp32), PyTorch + e3nn, no neighbour list or integration",
            "peak_device_bytes": {n: t["peak_device_bytes"] for n, t in timing.items()},
            "hyperparameters": m, "train_seconds": r["training"]["seconds"], "device": r["machine"]["device"],
            "note": r.get("note"),
            "sources": {"result": path, "speed": speed_path or path, "commit": r.get("commit"),
                        "command": r.get("command")}}


def external_point(path):
    """A point from a JSON file of EXTERNAL_KEYS (figures measured elsewhere); SystemExit naming what is missing."""
    try:
        with open(path) as f:
            r = json.load(f)
    except (OSError, ValueError) as e:
        raise SystemExit(f"error: --external {path}: {e}")
    missing = [k for k in EXTERNAL_KEYS if k not in r]
    if missing:
        raise SystemExit(f"error: --external {path}: missing {', '.join(missing)}")
    point = dict(r, kind="external")
    point["steps_per_second"] = {str(n): v for n, v in r["steps_per_second"].items() if v is not None}
    point["sources"] = {"result": path}
    return point


def plot(points, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(SIZES), figsize=(5.5 * len(SIZES), 5), sharey=True)
    markers = {"batmobile": "o", "e3nn": "s", "external": "^"}
    for ax, n in zip(axes, SIZES):
        for k, pt in enumerate(points):
            sps = pt["steps_per_second"].get(str(n))
            if sps is None:
                ax.axhline(pt["force_rmse_meV_per_A"], color=f"C{k}", ls="--", lw=1,
                           label=f"{pt['label']} ({pt['force_rmse_meV_per_A']:.1f}; speed not measured)")
                continue
            ax.scatter([sps], [pt["force_rmse_meV_per_A"]], marker=markers.get(pt["kind"], "^"), s=50,
                       color=f"C{k}", label=pt["label"])
            ax.annotate(f"{pt['force_rmse_meV_per_A']:.1f}", (sps, pt["force_rmse_meV_per_A"]),
                        textcoords="offset points", xytext=(6, 4), fontsize=8)
        for (name, target), ls in zip(TARGETS.items(), (":", "-.")):
            ax.axhline(target, color="grey", ls=ls, lw=1,
                       label=f"{name} target ({target:g} meV/A)" if n == SIZES[0] else None)
        ax.set_xscale("log")
        ax.set_xlabel("MD steps/s (e3nn, MACE: energy+force evaluations/s)")
        ax.set_title(f"{n:,} atoms (216-water box, replicated)")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("validation force RMSE, all of data_2 [meV/A]")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8)
    fig.tight_layout(rect=(0, 0.16, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ours", nargs=3, action="append", default=[], metavar=("NAME", "CARD", "MD"))
    p.add_argument("--e3nn", action="append", default=[])
    p.add_argument("--external", action="append", default=[], help="a point measured elsewhere (JSON)")
    p.add_argument("--e3nn-speed-from", default=None, help="e3nn_train.py result whose timings all e3nn points use")
    p.add_argument("--commit", required=True, help="commit the merged figures belong to")
    p.add_argument("--machine", required=True)
    p.add_argument("--out-json", required=True)
    p.add_argument("--out-png", required=True)
    a = p.parse_args(argv)
    points = [our_point(*o) for o in a.ours] + [e3nn_point(e, a.e3nn_speed_from) for e in a.e3nn] + \
        [external_point(e) for e in a.external]
    result = {"what": "validation force RMSE (all of data_2) against MD speed at 648 and 10,368 atoms",
              "provenance": {"commit": a.commit, "machine": a.machine,
                             "command": "bench/accuracy/accuracy_front.py " + " ".join(
                                 shlex.quote(s) for s in (argv if argv is not None else sys.argv[1:]))},
              "points": points}
    os.makedirs(os.path.dirname(os.path.abspath(a.out_json)), exist_ok=True)
    with open(a.out_json, "w") as f:
        json.dump(result, f, indent=1)
    plot(points, a.out_png)
    print(f"wrote {a.out_json} and {a.out_png} ({len(points)} points)")


if __name__ == "__main__":
    main()
