#!/usr/bin/env python3
"""md_h200_lammps2025.json from bench/md/run_lammps2025_bench.sh's OUTDIR: per case the mean steps/s of
`pair_style batmobile device cuda` in LAMMPS 2025 (steps_per_second) and of batmobile/kk in LAMMPS 2021
(kk_steps_per_second), their ratio, every run, and where the 2025 run's time goes (LAMMPS's timing breakdown, % of
the loop: Pair includes the model and its host<->GPU copies, Neigh LAMMPS's CPU neighbour list)."""
import argparse
import glob
import json
import os
import re
import statistics


def breakdown(log):
    """{section: % of loop time} from the last 'MPI task timing breakdown' table of a LAMMPS log."""
    out = {}
    text = open(log).read() if os.path.isfile(log) else ""
    table = text.split("MPI task timing breakdown")[-1] if "MPI task timing breakdown" in text else ""
    for line in table.splitlines():
        m = re.match(r"^(Pair|Bond|Kspace|Neigh|Comm|Output|Modify|Other)\s*\|.*\|\s*([0-9.]+)\s*$", line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--machine", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    runs = {}
    for line in open(os.path.join(a.outdir, "runs.txt")):
        n, kind, r, sps = line.split()
        runs.setdefault(int(n), {}).setdefault(kind, []).append(float(sps))
    cases = []
    for n in sorted(runs):
        dev, kk = runs[n].get("device_cuda", []), runs[n].get("kk", [])
        ok_dev = [v for v in dev if v == v]
        ok_kk = [v for v in kk if v == v]
        mean_dev = statistics.mean(ok_dev) if ok_dev else None
        mean_kk = statistics.mean(ok_kk) if ok_kk else None
        parts = [breakdown(p) for p in sorted(glob.glob(os.path.join(a.outdir, f"device_cuda_{n}_r*.log")))]
        parts = [p for p in parts if p]
        share = {k: round(statistics.mean(p.get(k, 0.0) for p in parts), 2) for k in (parts[0] if parts else {})}
        cases.append({
            "atoms": n,
            "steps_per_second": mean_dev,
            "kk_steps_per_second": mean_kk,
            "ratio_vs_kk": mean_dev / mean_kk if mean_dev and mean_kk else None,
            "atom_steps_per_second": mean_dev * n if mean_dev else None,
            "runs": dev,
            "kk_runs": kk,
            "loop_time_percent_2025": share,
        })
    doc = {
        "what": "MD throughput of pair_style batmobile device cuda (plugin in a stock LAMMPS 4 Feb 2025, no KOKKOS "
                "package; newton on) against batmobile/kk (LAMMPS 29 Sep 2021, -k on g 1 -sf kk; newton off), same "
                "input bench/md/in.md_bench (216-water box replicated, NVE, 0.5 fs, neighbour list every 10 steps "
                "with 1 A skin), single-precision kernels, water_fast.pt, runs of the two alternating",
        "provenance": {"commit": a.commit, "machine": a.machine, "command": a.command}, "cases": cases,
    }
    json.dump(doc, open(a.out, "w"), indent=1)
    for c in cases:
        print(f"{c['atoms']:8d} atoms: device cuda {c['steps_per_second']} steps/s, kk {c['kk_steps_per_second']}, "
              f"ratio {c['ratio_vs_kk']}, 2025 loop {c['loop_time_percent_2025']}")


if __name__ == "__main__":
    main()
