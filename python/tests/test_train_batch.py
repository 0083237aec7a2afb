"""Batches of several frames per optimiser step (--batch-size): the batched forward pass equals the per-frame one,
the batch loss's gradient is the mean of the frames' gradients, batch 1 is the former one-frame step, and a run
with batches resumes exactly."""
import os

import numpy as np
import pytest
import torch

from batmobile import train
from batmobile.data import Batcher, Frame, batch_frames, dataset_statistics
from batmobile.io_utils import load_checkpoint
from batmobile.model import BatmobileModel, Hyperparameters, evaluate_structure
from conftest import random_model
from test_train_resume import assert_same_run

R_C = 5.0


def make_frame(rng, n, cell, virial=True, pbc=(True, True, True)):
    """n atoms at random positions (no pair closer than 0.8 A in any image), random labels."""
    shifts = np.array([[a, b, c] for a in (-1, 0, 1) for b in (-1, 0, 1) for c in (-1, 0, 1)]) @ cell
    pos = []
    while len(pos) < n:
        x = rng.uniform(size=3) @ cell
        if all(np.linalg.norm(x - p + shifts, axis=1).min() > 0.8 for p in pos):
            pos.append(x)
    fr = Frame(positions=np.array(pos), cell=np.asarray(cell, dtype=float), species=rng.integers(0, 2, n),
               energy=float(rng.normal()), forces=rng.normal(size=(n, 3)), pbc=pbc,
               virial=rng.normal(size=(3, 3)) if virial else None)
    fr.build_neighbors(R_C)
    return fr


def mixed_frames(seed=5):
    """Four frames of 5, 9, 7 and 3 atoms: cubic, triclinic, another box, and a non-periodic one; two with a
    virial."""
    rng = np.random.default_rng(seed)
    tric = np.array([[5.5, 0.0, 0.0], [0.7, 5.8, 0.0], [-0.4, 0.3, 6.1]])
    return [make_frame(rng, 5, np.diag([4.8, 5.1, 5.3]), virial=True),
            make_frame(rng, 9, tric, virial=False),
            make_frame(rng, 7, np.diag([6.0, 5.0, 5.5]), virial=True),
            make_frame(rng, 3, 8.0 * np.eye(3), virial=False, pbc=(False, False, False))]


def rel_close(a, b, tol=1e-12):
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return np.abs(a - b).max() <= tol * max(1.0, np.abs(b).max())


def test_batched_forward_equals_per_frame():
    model = random_model()
    frames = mixed_frames()
    batch = batch_frames(frames, torch.float64, "cpu")
    assert batch["num_frames"] == 4 and not batch["equal_sizes"] and batch["any_virial"] and not batch["all_virial"]
    assert batch["positions"].shape == (24, 3) and batch["cell"].shape == (4, 3, 3)
    de, df, dw = train.loss_terms(model, batch, training=False, with_virial=True)
    start = 0
    for k, fr in enumerate(frames):
        n = len(fr.species)
        T = lambda x, dt=torch.float64: torch.as_tensor(x, dtype=dt)
        ref = evaluate_structure(model, T(fr.positions), T(fr.species, torch.long), T(fr.cell),
                                 T(fr.sender, torch.long), T(fr.receiver, torch.long), T(fr.shifts, torch.long),
                                 virial=True)
        assert rel_close(de[k].item() * n + fr.energy, ref["energy"].item())
        assert rel_close(df[start:start + n].detach().numpy() + fr.forces, ref["forces"].detach().numpy())
        label = fr.virial if fr.virial is not None else np.zeros((3, 3))
        assert rel_close(dw[k].detach().numpy() * n + label, ref["virial"].numpy())
        assert bool(batch["has_virial"][k]) == (fr.virial is not None)
        start += n
    # any subset in any order gives the same per-frame numbers
    sub = Batcher(frames, torch.float64, "cpu")([2, 0])
    de2, df2 = train.loss_terms(model, sub, training=False)
    assert rel_close(de2.detach().numpy(), de.detach().numpy()[[2, 0]])
    assert rel_close(df2[:7].detach().numpy(), df[14:21].detach().numpy())


def batch_gradient(model, batch, w=(2.0, 10.0, 0.5)):
    """Gradient of batch_loss with respect to the parameters, with the virial term where the batch has one."""
    with_virial = batch["any_virial"]
    de, df, *dw = train.loss_terms(model, batch, training=True, with_virial=with_virial)
    loss = train.batch_loss(batch, de, df, dw[0] if with_virial else None, 1.3, *w)
    params = list(model.parameters())
    return loss, torch.autograd.grad(loss, params)


