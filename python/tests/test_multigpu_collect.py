"""bench/md/collect_multigpu.py: efficiencies, timing shares and rank-count differences from LAMMPS logs."""
import json
import os

import numpy as np

from script_loader import load_script

collect = load_script("bench/md/collect_multigpu.py")


def log_text(sps, atoms, ranks, steps=30, comm=12.5, thermo=()):
    rows = "".join(f"{s} 300 {pe!r} {et!r} {pr!r}\n" for s, pe, et, pr in thermo)
    return (f"Step Temp PotEng TotEng Press\n{rows}"
            f"Loop time of 1.5 on {ranks} procs for {steps} steps with {atoms} atoms\n\n"
            f"Performance: 1.0 ns/day, 1.0 hours/ns, {sps} timesteps/s\n\n"
            "MPI task timing breakdown:\nSection |  min time  |  avg time  |  max time  |%varavg| %total\n"
            "---------------------------------------------------------------\n"
            f"Pair    | 1.0 | 1.0 | 1.0 |   0.0 | {80.0 - comm:.2f}\n"
            f"Neigh   | 0.1 | 0.1 | 0.1 |   0.0 | 5.00\n"
            f"Comm    | 0.2 | 0.2 | 0.2 |   0.0 | {comm:.2f}\n")


def dump_text(f):
    rows = "".join(f"{i + 1} {x!r} {y!r} {z!r}\n" for i, (x, y, z) in enumerate(f))
    return f"ITEM: TIMESTEP\n62\nITEM: NUMBER OF ATOMS\n{len(f)}\nITEM: BOX BOUNDS pp pp pp\n0 1\n0 1\n0 1\n" \
           f"ITEM: ATOMS id fx fy fz\n{rows}"


def test_collect(tmp_path):
    out = str(tmp_path)
    w = lambda name, text: open(os.path.join(out, name), "w").write(text)
    w("strong_97200_1.log", log_text(10.0, 97200, 1))
    w("strong_97200_2.log", log_text(16.0, 97200, 2))
    w("weak_1.log", log_text(1.0, 1000, 1))
    w("weak_2.log", log_text(0.9, 2000, 2, comm=20.0))
    th = [(0, -10.0, -9.0, 100.0), (10, -10.5, -9.0, 120.0)]
    th2 = [(0, -10.0, -9.0, 100.0), (10, -10.5 * (1 + 1e-12), -9.0, 120.0 * (1 + 3e-11))]
    f = np.array([[1.0, -2.0, 0.5], [0.25, 0.0, -1.0]])
    for prec in ("double", "single"):
        w(f"check_{prec}_1.log", log_text(5.0, 2, 1, thermo=th))
        w(f"check_{prec}_2.log", log_text(5.0, 2, 2, thermo=th2))
        w(f"forces_{prec}_1.txt", dump_text(f))
        w(f"forces_{prec}_2.txt", dump_text(f + np.array([[0, 0, 0], [0, 2e-10, 0]])))
    js = os.path.join(out, "r.json")
    collect.main([out, "--gpus", "1", "2", "--commit", "abc", "--machine", "M", "--command", "c", "--out", js])
    r = json.load(open(js))
    assert r["provenance"] == {"commit": "abc", "machine": "M", "command": "c"}
    assert r["strong_efficiency_97200"] == {"1": 1.0, "2": 0.8}
    assert abs(r["weak_efficiency"]["2"] - 0.9) < 1e-12
    assert r["weak"]["2"]["percent_of_loop"]["Comm"] == 20.0
    # press differs by 3e-11 relative, forces by 2e-10 / 2 (largest force component) = 1e-10
    assert abs(r["correctness"]["double"]["2"]["thermo"] - 3e-11) < 1e-15
    assert abs(r["max_rel_diff_fp64"] - 1e-10) < 1e-15


def test_missing_runs_are_reported_not_invented(tmp_path):
    out = str(tmp_path)
    open(os.path.join(out, "weak_1.log"), "w").write(log_text(1.0, 1000, 1))
    open(os.path.join(out, "weak_2.log"), "w").write("ERROR: out of memory\n")
    js = os.path.join(out, "r.json")
    r = collect.main([out, "--gpus", "1", "2", "--commit", "a", "--machine", "M", "--command", "c", "--out", js])
    assert r["weak"]["2"] is None and "2" not in r["weak_efficiency"]
    assert r["max_rel_diff_fp64"] is None
