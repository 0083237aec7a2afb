"""Train a Batmobile model: python -m batmobile.train --train FILE[@START:STOP] ... --val FILE[@START:STOP] ...
--out runs/mine [--config run.yaml] [options]; without --train, DeePMD sets under --data (--train-sets, --val-sets).

Data (batmobile/sources.py): extended XYZ files, DeePMD set or system directories, each optionally restricted to a
frame range; the validation data are given explicitly (no random split of correlated frames). The species are
--species, or the elements in the order they first appear in the training data. A config file (YAML or JSON,
batmobile/config.py) gives any option; flags override it.

Each optimiser step takes --batch-size frames (of any sizes) as one disjoint graph. Loss of one frame =
w_E * (dE / N / s)^2 + w_F * mean over its atoms and components of (dF / s)^2 [+ w_S * mean((dW / N / s)^2) when the
frame has a virial, --stress-weight]; the step's loss is the mean over the batch's frames, so its gradient is the
mean of the frames' gradients. s = energy_scale (force RMS of the training set), so the terms are dimensionless;
w_E rises linearly from --energy-weight to --energy-weight-final over the run when the latter is given. Adam, EMA
of the weights (validation and checkpoints' "ema" are the EMA weights), cosine learning-rate decay over the whole
run: --steps and --total-minutes (alias --max-minutes) define the run, and the
schedule follows whichever of the two runs out first, so a time-limited run still anneals. The schedules (learning
rate, energy weight, EMA decay and its warm-up) count optimiser steps, not frames: --steps is the number of steps of
--batch-size frames each. The step reads nothing back from the device: losses are summed there and read when a
progress line, curve point or checkpoint is written.

A run may be split over several calls: --chunk-steps / --chunk-minutes end this call early, and --resume continues
from OUT/checkpoint.pt exactly where it stopped (weights, optimizer, EMA, schedule position and elapsed training time,
the python / numpy / torch random states and the data order), so a split run matches one long run. On resume the
options that define the run are taken from the checkpoint unless given again on the command line.
OUT/curve.json and OUT/curve.png hold the learning curve of the whole run, appended across chunks.
"""
import argparse
import copy
import json
import math
import os
import random
import shlex
import sys
import time

import numpy as np
import torch

from .cli import ArgumentParser, run
from .config import apply_config
from .data import DEFAULT_ROOT, TRAIN_SETS, VALIDATION_SETS, Batcher, DataError, dataset_statistics, \
    species_in_order
from .evaluate import metrics, parity_plots, predict, stress_metrics
from .io_utils import InputError, load_checkpoint
from .model import BatmobileModel, Hyperparameters, edge_vectors, evaluate_structure, scale_product_basis
from .sources import prepare, read_sources

# options that define the run (model, data sets, schedule, what the curve records): a resumed run takes them from its
# checkpoint; --data (where the sets lie) and the per-call options may differ between calls
RUN_OPTIONS = ("train", "val", "energy_key", "forces_key", "stress_key", "virial_key", "stress_weight",
               "train_sets", "val_sets", "species", "r_c", "L", "C", "T", "NB", "H", "A", "dk", "Hr", "correlation",
               "energy_scale_from", "steps", "total_minutes", "batch_size", "lr", "lr_final_fraction",
               "energy_weight", "energy_weight_final", "force_weight", "ema", "seed", "dtype", "val_every",
               "val_frames", "curve_every")


