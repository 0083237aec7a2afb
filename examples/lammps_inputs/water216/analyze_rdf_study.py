#!/usr/bin/env python3
"""Size / temperature g_OO study (rdf_study.sh): first O-O peak per case with block uncertainties, against the DFT
frames.

usage: analyze_rdf_study.py STUDY_DIR [--out DIR]     the comparison: every case of STUDY_DIR (what rdf_study.sh
                                                       wrote) -> DIR/rdf_size_temperature.{json,png}
                                                       (default DIR: this folder's results/); also each case's
                                                       results/ as below
       analyze_rdf_study.py --case CASE_DIR            one case -> CASE_DIR/results/{gOO.dat, summary.json}

A case folder holds case.env (written by rdf_study.sh: water count, temperature, steps, RDF block, model), the RDF
files of its parts (rdf.dat, rdf_cont_1.dat, ...: fix ave/time blocks as analyze_rdf.py reads them; a step written
by two parts counts once, the later part's) and the logs (log.lammps, log_cont_1.lammps, ...).

Values and uncertainties. As in analyze_rdf.py (whose peak finder and DFT-frame g_OO this reuses), the production
blocks (after the equilibration) are averaged and the first peak is the parabola-refined maximum of that average in
2.4-3.2 A. Its uncertainty is a block jackknife: the production is cut into G contiguous groups (default 10, i.e.
5 ps each in a 50 ps production, longer than the structural correlation time of liquid water), the peak is found
again with each group left out, and the standard error is sqrt((G-1)/G * sum (p_i - p_mean)^2). For a quantity
linear in g (the g value of one bin) this equals the standard error of the group means. stderr_by_group_ps lists the
peak-position error for other group lengths: if the errors keep growing with the group length, the groups are still
correlated and the error is underestimated. The DFT reference gets the same jackknife over its four sets of 80
frames (data_0/set.000, data_1/set.000, data_1/set.001, data_2/set.000).

Binning. The three-bin parabola depends on the bin width by more than the effects studied: the DFT frames' peak is
at 2.734 A with analyze_rdf.py's 0.02 A bins (the headline figure) but 2.747 A with 0.025 A and 2.750 A with
0.03 A bins. So (1) the DFT reference is computed again at the cases' own bin width and range (dft_frames, used for
the differences; dft_frames_headline_binning keeps the 0.02 A figure), and (2) every peak also gets a second,
less binning-dependent estimate, first_peak_fit_*: the maximum of a quartic least-squares fit to g within +-0.15 A
of the peak (DFT frames: 2.743-2.745 A for bin widths 0.01-0.03 A; the headline MD run 2.742 A). The bin width of the MD cases depends on the
LAMMPS build: LAMMPS 4 Feb 2025 ignores compute rdf's `cutoff` for the bin width (ComputeRDF::init lacks an `else`,
so the bins are the pair cutoff / 200 = 0.025 A and end at 5 A); LAMMPS 29 Sep 2021 (the headline run) and 4 Jul
2026 give 6 A / 200 = 0.03 A.
"""
import argparse
import glob
import json
import os
import re
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from analyze_rdf import SHARED, dft_sets_goo, goo_from_hist, peak  # noqa: E402
from lammps_log import thermo_blocks, timesteps_per_second  # noqa: E402

FIRST_PEAK = (2.4, 3.2)   # A, the window of analyze_rdf.py
FIRST_MIN = (3.0, 4.0)
CASES = ("n64_T300", "n64_T330", "n216_T300", "n216_T330")   # the order of rdf_study.sh


# ---------------------------------------------------------------- block statistics (tested on synthetic data)
def contiguous_groups(n, n_groups):
    """Index arrays of n_groups contiguous, near-equal groups of range(n) (sizes differ by at most one)."""
    return np.array_split(np.arange(n), n_groups)


def jackknife(blocks, estimator, n_groups):
    """(estimate on the mean of all blocks, block-jackknife standard error or None with fewer than 2 groups).
    blocks: array[n_blocks, ...] in time order; estimator: mean block -> scalar or array."""
    blocks = np.asarray(blocks, dtype=float)
    n_groups = min(n_groups, len(blocks))
    value = np.asarray(estimator(blocks.mean(axis=0)), dtype=float)
    if n_groups < 2:
        return value, None
    total = blocks.sum(axis=0)
    loo = []
    for idx in contiguous_groups(len(blocks), n_groups):
        loo.append(np.asarray(estimator((total - blocks[idx].sum(axis=0)) / (len(blocks) - len(idx))), float))
    loo = np.array(loo)
    err = np.sqrt((n_groups - 1) / n_groups * ((loo - loo.mean(axis=0)) ** 2).sum(axis=0))
    return value, err


