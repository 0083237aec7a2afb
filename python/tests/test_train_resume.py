"""A training run split into chunks (--chunk-steps, then --resume) ends bit-identical to one long run: weights,
EMA, optimizer state, data order and learning curve; also for a wall-clock schedule (--total-minutes)."""
import json
import os

import numpy as np
import pytest
import torch

from batmobile import train
from batmobile.io_utils import load_checkpoint


def write_deepmd_set(root, name, frames, seed):
    """A tiny DeePMD system of 3 'water' molecules per frame on a jittered grid in a 6 A box."""
    rng = np.random.default_rng(seed)
    system = os.path.join(root, name)
    os.makedirs(os.path.join(system, "set.000"))
    with open(os.path.join(system, "type_map.raw"), "w") as f:
        f.write("O\nH\n")
    types = np.array([0, 1, 1] * 3)
    np.savetxt(os.path.join(system, "type.raw"), types, fmt="%d")
    grid = np.array([[i, j, k] for i in range(3) for j in range(3) for k in range(1)], dtype=float) * 2.0 + 0.5
    coord = grid[None] + 0.3 * rng.standard_normal((frames, len(types), 3))
    np.save(os.path.join(system, "set.000", "coord.npy"), coord.reshape(frames, -1))
    np.save(os.path.join(system, "set.000", "force.npy"), rng.standard_normal((frames, len(types) * 3)))
    np.save(os.path.join(system, "set.000", "energy.npy"), -10.0 + 0.1 * rng.standard_normal(frames))
    np.save(os.path.join(system, "set.000", "box.npy"), np.tile(np.diag([6.0, 6.0, 6.0]).reshape(1, 9), (frames, 1)))


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("deepmd"))
    write_deepmd_set(root, "train", 5, seed=1)
    write_deepmd_set(root, "val", 2, seed=2)
    return root


def run_options(data_root):
    """Tiny float64 model; one frame per step, so the 5-frame data set gives several shuffled epochs."""
    return ["--data", data_root, "--train-sets", "train/set.000", "--val-sets", "val/set.000", "--val-frames", "1",
            "--C", "4", "--T", "1", "--H", "4", "--Hr", "4", "--A", "2", "--dk", "2", "--NB", "4", "--r_c", "3.0",
            "--dtype", "float64", "--device", "cpu", "--lr", "1e-2", "--force-weight", "10",
            "--energy-weight-final", "5", "--ema", "0.9"]


CALL_OPTIONS = ["--val-every", "4", "--checkpoint-every", "3", "--log-every", "5", "--curve-every", "2",
                "--threads", "1"]


def assert_same_run(a, b):
    for key in ("model", "ema"):
        assert a[key].keys() == b[key].keys()
        for name in a[key]:
            assert torch.equal(a[key][name], b[key][name]), (key, name)
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    for i in sa:
        for k in sa[i]:
            assert torch.equal(torch.as_tensor(sa[i][k]), torch.as_tensor(sb[i][k])), (i, k)
    assert a["step"] == b["step"] and a["finished"] and b["finished"]
    assert json.dumps(a["data_order"]) == json.dumps(b["data_order"])   # plain types: loads under any numpy
    assert isinstance(b["rng"]["numpy"][1], list)
    ca, cb = a["curve"], b["curve"]
    for k in ("step", "loss", "lr", "energy_weight"):
        assert ca["train"][k] == cb["train"][k], k
    strip = lambda vs: [{k: v for k, v in d.items() if k != "elapsed_s"} for d in vs]
    assert strip(ca["validation"]) == strip(cb["validation"])


