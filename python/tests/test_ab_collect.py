"""bench/md/collect_ab_runs.py: same-call comparison lines of scripts/gpu/md_ab.sh become one record per (run, case),
and the summary never mixes precisions or atom counts (one call may run fp32 and fp64 cases under one dummy X=N)."""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "collect_ab_runs", os.path.join(HERE, "..", "..", "bench", "md", "collect_ab_runs.py"))
collect = importlib.util.module_from_spec(spec)
spec.loader.exec_module(collect)

LOG = """[ab +7s] A/B X=1 (d1): 648 0 1000.0 673 0 single
[ab +14s] A/B LD_LIBRARY_PATH=/tmp/old_lib (o1): 648 0 990.0 673 0 single
[ab +21s] A/B X=2 (d2): 648 0 1010.0 673 0 single
[ab +28s] A/B X=1 (pd1): 648 0 450.0 705 0 double
[ab +35s] A/B X=2 (pd2): 648 0 nan 705 1 double
[ab +42s] A/B X=3 (pd3): 648 0 440.0 705 0 double 10368 0 120.0 1003 0 double
"""


def records():
    out = []
    for name, settings, fields in collect.runs_of(LOG):
        for row in collect.parse_raw(fields):
            out.append({"call": "c1", "build": "b", "run": name, "settings": settings, **row})
    return out


def test_each_case_of_a_run_is_a_record():
    r = records()
    assert [x["run"] for x in r] == ["d1", "o1", "d2", "pd1", "pd2", "pd3", "pd3"]
    assert r[4]["steps_per_second"] is None and r[6]["atoms"] == 10368


def test_summary_keys_split_precision_and_atoms():
    s = collect.summarize(records())
    assert list(s) == ["c1:648:single:defaults", "c1:648:single:LD_LIBRARY_PATH=/tmp/old_lib",
                       "c1:648:double:defaults", "c1:10368:double:defaults"]
    single = s["c1:648:single:defaults"]
    assert single["steps_per_second"] == [1000.0, 1010.0] and single["mean"] == 1005.0
    assert single["standard_error"] == 5.0
    double = s["c1:648:double:defaults"]
    assert double["mean"] == 445.0 and double["failed_runs"] == 1 and double["precision"] == "double"
    assert s["c1:10368:double:defaults"]["standard_error"] is None  # one run
