"""The product basis (correlation 2, docs/model.md step 3, in the layers t < T - 1): its equivariance, a
loop-by-loop re-implementation of its formula, forces and training gradients against finite differences,
correlation 1 unchanged bit for bit, the model file (version 3) and the trainer's --correlation with batches and an
exact resume."""
import importlib.util
import json
import math
import os
import re
import subprocess

import numpy as np
import pytest
import torch

from batmobile import cli, export, train
from batmobile.export import build_export_module, load_potential, read_header, save_potential, upgrade
from batmobile.io_utils import InputError, load_checkpoint, load_model_file
from batmobile.model import (BatmobileModel, Hyperparameters, ProductBasis, edge_vectors, evaluate_structure,
                             scale_product_basis)
from batmobile.neighbors import neighbor_list
from batmobile.so3 import clebsch_gordan, wigner_D_from_sh
from conftest import REPO, compute, random_model
from test_model import rotation
from test_model import test_forces_are_finite_differences as check_forces_by_finite_differences
from test_train_resume import assert_same_run, data_root, run_options  # noqa: F401 (data_root: a fixture)


def blocks(x, L, fn):
    """fn(l, x[:, l-block, :]) for each l, concatenated back along dim 1."""
    return torch.cat([fn(l, x[:, l * l:(l + 1) ** 2, :]) for l in range(L + 1)], dim=1)


def rotate_features(x, L, R):
    """Features (N, K, C) of a structure rotated (or reflected) by R: x[l] -> D_l(R) x[l]."""
    return blocks(x, L, lambda l, xl: torch.einsum("ab,nbc->nac", wigner_D_from_sh(l, torch.tensor(R)), xl))


def naive_product(m, wq, L):
    """docs/model.md step 3 written out with loops over paths, channels and m1, m2, m3 (float64)."""
    paths = [(l1, l2, l3) for l1 in range(L + 1) for l2 in range(L + 1) for l3 in range(L + 1)
             if abs(l1 - l2) <= l3 <= l1 + l2 and (l1 + l2 + l3) % 2 == 0 and l1 <= l2]
    nq = {l3: sum(1 for q in paths if q[2] == l3) for _, _, l3 in paths}
    N, K, C = m.shape
    p = np.zeros((N, K, C))
    for q, (l1, l2, l3) in enumerate(paths):
        beta = math.sqrt((2 * l3 + 1) / nq[l3])
        cg = clebsch_gordan(l1, l2, l3)
        for n in range(N):
            for c in range(C):
                for m1 in range(2 * l1 + 1):
                    for m2 in range(2 * l2 + 1):
                        for m3 in range(2 * l3 + 1):
                            p[n, l3 * l3 + m3, c] += (beta * wq[q, c] * cg[m1, m2, m3] * m[n, l1 * l1 + m1, c]
                                                      * m[n, l2 * l2 + m2, c])
    return p, len(paths)


@pytest.mark.parametrize("L", [1, 2, 3])
def test_product_equals_loops(L):
    torch.manual_seed(L)
    pb = ProductBasis(L, 3).double()
    with torch.no_grad():
        pb.wq.normal_()
    m = torch.randn(2, (L + 1) ** 2, 3, dtype=torch.float64)
    ref, Q = naive_product(m.numpy(), pb.wq.detach().numpy(), L)
    assert Q == {1: 3, 2: 8, 3: 15}[L] == pb.wq.shape[0]
    assert np.abs(pb(m).detach().numpy() - ref).max() < 1e-13 * np.abs(ref).max()


@pytest.mark.parametrize("L", [1, 2, 3])
def test_product_is_equivariant(L):
    """p(D m) = D p(m) for the Wigner D matrices of a random rotation (and of a reflection: natural parity)."""
    torch.manual_seed(10 + L)
    pb = ProductBasis(L, 4).double()
    m = torch.randn(3, (L + 1) ** 2, 4, dtype=torch.float64)
    for R in (rotation(L), rotation(L) @ np.diag([1.0, -1.0, 1.0])):   # D of the SH: parity (-1)^l included
        a, b = pb(rotate_features(m, L, R)), rotate_features(pb(m), L, R)
        assert torch.allclose(a, b, atol=1e-12), (a - b).abs().max()
    assert pb(m).abs().max() > 1e-2