def first_peak(r, g):
    """(r, g) of the first g_OO maximum in 2.4-3.2 A (analyze_rdf.peak)."""
    return np.array(peak(r, g, *FIRST_PEAK))


def peak_fit(r, g, lo=FIRST_PEAK[0], hi=FIRST_PEAK[1], half=0.15, iterations=3):
    """(r, g) of the maximum of a quartic least-squares fit to g within +-half A of the peak, the window re-centred
    on the fit's maximum (starting from analyze_rdf.peak) a few times. It uses about ten bins instead of three, so
    bin noise and the bin width move it less than the three-bin parabola; for a skewed peak both are biased
    alike for curves of the same shape. A maximum at the window's edge (a curve too noisy for the fit) ends the
    re-centring there."""
    centre = peak(r, g, lo, hi)[0]
    x = np.linspace(-half, half, 3001)
    for _ in range(iterations):
        near = np.abs(r - centre) <= half
        y = np.polyval(np.polyfit(r[near] - centre, g[near], 4), x)
        j = np.argmax(y)
        centre += x[j]
        if j in (0, len(x) - 1):
            break
    return np.array([centre, y[j]])


def peak_with_error(r, g_blocks, n_groups=10, finder=None):
    """First-peak position and height of the block average, with block-jackknife errors: a dict. finder: (r, g) ->
    (r, g) of the peak (default analyze_rdf.peak in 2.4-3.2 A)."""
    finder = finder or first_peak
    (pr, pg), err = jackknife(g_blocks, lambda g: finder(r, g), n_groups)
    n_used = min(n_groups, len(g_blocks))
    return {"r": float(pr), "r_err": None if err is None else float(err[0]),
            "g": float(pg), "g_err": None if err is None else float(err[1]), "groups": n_used}