def build_parser():
    p = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default=None, help="YAML or JSON file of options (flags override it)")
    p.add_argument("--train", nargs="+", default=None, metavar="SOURCE",
                   help="training data: extended XYZ files or DeePMD directories, each optionally PATH@START:STOP")
    p.add_argument("--val", nargs="+", default=None, metavar="SOURCE", help="validation data (needed with --train)")
    for kind, default in (("energy", "energy"), ("forces", "forces"), ("stress", "stress"), ("virial", "virial")):
        p.add_argument(f"--{kind}-key", default=default, help=f"extended XYZ key of the {kind} (default {default})")
    p.add_argument("--data", default=DEFAULT_ROOT, help="root of the DeePMD sets of --train-sets / --val-sets")
    p.add_argument("--train-sets", nargs="+", default=list(TRAIN_SETS))
    p.add_argument("--val-sets", nargs="+", default=list(VALIDATION_SETS))
    p.add_argument("--species", nargs="+", default=None,
                   help="element names in model order (default: in order of appearance in the training data)")
    p.add_argument("--out", default="runs/water", help="directory for checkpoint.pt, log.txt, curve.json/png")
    for name, default in [("r_c", 5.0), ("L", 2), ("C", 32), ("T", 2), ("NB", 8), ("H", 32), ("A", 4), ("dk", 8),
                          ("Hr", 16)]:
        p.add_argument(f"--{name}", type=type(default), default=default)
    p.add_argument("--correlation", type=int, choices=[1, 2], default=1,
                   help="2 adds the product basis (body order 3) to every layer but the last (docs/model.md step 3; "
                        "needs --T 2 or more; model file version 3); 1 is without it (default 1)")
    p.add_argument("--energy-scale-from", choices=["force_rms", "energy_std"], default="force_rms")
    p.add_argument("--steps", type=int, default=20000, help="length of the whole run in steps")
    p.add_argument("--total-minutes", "--max-minutes", dest="total_minutes", type=float, default=0.0,
                   help="training time of the whole run, all chunks together (0 = no limit)")
    p.add_argument("--chunk-steps", type=int, default=0, help="end this call after this many steps (0 = no limit)")
    p.add_argument("--chunk-minutes", type=float, default=0.0,
                   help="end this call after this many minutes of training (0 = no limit)")
    p.add_argument("--batch-size", "--batch-frames", dest="batch_size", type=int, default=1,
                   help="frames per optimiser step (default 1); the schedules count steps")
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--lr-final-fraction", type=float, default=0.01)
    p.add_argument("--energy-weight", type=float, default=1.0)
    p.add_argument("--energy-weight-final", type=float, default=None,
                   help="energy weight at the end of the run, reached linearly (default: constant)")
    p.add_argument("--force-weight", type=float, default=1.0)
    p.add_argument("--stress-weight", type=float, default=0.0,
                   help="weight of the virial term, mean((dW / N / s)^2) over frames that have a stress or virial")
    p.add_argument("--ema", type=float, default=0.99)
    p.add_argument("--val-every", type=int, default=100)
    p.add_argument("--val-frames", type=int, default=8, help="validation frames during training (0 = all)")
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--log-every", type=int, default=100, help="progress line every this many steps")
    p.add_argument("--curve-every", type=int, default=10, help="learning-curve point every this many steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, cuda:1 ...")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0 = torch default)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    p.add_argument("--progress", choices=["auto", "bar", "lines"], default="auto",
                   help="a progress bar (auto: when the terminal shows one and tqdm is installed) or lines only")
    p.add_argument("--parity-plots", action=argparse.BooleanOptionalAction, default=True,
                   help="at the end: OUT/parity_energy.png, parity_forces.png and validation.json (float64)")
    return p


def parse_args(argv=None):
    """The options, and the names of those given on the command line or in --config (they override a
    checkpoint's)."""
    pre = ArgumentParser(add_help=False)
    pre.add_argument("--config", default=None)
    config = pre.parse_known_args(argv)[0].config
    parser = build_parser()
    from_file = apply_config(parser, config) if config else set()
    args = parser.parse_args(argv)
    given = argparse.Namespace()
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    parser.parse_args(argv, namespace=given)
    return args, set(vars(given)) | from_file


class EMA:
    def __init__(self, model, decay):
        self.decay = decay
        self.shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}

    @torch.no_grad()
    def update(self, model, step):
        d = min(self.decay, (1.0 + step) / (10.0 + step))  # short warm-up so early EMA is not the random init
        shadow, live = [], []
        for k, v in model.state_dict().items():
            if v.dtype.is_floating_point:
                shadow.append(self.shadow[k])
                live.append(v.detach())
            else:
                self.shadow[k].copy_(v)
        # shadow = d * shadow + (1 - d) * weights, for all tensors at once (a few kernels on a GPU)
        torch._foreach_mul_(shadow, d)
        torch._foreach_add_(shadow, live, alpha=1.0 - d)

    def model_copy(self, model):
        m = copy.deepcopy(model)
        m.load_state_dict(self.shadow)
        return m


class DataOrder:
    """Epochs of shuffled frame indices from one numpy generator; its state and the pending indices resume."""

    def __init__(self, num_frames, seed):
        self.num_frames = num_frames
        self.rng = np.random.default_rng(seed)
        self.pending = []

    def take(self, n):
        if len(self.pending) < n:
            self.pending += self.rng.permutation(self.num_frames).tolist()
        picked, self.pending = self.pending[:n], self.pending[n:]
        return picked

    def state_dict(self):
        return {"rng": self.rng.bit_generator.state, "pending": list(self.pending)}

    def load_state_dict(self, state):
        self.rng.bit_generator.state = state["rng"]
        self.pending = list(state["pending"])


