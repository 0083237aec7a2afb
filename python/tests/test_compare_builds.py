"""bench/md/collect_compare_builds.py: statistics and the same-energy check of two builds."""
import importlib.util
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location(
    "collect_compare_builds", os.path.join(HERE, "..", "..", "bench", "md", "collect_compare_builds.py"))
ccb = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(ccb)

RUN0 = "|0 300 -101054.751234 -101029.661234 993.492151"


def collect(tmp_path, lines, *extra):
    raw = tmp_path / "raw.txt"
    raw.write_text("\n".join(lines) + "\n")
    out = tmp_path / "c.json"
    rc = ccb.main([str(raw), str(out), "--old", "a", "--new", "b", "--machine", "H200", "--command", "x", *extra])
    return rc, json.loads(out.read_text())


def test_ratio_and_same_energy(tmp_path):
    rc, doc = collect(tmp_path, [f"check old 648 {RUN0}", f"check new 648 {RUN0}", "old 648 1 1000.0",
                                 "new 648 1 1100.0", "new 648 2 1120.0", "old 648 2 1020.0"])
    case = doc["cases"][0]
    assert rc == 0
    assert case["same_energy_and_pressure"]
    assert abs(case["ratio"] - 1110.0 / 1010.0) < 1e-12 and case["potential"] == "water_fast"
    assert abs(case["old_steps_per_second"]["stderr"] - 10.0) < 1e-9
    assert doc["provenance"] == {"commit": "b", "machine": "H200", "command": "x"} and doc["compared_with"] == "a"


def test_different_energy_fails(tmp_path):
    other = "|0 300 -101054.751334 -101029.661234 993.492151"
    rc, doc = collect(tmp_path, [f"check old 648 {RUN0}", f"check new 648 {other}", "old 648 1 1000.0",
                                 "new 648 1 1000.0"])
    assert rc == 1
    assert not doc["cases"][0]["same_energy_and_pressure"]
    # within a looser tolerance the same values pass
    rc, doc = collect(tmp_path, [f"check old 648 {RUN0}", f"check new 648 {other}"], "--rtol", "1e-8")
    assert rc == 0


def test_missing_check_or_failed_run(tmp_path):
    rc, doc = collect(tmp_path, [f"check old 648 {RUN0}", "check new 648 |", "old 648 1 1000.0", "new 648 1 nan"])
    case = doc["cases"][0]
    assert rc == 1 and case["new_steps_per_second"]["mean"] is None and not case["same_energy_and_pressure"]


def test_cases_per_potential(tmp_path):
    """Runs and checks that name a potential are their own case (atoms, potential)."""
    rc, doc = collect(tmp_path, [f"check old 648 water_accurate {RUN0}", f"check new 648 water_accurate {RUN0}",
                                 f"check old 648 {RUN0}", f"check new 648 {RUN0}", "old 648 1 1000.0",
                                 "new 648 1 990.0", "old 648 1 500.0 water_accurate", "new 648 1 520.0 water_accurate"])
    assert rc == 0
    by = {c["potential"]: c for c in doc["cases"]}
    assert set(by) == {"water_fast", "water_accurate"}
    assert abs(by["water_fast"]["ratio"] - 0.99) < 1e-12 and abs(by["water_accurate"]["ratio"] - 1.04) < 1e-12
