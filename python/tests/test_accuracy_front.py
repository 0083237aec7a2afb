"""bench/accuracy/accuracy_front.py merges a model card + MD benchmark, a metrics-only model and an e3nn result."""
import json
import os

from script_loader import load_script

front = load_script("bench/accuracy/accuracy_front.py")


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


def test_card_speed_and_e3nn_speed_override(tmp_path):
    """A card's md_h200 block (written by add_md_speed.py) gives our speed; --e3nn-speed-from replaces e3nn's."""
    add = load_script("bench/accuracy/add_md_speed.py")
    card = {"validation": {"force_rmse_meV_per_A": 16.0, "energy_rmse_meV_per_atom": 0.15}}
    speeds = {"what": "w", "provenance": {"commit": "c", "machine": "GPU", "command": "x"},
              "models": {"m": {"steps_per_second_648": 500.0, "steps_per_second_10368": 53.0},
                         "own": {"steps_per_second_648": 400.0,
                                 "provenance": {"commit": "d", "machine": "GPU", "command": "y"}}}}
    timing = lambda a, b: {"648": {"evaluations_per_second": a, "peak_device_bytes": 1},
                           "10368": {"evaluations_per_second": b, "peak_device_bytes": 2}}
    e3nn = {"model": {"T": 3, "L": 2, "C": 32}, "validation": {"force_rmse_meV_per_A": 40.0,
                                                                "energy_rmse_meV_per_atom": 0.3},
            "timing_float32": timing(20.0, 5.0), "training": {"seconds": 450.0, "minutes_budget": 7.5},
            "machine": {"device": "GPU"}}
    clean = dict(e3nn, timing_float32=timing(25.0, 8.0))
    paths = {}
    for name, obj in (("card", card), ("speeds", speeds), ("e3nn", e3nn), ("clean", clean)):
        paths[name] = str(tmp_path / f"{name}.json")
        json.dump(obj, open(paths[name], "w"))
    add.main([paths["card"], paths["speeds"], "m", "--note", "n"])
    stored = json.load(open(paths["card"]))
    assert stored["md_h200"]["steps_per_second_648"] == 500.0 and stored["notes"] == "n"
    assert stored["validation"] == card["validation"]
    assert stored["md_h200"]["provenance"]["commit"] == "c"
    own_card = str(tmp_path / "own_card.json")
    json.dump(card, open(own_card, "w"))
    add.main([own_card, paths["speeds"], "own"])
    assert json.load(open(own_card))["md_h200"]["provenance"]["commit"] == "d"  # a model's own run wins
    try:
        add.main([paths["card"], paths["speeds"], "missing"])
        raise AssertionError("an unknown model name must fail")
    except SystemExit as e:
        assert "no model 'missing'" in str(e)
    out_json = str(tmp_path / "front.json")
    front.main(["--ours", "m", paths["card"], "card", "--e3nn", paths["e3nn"], "--e3nn-speed-from", paths["clean"],
                "--commit", "1", "--machine", "GPU", "--out-json", out_json, "--out-png", str(tmp_path / "f.png")])
    ours, ref = json.load(open(out_json))["points"]
    assert ours["steps_per_second"] == {"648": 500.0, "10368": 53.0}
    assert ref["steps_per_second"] == {"648": 25.0, "10368": 8.0} and ref["sources"]["speed"] == paths["clean"]


def test_external_point(tmp_path):
    """--external adds a point measured elsewhere (the bundled MACE figures load); a file lacking a key is one error."""
    out_json, out_png = str(tmp_path / "front.json"), str(tmp_path / "front.png")
    mace = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "accuracy", "results", "mace_external.json")
    front.main(["--external", mace, "--commit", "1", "--machine", "GPU", "--out-json", out_json, "--out-png", out_png])
    (pt,) = json.load(open(out_json))["points"]
    assert pt["kind"] == "external" and pt["force_rmse_meV_per_A"] == 22.0
    assert pt["steps_per_second"] == {"648": 44.6, "10368": 10.7} and "source" in pt
    bad = str(tmp_path / "bad.json")
    json.dump({"label": "x", "force_rmse_meV_per_A": 1.0}, open(bad, "w"))
    try:
        front.main(["--external", bad, "--commit", "1", "--machine", "GPU", "--out-json", out_json,
                    "--out-png", out_png])
    except SystemExit as e:
        assert str(e).startswith("error: --external") and "speed_what" in str(e)
    else:
        raise AssertionError("a point without speeds was accepted")