def rng_states():
    """Random states in plain Python and torch types, so a checkpoint loads under another numpy version."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": random.getstate(), "numpy": (name, keys.tolist(), pos, has_gauss, cached),
             "torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["torch_cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_states(state):
    random.setstate(state["python"])
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch_cpu"])
    if "torch_cuda" in state and torch.cuda.is_available() and len(state["torch_cuda"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(state["torch_cuda"])


def schedule_progress(args, step, elapsed):
    """Fraction of the run done: steps or training time, whichever is further along."""
    by_time = elapsed / (60.0 * args.total_minutes) if args.total_minutes > 0 else 0.0
    return min(1.0, max(step / args.steps, by_time))


def learning_rate(args, progress):
    f = args.lr_final_fraction
    return args.lr * (f + (1 - f) * 0.5 * (1 + math.cos(math.pi * progress)))


def energy_weight(args, progress):
    if args.energy_weight_final is None:
        return args.energy_weight
    return args.energy_weight + (args.energy_weight_final - args.energy_weight) * progress


def loss_terms(model, batch, training, with_virial=False):
    """Per-frame energy error per atom (B,) and force errors (N, 3) of a batch (batmobile.data.Batcher);
    with_virial adds the virial errors per atom (B, 3, 3), whose rows of frames without a virial
    (batch["has_virial"] False) are to be ignored."""
    cell = batch["cell"][batch["frame_of_edge"]]     # per-edge cells
    out = evaluate_structure(model, batch["positions"], batch["species"], cell, batch["sender"],
                             batch["receiver"], batch["shifts"], training=training, edge_terms=with_virial)
    n_frames = batch["energy"].shape[0]
    e_pred = torch.zeros(n_frames, dtype=out["atomic_energies"].dtype, device=out["atomic_energies"].device)
    e_pred = e_pred.index_add(0, batch["frame_of_atom"], out["atomic_energies"])
    de_per_atom = (e_pred - batch["energy"]) / batch["num_atoms"]
    df = out["forces"] - batch["forces"]
    if not with_virial:
        return de_per_atom, df
    # W = -sum_edges r (x) dE/dr per frame, symmetrised as in evaluate_structure
    rg = out["edge_vectors"][:, :, None] * out["edge_gradients"][:, None, :]
    w_pred = torch.zeros(n_frames, 3, 3, dtype=rg.dtype, device=rg.device)
    w_pred = w_pred.index_add(0, batch["frame_of_edge"], -0.5 * (rg + rg.transpose(1, 2)))
    dw = (w_pred - batch["virial"]) / batch["num_atoms"][:, None, None]
    return de_per_atom, df, dw


def batch_loss(batch, de, df, dw, s, w_e, w_f, w_s):
    """The mean over the batch's frames of each frame's loss w_E (dE/N/s)^2 + w_F mean((dF/s)^2) [+ w_S
    mean((dW/N/s)^2) for a frame with a virial]. Where all frames have the same atom count (or all a virial) the
    plain mean over all components is that mean; the branches read host-side facts of the batch, not the device."""
    loss = w_e * (de / s).pow(2).mean()
    if batch["equal_sizes"]:
        loss = loss + w_f * (df / s).pow(2).mean()
    else:
        loss = loss + w_f * ((df / s).pow(2).sum(1) * batch["atom_weight"]).sum()
    if dw is not None:
        if batch["all_virial"]:
            loss = loss + w_s * (dw / s).pow(2).mean()
        else:
            loss = loss + w_s * ((dw / s).pow(2).sum((1, 2)) * batch["virial_weight"]).sum()
    return loss


def validate(model, frames, dtype, device, batch_size=1):
    de, df, dw = [], [], []
    batcher = Batcher(frames, dtype, device)
    for start in range(0, len(frames), batch_size):
        b = batcher(range(start, min(start + batch_size, len(frames))))
        e, f, w = loss_terms(model, b, training=False, with_virial=True)
        de.append(e.detach())
        df.append(f.detach().reshape(-1))
        dw.append(w.detach()[b["has_virial"]].reshape(-1))
    de, df, dw = torch.cat(de), torch.cat(df), torch.cat(dw)
    m = {"energy_rmse_meV_per_atom": 1e3 * de.pow(2).mean().sqrt().item(),
         "force_rmse_meV_per_A": 1e3 * df.pow(2).mean().sqrt().item(),
         "force_mae_meV_per_A": 1e3 * df.abs().mean().item()}
    if len(dw):
        m["virial_rmse_meV_per_atom"] = 1e3 * dw.pow(2).mean().sqrt().item()
    return m


def select_device(name):
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise InputError(f"--device {name}: not a device name; use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise InputError(f"--device {name}: torch sees no CUDA device here; use --device cpu or auto")
    return device


def new_curve():
    """Learning curve: training points (mean loss over --curve-every steps) and validation points."""
    return {"train": {"step": [], "elapsed_s": [], "loss": [], "lr": [], "energy_weight": []}, "validation": []}


def write_curve(curve, out_dir, plot):
    path = os.path.join(out_dir, "curve.json")
    with open(path + ".tmp", "w") as f:
        json.dump(curve, f)
    os.replace(path + ".tmp", path)
    if plot:
        plot_curve(curve, os.path.join(out_dir, "curve.png"))


def plot_curve(curve, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    tr, val = curve["train"], [v for v in curve["validation"] if "force_rmse_meV_per_A" in v]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.semilogy(tr["step"], tr["loss"], lw=0.8, label="training loss")
    a.set_xlabel("step")
    a.set_ylabel("loss (scaled units)")
    lr_ax = a.twinx()
    lr_ax.plot(tr["step"], tr["lr"], "k:", lw=0.8)
    lr_ax.set_ylabel("learning rate (dotted)")
    if val:
        steps = [v["step"] for v in val]
        b.plot(steps, [v["force_rmse_meV_per_A"] for v in val], "o-", ms=3, label="force RMSE [meV/A]")
        e_ax = b.twinx()
        e_ax.plot(steps, [v["energy_rmse_meV_per_atom"] for v in val], "s--", ms=3, color="C1")
        e_ax.set_ylabel("energy RMSE [meV/atom] (dashed)")
    b.set_xlabel("step")
    b.set_ylabel("validation force RMSE [meV/A] (EMA)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def resolve_resume(args, given, ckpt):
    """Run-defining options from the checkpoint unless given on the command line; returns the overridden names."""
    stored = dict(ckpt.get("args") or {})
    if "max_minutes" in stored:
        stored.setdefault("total_minutes", stored.pop("max_minutes"))
    if "batch_frames" in stored:   # the option's earlier name
        stored.setdefault("batch_size", stored.pop("batch_frames"))
    overridden = []
    for name in RUN_OPTIONS:
        if name not in stored:
            continue
        if name in given:
            if getattr(args, name) != stored[name]:
                overridden.append(name)
        else:
            setattr(args, name, stored[name])
    return overridden


# The options that define the model's shape: a resumed run keeps its checkpoint's (its weights fit no other).
ARCHITECTURE_OPTIONS = ("r_c", "L", "C", "T", "NB", "H", "A", "dk", "Hr", "correlation")


def check_resumed_architecture(args, given, ckpt, ckpt_path):
    """The checkpoint's architecture into args; InputError where the command line asks for another one."""
    hp = dict(ckpt["hyperparameters"])
    hp.setdefault("correlation", 1)   # checkpoints from before the option
    for name in ARCHITECTURE_OPTIONS:
        if name not in hp:
            continue
        if name not in given:
            setattr(args, name, hp[name])
        elif getattr(args, name) != hp[name]:
            raise InputError(f"--resume --{name} {getattr(args, name)}: {ckpt_path} is a run with --{name} "
                             f"{hp[name]}, whose weights cannot continue as another model; resume without --{name}, "
                             f"or start a new run in another --out directory")