def capture_products(model, positions, species, cell):
    """Each product basis's p (N, K, C) for a structure."""
    seen = []
    hooks = [layer.product.register_forward_hook(lambda mod, inp, out: seen.append(out.detach()))
             for layer in model.layers if layer.product is not None]
    compute(model, positions, species, cell, virial=False)
    for h in hooks:
        h.remove()
    return seen


def test_model_products_rotate_with_the_edges(system):
    """Rotating the structure (so every edge vector) rotates each layer's p with the Wigner D matrices."""
    model = random_model(T=3, correlation=2)
    pos, spc, cell = system
    R = rotation(5)
    ref = capture_products(model, pos, spc, cell)
    rot = capture_products(model, pos @ R.T, spc, cell @ R.T)
    assert len(ref) == 2   # layers 0 and 1, not the last
    for a, b in zip(ref, rot):
        assert torch.allclose(b, rotate_features(a, model.hp.L, R), atol=1e-10)
        assert a[:, 1:].abs().max() > 1e-3   # the l >= 1 parts are not trivially zero


def test_invariances_of_a_correlation_2_model(system):
    model = random_model(correlation=2)
    pos, spc, cell = system
    ref = compute(model, pos, spc, cell)
    R = rotation(11)
    moved = compute(model, pos @ R.T + np.array([0.3, -1.2, 2.0]), spc, cell @ R.T)
    perm = np.random.default_rng(2).permutation(len(pos))
    permuted = compute(model, pos[perm], spc[perm], cell)
    tol = 1e-10 * max(1.0, abs(ref["energy"]))
    assert abs(moved["energy"] - ref["energy"]) < tol and abs(permuted["energy"] - ref["energy"]) < tol
    assert np.allclose(moved["forces"], ref["forces"] @ R.T, atol=1e-10)
    assert np.allclose(moved["virial"], R @ ref["virial"] @ R.T, atol=1e-9)
    assert np.allclose(permuted["atomic_energies"], ref["atomic_energies"][perm], atol=1e-10)
    assert np.allclose(permuted["forces"], ref["forces"][perm], atol=1e-10)
    # the product basis matters: the same weights without it give other forces
    plain = random_model(correlation=2)
    with torch.no_grad():
        plain.layers[0].product.wq.zero_()
    assert np.abs(compute(plain, pos, spc, cell)["forces"] - ref["forces"]).max() > 1e-3


def test_forces_are_finite_differences(system):
    check_forces_by_finite_differences(random_model(correlation=2), system)


def force_loss(model, pos, spc, cell, target):
    s, r, sh = neighbor_list(pos, cell, model.hp.r_c)
    T = lambda x, dt=torch.float64: torch.as_tensor(np.asarray(x), dtype=dt)
    out = evaluate_structure(model, T(pos), T(spc, torch.long), T(cell), T(s, torch.long), T(r, torch.long),
                             T(sh, torch.long), training=True)
    return (out["forces"] - target).pow(2).sum() + out["energy"]


def test_force_loss_gradient_through_the_product(system):
    """The double backward (a force loss, as in training) reaches wq and Wp: its gradient equals finite
    differences of the loss in these weights."""
    model = random_model(correlation=2)
    pos, spc, cell = system
    target = torch.as_tensor(np.random.default_rng(1).normal(size=pos.shape))
    pb = model.layers[0].product
    loss = force_loss(model, pos, spc, cell, target)
    g_wq, g_wp = torch.autograd.grad(loss, [pb.wq, pb.Wp1])
    h = 1e-6
    for param, grad, idx in ((pb.wq, g_wq, (4, 3)), (pb.Wp1, g_wp, (2, 5))):
        up_down = []
        for shift in (h, -2 * h):
            with torch.no_grad():
                param[idx] += shift
            up_down.append(force_loss(model, pos, spc, cell, target).item())
        with torch.no_grad():
            param[idx] += h
        up, down = up_down
        assert abs((up - down) / (2 * h) - grad[idx].item()) < 1e-6 * max(1.0, abs(grad[idx].item()))
        assert abs(grad[idx].item()) > 1e-6


