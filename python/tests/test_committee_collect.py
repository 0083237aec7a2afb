"""bench/md/collect_committee.py: means, overhead fraction (largest over sizes), failed runs left out."""
import json
import os

from script_loader import load_script

collect = load_script("bench/md/collect_committee.py")


def test_overhead(tmp_path):
    runs = tmp_path / "runs.txt"
    runs.write_text("648 single 1 1000\n648 committee 1 980\n648 single 2 1010\n648 committee 2 nan\n"
                    "10368 single 1 120\n10368 committee 1 117\n")
    out = tmp_path / "c.json"
    r = collect.main([str(runs), "--members", "3", "--out-freq", "100", "--commit", "c", "--machine", "M",
                      "--command", "x", "--out", str(out)])
    c648 = r["cases"]["648"]
    assert c648["single_steps_per_second"] == 1005.0 and c648["committee_steps_per_second"] == 980.0
    assert abs(c648["overhead_fraction"] - (1 - 980 / 1005)) < 1e-12
    assert abs(r["overhead_fraction"] - 0.025) < 1e-12          # 10,368 atoms: 1 - 117/120
    assert json.load(open(out))["provenance"]["commit"] == "c"