class Trainer:
    """Model, optimizer, EMA, data order and curve of one run; save() / load() cover everything a resume needs."""

    def __init__(self, args, hp, stats, train, device, dtype):
        self.args, self.hp, self.stats, self.train = args, hp, stats, train
        self.device, self.dtype = device, dtype
        model = BatmobileModel(hp, seed=args.seed)
        model.E_ref.copy_(torch.tensor(stats["E_ref"]))
        self.model = model.to(device=device, dtype=dtype)
        self.batcher = Batcher(train, dtype, device)
        if hp.correlation == 2:   # (before the optimizer and the EMA see the weights; a resume overwrites them)
            self.scale_product_basis()
        self.opt = torch.optim.Adam(self.model.parameters(), lr=args.lr)
        self.ema = EMA(self.model, args.ema)
        self.order = DataOrder(len(train), args.seed)
        self.step, self.elapsed_before, self.curve, self.commands = 0, 0.0, new_curve(), []
        # on-device sums: the curve's loss since its last point; loss, |dE/N| and dF^2 since the last progress line
        self.curve_sum, self.curve_steps = torch.zeros((), dtype=torch.float64, device=device), 0
        self.log_sum = torch.zeros(3, dtype=torch.float64, device=device)
        self.log_steps = self.log_frames = self.log_components = 0
        self.pending_points = []   # curve points whose loss is still on the device

    def scale_product_basis(self):
        """The product basis's initial strength from the data: RMS(p) = 0.1 RMS(m) on the first (up to) four
        training frames (model.scale_product_basis), so that it starts as a small but not a negligible term."""
        b = self.batcher(list(range(min(4, len(self.train)))))
        edge_vec = edge_vectors(b["positions"], b["cell"][b["frame_of_edge"]], b["sender"], b["receiver"], b["shifts"])
        scale_product_basis(self.model, b["species"], edge_vec, b["sender"], b["receiver"])

    def load(self, ckpt):
        self.model.load_state_dict(ckpt["model"])
        self.opt.load_state_dict(ckpt["optimizer"])
        state = self.model.state_dict()
        self.ema.shadow = {k: v.to(device=self.device, dtype=state[k].dtype) for k, v in ckpt["ema"].items()}
        self.step, self.elapsed_before = ckpt["step"], ckpt["elapsed_seconds"]
        if "data_order" in ckpt:
            self.order.load_state_dict(ckpt["data_order"])
        else:  # checkpoint without a stored order: a fresh permutation, as older versions did
            self.order = DataOrder(len(self.train), self.args.seed + self.step)
        self.curve = ckpt.get("curve") or new_curve()
        if "curve_sum" in ckpt:
            self.curve_sum = ckpt["curve_sum"].to(device=self.device, dtype=torch.float64)
            self.curve_steps = ckpt["curve_steps"]
        else:   # older checkpoints: the losses since the last curve point as a list
            pending = list(ckpt.get("pending_losses", []))
            self.curve_sum.fill_(math.fsum(pending))
            self.curve_steps = len(pending)
        self.commands = list(ckpt.get("train_commands") or [ckpt.get("train_command")])
        if "rng" in ckpt:
            restore_rng_states(ckpt["rng"])
        else:
            torch.set_rng_state(ckpt["rng_cpu"])

    def one_step(self, lr, w_e):
        """One optimiser step on the next --batch-size frames; nothing in it waits for the device. Returns the
        loss as a device tensor."""
        args = self.args
        for g in self.opt.param_groups:
            g["lr"] = lr
        batch = self.batcher(self.order.take(args.batch_size))
        self.model.train()
        with_virial = args.stress_weight > 0 and batch["any_virial"]
        de, df, *dw = loss_terms(self.model, batch, training=True, with_virial=with_virial)
        loss = batch_loss(batch, de, df, dw[0] if with_virial else None, self.hp.energy_scale, w_e,
                          args.force_weight, args.stress_weight)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.ema.update(self.model, self.step)
        self.step += 1
        loss = loss.detach()
        self.curve_sum += loss
        self.curve_steps += 1
        self.log_sum += torch.stack([loss.double(), de.detach().abs().sum().double(),
                                     df.detach().pow(2).sum().double()])
        self.log_steps += 1
        self.log_frames += de.shape[0]
        self.log_components += df.numel()
        return loss

    def take_log_means(self):
        """(loss, energy MAE meV/atom, force RMSE meV/A) over the steps since the last call (one device read)."""
        loss_sum, e_abs, f_sq = self.log_sum.tolist()
        means = (loss_sum / max(1, self.log_steps), 1e3 * e_abs / max(1, self.log_frames),
                 1e3 * math.sqrt(f_sq / max(1, self.log_components)))
        self.log_sum.zero_()
        self.log_steps = self.log_frames = self.log_components = 0
        return means

    def record_train_point(self, elapsed, lr, w_e):
        """A curve point: the mean loss since the last point stays on the device until flush_curve()."""
        self.pending_points.append((self.step, elapsed, self.curve_sum / max(1, self.curve_steps), lr, w_e))
        self.curve_sum = torch.zeros_like(self.curve_sum)
        self.curve_steps = 0

    def flush_curve(self):
        if not self.pending_points:
            return
        losses = torch.stack([p[2] for p in self.pending_points]).tolist()
        tr = self.curve["train"]
        for (step, elapsed, _, lr, w_e), loss in zip(self.pending_points, losses):
            for key, value in (("step", step), ("elapsed_s", elapsed), ("loss", loss), ("lr", lr),
                               ("energy_weight", w_e)):
                tr[key].append(value)
        self.pending_points = []

    def save(self, path, elapsed, finished, device_name):
        self.flush_curve()
        state = {"model": self.model.state_dict(), "ema": self.ema.shadow, "optimizer": self.opt.state_dict(),
                 "step": self.step, "elapsed_seconds": elapsed, "finished": finished,
                 "hyperparameters": self.hp.to_dict(), "statistics": self.stats, "args": vars(self.args),
                 "train_command": "  +  ".join(self.commands), "train_commands": self.commands,
                 "device": device_name, "train_frames": len(self.train), "rng": rng_states(),
                 "data_order": self.order.state_dict(), "curve": self.curve, "curve_sum": self.curve_sum.cpu(),
                 "curve_steps": self.curve_steps}
        torch.save(state, path + ".tmp")
        os.replace(path + ".tmp", path)


