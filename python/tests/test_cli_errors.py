"""Bad inputs of the command-line tools (batmobile.cli: the console scripts and `python -m batmobile.<tool>`) end with
ONE line `error: ...` on stderr and exit status 2, never a traceback: --resume without or with a damaged checkpoint,
bad option and config values, missing data, missing / non-zip / truncated / altered model files, missing committee
inputs and a committee member whose checkpoint is missing. The tools' main() functions raise the same errors."""
import json
import os
import re
import subprocess
import sys

import pytest
import torch

import batmobile
from batmobile import cli, train
from batmobile.io_utils import InputError, load_checkpoint
from conftest import REPO

POTENTIAL = os.path.join(REPO, "potentials", "water_fast.pt")


def one_error_line(capsys, status):
    """The single stderr line of a tool that ended with exit status 2."""
    err = capsys.readouterr().err
    assert status == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def checkpoint_like(path):
    """A small dict saved like a training checkpoint (torch.save: a zip archive)."""
    torch.save({"model": {"embed": torch.ones(2, 3)}, "hyperparameters": {}, "ema": {}, "optimizer": {}, "step": 1,
                "elapsed_seconds": 0.0, "statistics": {}}, str(path))
    return str(path)


def run_dir_with(tmp_path, data):
    out = tmp_path / "run"
    out.mkdir()
    write_bytes(out / "checkpoint.pt", data)
    return str(out)


def flip_tensor_byte(src, dst, name="embed"):
    """Copies a model file with one byte of one value of buffer `name` changed (torch.jit.save stores tensor data
    uncompressed, so the tensor's bytes occur verbatim in the archive)."""
    t = dict(torch.jit.load(src).named_buffers())[name]
    data = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    blob = bytearray(open(src, "rb").read())
    assert blob.count(data) == 1
    blob[blob.find(data) + 3] ^= 1
    return write_bytes(dst, bytes(blob))


# ---- batmobile-train


def test_resume_without_checkpoint_is_an_error(tmp_path, capsys):
    out = str(tmp_path / "never_trained")
    line = one_error_line(capsys, cli.train(["--resume", "--out", out]))
    assert "--resume" in line and os.path.join(out, "checkpoint.pt") in line and "leave out --resume" in line
    assert not os.path.exists(out), "a failed --resume must not create the run directory"
    with pytest.raises(InputError, match="--resume: no checkpoint"):
        train.main(["--resume", "--out", out])