@pytest.mark.parametrize("kind", ["mixed", "equal"])
def test_batch_loss_gradient_is_mean_of_frame_gradients(kind):
    model = random_model(T=1)
    if kind == "mixed":   # different sizes, some frames with a virial: the per-atom and per-frame weights
        frames = mixed_frames()
    else:                 # same size, all with a virial: the plain means
        rng = np.random.default_rng(8)
        frames = [make_frame(rng, 6, np.diag([5.0, 5.2, 5.4]) * (1 + 0.05 * k)) for k in range(3)]
    batcher = Batcher(frames, torch.float64, "cpu")
    batch = batcher(range(len(frames)))
    assert batch["equal_sizes"] == (kind == "equal") and batch["all_virial"] == (kind == "equal")
    loss, grads = batch_gradient(model, batch)
    per_frame = [batch_gradient(model, batcher([k])) for k in range(len(frames))]
    assert rel_close(loss.item(), np.mean([lf.item() for lf, _ in per_frame]))
    for i, g in enumerate(grads):
        mean = torch.stack([gf[i] for _, gf in per_frame]).mean(0)
        assert rel_close(g.numpy(), mean.numpy()), i


# --- the former one-frame step, as it was before batches (per-edge cells, loss over the one frame) -------------

def former_batch(fr, dtype):
    t = lambda x, dt=dtype: torch.as_tensor(np.ascontiguousarray(x), dtype=dt)
    n = len(fr.species)
    return {"positions": t(fr.positions), "species": t(fr.species, torch.long), "sender": t(fr.sender, torch.long),
            "receiver": t(fr.receiver, torch.long), "shifts": t(fr.shifts, torch.long),
            "cell": t(np.broadcast_to(fr.cell, (len(fr.sender), 3, 3))), "frame_of_atom": t(np.zeros(n), torch.long),
            "energy": t(np.array([fr.energy])), "forces": t(fr.forces), "num_atoms": t(np.array([n])),
            "virial": t(np.stack([np.zeros((3, 3)) if fr.virial is None else fr.virial])),
            "has_virial": t(np.array([fr.virial is not None]), torch.bool)}


def former_step(model, opt, shadow, step, fr, lr, w_e, args, s):
    for g in opt.param_groups:
        g["lr"] = lr
    b = former_batch(fr, torch.float64)
    with_virial = args.stress_weight > 0 and bool(b["has_virial"].any())
    out = evaluate_structure(model, b["positions"], b["species"], b["cell"], b["sender"], b["receiver"], b["shifts"],
                             training=True, edge_terms=with_virial)
    e_pred = torch.zeros(1, dtype=torch.float64).index_add(0, b["frame_of_atom"], out["atomic_energies"])
    de = (e_pred - b["energy"]) / b["num_atoms"]
    df = out["forces"] - b["forces"]
    loss = w_e * (de / s).pow(2).mean() + args.force_weight * (df / s).pow(2).mean()
    if with_virial:
        rg = out["edge_vectors"][:, :, None] * out["edge_gradients"][:, None, :]
        w_pred = torch.zeros(1, 3, 3, dtype=rg.dtype).index_add(0, b["frame_of_atom"][b["receiver"]],
                                                                 -0.5 * (rg + rg.transpose(1, 2)))
        has = b["has_virial"]
        dw = (w_pred[has] - b["virial"][has]) / b["num_atoms"][has][:, None, None]
        loss = loss + args.stress_weight * (dw / s).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    d = min(args.ema, (1.0 + step) / (10.0 + step))
    with torch.no_grad():
        for k, v in model.state_dict().items():
            shadow[k].mul_(d).add_(v.detach(), alpha=1.0 - d)
    return loss.item()


def test_batch_one_is_the_former_step():
    rng = np.random.default_rng(11)
    frames = [make_frame(rng, n, np.diag([5.0, 5.5, 6.0]), virial=n != 7) for n in (6, 7, 6, 5)]
    args, _ = train.parse_args(["--C", "8", "--T", "1", "--H", "8", "--Hr", "4", "--A", "2", "--dk", "4",
                                "--dtype", "float64", "--force-weight", "10", "--stress-weight", "0.3",
                                "--ema", "0.9", "--seed", "3"])
    args.species = ["O", "H"]
    stats = dataset_statistics(frames, 2)
    hp = Hyperparameters(species=["O", "H"], r_c=R_C, L=2, C=8, T=1, H=8, A=2, dk=4, Hr=4,
                         avg_num_neighbors=stats["avg_num_neighbors"], energy_scale=stats["force_rms"])
    tr = train.Trainer(args, hp, stats, frames, torch.device("cpu"), torch.float64)
    assert args.batch_size == 1

    model = BatmobileModel(hp, seed=args.seed)
    model.E_ref.copy_(torch.tensor(stats["E_ref"]))
    model = model.double()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}
    order = train.DataOrder(len(frames), args.seed)
    losses = []
    for step in range(7):   # more steps than frames: two epochs
        lr, w_e = 5e-3 * (1 - 0.1 * step), 1.0 + 0.5 * step
        losses.append(former_step(model, opt, shadow, step, frames[order.take(1)[0]], lr, w_e, args,
                                  hp.energy_scale))
        assert tr.one_step(lr, w_e).item() == losses[-1]
    for k, v in model.state_dict().items():
        assert torch.equal(v, tr.model.state_dict()[k]), k
        assert torch.equal(shadow[k], tr.ema.shadow[k]), k