class Log:
    """Messages to stdout and OUT/log.txt; while a progress bar runs, printed above it."""

    def __init__(self, path):
        self.file = open(path, "a")
        self.bar = None

    def __call__(self, msg):
        if self.bar is not None:
            self.bar.write(msg, file=sys.stdout)
        else:
            print(msg, flush=True)
        self.file.write(msg + "\n")
        self.file.flush()


def data_sources(args):
    """(training, validation) source specs: --train / --val, or the DeePMD sets under --data."""
    if args.train:
        if not args.val:
            raise DataError("--train needs --val: frames of one trajectory are correlated, so no random split is "
                            "made; give separate files or frame ranges, e.g. --train md.xyz@:800 --val md.xyz@800:")
        return list(args.train), list(args.val)
    if not os.path.isdir(args.data):
        raise DataError(f"--data {args.data}: no such directory; without --train the DeePMD sets --train-sets / "
                        f"--val-sets are read under --data (the bundled water data: the repository's "
                        f"data/water/dft_train, or set BATMOBILE_WATER_DATA); or give --train and --val")
    val = args.val or [os.path.join(args.data, s) for s in args.val_sets]
    return [os.path.join(args.data, s) for s in args.train_sets], list(val)


def load_data(args, say):
    """Training and validation frames with species and neighbour lists; sets args.species when not given."""
    keys = {k: getattr(args, k) for k in ("energy_key", "forces_key", "stress_key", "virial_key")}
    train_specs, val_specs = data_sources(args)
    train, val = read_sources(train_specs, keys), read_sources(val_specs, keys)
    if args.species is None:
        args.species = species_in_order(train)
    elif len(set(args.species)) != len(args.species):
        raise DataError(f"--species {' '.join(args.species)}: a species is named twice")
    absent = sorted(set(args.species) - set(species_in_order(train)))
    if absent:
        say(f"warning: species {absent} have no atoms in the training data; the model learns nothing about them")
    prepare(train, args.species, args.r_c)
    prepare(val, args.species, args.r_c)
    shared = {fr.origin for fr in train} & {fr.origin for fr in val}
    if shared:
        say(f"warning: {len(shared)} validation frames are also training frames (e.g. {sorted(shared)[0]})")
    sizes = sorted({len(fr.species) for fr in train})
    size = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
    say(f"species {' '.join(args.species)}; training frames of {size} atoms, "
        f"{sum(fr.virial is not None for fr in train)} with a virial")
    return train, val