def test_resume_of_a_damaged_checkpoint_is_an_error(tmp_path, capsys):
    good = open(checkpoint_like(tmp_path / "good.pt"), "rb").read()
    cases = {"garbage": (b"not a checkpoint at all\n" * 20, "not a zip archive"),
             "empty": (b"", "not a zip archive"),
             "truncated": (good[: len(good) // 2], "not a zip archive"),
             "model file": (open(POTENTIAL, "rb").read(), "a model file (TorchScript), not a training checkpoint")}
    for name, (data, message) in cases.items():
        case = tmp_path / name.replace(" ", "_")
        case.mkdir()
        out = run_dir_with(case, data)
        line = one_error_line(capsys, cli.train(["--resume", "--out", out]))
        assert message in line and "checkpoint.pt" in line, (name, line)
        with pytest.raises(InputError, match=re.escape(message)):
            train.main(["--resume", "--out", out])
    other = tmp_path / "other"
    other.mkdir()
    torch.save({"weights": torch.ones(2)}, str(other / "checkpoint.pt"))
    line = one_error_line(capsys, cli.train(["--resume", "--out", str(other)]))
    assert "not a training checkpoint of batmobile.train" in line


def test_load_checkpoint_errors(tmp_path):
    with pytest.raises(InputError, match="no such training checkpoint"):
        load_checkpoint(str(tmp_path / "missing.pt"))
    with pytest.raises(InputError, match="a directory"):
        load_checkpoint(str(tmp_path))
    assert load_checkpoint(checkpoint_like(tmp_path / "ok.pt"))["step"] == 1


def test_bad_options_and_config_values(tmp_path, capsys):
    out = str(tmp_path / "run")
    line = one_error_line(capsys, cli.train(["--steps", "0", "--out", out]))
    assert line == "error: --steps 0: must be at least 1"
    assert "--ema 1.0" in one_error_line(capsys, cli.train(["--ema", "1", "--out", out]))
    assert "--r_c -1.0: must be positive" in one_error_line(capsys, cli.train(["--r_c", "-1", "--out", out]))
    line = one_error_line(capsys, cli.train(["--stepz", "3"]))
    assert "unrecognized arguments: --stepz 3" in line and "--help" in line
    assert "invalid int value" in one_error_line(capsys, cli.train(["--steps", "many"]))
    cfg = str(tmp_path / "run.json")
    with open(cfg, "w") as f:
        json.dump({"steps": "many"}, f)
    assert "'many' is not a int" in one_error_line(capsys, cli.train(["--config", cfg]))
    assert "no such config file" in one_error_line(capsys, cli.train(["--config", str(tmp_path / "none.yaml")]))
    assert not os.path.exists(out)


def test_missing_data_is_an_error(tmp_path, capsys):
    missing = str(tmp_path / "md.xyz")
    line = one_error_line(capsys, cli.train(["--train", missing, "--val", missing, "--out", str(tmp_path / "a")]))
    assert line == f"error: {missing}: no such file or directory"
    line = one_error_line(capsys, cli.train(["--data", str(tmp_path / "nowhere"), "--out", str(tmp_path / "b")]))
    assert "--data" in line and "no such directory" in line and "BATMOBILE_WATER_DATA" in line
    line = one_error_line(capsys, cli.train(["--train", missing, "--out", str(tmp_path / "c")]))
    assert "--train needs --val" in line


# ---- batmobile-evaluate


def test_evaluate_bad_model_files(tmp_path, capsys):
    missing = str(tmp_path / "missing.pt")
    line = one_error_line(capsys, cli.evaluate([missing]))
    assert line.startswith(f"error: {missing}: no such model file") and "batmobile-export" in line
    text = write_bytes(tmp_path / "notes.pt", b"just some text, not a zip archive\n")
    assert f"{text}: not a model file: not a zip archive" in one_error_line(capsys, cli.evaluate([text]))
    model = open(POTENTIAL, "rb").read()
    cut = write_bytes(tmp_path / "cut.pt", model[: len(model) - 100])
    assert "not a zip archive" in one_error_line(capsys, cli.evaluate([cut]))
    ckpt = checkpoint_like(tmp_path / "checkpoint.pt")
    assert "a training checkpoint? export it" in one_error_line(capsys, cli.evaluate([ckpt]))
    assert "a directory" in one_error_line(capsys, cli.evaluate([str(tmp_path)]))


def test_evaluate_model_with_failing_checksum(tmp_path, capsys):
    altered = flip_tensor_byte(POTENTIAL, tmp_path / "altered.pt")
    line = one_error_line(capsys, cli.evaluate([altered, "--frames", str(tmp_path / "unused.xyz")]))
    assert line.startswith(f"error: {altered}: ") and "checksum" in line
    with pytest.raises(InputError, match="checksum"):
        from batmobile import evaluate
        evaluate.main([altered])


def test_evaluate_missing_frames(tmp_path, capsys):
    missing = str(tmp_path / "frames.xyz")
    assert one_error_line(capsys, cli.evaluate([POTENTIAL, "--frames", missing])) == \
        f"error: {missing}: no such file or directory"
    line = one_error_line(capsys, cli.evaluate([POTENTIAL, "--data", str(tmp_path / "nowhere")]))
    assert "--data" in line and "no such directory" in line
    assert "--help" in one_error_line(capsys, cli.evaluate([]))


# ---- batmobile-committee


def test_committee_missing_inputs(tmp_path, capsys):
    devi = tmp_path / "model_devi.out"
    devi.write_text("0 0 0 0 0.1 0 0\n")
    base = ["select", "--species", "O", "H", "--lo", "0", "--hi", "1", "--out", str(tmp_path / "o.xyz")]
    missing = str(tmp_path / "missing.dump")
    assert one_error_line(capsys, cli.committee(base + ["--devi", str(devi), "--dump", missing])) == \
        f"error: --dump {missing}: no such file"
    missing = str(tmp_path / "missing.out")
    assert one_error_line(capsys, cli.committee(base + ["--devi", missing, "--dump", str(devi)])) == \
        f"error: --devi {missing}: no such file"
    devi.write_text("step a b c d e f\n")
    dump = tmp_path / "traj.dump"
    dump.write_text("ITEM: TIMESTEP\n0\n")
    assert "line 1 is not numbers" in one_error_line(capsys, cli.committee(base + ["--devi", str(devi), "--dump",
                                                                                   str(dump)]))
    assert "unknown command 'tain'" in one_error_line(capsys, cli.committee(["tain"]))
    assert "no command" in one_error_line(capsys, cli.committee([]))
    assert "--help" in one_error_line(capsys, cli.committee(["select", "--lo", "x"]))


def test_committee_member_without_checkpoint(tmp_path, capsys, monkeypatch):
    """A member whose training left no checkpoint (here: training does nothing): its export is one error line."""
    monkeypatch.setattr(train, "main", lambda argv: None)
    out = str(tmp_path / "committee")
    line = one_error_line(capsys, cli.committee(["train", "--members", "2", "--out", out]))
    assert line.startswith("error: " + os.path.join(out, "member_0", "checkpoint.pt") + ": no such training checkpoint")


# ---- the module form and the exit status of a real process


def test_python_m_prints_one_line_and_exits_2(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [os.path.dirname(os.path.dirname(batmobile.__file__)),
                                                        os.environ.get("PYTHONPATH")])))
    for argv, message in [(["batmobile.evaluate", str(tmp_path / "missing.pt")], "no such model file"),
                          (["batmobile.train", "--resume", "--out", str(tmp_path / "run")], "--resume: no checkpoint"),
                          (["batmobile.committee", "select", "--devi"], "expected one argument")]:
        p = subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                           timeout=300)
        lines = p.stderr.strip().splitlines()
        assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], \
            (argv, p.stderr)


def test_traceback_on_request(tmp_path):
    with pytest.raises(InputError):
        cli.evaluate(["--traceback", str(tmp_path / "missing.pt")])