def test_float32_close_to_float64(system):
    model = random_model(correlation=2)
    pos, spc, cell = system
    ref = compute(model, pos, spc, cell)
    s, r, sh = neighbor_list(pos, cell, model.hp.r_c)
    T = lambda x, dt=torch.float32: torch.as_tensor(np.asarray(x), dtype=dt)
    out = evaluate_structure(model.float(), T(pos), T(spc, torch.long), T(cell), T(s, torch.long),
                             T(r, torch.long), T(sh, torch.long))
    assert abs(out["energy"].item() - ref["energy"]) < 1e-5 * max(1.0, abs(ref["energy"]))
    assert np.abs(out["forces"].detach().numpy() - ref["forces"]).max() < 1e-4 * np.abs(ref["forces"]).max()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_matches_cpu(system):
    model = random_model(correlation=2)
    pos, spc, cell = system
    ref = compute(model, pos, spc, cell)
    s, r, sh = neighbor_list(pos, cell, model.hp.r_c)
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 1e-4)):
        m = random_model(correlation=2).to("cuda", dtype)
        T = lambda x, dt=dtype: torch.as_tensor(np.asarray(x), dtype=dt, device="cuda")
        out = evaluate_structure(m, T(pos), T(spc, torch.long), T(cell), T(s, torch.long), T(r, torch.long),
                                 T(sh, torch.long), training=True)
        out["forces"].pow(2).sum().backward()   # the training's double backward
        assert m.layers[0].product.wq.grad.abs().max() > 0
        assert np.abs(out["forces"].detach().cpu().numpy() - ref["forces"]).max() < tol * np.abs(ref["forces"]).max()


# --- correlation 1 is the model as it was -----------------------------------------------------------------------

BEFORE = "f7b76fb"   # the last commit without the product basis