def flag(name):
    """The command-line option of an args attribute."""
    return f"--{name}" if name in ("r_c", "L", "C", "T", "NB", "H", "A", "dk", "Hr") else "--" + name.replace("_", "-")


def check_args(args):
    """Option values the run cannot use, as InputError (before any data is read)."""
    at_least = {"steps": 1, "batch_size": 1, "val_every": 1, "checkpoint_every": 1, "log_every": 1,
                "curve_every": 1, "C": 1, "T": 1, "NB": 1, "H": 1, "A": 1, "dk": 1, "Hr": 1, "L": 0, "chunk_steps": 0,
                "val_frames": 0, "threads": 0, "total_minutes": 0.0, "chunk_minutes": 0.0}
    for name, low in at_least.items():
        if getattr(args, name) < low:
            raise InputError(f"{flag(name)} {getattr(args, name)}: must be at least {low}")
    if args.L > 3:
        raise InputError(f"--L {args.L}: the model supports L up to 3")
    for name in ("r_c", "lr"):
        if not getattr(args, name) > 0:
            raise InputError(f"{flag(name)} {getattr(args, name)}: must be positive")
    if not 0.0 <= args.ema < 1.0:
        raise InputError(f"--ema {args.ema}: the EMA decay must lie in [0, 1)")
    if args.correlation == 2 and args.T < 2:
        raise InputError(f"--correlation 2 with --T {args.T}: the product basis acts in every layer but the last, so "
                         f"it needs --T 2 or more")


