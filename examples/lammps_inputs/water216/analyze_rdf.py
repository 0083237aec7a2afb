#!/usr/bin/env python3
"""Turns the LAMMPS output of the water216 example into g_OO(r) plots and summary.json.

Compares the simulated O-O radial distribution function with the X-ray experiment (Skinner 2013) and with
g_OO computed here from the DFT training frames (the data the potential was fitted to).

usage: analyze_rdf.py --rdf rdf.dat [rdf_cont_1.dat ...] --log log.lammps [log_cont_1.lammps ...] --out results/
                      [--equil-ps 10] [--device "..."]
The rdf file is what `fix ave/time ... c_rdf[*] file rdf.dat mode vector` writes (blocks of rows:
index r g_OO coord_OO g_OH coord_OH g_HH coord_HH); blocks after the equilibration time are averaged.
"""
import argparse
import glob
import json
import os

import numpy as np

from lammps_log import thermo_blocks, timesteps_per_second

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = os.environ.get("BATMOBILE_SHARED_DATA", os.path.join(HERE, "..", "..", "..", "data"))  # bundled data/water


def read_rdf_blocks(path):
    """Returns a list of (timestep, array[rows, cols]) blocks of a fix ave/time vector file."""
    blocks, lines = [], [l for l in open(path) if l.strip() and not l.startswith("#")]
    i = 0
    while i < len(lines):
        step, nrows = (int(x) for x in lines[i].split()[:2])
        rows = np.array([[float(x) for x in l.split()] for l in lines[i + 1:i + 1 + nrows]])
        blocks.append((step, rows))
        i += 1 + nrows
    return blocks


def read_log(path):
    """(step, temperature) of every thermo row and the timesteps/s LAMMPS reported (last run)."""
    text = open(path).read()
    temps = [(row["Step"], row.get("Temp", np.nan)) for rows in thermo_blocks(text) for row in rows]
    return temps, timesteps_per_second(text)


def dft_sets_goo(data_dir, r_max=6.0, dr=0.02):
    """Per DFT set (data_K/set.NNN, in order): (O-O pair histogram, frame count, sum of N * rho over its frames),
    periodic cubic boxes, minimum image; and the bin edges. dft_frames_goo sums them; rdf_study's analysis takes
    one set out at a time for an uncertainty (consecutive frames of a set are correlated)."""
    edges = np.arange(0.0, r_max + dr / 2, dr)
    sets = []
    for d in sorted(glob.glob(os.path.join(data_dir, "data_*"))):
        types = np.loadtxt(os.path.join(d, "type.raw"), dtype=int)
        for s in sorted(glob.glob(os.path.join(d, "set.*"))):
            hist, n_frames, norm = np.zeros(len(edges) - 1), 0, 0.0
            coords = np.load(os.path.join(s, "coord.npy")).reshape(-1, len(types), 3)
            boxes = np.load(os.path.join(s, "box.npy")).reshape(-1, 3, 3)
            for x, box in zip(coords, boxes):
                L = np.diag(box)
                o = x[types == 0]
                dv = o[:, None, :] - o[None, :, :]
                dv -= L * np.round(dv / L)
                r = np.linalg.norm(dv, axis=-1)[np.triu_indices(len(o), 1)]
                hist += 2 * np.histogram(r, edges)[0]
                n_frames += 1
                norm += len(o) * len(o) / np.prod(L)  # N * rho
            sets.append((hist, n_frames, norm))
    return sets, edges


def goo_from_hist(hist, norm, edges):
    """(bin centres, g(r)) of an O-O pair histogram normalised by the summed N * rho of its frames."""
    shell = 4.0 / 3.0 * np.pi * (edges[1:] ** 3 - edges[:-1] ** 3)
    return 0.5 * (edges[1:] + edges[:-1]), hist / (shell * norm)


def dft_frames_goo(data_dir, r_max=6.0, dr=0.02):
    """g_OO(r) averaged over every DFT frame (periodic cubic boxes, minimum image)."""
    sets, edges = dft_sets_goo(data_dir, r_max, dr)
    centers, g = goo_from_hist(sum(h for h, _, _ in sets), sum(n for _, _, n in sets), edges)
    return centers, g, sum(n for _, n, _ in sets)