def test_chunks_match_one_run(data_root, tmp_path):
    one, split = str(tmp_path / "one"), str(tmp_path / "split")
    train.main(run_options(data_root) + CALL_OPTIONS + ["--out", one, "--steps", "13"])
    train.main(run_options(data_root) + CALL_OPTIONS + ["--out", split, "--steps", "13", "--chunk-steps", "5"])
    first = load_checkpoint(os.path.join(split, "checkpoint.pt"))
    assert first["step"] == 5 and not first["finished"]
    # later chunks name only what the call needs: the run's options come from the checkpoint
    for _ in range(2):
        train.main(["--data", data_root, "--out", split, "--resume", "--chunk-steps", "5"] + CALL_OPTIONS)
    a = load_checkpoint(os.path.join(one, "checkpoint.pt"))
    b = load_checkpoint(os.path.join(split, "checkpoint.pt"))
    assert_same_run(a, b)
    assert a["curve"]["train"]["step"] == list(range(2, 13, 2))
    assert a["curve"]["validation"][-1]["final"] and a["curve"]["validation"][-1]["frames"] == 2
    assert a["curve"]["train"]["energy_weight"][0] < a["curve"]["train"]["energy_weight"][-1] <= 5.0
    assert len(b["train_commands"]) == 3 and b["args"]["force_weight"] == 10
    with open(os.path.join(split, "curve.json")) as f:
        assert json.load(f)["train"]["loss"] == b["curve"]["train"]["loss"]
    assert os.path.getsize(os.path.join(split, "curve.png")) > 0
    log = open(os.path.join(split, "log.txt")).read()
    assert "resumed at step 5" in log and "resumed at step 10" in log and "end of chunk at step 5/13" in log
    # a finished run resumed again does nothing
    train.main(["--data", data_root, "--out", split, "--resume"] + CALL_OPTIONS)
    c = load_checkpoint(os.path.join(split, "checkpoint.pt"))
    assert c["step"] == 13 and torch.equal(c["model"]["embed"], b["model"]["embed"])
    assert len(c["curve"]["validation"]) == len(b["curve"]["validation"])


def test_time_schedule_continues_across_chunks(data_root, tmp_path, monkeypatch):
    """With a clock that advances 1 s per training step, a 12-second run ends after 12 steps, split or not,
    and its cosine decay continues from the stored training time."""
    clock = [1000.0]
    monkeypatch.setattr(train.time, "time", lambda: clock[0])
    one_step = train.Trainer.one_step

    def timed_step(self, lr, w_e):
        clock[0] += 1.0
        return one_step(self, lr, w_e)

    monkeypatch.setattr(train.Trainer, "one_step", timed_step)
    one, split = str(tmp_path / "one"), str(tmp_path / "split")
    common = run_options(data_root) + CALL_OPTIONS + ["--steps", "1000", "--total-minutes", "0.2"]
    train.main(common + ["--out", one])
    train.main(common + ["--out", split, "--chunk-minutes", "0.125"])
    mid = load_checkpoint(os.path.join(split, "checkpoint.pt"))
    assert mid["step"] == 8 and mid["elapsed_seconds"] == 8.0
    train.main(["--data", data_root, "--out", split, "--resume"] + CALL_OPTIONS)
    a = load_checkpoint(os.path.join(one, "checkpoint.pt"))
    b = load_checkpoint(os.path.join(split, "checkpoint.pt"))
    assert a["step"] == 12 and a["elapsed_seconds"] == 12.0
    assert_same_run(a, b)
    lrs = a["curve"]["train"]["lr"]
    assert all(x > y for x, y in zip(lrs, lrs[1:])) and lrs[-1] < 0.1 * 1e-2


def test_schedule_functions():
    args, given = train.parse_args(["--steps", "100", "--lr", "1.0", "--lr-final-fraction", "0.0",
                                    "--total-minutes", "1"])
    assert {"steps", "lr", "lr_final_fraction", "total_minutes"} == given
    assert train.schedule_progress(args, 50, 0.0) == 0.5
    assert train.schedule_progress(args, 10, 45.0) == 0.75
    assert train.learning_rate(args, 0.0) == 1.0 and abs(train.learning_rate(args, 0.5) - 0.5) < 1e-12
    assert train.energy_weight(args, 0.7) == 1.0
    args.energy_weight_final = 3.0
    assert abs(train.energy_weight(args, 0.5) - 2.0) < 1e-12


def test_resume_keeps_the_architecture(data_root, tmp_path, capsys):
    """A resumed run keeps its checkpoint's architecture: another --L, --C, ... is one error line (the weights fit
    no other model); a run option such as --steps may change, and the log says so."""
    from batmobile import cli
    out = str(tmp_path / "run")
    train.main(run_options(data_root) + CALL_OPTIONS + ["--out", out, "--steps", "4", "--chunk-steps", "2"])
    capsys.readouterr()
    for option, value, stored in (("--C", "8", "4"), ("--L", "1", "2"), ("--r_c", "4.0", "3.0")):
        assert cli.train(["--data", data_root, "--out", out, "--resume", option, value] + CALL_OPTIONS) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"error: --resume {option} {value}:"), err
        assert f"a run with {option} {stored}," in err[0] and "start a new run" in err[0]
    train.main(["--data", data_root, "--out", out, "--resume", "--steps", "6"] + CALL_OPTIONS)
    assert load_checkpoint(os.path.join(out, "checkpoint.pt"))["step"] == 6
    assert "resume overrides the checkpoint's --steps 6" in open(os.path.join(out, "log.txt")).read()