def stderr_by_group_length(r, g_blocks, block_ps, lengths_ps=(0.5, 1, 2.5, 5, 10)):
    """Peak-position jackknife error for groups of each length (ps) that leaves at least 4 groups."""
    out = {}
    for lp in lengths_ps:
        k = int(round(lp / block_ps))
        if k < 1 or len(g_blocks) // k < 4:
            continue
        n = len(g_blocks) // k * k
        grouped = np.asarray(g_blocks[-n:]).reshape(n // k, k, -1).mean(axis=1)   # the last n blocks
        _, err = jackknife(grouped, lambda g: first_peak(r, g), len(grouped))
        out[f"{lp:g}"] = float(err[0])
    return out


# ---------------------------------------------------------------- reading a case
def read_env(path):
    """KEY=VALUE lines of case.env (rdf_study.sh writes them; values unquoted or single-quoted)."""
    env = {}
    for line in open(path):
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.rstrip("\n").split("=", 1)
            env[k.strip()] = v.strip().strip("'")
    return env


def part_files(case_dir, first, pattern):
    """The files of every part in run order: first (rdf.dat / log.lammps), then pattern % 1, % 2, ..."""
    files = [os.path.join(case_dir, first)] if os.path.exists(os.path.join(case_dir, first)) else []
    rx = re.compile(re.escape(pattern).replace("%d", r"(\d+)") + "$")
    cont = [(int(m.group(1)), f) for f in glob.glob(os.path.join(case_dir, "*"))
            if (m := rx.match(os.path.basename(f)))]
    return files + [f for _, f in sorted(cont)]


def read_rdf_blocks_complete(path):
    """(timestep, rows) blocks of a fix ave/time vector file, as analyze_rdf.read_rdf_blocks, except that a last
    block cut short (a run killed while writing it) is dropped."""
    blocks, lines = [], [l for l in open(path) if l.strip() and not l.startswith("#")]
    i = 0
    while i < len(lines):
        head = lines[i].split()
        step, nrows = int(head[0]), int(head[1])
        body = [l.split() for l in lines[i + 1:i + 1 + nrows]]
        if len(body) < nrows or any(len(b) != len(body[0]) for b in body):
            break
        blocks.append((step, np.array(body, dtype=float)))
        i += 1 + nrows
    return blocks


def analyze_case(case_dir, n_groups=10):
    """Everything about one case: a dict (also written to CASE_DIR/results/summary.json) and the mean curve."""
    env = read_env(os.path.join(case_dir, "case.env"))
    dt_fs = float(env.get("timestep_fs", 0.5))
    equil, total, block = int(env["equil_steps"]), int(env["total_steps"]), int(env["rdf_block"])
    merged = {}
    for f in part_files(case_dir, "rdf.dat", "rdf_cont_%d.dat"):
        merged.update(dict(read_rdf_blocks_complete(f)))    # a later part's block replaces an earlier one
    prod_steps = sorted(s for s in merged if s > equil)
    res = {"case": os.path.basename(os.path.normpath(case_dir)), "n_water": int(env["n_water"]),
           "temperature_K": float(env["temperature"]), "box_A": float(env["box"]),
           "start": env.get("data", ""), "model": env.get("model", ""),
           "equilibration_ps": equil * dt_fs / 1000, "production_ps_target": (total - equil) * dt_fs / 1000,
           "complete": os.path.exists(os.path.join(case_dir, "DONE")), "rdf_blocks": len(prod_steps)}
    if not prod_steps:
        res["error"] = "no production RDF block yet"
        return res, None
    rows = np.array([merged[s] for s in prod_steps])     # [blocks, bins, columns]
    r, g_blocks = rows[0, :, 1], rows[:, :, 2]
    mean, err_bins = jackknife(g_blocks, lambda g: g, n_groups)
    temps, sps = [], None
    for f in part_files(case_dir, "log.lammps", "log_cont_%d.lammps"):
        text = open(f).read()
        temps += [row["Temp"] for rows_ in thermo_blocks(text) for row in rows_ if row["Step"] > equil]
        sps = timesteps_per_second(text) or sps
    p1 = peak_with_error(r, g_blocks, n_groups)
    pf = peak_with_error(r, g_blocks, n_groups, peak_fit)
    res.update({
        "production_ps": (prod_steps[-1] - equil) * dt_fs / 1000,
        "temperature_K_mean": float(np.mean(temps)) if temps else None,
        "first_peak_r": p1["r"], "first_peak_r_err": p1["r_err"],
        "first_peak_g": p1["g"], "first_peak_g_err": p1["g_err"], "jackknife_groups": p1["groups"],
        "first_peak_fit_r": pf["r"], "first_peak_fit_r_err": pf["r_err"],
        "first_peak_fit_g": pf["g"], "first_peak_fit_g_err": pf["g_err"],
        "bin_width_A": float(r[1] - r[0]), "r_max_A": float(r[-1] + (r[1] - r[0]) / 2),
        "first_min_r": float(peak(r, mean, *FIRST_MIN, find_min=True)[0]),
        "first_peak_r_err_by_group_ps": stderr_by_group_length(r, g_blocks, block * dt_fs / 1000),
        "steps_per_second_last_part": sps,
    })
    os.makedirs(os.path.join(case_dir, "results"), exist_ok=True)
    np.savetxt(os.path.join(case_dir, "results", "gOO.dat"),
               np.c_[r, mean, err_bins if err_bins is not None else np.zeros_like(r)], fmt="%.6f",
               header=f"{res['case']}: r_A g_OO g_OO_err (mean of {len(prod_steps)} production blocks, "
                      f"{res['production_ps']:g} ps; block-jackknife error per bin)")
    with open(os.path.join(case_dir, "results", "summary.json"), "w") as f:
        json.dump(res, f, indent=1)
    return res, (r, mean)


def dft_reference(data_dir, dr=0.02, r_max=6.0):
    """g_OO of the DFT frames (analyze_rdf.dft_frames_goo's code; its default binning is 0.02 A to 6 A) and its
    first peak, both estimators, with a jackknife over the sets."""
    sets, edges = dft_sets_goo(data_dir, r_max=r_max, dr=dr)
    hist, norm = np.array([h for h, _, _ in sets]), np.array([n for _, _, n in sets])
    r, g = goo_from_hist(hist.sum(0), norm.sum(), edges)
    res = {"bin_width_A": dr, "r_max_A": r_max, "frames": int(sum(n for _, n, _ in sets)),
           "jackknife_groups": len(sets),
           "note": "64 H2O, cubic 12.444661 A, temperature not documented; jackknife over the DFT sets"}
    G = len(sets)
    for key, finder in (("first_peak", first_peak), ("first_peak_fit", peak_fit)):
        p = finder(r, g)
        loo = np.array([finder(*goo_from_hist(hist.sum(0) - hist[k], norm.sum() - norm[k], edges))
                        for k in range(G)])
        err = np.sqrt((G - 1) / G * ((loo - loo.mean(0)) ** 2).sum(0))
        res.update({f"{key}_r": float(p[0]), f"{key}_r_err": float(err[0]),
                    f"{key}_g": float(p[1]), f"{key}_g_err": float(err[1])})
    return res, (r, g)


def difference(a, b, key):
    """a[key] - b[key] with the errors added in quadrature (None where one is missing)."""
    ea, eb = a.get(key + "_err"), b.get(key + "_err")
    return {"value": a[key] - b[key], "err": None if ea is None or eb is None else float(np.hypot(ea, eb))}


def compare(study_dir, out_dir, data_dir, n_groups=10):
    cases, curves = {}, {}
    for name in CASES:
        d = os.path.join(study_dir, name)
        if not os.path.exists(os.path.join(d, "case.env")):
            print(f"analyze_rdf_study: {name}: not run (no {d}/case.env)")
            continue
        res, curve = analyze_case(d, n_groups)
        cases[name] = res
        if curve is not None:
            curves[name] = curve
        if not res["complete"]:
            print(f"analyze_rdf_study: {name}: not finished ({res.get('production_ps', 0):g} of "
                  f"{res['production_ps_target']:g} ps production)")
    if not curves:
        raise SystemExit(f"analyze_rdf_study: no case in {study_dir} has production RDF blocks")
    ok = {k: v for k, v in cases.items() if "first_peak_r" in v}
    dft_dir = os.path.join(data_dir, "water", "dft_train")
    dft_headline, _ = dft_reference(dft_dir)
    # the DFT reference at the cases' binning (the first case's; all come from one build and input)
    ref = next(iter(ok.values()))
    binnings = sorted({(round(v["bin_width_A"], 6), round(v["r_max_A"], 6)) for v in ok.values()})
    if len(binnings) > 1:
        print(f"analyze_rdf_study: the cases have different RDF binnings {binnings}; the DFT reference uses "
              f"{ref['case']}'s")
    dft, (r_dft, g_dft) = dft_reference(dft_dir, dr=ref["bin_width_A"], r_max=ref["r_max_A"])
    effects = {}
    for key in ("first_peak_r", "first_peak_g", "first_peak_fit_r", "first_peak_fit_g"):
        e = {}
        for T in (300, 330):
            if f"n216_T{T}" in ok and f"n64_T{T}" in ok:
                e[f"size_216_minus_64_at_{T}K"] = difference(ok[f"n216_T{T}"], ok[f"n64_T{T}"], key)
        for n in (64, 216):
            if f"n{n}_T330" in ok and f"n{n}_T300" in ok:
                e[f"temperature_330_minus_300_at_{n}"] = difference(ok[f"n{n}_T330"], ok[f"n{n}_T300"], key)
        for name, v in ok.items():
            e[f"{name}_minus_dft"] = difference(v, dft, key)
        effects[key] = e
    summary = {
        "what": "first O-O peak of g_OO: 64 and 216 H2O at the DFT frames' density (0.9934 g/cm3), 300 and 330 K, "
                "against the DFT frames (64 H2O, same density); value = peak of the mean production RDF, err = "
                "block-jackknife standard error",
        "cases": cases, "dft_frames": dft, "dft_frames_headline_binning": dft_headline, "differences": effects,
        "binning_note": "differences use the DFT frames binned as the cases (dft_frames); first_peak_* is "
                        "analyze_rdf.peak (three-bin parabola), first_peak_fit_* a quartic fit within +-0.15 A, less "
                        "sensitive to bin width and noise; dft_frames_headline_binning is analyze_rdf.py's 0.02 A figure",
        "all_complete": len(cases) == len(CASES) and all(v["complete"] for v in cases.values()),
        "study_dir": os.path.abspath(study_dir),
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "rdf_size_temperature.json"), "w") as f:
        json.dump(summary, f, indent=1)
    plot(curves, ok, (r_dft, g_dft), dft, os.path.join(out_dir, "rdf_size_temperature.png"))
    print(f"first O-O peak: parabola (analyze_rdf.peak) | quartic fit +-0.15 A; bins {dft['bin_width_A']:g} A")
    for name, v in list(ok.items()) + [("DFT", dft)]:
        print(f"{name:10s} r1 = {v['first_peak_r']:.4f} +- {fmt(v['first_peak_r_err'])} A  "
              f"g1 = {v['first_peak_g']:.3f} +- {fmt(v['first_peak_g_err'])} | "
              f"r1 = {v['first_peak_fit_r']:.4f} +- {fmt(v['first_peak_fit_r_err'])} A  "
              f"g1 = {v['first_peak_fit_g']:.3f} +- {fmt(v['first_peak_fit_g_err'])}  "
              + (f"({v['production_ps']:g} ps, T = {v['temperature_K_mean']:.1f} K)" if name != "DFT"
                 else f"({v['frames']} frames)"))
    print(f"written: {out_dir}/rdf_size_temperature.json, .png")
    return summary


