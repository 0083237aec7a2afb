"""bench/accuracy/accuracy_front.py merges a model card + MD benchmark, a metrics-only model and an e3nn result."""
import importlib.util
import json
import os

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
spec = importlib.util.spec_from_file_location("accuracy_front", os.path.join(ROOT, "bench", "accuracy",
                                                                              "accuracy_front.py"))
front = importlib.util.module_from_spec(spec)
spec.loader.exec_module(front)


def test_front_merges_points(tmp_path):
    md = {"device": "GPU", "commit": "abc", "cases": [
        {"atoms": 648, "precision": "single", "steps_per_second": 1000.0},
        {"atoms": 648, "precision": "double", "steps_per_second": 400.0},
        {"atoms": 10368, "precision": "single", "steps_per_second": 120.0}]}
    card = {"validation": {"force_rmse_meV_per_A": 31.0, "energy_rmse_meV_per_atom": 0.3},
            "hyperparameters": {"L": 2, "C": 32, "T": 2}, "train_seconds": 330.0}
    metrics = {"force_rmse_meV_per_A": 20.0, "energy_rmse_meV_per_atom": 0.18}
    e3nn = {"model": {"T": 3, "L": 2, "C": 32}, "validation": {"force_rmse_meV_per_A": 60.0,
                                                                "energy_rmse_meV_per_atom": 0.5},
            "timing_float32": {"648": {"evaluations_per_second": 25.0, "peak_device_bytes": 10},
                               "10368": {"evaluations_per_second": 8.0, "peak_device_bytes": 20}},
            "training": {"seconds": 240.0, "minutes_budget": 4.0}, "machine": {"device": "GPU"}, "commit": "def", "command": "x"}
    paths = {}
    for name, obj in (("md", md), ("card", card), ("metrics", metrics), ("e3nn", e3nn)):
        paths[name] = str(tmp_path / f"{name}.json")
        json.dump(obj, open(paths[name], "w"))
    out_json, out_png = str(tmp_path / "front.json"), str(tmp_path / "front.png")
    front.main(["--ours", "bundled", paths["card"], paths["md"], "--ours", "candidate", paths["metrics"], "-",
                "--e3nn", paths["e3nn"], "--commit", "123", "--machine", "GPU", "--out-json", out_json,
                "--out-png", out_png])
    r = json.load(open(out_json))
    prov = r["provenance"]
    assert prov["commit"] == "123" and prov["machine"] == "GPU" and prov["command"].startswith("bench/accuracy/")
    ours, cand, ref = r["points"]
    assert ours["steps_per_second"] == {"648": 1000.0, "10368": 120.0} and ours["force_rmse_meV_per_A"] == 31.0
    assert cand["steps_per_second"] == {} and cand["speed_what"] == "not measured yet"
    assert ref["kind"] == "e3nn" and "4 min" in ref["label"] and ref["steps_per_second"] == {"648": 25.0, "10368": 8.0}
    assert os.path.getsize(out_png) > 1000
