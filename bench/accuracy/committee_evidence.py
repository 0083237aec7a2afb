#!/usr/bin/env python3
"""Does a committee's force deviation flag large errors? Per frame, the largest atomic force deviation of the
committee (DeePMD's eps_F,i, as pair_style batmobile writes it) against the largest atomic force error of its first
member, on labelled water frames and on configurations the script generates from them.

  bench/accuracy/committee_evidence.py --members m0.pt m1.pt m2.pt --label-model potentials/water_accurate.pt \
      --out-json committee_evidence.json --out-png committee_evidence.png

Frames: every frame of the validation sets (DFT labels), and from the first --frames-per-kind of them, "hot" copies
with Gaussian displacements of each --displace sigma (A) and "compressed" copies with cell and positions scaled by each
--compress factor. Generated frames have no DFT labels: their reference forces come from --label-model (a more
accurate model as a stand-in for DFT), which the JSON says per point. Float64 PyTorch evaluation on --device.
"""
import argparse
import copy
import json
import os
import shlex
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from batmobile.data import DEFAULT_ROOT, VALIDATION_SETS, read_sets  # noqa: E402
from batmobile.export import load_potential  # noqa: E402
from batmobile.model import evaluate_structure  # noqa: E402


def model_forces(model, fr, device):
    T = lambda x, dt=torch.float64: torch.as_tensor(x, dtype=dt, device=device)
    out = evaluate_structure(model, T(fr.positions), T(fr.species, torch.long), T(fr.cell), T(fr.sender, torch.long),
                             T(fr.receiver, torch.long), T(fr.shifts, torch.long))
    return out["forces"].detach().cpu().numpy()


def generated(frames, sigmas, factors, r_c, seed):
    rng = np.random.default_rng(seed)
    out = []
    for fr in frames:
        for s in sigmas:
            g = copy.deepcopy(fr)
            g.positions = fr.positions + rng.normal(scale=s, size=fr.positions.shape)
            g.origin = f"{fr.origin}, displaced by {s} A"
            out.append((f"hot (displacements sigma {s} A)", g))
        for f in factors:
            g = copy.deepcopy(fr)
            g.positions, g.cell = fr.positions * f, fr.cell * f
            g.origin = f"{fr.origin}, compressed by {f}"
            out.append((f"compressed (x {f})", g))
    for _, g in out:
        g.build_neighbors(r_c)
    return out


def spearman(x, y):
    rx, ry = np.argsort(np.argsort(x)), np.argsort(np.argsort(y))
    return float(np.corrcoef(rx, ry)[0, 1]) if len(x) > 2 else None


def plot(points, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.2, 5.2))
    for k, kind in enumerate(dict.fromkeys(p["kind"] for p in points)):
        sel = [p for p in points if p["kind"] == kind]
        ax.scatter([p["max_devi_f"] for p in sel], [p["max_force_error"] for p in sel], s=14, color=f"C{k}",
                   marker="os^vD"[k % 5], label=f"{kind} ({sel[0]['labels']})")
    lo = min(min(p["max_devi_f"], p["max_force_error"]) for p in points)
    hi = max(max(p["max_devi_f"], p["max_force_error"]) for p in points)
    ax.plot([lo, hi], [lo, hi], "k:", lw=0.8, label="deviation = error")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("committee: max atomic force deviation [eV/A]")
    ax.set_ylabel("first member: max atomic force error [eV/A]")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--members", nargs="+", required=True)
    p.add_argument("--label-model", required=True)
    p.add_argument("--data", default=DEFAULT_ROOT)
    p.add_argument("--sets", nargs="+", default=list(VALIDATION_SETS))
    p.add_argument("--frames-per-kind", type=int, default=20)
    p.add_argument("--displace", nargs="*", type=float, default=[0.05, 0.1, 0.15])
    p.add_argument("--compress", nargs="*", type=float, default=[0.97, 0.94])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--commit", default="unknown", help="commit of the tree that runs (recorded)")
    p.add_argument("--out-json", required=True)
    p.add_argument("--out-png", required=True)
    a = p.parse_args(argv)
    if len(a.members) < 2:
        raise SystemExit("a committee needs at least 2 --members")
    members = [load_potential(m).to(a.device) for m in a.members]
    label = load_potential(a.label_model).to(a.device)
    hp = members[0].hp
    if any(m.hp.species != hp.species or m.hp.r_c != hp.r_c for m in members[1:] + [label]):
        raise SystemExit("the members and the label model must share species and cutoff")
    frames = read_sets(a.data, a.sets, hp.species, hp.r_c)
    cases = [("validation frames", fr, "DFT") for fr in frames]
    cases += [(kind, g, "label model") for kind, g in generated(frames[:a.frames_per_kind], a.displace, a.compress,
                                                                 hp.r_c, a.seed)]
    points = []
    for k, (kind, fr, labels) in enumerate(cases):
        f = np.array([model_forces(m, fr, a.device) for m in members])            # (K, N, 3)
        eps = np.linalg.norm(np.std(f, axis=0), axis=-1)
        ref = fr.forces if labels == "DFT" else model_forces(label, fr, a.device)
        err = np.linalg.norm(f[0] - ref, axis=-1)
        points.append({"kind": kind, "labels": labels, "origin": fr.origin, "max_devi_f": float(eps.max()),
                       "max_force_error": float(err.max())})
        if (k + 1) % 20 == 0:
            print(f"{k + 1}/{len(cases)} frames", flush=True)
    kinds = {}
    for kind in dict.fromkeys(q["kind"] for q in points):
        sel = [q for q in points if q["kind"] == kind]
        kinds[kind] = {"frames": len(sel), "spearman": spearman([q["max_devi_f"] for q in sel],
                                                                [q["max_force_error"] for q in sel]),
                       "median_max_devi_f": float(np.median([q["max_devi_f"] for q in sel])),
                       "median_max_force_error": float(np.median([q["max_force_error"] for q in sel]))}
    result = {"what": __doc__.split("\n\n")[0].replace("\n", " "),
              "provenance": {"commit": a.commit, "machine": a.device,
                             "command": "bench/accuracy/committee_evidence.py " + " ".join(
                                 shlex.quote(s) for s in (argv if argv is not None else sys.argv[1:]))},
              "members": a.members, "label_model": a.label_model,
              "spearman_all": spearman([q["max_devi_f"] for q in points], [q["max_force_error"] for q in points]),
              "kinds": kinds, "points": points}
    with open(a.out_json, "w") as f:
        json.dump(result, f, indent=1)
    plot(points, a.out_png)
    print(json.dumps({"spearman_all": result["spearman_all"], **{k: v["spearman"] for k, v in kinds.items()}}))
    return result


if __name__ == "__main__":
    main()