def fmt(x):
    return "n/a" if x is None else f"{x:.4f}"


def plot(curves, cases, dft_curve, dft, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    style = {"n64_T300": ("C0", "-"), "n64_T330": ("C0", ":"), "n216_T300": ("C3", "-"), "n216_T330": ("C3", ":")}
    fig, ax = plt.subplots(1, 2, figsize=(11.5, 4.4))
    r_end = max(r[-1] for r, _ in curves.values())
    for a, xlim in zip(ax, ((2.0, r_end), (2.45, 3.1))):
        for name, (r, g) in curves.items():
            c, ls = style[name]
            n, T = name[1:].split("_T")
            a.plot(r, g, color=c, ls=ls, lw=1.8, label=f"{n} H2O, {T} K ({cases.get(name, {}).get('production_ps', 0):g} ps)")
        a.plot(*dft_curve, color="k", ls="--", lw=1.4,
               label=f"DFT frames ({dft['frames']}, 64 H2O, {dft['bin_width_A']:g} A bins)")
        a.set(xlabel="r (Å)", ylabel="g$_{OO}$(r)", xlim=xlim)
    for name, v in cases.items():
        c, _ = style[name]
        ax[1].errorbar(v["first_peak_r"], v["first_peak_g"], xerr=v["first_peak_r_err"] or 0,
                       yerr=v["first_peak_g_err"] or 0, color=c, marker="o" if name.endswith("300") else "s",
                       ms=4, capsize=2)
        ax[1].errorbar(v["first_peak_fit_r"], v["first_peak_fit_g"], xerr=v["first_peak_fit_r_err"] or 0,
                       yerr=v["first_peak_fit_g_err"] or 0, color=c, marker="o" if name.endswith("300") else "s",
                       mfc="none", ms=5, capsize=2)
    for key, mfc in (("first_peak", "k"), ("first_peak_fit", "none")):
        ax[1].errorbar(dft[key + "_r"], dft[key + "_g"], xerr=dft[key + "_r_err"], yerr=dft[key + "_g_err"],
                       color="k", marker="D", mfc=mfc, ms=5, capsize=2)
    ax[1].set(ylim=(1.5, None), title="first peak: parabola (filled), quartic fit (open); jackknife errors")
    ax[0].set(title="g$_{OO}$ at the DFT density (0.9934 g/cm$^3$)")
    ax[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("study_dir", nargs="?", help="OUTDIR of rdf_study.sh")
    ap.add_argument("--case", help="analyse one case folder only")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--groups", type=int, default=10, help="jackknife groups (contiguous) of the production")
    ap.add_argument("--brief", action="store_true", help="with --case: one line instead of the JSON")
    ap.add_argument("--data", default=SHARED, help="folder with water/dft_train (default: the bundled data/)")
    a = ap.parse_args()
    if a.case:
        res, _ = analyze_case(a.case, a.groups)
        if not a.brief:
            print(json.dumps(res, indent=1))
        elif "first_peak_r" in res:
            print(f"  {res['case']}: first peak r = {res['first_peak_r']:.4f} +- {fmt(res['first_peak_r_err'])} A, "
                  f"g = {res['first_peak_g']:.3f} +- {fmt(res['first_peak_g_err'])} (quartic fit: r = "
                  f"{res['first_peak_fit_r']:.4f} +- {fmt(res['first_peak_fit_r_err'])} A, g = "
                  f"{res['first_peak_fit_g']:.3f}), T = {res['temperature_K_mean']:.1f} K, "
                  f"{res['production_ps']:g} ps production, bins {res['bin_width_A']:g} A")
        else:
            print(f"  {res['case']}: {res['error']}")
    elif a.study_dir:
        compare(a.study_dir, a.out, a.data, a.groups)
    else:
        ap.error("give STUDY_DIR or --case CASE_DIR")


if __name__ == "__main__":
    main()