def peak(r, g, lo, hi, find_min=False):
    """Extremum of g in [lo, hi], refined by a parabola through the three bins around it."""
    sel = np.where((r >= lo) & (r <= hi))[0]
    k = sel[np.argmin(g[sel])] if find_min else sel[np.argmax(g[sel])]
    if 0 < k < len(g) - 1:
        y0, y1, y2 = g[k - 1], g[k], g[k + 1]
        den = y0 - 2 * y1 + y2
        if den != 0:
            t = 0.5 * (y0 - y2) / den
            h = r[k + 1] - r[k]
            return float(r[k] + t * h), float(y1 - 0.25 * (y0 - y2) * t)
    return float(r[k]), float(g[k])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rdf", required=True, nargs="+", help="one file per run part (a continued run adds one)")
    ap.add_argument("--log", required=True, nargs="+")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--timestep-fs", type=float, default=0.5)
    ap.add_argument("--equil-ps", type=float, default=10.0, help="rdf blocks and thermo rows before this are skipped")
    ap.add_argument("--device", default="unknown")
    ap.add_argument("--data", default=SHARED)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)

    equil_steps = a.equil_ps * 1000.0 / a.timestep_fs
    # parts of a continued run: blocks are keyed by timestep, a step written twice is counted once
    blocks = sorted({s: b for f in a.rdf for s, b in read_rdf_blocks(f)}.items(), key=lambda sb: sb[0])
    if not blocks:
        raise SystemExit(f"analyze_rdf: no RDF block in {' '.join(a.rdf)} (a block is written every 1000 steps)")
    prod = [b for s, b in blocks if s > equil_steps] or [blocks[-1][1]]
    rows = np.mean(prod, axis=0)
    r, g_oo, g_oh, g_hh = rows[:, 1], rows[:, 2], rows[:, 4], rows[:, 6]
    temps, steps_per_s = [], None
    for f in a.log:
        t, sps = read_log(f)
        temps += t
        steps_per_s = sps if sps is not None else steps_per_s  # the last part's figure
    t_prod = [T for s, T in temps if s > equil_steps] or [T for s, T in temps]
    last_step = max([s for s, _ in temps] + [s for s, _ in blocks])
    production_ps = max(0.0, (last_step - equil_steps)) * a.timestep_fs / 1000.0

    exp = np.loadtxt(os.path.join(a.data, "water", "reference", "skinner2013_gOO_experiment.dat"))
    r_dft, g_dft, n_dft = dft_frames_goo(os.path.join(a.data, "water", "dft_train"))

    p1 = peak(r, g_oo, 2.4, 3.2)
    m1 = peak(r, g_oo, 3.0, 4.0, find_min=True)
    p2 = peak(r, g_oo, 3.8, 5.5)
    d1 = peak(r_dft, g_dft, 2.4, 3.2)
    summary = {
        "production_ps": production_ps,
        "temperature_K_mean": float(np.nanmean(t_prod)),
        "gOO_first_peak_r": p1[0], "gOO_first_peak_g": p1[1],
        "gOO_first_min_r": m1[0], "gOO_second_peak_r": p2[0],
        "dft_frames_first_peak_r": d1[0], "dft_frames_first_peak_g": d1[1], "dft_frames_count": n_dft,
        "experiment_first_peak_r": 2.80, "experiment_first_peak_g": 2.57,
        "first_peak_r_minus_dft": p1[0] - d1[0], "first_peak_g_rel_to_dft": p1[1] / d1[1] - 1.0,
        "steps_per_second": steps_per_s, "device": a.device,
        "rdf_blocks_averaged": len(prod),
    }
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    np.savetxt(os.path.join(a.out, "rdf_production.dat"), np.c_[r, g_oo, g_oh, g_hh],
               header="r_A g_OO g_OH g_HH (averaged over production blocks)")
    np.savetxt(os.path.join(a.out, "gOO_dft_frames.dat"), np.c_[r_dft, g_dft], header="r_A g_OO (DFT frames)")

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(11, 4.2))
    ax[0].plot(r, g_oo, label=f"Batmobile MD ({production_ps:.1f} ps)", lw=2)
    ax[0].plot(r_dft, g_dft, label=f"DFT training frames ({n_dft})", lw=1.5, ls="--")
    e = exp[exp[:, 0] >= 2.5]
    ax[0].plot(e[:, 0], e[:, 1], label="experiment (Skinner 2013)", lw=1.5, color="k", alpha=0.7)
    ax[0].set(xlabel="r (Å)", ylabel="g$_{OO}$(r)", xlim=(2.0, 6.0), title="O-O")
    ax[0].legend()
    ax[1].plot(r, g_oh, label="O-H")
    ax[1].plot(r, g_hh, label="H-H")
    ax[1].set(xlabel="r (Å)", ylabel="g(r)", xlim=(0.5, 6.0), ylim=(0, 4), title="O-H and H-H")
    ax[1].legend()
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "gOO.png"), dpi=130)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