# --- a run with batches of mixed sizes, split and resumed -------------------------------------------------------

def write_system(root, name, molecules, frames, seed, virial=False):
    rng = np.random.default_rng(seed)
    system = os.path.join(root, name)
    os.makedirs(os.path.join(system, "set.000"))
    with open(os.path.join(system, "type_map.raw"), "w") as f:
        f.write("O\nH\n")
    types = np.array([0, 1, 1] * molecules)
    np.savetxt(os.path.join(system, "type.raw"), types, fmt="%d")
    grid = np.array([[i % 3, i // 3, 0] for i in range(molecules)], dtype=float) * 2.0 + 0.5
    mol = np.repeat(grid, 3, axis=0) + np.tile([[0, 0, 0], [0.9, 0.3, 0], [-0.3, 0.9, 0.1]], (molecules, 1))
    coord = mol[None] + 0.2 * rng.standard_normal((frames, len(types), 3))
    np.save(os.path.join(system, "set.000", "coord.npy"), coord.reshape(frames, -1))
    np.save(os.path.join(system, "set.000", "force.npy"), rng.standard_normal((frames, len(types) * 3)))
    np.save(os.path.join(system, "set.000", "energy.npy"), -3.0 * molecules + 0.1 * rng.standard_normal(frames))
    np.save(os.path.join(system, "set.000", "box.npy"), np.tile(np.diag([6.0, 6.0, 6.0]).reshape(1, 9), (frames, 1)))
    if virial:
        np.save(os.path.join(system, "set.000", "virial.npy"), rng.standard_normal((frames, 9)))


@pytest.fixture(scope="module")
def mixed_root(tmp_path_factory):
    root = str(tmp_path_factory.mktemp("mixed"))
    write_system(root, "a", 3, 4, seed=1)
    write_system(root, "b", 2, 3, seed=2, virial=True)
    write_system(root, "v", 2, 2, seed=3)
    return root


def batch_options(root):
    return ["--data", root, "--train-sets", "a/set.000", "b/set.000", "--val-sets", "v/set.000",
            "--val-frames", "0", "--C", "4", "--T", "1", "--H", "4", "--Hr", "4", "--A", "2", "--dk", "2",
            "--NB", "4", "--r_c", "3.0", "--dtype", "float64", "--device", "cpu", "--lr", "1e-2",
            "--force-weight", "10", "--stress-weight", "0.5", "--energy-weight-final", "5", "--ema", "0.9",
            "--batch-size", "3"]


CALLS = ["--val-every", "4", "--checkpoint-every", "3", "--log-every", "2", "--curve-every", "2", "--threads", "1",
         "--no-parity-plots", "--progress", "lines"]


def test_resume_with_batches_matches_one_run(mixed_root, tmp_path):
    one, split = str(tmp_path / "one"), str(tmp_path / "split")
    train.main(batch_options(mixed_root) + CALLS + ["--out", one, "--steps", "7"])
    train.main(batch_options(mixed_root) + CALLS + ["--out", split, "--steps", "7", "--chunk-steps", "3"])
    first = load_checkpoint(os.path.join(split, "checkpoint.pt"))
    assert first["step"] == 3 and first["args"]["batch_size"] == 3
    # the resumed call names neither the batch size nor the run: both come from the checkpoint
    train.main(["--data", mixed_root, "--out", split, "--resume"] + CALLS)
    a = load_checkpoint(os.path.join(one, "checkpoint.pt"))
    b = load_checkpoint(os.path.join(split, "checkpoint.pt"))
    assert_same_run(a, b)
    assert b["args"]["batch_size"] == 3 and a["curve"]["train"]["step"] == [2, 4, 6]
    assert all(np.isfinite(a["curve"]["train"]["loss"]))
    log = open(os.path.join(one, "log.txt")).read()
    assert "frames/s" in log and "F " in log


def test_former_option_name_resumes():
    args, given = train.parse_args(["--batch-frames", "4"])
    assert args.batch_size == 4 and "batch_size" in given
    args, given = train.parse_args([])
    assert train.resolve_resume(args, given, {"args": {"batch_frames": 6}}) == [] and args.batch_size == 6