def main(argv=None):
    args, given = parse_args(argv)
    ckpt_path = os.path.join(args.out, "checkpoint.pt")
    ckpt = None
    if args.resume:
        if not os.path.exists(ckpt_path):
            raise InputError(f"--resume: no checkpoint {ckpt_path}; give the --out directory of the run to continue, "
                             f"or leave out --resume to start a new run")
        ckpt = load_checkpoint(ckpt_path, map_location="cpu")
        for key in ("ema", "optimizer", "step", "elapsed_seconds", "statistics"):
            if key not in ckpt:
                raise InputError(f"--resume: {ckpt_path} has no {key!r} entry: not a checkpoint of batmobile.train "
                                 f"that can be resumed; start a new run in another --out directory")
        overridden = resolve_resume(args, given, ckpt)
        check_resumed_architecture(args, given, ckpt, ckpt_path)
    check_args(args)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    say = Log(os.path.join(args.out, "log.txt"))
    if ckpt is not None and overridden:
        say("resume overrides the checkpoint's " + ", ".join(f"--{n} {getattr(args, n)}" for n in overridden))
    device = select_device(args.device)
    dtype = torch.float32 if args.dtype == "float32" else torch.float64
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    train, val = load_data(args, say)
    val_monitor = val if args.val_frames <= 0 else val[:: max(1, len(val) // args.val_frames)][: args.val_frames]
    if ckpt is not None:
        hp, stats = Hyperparameters.from_dict(ckpt["hyperparameters"]), ckpt["statistics"]
    else:
        stats = dataset_statistics(train, len(args.species))
        scale = stats["force_rms"] if args.energy_scale_from == "force_rms" else stats["energy_residual_std_per_atom"]
        if not scale > 0:
            raise DataError(f"the training data give energy_scale {scale} "
                            f"(--energy-scale-from {args.energy_scale_from}); it must be positive")
        hp = Hyperparameters(species=list(args.species), r_c=args.r_c, L=args.L, C=args.C, T=args.T, NB=args.NB,
                             H=args.H, A=args.A, dk=args.dk, Hr=args.Hr, correlation=args.correlation,
                             avg_num_neighbors=stats["avg_num_neighbors"], energy_scale=scale,
                             min_distance=stats["min_distance"])
    tr = Trainer(args, hp, stats, train, device, dtype)
    if ckpt is not None:
        tr.load(ckpt)
        say(f"resumed at step {tr.step} ({tr.elapsed_before:.0f} s trained)")
    else:
        say(f"statistics: {json.dumps(stats)}")
    tr.commands.append("python -m batmobile.train " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])))
    n_params = sum(p.numel() for p in tr.model.parameters())
    say(f"device {device}, dtype {args.dtype}, {n_params} parameters, {len(train)} train / {len(val)} val frames")
    device_name = (torch.cuda.get_device_name(device) if device.type == "cuda"
                   else f"cpu ({torch.get_num_threads()} threads)")
    run_loop(args, tr, val_monitor, val, ckpt_path, device_name, say)


def open_bar(args, tr, say):
    """A tqdm progress bar over the run's steps, or None (--progress lines, no terminal, or no tqdm)."""
    if args.progress == "lines" or (args.progress == "auto" and not sys.stderr.isatty()):
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        if args.progress == "bar":
            say("no progress bar: tqdm is not installed (Debian: python3-tqdm); progress lines only")
        return None
    return tqdm(total=args.steps, initial=tr.step, unit="step", dynamic_ncols=True, file=sys.stderr)