def model_before_product_basis(tmp_dir):
    """python/batmobile/model.py of commit BEFORE as module batmobile._model_before (its `from .so3` finds today's
    so3.py, which the product basis did not change); None where git or the commit is not at hand."""
    try:
        source = subprocess.run(["git", "-C", REPO, "show", f"{BEFORE}:python/batmobile/model.py"],
                                capture_output=True, check=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = os.path.join(tmp_dir, "model_before_product_basis.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location("batmobile._model_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def perturbed(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g, dtype=p.dtype))
        model.E_ref.copy_(torch.tensor([-2.5, -0.75]))
    return model


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_correlation_1_is_bit_identical_to_the_model_before(system, dtype, tmp_path):
    before = model_before_product_basis(str(tmp_path))
    if before is None:
        pytest.skip(f"git show {BEFORE} not available (no repository checkout)")
    kw = dict(L=2, C=8, T=2, A=2, dk=4, H=16, Hr=8, avg_num_neighbors=4.0, energy_scale=1.7)
    old = perturbed(before.BatmobileModel(before.Hyperparameters(**kw), seed=3), 7).to(dtype)
    new = perturbed(BatmobileModel(Hyperparameters(**kw), seed=3), 7).to(dtype)
    assert list(old.state_dict()) == list(new.state_dict())
    pos, spc, cell = system
    s, r, sh = neighbor_list(pos, cell, 5.0)
    T = lambda x, dt=dtype: torch.as_tensor(np.asarray(x), dtype=dt)
    args = (T(pos), T(spc, torch.long), T(cell), T(s, torch.long), T(r, torch.long), T(sh, torch.long))
    a = before.evaluate_structure(old, *args, virial=True)
    b = evaluate_structure(new, *args, virial=True)
    for key in ("energy", "atomic_energies", "forces", "virial", "atomic_virial"):
        assert torch.equal(a[key], b[key]), key


def test_correlation_1_has_no_product_and_shares_the_seed():
    """Correlation 1: no product module and no state_dict entries. Correlation 2 has one in every layer but the last,
    drawn after all other weights, so a seed gives both the same other weights; with wq = 0 both give the same
    numbers bit for bit."""
    kw = dict(C=8, A=2, dk=4, avg_num_neighbors=4.0, T=3)
    one, two = BatmobileModel(Hyperparameters(**kw), seed=2), BatmobileModel(Hyperparameters(correlation=2, **kw),
                                                                               seed=2)
    assert Hyperparameters().correlation == 1 and Hyperparameters.from_dict({"L": 2}).correlation == 1
    assert all(layer.product is None for layer in one.layers)
    assert not [k for k in one.state_dict() if "product" in k]
    extra = [k for k in two.state_dict() if k not in one.state_dict()]
    assert extra == [f"layers.{t}.product.{n}" for t in range(2) for n in ("wq", "Wp0", "Wp1", "Wp2")]
    assert two.state_dict()["layers.1.product.wq"].shape == (8, 8) and two.layers[2].product is None
    for k, v in one.state_dict().items():
        assert torch.equal(v, two.state_dict()[k]), k
    with torch.no_grad():
        for layer in two.layers[:-1]:
            layer.product.wq.zero_()
    rng = np.random.default_rng(4)
    cell = np.diag([6.0, 6.5, 7.0])
    pos, spc = rng.uniform(size=(7, 3)) @ cell, rng.integers(0, 2, 7)
    a, b = compute(one.double(), pos, spc, cell), compute(two.double(), pos, spc, cell)
    for key in a:
        assert np.array_equal(a[key], b[key]), key
    for bad in (0, 3, True):
        with pytest.raises(ValueError, match="correlation .*must be 1"):
            Hyperparameters(correlation=bad)
    with pytest.raises(ValueError, match="correlation 2 needs T >= 2"):
        Hyperparameters(correlation=2, T=1)


# --- the model file -----------------------------------------------------------------------------------------------

def test_export_round_trip_version_3(system, tmp_path):
    model = random_model(correlation=2)
    path = str(tmp_path / "c2.pt")
    save_potential(model, path)
    header = read_header(path)
    buffers = dict(torch.jit.load(path).named_buffers())
    assert header["version"] == 3 and header["correlation"] == 2 and header["hyperparameters"]["correlation"] == 2
    assert buffers["meta.version"].item() == 3.0 and buffers["meta.correlation"].item() == 2.0
    assert tuple(buffers["layers.0.product.wq"].shape) == (8, 8)
    assert tuple(buffers["layers.0.product.Wp2"].shape) == (8, 8)
    assert not [k for k in buffers if k.startswith("layers.1.product")]   # the last layer has none
    loaded = load_potential(path)
    assert loaded.hp.correlation == 2
    pos, spc, cell = system
    a, b = compute(model, pos, spc, cell), compute(loaded, pos, spc, cell)
    for key in a:
        assert np.array_equal(a[key], b[key]), key
    # --upgrade verifies a version-3 file and copies it
    up = str(tmp_path / "up.pt")
    assert upgrade(path, up) == header["checksum"] and open(up, "rb").read() == open(path, "rb").read()
    # a correlation-1 model still makes a version-2 file, as before: no correlation anywhere in it
    one = str(tmp_path / "c1.pt")
    save_potential(random_model(), one)
    stored = bytes(dict(torch.jit.load(one).named_buffers())["meta.header_json"].tolist())
    assert read_header(one)["version"] == 2 and b"correlation" not in stored
    assert "meta.correlation" not in dict(torch.jit.load(one).named_buffers())
    assert load_potential(one).hp.correlation == 1


def rewritten(model, path, edit):
    """A model file of model whose export module edit(root, header) changed, written with a valid checksum."""
    root = build_export_module(model)
    header = json.loads(bytes(root.meta.header_json.tolist()).decode())
    edit(root, header)
    del root.meta.header_json
    export._set_header(root, header)
    torch.jit.save(torch.jit.script(root), path)
    return path


def drop_product_tensor(root, header):
    del getattr(root.layers, "0").product.Wp1


def set_correlation_3(root, header):
    root.meta.correlation = torch.tensor(3.0, dtype=torch.float64)
    header["correlation"] = header["hyperparameters"]["correlation"] = 3


def drop_meta_correlation(root, header):
    del root.meta.correlation


def version_2_with_product(root, header):
    del root.meta.correlation
    root.meta.version = torch.tensor(2.0, dtype=torch.float64)
    header["version"] = 2


@pytest.mark.parametrize("edit, message", [
    (drop_product_tensor, r"tensors do not match the hyperparameters \(format version 3, correlation 2, .*\): "
                          r"missing layers\.0\.product\.Wp1 \[8, 8\]; re-export"),
    (set_correlation_3, "meta.correlation 3: this reader understands correlation 1 or 2"),
    (drop_meta_correlation, "a format-version-3 file without its meta.correlation number"),
    (version_2_with_product, "a format-version-2 file with a correlation"),
])
def test_bad_version_3_files_are_refused(tmp_path, edit, message):
    path = rewritten(random_model(C=8, T=2, correlation=2), str(tmp_path / "bad.pt"), edit)
    with pytest.raises(ValueError, match=message):
        load_potential(path)
    with pytest.raises(InputError, match=message):   # batmobile-evaluate's reader: one `error:` line
        load_model_file(path)
    with pytest.raises(ValueError, match=message):
        upgrade(path, str(tmp_path / "out.pt"))
    assert not os.path.exists(tmp_path / "out.pt")


def test_scale_product_basis_sets_the_starting_strength(system):
    """scale_product_basis: afterwards RMS(p) = fraction RMS(m) in every product layer (layer 0, then layer 1, whose
    input the first scaling changed), on the same atoms; only the wq tensors change."""
    model = random_model(T=3, correlation=2)
    pos, spc, cell = system
    s, r, sh = neighbor_list(pos, cell, model.hp.r_c)
    sender, receiver = torch.as_tensor(s), torch.as_tensor(r)
    edge_vec = edge_vectors(torch.as_tensor(pos), torch.as_tensor(cell), sender, receiver, torch.as_tensor(sh))
    species = torch.as_tensor(spc)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    factors = scale_product_basis(model, species, edge_vec, sender, receiver, fraction=0.25)
    assert len(factors) == 2 and all(f > 0 and f != 1.0 for f in factors)
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert sorted(changed) == ["layers.0.product.wq", "layers.1.product.wq"]
    for layer in model.layers[:2]:
        seen = {}
        hook = layer.product.register_forward_hook(lambda mod, inp, out: seen.update(m=inp[0], p=out))
        with torch.no_grad():
            model.atomic_energies(species, edge_vec, sender, receiver)
        hook.remove()
        ratio = (seen["p"].pow(2).mean().sqrt() / seen["m"].pow(2).mean().sqrt()).item()
        assert abs(ratio - 0.25) < 1e-12, ratio


# --- the trainer ------------------------------------------------------------------------------------------------

CALLS = ["--val-every", "2", "--checkpoint-every", "2", "--log-every", "2", "--curve-every", "1", "--threads", "1",
         "--no-parity-plots", "--progress", "lines"]


def test_training_with_correlation_2_resumes_exactly(data_root, tmp_path, capsys):  # noqa: F811
    options = run_options(data_root) + ["--T", "2", "--correlation", "2", "--batch-size", "2", "--steps", "4"] + CALLS
    one, split = str(tmp_path / "one"), str(tmp_path / "split")
    train.main(options + ["--out", one])
    train.main(options + ["--out", split, "--chunk-steps", "2"])
    train.main(["--data", data_root, "--out", split, "--resume"] + CALLS)
    a = load_checkpoint(os.path.join(one, "checkpoint.pt"))
    b = load_checkpoint(os.path.join(split, "checkpoint.pt"))
    assert_same_run(a, b)
    assert a["hyperparameters"]["correlation"] == 2 and b["args"]["correlation"] == 2
    assert len(a["optimizer"]["state"]) == len(a["model"]) - 1   # Adam state for every parameter (E_ref: a buffer)
    assert not torch.equal(a["model"]["layers.0.product.wq"],
                           BatmobileModel(Hyperparameters.from_dict(a["hyperparameters"]),
                                          seed=0).state_dict()["layers.0.product.wq"])   # it trained
    # another --correlation on resume: one error line
    capsys.readouterr()
    assert cli.train(["--data", data_root, "--out", split, "--resume", "--correlation", "1"] + CALLS) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --resume --correlation 1:") and "--correlation 2" in err[0]
    # the export of the run is a version-3 file
    pt = str(tmp_path / "c2.pt")
    export.main([os.path.join(one, "checkpoint.pt"), pt])
    assert read_header(pt)["version"] == 3 and load_potential(pt).hp.correlation == 2


def test_correlation_option(capsys):
    args, given = train.parse_args([])
    assert args.correlation == 1 and "correlation" in train.RUN_OPTIONS
    assert "--correlation {1,2}" in train.build_parser().format_help()
    for argv, message in ((["--correlation", "3"], "invalid choice: 3"),
                          (["--correlation", "2", "--T", "1"], "--correlation 2 with --T 1: .* needs --T 2 or more")):
        assert cli.train(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: ") and re.search(message, err[0]), err
