"""bench/md/collect_md_bench.py: the raw lines of run_md_bench.sh become one case per (atoms, precision) run in a row,
so that a repeated case reports the mean of its runs."""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "collect_md_bench", os.path.join(HERE, "..", "..", "bench", "md", "collect_md_bench.py"))
collect = importlib.util.module_from_spec(spec)
spec.loader.exec_module(collect)


def test_group_runs_joins_consecutive_repeats_only():
    lines = ["648 0 990.5 673 1 single", "648 0 1010.5 675 0 single", "", "648 0 460.0 707 0 double",
             "10368 0 nan 0 0 single", "648 0 970.0 673 0 single"]
    groups = collect.group_runs(lines)
    assert [(g[0]["atoms"], g[0]["precision"], len(g)) for g in groups] == [
        (648, "single", 2), (648, "double", 1), (10368, "single", 1), (648, "single", 1)]
    assert [r["sps"] for r in groups[0]] == [990.5, 1010.5]
    assert groups[2][0]["sps"] is None
    assert groups[0][1]["peak"] == 675.0


def test_summarize_reports_the_mean_and_fails_with_any_run():
    runs = collect.group_runs(["648 0 990.0 673 1 single", "648 0 1010.0 675 0 single"])[0]
    case = collect.summarize(runs)
    assert case["steps_per_second"] == 1000.0 and case["atom_steps_per_second"] == 648000.0
    assert case["steps_per_second_runs"] == [990.0, 1010.0] and case["steps_per_second_min_max"] == [990.0, 1010.0]
    assert case["peak_device_bytes"] == 675 * 2**20 and case["baseline_device_bytes"] == 2**20
    failed = collect.summarize(collect.group_runs(["648 0 990.0 673 0 single", "648 124 nan 673 0 single"])[0])
    assert failed["exit_code"] == 124 and failed["steps_per_second"] is None
    one = collect.summarize(collect.group_runs(["97200 0 14.6 3485 0 single"])[0])
    assert one["steps_per_second"] == 14.6 and "steps_per_second_runs" not in one


def test_read_launches_keeps_each_cases_first_line():
    lines = ["648 single fused kernels for 648 local atoms, per atom: layer 0 forward 96 threads",
             "648 single fused kernels for 648 local atoms, per atom: layer 0 forward 128 threads", "",
             "648 double reference edge kernels (per-edge arrays)", "10368 single"]
    got = collect.read_launches(lines)
    assert got == {(648, "single"): "fused kernels for 648 local atoms, per atom: layer 0 forward 96 threads",
                   (648, "double"): "reference edge kernels (per-edge arrays)"}


def test_provenance_names_commit_machine_and_command(monkeypatch):
    p = collect.provenance("abc1234", "NVIDIA H200", 16, "bench/md/run_md_bench.sh LMP water_fast.pt OUTDIR")
    assert p == {"commit": "abc1234", "machine": "NVIDIA H200, 16 CPU cores",
                 "command": "bench/md/run_md_bench.sh LMP water_fast.pt OUTDIR"}
    monkeypatch.setenv("BATMOBILE_COMMIT", "feed123")
    assert collect.source_commit(HERE) == "feed123"
    monkeypatch.delenv("BATMOBILE_COMMIT")
    assert collect.source_commit("/nonexistent-dir") == "unknown"


def test_committed_result_files_name_their_provenance():
    import json
    results = os.path.join(HERE, "..", "..", "bench", "results")
    for name in sorted(os.listdir(results)):
        if name.endswith(".json"):
            doc = json.load(open(os.path.join(results, name)))
            assert set(doc["provenance"]) == {"commit", "machine", "command"}, name
            assert all(doc["provenance"].values()), name


def test_add_e3nn_times_each_box_once_and_records_failures(monkeypatch):
    calls = []

    def fake_peer(pot, X, types, box):
        calls.append(len(X))
        if len(X) > 1000:
            raise RuntimeError("CUDA out of memory")
        return 50.0, 123

    monkeypatch.setattr(collect, "e3nn_peer", fake_peer)
    cache = {}
    box = ([0] * 648, None, None)
    single = {"atoms": 648, "steps_per_second": 1000.0}
    mixed = {"atoms": 648, "steps_per_second": 1500.0}
    collect.add_e3nn(single, "pot.pt", box, cache)
    collect.add_e3nn(mixed, "pot.pt", box, cache)
    assert calls == [648]
    assert single["e3nn_steps_per_second"] == 50.0 and single["e3nn_peak_device_bytes"] == 123
    assert single["speedup_vs_e3nn"] == 20.0 and mixed["speedup_vs_e3nn"] == 30.0
    big = {"atoms": 97200, "steps_per_second": 20.0}
    collect.add_e3nn(big, "pot.pt", ([0] * 97200, None, None), cache)
    assert big["e3nn_error"] == "CUDA out of memory" and "speedup_vs_e3nn" not in big


def test_e3nn_peer_matches_the_potentials_size():
    import pytest
    pytest.importorskip("e3nn")
    import numpy as np
    x, types, box = collect.read_lammps_data(os.path.join(HERE, "..", "..", "examples", "lammps_inputs", "water216",
                                                          "water216_start.lmp"))
    sps, _ = collect.e3nn_peer(os.path.join(HERE, "..", "..", "potentials", "water_fast.pt"), x, types, box)
    assert np.isfinite(sps) and sps > 0