def run_loop(args, tr, val_monitor, val_all, ckpt_path, device_name, say):
    t_start = time.time()
    first_step = tr.step
    total_s, chunk_s = 60.0 * args.total_minutes, 60.0 * args.chunk_minutes
    elapsed = lambda: tr.elapsed_before + time.time() - t_start
    finished = False
    say.bar = open_bar(args, tr, say)
    while True:
        el = elapsed()
        if tr.step >= args.steps or (total_s > 0 and el >= total_s):
            finished = True
            break
        if (args.chunk_steps > 0 and tr.step - first_step >= args.chunk_steps) or (
                chunk_s > 0 and time.time() - t_start >= chunk_s):
            break
        progress = schedule_progress(args, tr.step, el)
        lr, w_e = learning_rate(args, progress), energy_weight(args, progress)
        tr.one_step(lr, w_e)
        if say.bar is not None:
            say.bar.update(1)
        if tr.step % args.curve_every == 0:
            tr.record_train_point(elapsed(), lr, w_e)
        if tr.step % args.log_every == 0 or tr.step == first_step + 1:
            # the only read of the training losses between checkpoints: means since the last line
            loss, e_mae, f_rmse = tr.take_log_means()
            el = elapsed()
            limit = f"/{total_s:.0f}" if total_s > 0 else ""
            per_step = (time.time() - t_start) / (tr.step - first_step)
            frames_per_s = args.batch_size / per_step if per_step > 0 else 0.0
            if say.bar is not None:
                say.bar.set_postfix_str(f"loss {loss:.3g} E {e_mae:.2f} meV/at F {f_rmse:.1f} meV/A", refresh=False)
            say(f"step {tr.step}/{args.steps} {el:.0f}{limit} s ({per_step:.3f} s/step, {frames_per_s:.1f} frames/s) "
                f"loss {loss:.4g} lr {lr:.2e} w_E {w_e:.3g} E {e_mae:.2f} meV/at F {f_rmse:.1f} meV/A")
        if tr.step % args.val_every == 0:
            metrics = validate(tr.ema.model_copy(tr.model), val_monitor, tr.dtype, tr.device, args.batch_size)
            tr.curve["validation"].append({"step": tr.step, "elapsed_s": elapsed(), "frames": len(val_monitor),
                                           **metrics})
            say(f"validation (EMA, {len(val_monitor)} frames) step {tr.step}: {json.dumps(metrics)}")
        if tr.step % args.checkpoint_every == 0:
            tr.save(ckpt_path, elapsed(), False, device_name)
            write_curve(tr.curve, args.out, plot=False)
    if say.bar is not None:
        say.bar.close()
        say.bar = None
    finish_run(args, tr, finished, val_monitor, val_all, elapsed, say)
    tr.save(ckpt_path, elapsed(), finished, device_name)
    write_curve(tr.curve, args.out, plot=True)
    say(f"checkpoint: {ckpt_path} (step {tr.step}, {elapsed():.0f} s trained{', finished' if finished else ''})")


def finish_run(args, tr, finished, val_monitor, val_all, elapsed, say):
    """Validation at the end of a call; at the end of the run also the parity plots of all validation frames."""
    ema_model = tr.ema.model_copy(tr.model)
    if finished and any(v.get("final") for v in tr.curve["validation"]):
        say(f"the run finished before (step {tr.step}/{args.steps}); nothing to do")
    elif finished:
        m = validate(ema_model, val_all, tr.dtype, tr.device, args.batch_size)
        tr.curve["validation"].append({"step": tr.step, "elapsed_s": elapsed(), "frames": len(val_all),
                                       "final": True, **m})
        say(f"final validation (EMA, all {len(val_all)} frames, {args.dtype}): {json.dumps(m)}")
        if args.parity_plots:
            res = predict(ema_model, val_all, torch.float64, tr.device)
            paths = parity_plots(*res, args.out, "")
            with open(os.path.join(args.out, "validation.json"), "w") as f:
                json.dump({"frames": len(val_all), "step": tr.step, **metrics(*res),
                           **stress_metrics(ema_model, val_all, torch.float64, tr.device)}, f, indent=1)
            say(f"parity plots (EMA, float64): {', '.join(paths)}; "
                f"metrics: {os.path.join(args.out, 'validation.json')}")
    else:
        m = validate(ema_model, val_monitor, tr.dtype, tr.device, args.batch_size)
        say(f"end of chunk at step {tr.step}/{args.steps}: validation (EMA, {len(val_monitor)} frames) "
            f"{json.dumps(m)}; continue with --resume")


if __name__ == "__main__":
    sys.exit(run(main))
