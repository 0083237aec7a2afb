"""bench/md/collect_compare_builds.py: statistics and the same-thermo check of two builds."""
import importlib.util
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
SPEC = importlib.util.spec_from_file_location(
    "collect_compare_builds", os.path.join(HERE, "..", "..", "bench", "md", "collect_compare_builds.py"))
ccb = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(ccb)

THERMO = "|      1005    301.2   -1234.5   -1200.1    153.2"


def test_ratio_and_same_thermo(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text("\n".join([
        f"old 648 1 1000.0 {THERMO}", f"new 648 1 1100.0 {THERMO}",
        f"new 648 2 1120.0 {THERMO}", f"old 648 2 1020.0 {THERMO}"]) + "\n")
    out = tmp_path / "c.json"
    rc = ccb.main([str(raw), str(out), "--old", "a", "--new", "b", "--machine", "H200", "--command", "x"])
    doc = json.loads(out.read_text())
    case = doc["cases"][0]
    assert rc == 0
    assert case["same_thermo"]
    assert abs(case["ratio_new_over_old"] - 1110.0 / 1010.0) < 1e-12
    assert abs(case["old_steps_per_second"]["stderr"] - 10.0) < 1e-9
    assert doc["provenance"]["machine"] == "H200"


def test_different_thermo_fails(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text(f"old 648 1 1000.0 {THERMO}\nnew 648 1 1000.0 |1005 301.2 -1234.6 -1200.1 153.2\n")
    rc = ccb.main([str(raw), str(tmp_path / "c.json"), "--old", "a", "--new", "b", "--machine", "m", "--command", "x"])
    assert rc == 1
    assert not json.loads((tmp_path / "c.json").read_text())["cases"][0]["same_thermo"]


def test_failed_run_has_no_thermo(tmp_path):
    raw = tmp_path / "raw.txt"
    raw.write_text(f"old 648 1 1000.0 {THERMO}\nnew 648 1 nan |\n")
    rc = ccb.main([str(raw), str(tmp_path / "c.json"), "--old", "a", "--new", "b", "--machine", "m", "--command", "x"])
    case = json.loads((tmp_path / "c.json").read_text())["cases"][0]
    assert rc == 1 and case["new_steps_per_second"]["mean"] is None
