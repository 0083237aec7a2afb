"""Smoke training (loss decreases), checkpoint/resume, export with torch.jit.save and exact reload, fixtures."""
import json
import os

import numpy as np
import pytest
import torch

from batmobile import load_potential, save_potential
from batmobile.data import DEFAULT_ROOT, batch_frames, dataset_statistics, read_set, read_sets
from batmobile.export import build_export_module, model_from_checkpoint
from batmobile.io_utils import load_checkpoint
from batmobile.model import BatmobileModel, Hyperparameters
from batmobile.train import loss_terms
from conftest import compute, random_model

HAVE_DATA = os.path.isdir(DEFAULT_ROOT)
needs_data = pytest.mark.skipif(not HAVE_DATA, reason="water data not available")


@needs_data
def test_reader_wraps_and_statistics():
    frames = read_set(DEFAULT_ROOT, "data_0/set.000", ["O", "H"])
    assert len(frames) == 80 and frames[0].positions.shape == (192, 3)
    for fr in frames[:5]:
        frac = fr.positions @ np.linalg.inv(fr.cell)
        assert frac.min() >= 0 and frac.max() < 1
        assert (fr.species == 0).sum() == 64
    for fr in frames[:3]:
        fr.build_neighbors(5.0)
    st = dataset_statistics(frames[:3], 2)
    counts = np.array([64, 128])
    assert abs(counts @ st["E_ref"] - np.mean([f.energy for f in frames[:3]])) < 1.0
    assert 30 < st["avg_num_neighbors"] < 80 and 0.8 < st["min_distance"] < 1.2


@needs_data
def test_smoke_training_reduces_loss():
    frames = read_set(DEFAULT_ROOT, "data_0/set.000", ["O", "H"])[:2]
    for fr in frames:
        fr.build_neighbors(4.0)
    st = dataset_statistics(frames, 2)
    hp = Hyperparameters(r_c=4.0, C=8, T=1, H=16, Hr=8, A=2, dk=4, avg_num_neighbors=st["avg_num_neighbors"],
                         energy_scale=st["force_rms"], min_distance=st["min_distance"])
    model = BatmobileModel(hp, seed=0)
    model.E_ref.copy_(torch.tensor(st["E_ref"]))
    batch = batch_frames(frames, torch.float32, "cpu")
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(8):
        de, df = loss_terms(model, batch, training=True)
        loss = (de / hp.energy_scale).pow(2).mean() + (df / hp.energy_scale).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0], losses


@needs_data
def test_train_command_checkpoint_resume_export(tmp_path):
    from batmobile import train
    out = str(tmp_path / "run")
    common = ["--out", out, "--train-sets", "data_0/set.000", "--val-sets", "data_2/set.000", "--val-frames", "1",
              "--C", "8", "--T", "1", "--H", "8", "--Hr", "4", "--A", "2", "--dk", "2", "--r_c", "3.5",
              "--val-every", "2", "--checkpoint-every", "1", "--threads", "1"]
    train.main(common + ["--steps", "2"])
    ckpt = load_checkpoint(os.path.join(out, "checkpoint.pt"))
    assert ckpt["step"] == 2
    train.main(common + ["--steps", "3", "--resume"])
    ckpt = load_checkpoint(os.path.join(out, "checkpoint.pt"))
    assert ckpt["step"] == 3 and "resumed at step 2" in open(os.path.join(out, "log.txt")).read()
    from batmobile import export
    pt = str(tmp_path / "m.pt")
    export.main([os.path.join(out, "checkpoint.pt"), pt])
    loaded = load_potential(pt)
    assert loaded.header["training"]["step"] == 3
    ema = model_from_checkpoint(ckpt)
    fr = read_set(DEFAULT_ROOT, "data_2/set.000", ["O", "H"])[0]
    a = compute(ema, fr.positions, fr.species, fr.cell)
    b = compute(loaded, fr.positions, fr.species, fr.cell)
    assert a["energy"] == b["energy"] and np.array_equal(a["forces"], b["forces"])


