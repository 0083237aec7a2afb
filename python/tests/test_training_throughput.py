"""bench/accuracy/training_throughput.py on the CPU (--quick: small synthetic frames): one JSON row per model and batch
size, frames/s = steps x batch size / seconds, and --correlation 2 times the product-basis models."""
import json

from script_loader import load_script

tt = load_script("bench/accuracy/training_throughput.py")


def run(tmp_path, *extra):
    out = tmp_path / "tt.json"
    tt.main(["--quick", "--steps", "2", "--models", "fast", "--batch-sizes", "1", "2", "--device", "cpu",
             "--commit", "abc", "--out", str(out), *extra])
    return json.load(open(out))


def test_rows_and_rates(tmp_path):
    r = run(tmp_path)
    assert r["commit"] == "abc" and r["quick"] and r["device"].startswith("cpu")
    rows = r["results"]
    assert [(x["model"], x["batch_size"]) for x in rows] == [("fast", 1), ("fast", 2)]
    for x in rows:
        assert x["correlation"] == 1 and x["T"] == 2
        assert abs(x["frames_per_second"] - x["steps_per_second"] * x["batch_size"]) < 1e-9 * x["frames_per_second"]
        assert x["mean_loss"] > 0
    assert rows[0]["speedup_vs_batch_1"] == 1.0


def test_product_basis_models(tmp_path):
    rows = run(tmp_path, "--correlation", "2")["results"]
    assert all(x["correlation"] == 2 and x["frames_per_second"] > 0 for x in rows)
