#!/usr/bin/env python3
"""Energy drift of the NVE part of in.water216_nve (the last run of log.lammps).

usage: analyze_nve.py --log log.lammps --out results/ [--atoms 648] [--bound 0.5]
Fits etotal(t) linearly over the NVE run and writes results/nve_summary.json
{"nve_steps", "nve_ps", "drift_meV_per_atom_per_ps", "etotal_std_meV_per_atom", "temperature_K_mean",
 "steps_per_second", "bound_meV_per_atom_per_ps", "within_bound"} and results/nve_etotal.png.
Exit status 1 if |drift| exceeds the bound or the run is missing.
"""
import argparse
import json
import os
import sys

import numpy as np

from lammps_log import thermo_blocks, timesteps_per_second


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--log", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--atoms", type=int, default=648)
    ap.add_argument("--bound", type=float, default=0.5, help="allowed |drift| in meV/atom/ps")
    ap.add_argument("--device", default="")
    a = ap.parse_args()
    text = open(a.log).read()
    blocks = thermo_blocks(text)
    rows, sps = (blocks[-1] if blocks else []), timesteps_per_second(text)
    if len(rows) < 3 or "TotEng" not in rows[0]:
        print(f"analyze_nve: no NVE thermo rows with TotEng in {a.log}", file=sys.stderr)
        return 1
    t = np.array([r["Time"] for r in rows]) - rows[0]["Time"]  # ps
    e = np.array([r["TotEng"] for r in rows]) / a.atoms * 1000.0  # meV/atom
    slope, icpt = np.polyfit(t, e, 1)
    res = {
        "nve_steps": int(rows[-1]["Step"] - rows[0]["Step"]),
        "nve_ps": float(t[-1]),
        "drift_meV_per_atom_per_ps": float(slope),
        "etotal_std_meV_per_atom": float(np.std(e - (icpt + slope * t))),
        "etotal_max_excursion_meV_per_atom": float(np.max(np.abs(e - e[0]))),
        "temperature_K_mean": float(np.mean([r["Temp"] for r in rows])),
        "steps_per_second": sps,
        "bound_meV_per_atom_per_ps": a.bound,
        "within_bound": bool(abs(slope) <= a.bound),
        "device": a.device,
    }
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "nve_summary.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(t, e - e[0], lw=0.8, label="E_total - E_total(0)")
        ax.plot(t, slope * t + icpt - e[0], "--", label=f"fit: {slope:+.3g} meV/atom/ps")
        ax.set_xlabel("t (ps)")
        ax.set_ylabel("meV / atom")
        ax.set_title(f"NVE, 0.5 fs, {a.atoms} atoms")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(a.out, "nve_etotal.png"), dpi=120)
    except ImportError:
        print("analyze_nve: matplotlib missing, no PNG", file=sys.stderr)
    return 0 if res["within_bound"] else 1


if __name__ == "__main__":
    sys.exit(main())