EXPECTED_LAYER_NAMES = (["radial.W1", "radial.b1", "radial.W2", "gate.Wg", "attn.Wq", "attn.Wk", "mix.Wm0",
                         "mix.Wo0", "mix.b0", "mix.Wgm", "mix.Wgo", "mix.bg"])


def test_export_file_layout_and_exact_reload(tmp_path, system):
    model = random_model(L=3, C=8, T=2, seed=9)
    path = str(tmp_path / "model.pt")
    save_potential(model, path)
    module = torch.jit.load(path)
    buffers = dict(module.named_buffers())
    L, C, T, S = 3, 8, 2, 2
    P = 23
    names = {"embed", "E_ref", "readout.W1", "readout.b1", "readout.w2", "readout.b2"}
    for t in range(T):
        names |= {f"layers.{t}.{n}" for n in EXPECTED_LAYER_NAMES}
        names |= {f"layers.{t}.mix.Wm{l}" for l in range(1, L + 1)} | {f"layers.{t}.mix.Wo{l}" for l in range(1, L + 1)}
        names |= {f"layers.{t}.update.Wu{l}" for l in range(L + 1)} | {f"layers.{t}.norm.g{l}" for l in range(L + 1)}
    params = {k for k in buffers if not k.startswith("meta.")}
    assert params == names
    assert all(buffers[k].dtype == torch.float64 for k in buffers if k != "meta.header_json")
    assert buffers["meta.header_json"].dtype == torch.uint8
    assert tuple(buffers["layers.0.radial.W2"].shape) == (2 * P * C, model.hp.H)
    assert tuple(buffers["layers.1.mix.Wgm"].shape) == (L * C, C)
    assert tuple(buffers["embed"].shape) == (S, C) and buffers["readout.b2"].dim() == 0
    header = json.loads(bytes(buffers["meta.header_json"].tolist()).decode())
    assert header["format"] == "batmobile" and header["version"] == 2 and header["units"] == "metal"
    assert header["species"] == ["O", "H"] and header["L"] == 3 and header["r_c"] == model.hp.r_c
    assert buffers["meta.r_c"].item() == model.hp.r_c and buffers["meta.energy_scale"].item() == model.hp.energy_scale
    # rebuild from buffers: identical numbers
    rebuilt = load_potential(path)
    pos, spc, cell = system
    a, b = compute(model, pos, spc, cell), compute(rebuilt, pos, spc, cell)
    assert a["energy"] == b["energy"] and np.array_equal(a["forces"], b["forces"])


def test_loader_rejects_unknown_format_and_version(tmp_path):
    model = random_model(C=4, T=1)
    for key, value, message in (("version", 4, "version 4 is not supported"), ("format", "other", "unknown model format")):
        root = build_export_module(model, {key: value})
        path = str(tmp_path / f"bad_{key}.pt")
        torch.jit.save(torch.jit.script(root), path)
        with pytest.raises(ValueError, match=message):
            load_potential(path)


@needs_data
def test_fixtures_cli(tmp_path):
    from batmobile import fixtures
    model = random_model(C=4, T=1)
    pt = str(tmp_path / "m.pt")
    save_potential(model, pt)
    fixtures.main([str(tmp_path / "fx"), "--model", pt])
    for case in ("water", "distorted", "isolated", "cutoff"):
        ref = json.load(open(tmp_path / "fx" / f"{case}.json"))
        n = len(ref["positions"])
        assert len(ref["forces"]) == n and len(ref["atomic_virial_lammps"]) == n
        assert abs(sum(ref["atomic_energies"]) - ref["energy"]) < 1e-8
        assert np.allclose(np.sum(ref["atomic_virial_lammps"], 0), ref["virial_lammps"], atol=1e-8)
    cut = json.load(open(tmp_path / "fx" / "cutoff.json"))
    assert cut["num_edges"] == 8    # the pair exactly at r_c is not an edge
