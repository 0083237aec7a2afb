"""The water216 example's analysis scripts on synthetic LAMMPS output with known answers."""
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLE = os.path.join(ROOT, "examples", "lammps_inputs", "water216")


def thermo_block(header, rows):
    lines = [" ".join(header)] + [" ".join(f"{v:.10g}" for v in r) for r in rows]
    return "\n".join(lines) + "\nLoop time of 1.0 on 1 procs for 10 steps with 648 atoms\n\n" \
        "Performance: 1.0 ns/day, 1.0 hours/ns, 123.5 timesteps/s\n"


def test_analyze_nve_recovers_a_known_drift(tmp_path):
    header = ["Step", "Time", "Temp", "PotEng", "KinEng", "TotEng", "Press", "CPULeft"]
    nvt = [[s, s * 5e-4, 300, -1e5, 25, -1e5 + 25 + 0.3 * np.sin(s), 0, 0] for s in range(0, 2001, 500)]
    slope = 0.2  # meV/atom/ps imposed on E_total in the NVE part, plus a bounded oscillation
    nve = []
    for s in range(0, 10001, 50):
        t = s * 5e-4
        e = -101000.0 + (slope * t + 0.01 * np.sin(7 * t)) * 648 / 1000.0
        nve.append([s, 1.0 + t, 300, e - 25, 25, e, 0, 0])
    log = tmp_path / "log.lammps"
    log.write_text("LAMMPS\n" + thermo_block(header, nvt) + thermo_block(header, nve))
    out = tmp_path / "res"
    cmd = [sys.executable, os.path.join(EXAMPLE, "analyze_nve.py"), "--log", str(log), "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    s = json.load(open(out / "nve_summary.json"))
    assert abs(s["drift_meV_per_atom_per_ps"] - slope) < 0.01 * slope
    assert s["nve_steps"] == 10000 and abs(s["nve_ps"] - 5.0) < 1e-12
    assert s["within_bound"] and s["steps_per_second"] == 123.5
    assert (out / "nve_etotal.png").stat().st_size > 0
    # a bound below the drift fails the run
    p = subprocess.run(cmd + ["--bound", "0.1"], capture_output=True, text=True)
    assert p.returncode == 1 and not json.load(open(out / "nve_summary.json"))["within_bound"]


def test_analyze_rdf_skips_equilibration_and_finds_the_peak(tmp_path):
    r = np.arange(0.015, 6.0, 0.03)

    def block(step, r0):
        g = 1.0 + 2.0 * np.exp(-((r - r0) / 0.12) ** 2)
        rows = [f"{k + 1} {r[k]:.6f} {g[k]:.6f} 0 {g[k]:.6f} 0 {g[k]:.6f} 0" for k in range(len(r))]
        return f"{step} {len(r)}\n" + "\n".join(rows) + "\n"

    # equilibration (t <= 10 ps = 20000 steps) has its peak at 3.2 A, production at 2.8 A; the run was continued
    # from a restart, so its blocks come in two files (the block at step 30000 in both)
    rdf, rdf2 = tmp_path / "rdf.dat", tmp_path / "rdf_cont_1.dat"
    rdf.write_text("# header\n# header\n# header\n" + block(10000, 3.2) + block(30000, 2.8))
    rdf2.write_text("# header\n" + block(30000, 2.8) + block(40000, 2.8))
    header = ["Step", "Time", "Temp", "PotEng", "KinEng", "TotEng", "Press", "CPULeft"]
    log, log2 = tmp_path / "log.lammps", tmp_path / "log_cont_1.lammps"
    rows = [[s, s * 5e-4, 250 if s <= 20000 else 300, 0, 0, 0, 0, 0] for s in range(0, 40001, 1000)]
    log.write_text(thermo_block(header, rows[:31]))
    log2.write_text(thermo_block(header, rows[30:]))
    out = tmp_path / "res"
    p = subprocess.run([sys.executable, os.path.join(EXAMPLE, "analyze_rdf.py"), "--rdf", str(rdf), str(rdf2),
                        "--log", str(log), str(log2), "--out", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    s = json.load(open(out / "summary.json"))
    assert s["rdf_blocks_averaged"] == 2
    assert abs(s["gOO_first_peak_r"] - 2.8) < 0.01 and abs(s["gOO_first_peak_g"] - 3.0) < 0.02
    assert abs(s["production_ps"] - 10.0) < 1e-9 and abs(s["temperature_K_mean"] - 300.0) < 1e-9
    assert abs(s["dft_frames_first_peak_r"] - 2.734) < 0.01  # g_OO of the bundled DFT frames
    assert s["steps_per_second"] == 123.5
    assert (out / "gOO.png").stat().st_size > 0
