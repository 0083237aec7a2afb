"""Train a Batmobile model: python -m batmobile.train --out runs/water [options].

Loss per step = energy_weight * mean((dE / N / s)^2) + force_weight * mean((dF / s)^2), s = energy_scale
(force RMS of the training set), so both terms are dimensionless. Adam, EMA of the weights (validation and
checkpoints' "ema" are the EMA weights), cosine learning-rate decay over the run; with --max-minutes the decay
follows whichever of steps or wall clock runs out first, so a time-limited run still anneals.
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

from .data import DEFAULT_ROOT, TRAIN_SETS, VALIDATION_SETS, batch_frames, dataset_statistics, read_sets
from .io_utils import load_checkpoint
from .model import BatmobileModel, Hyperparameters, evaluate_structure


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=DEFAULT_ROOT)
    p.add_argument("--train-sets", nargs="+", default=list(TRAIN_SETS))
    p.add_argument("--val-sets", nargs="+", default=list(VALIDATION_SETS))
    p.add_argument("--species", nargs="+", default=["O", "H"])
    p.add_argument("--out", default="runs/water", help="directory for checkpoint.pt, log.txt")
    for name, default in [("r_c", 5.0), ("L", 2), ("C", 32), ("T", 2), ("NB", 8), ("H", 32), ("A", 4), ("dk", 8),
                          ("Hr", 16)]:
        p.add_argument(f"--{name}", type=type(default), default=default)
    p.add_argument("--energy-scale-from", choices=["force_rms", "energy_std"], default="force_rms")
    p.add_argument("--steps", type=int, default=20000)
    p.add_argument("--batch-frames", type=int, default=1)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--lr-final-fraction", type=float, default=0.01)
    p.add_argument("--energy-weight", type=float, default=1.0)
    p.add_argument("--force-weight", type=float, default=1.0)
    p.add_argument("--ema", type=float, default=0.99)
    p.add_argument("--val-every", type=int, default=100)
    p.add_argument("--val-frames", type=int, default=8, help="validation frames during training (0 = all)")
    p.add_argument("--checkpoint-every", type=int, default=50)
    p.add_argument("--max-minutes", type=float, default=0.0, help="wall-clock limit (0 = none)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto (cuda if available), cpu, cuda, cuda:1 ...")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0 = torch default)")
    p.add_argument("--resume", action="store_true", help="continue from OUT/checkpoint.pt")
    return p.parse_args(argv)


class EMA:
    def __init__(self, model, decay):
        self.decay = decay
        self.shadow = {k: v.detach().clone() for k, v in model.state_dict().items()}

    @torch.no_grad()
    def update(self, model, step):
        d = min(self.decay, (1.0 + step) / (10.0 + step))  # short warm-up so early EMA is not the random init
        for k, v in model.state_dict().items():
            if v.dtype.is_floating_point:
                self.shadow[k].mul_(d).add_(v.detach(), alpha=1.0 - d)
            else:
                self.shadow[k].copy_(v)

    def model_copy(self, model):
        m = copy.deepcopy(model)
        m.load_state_dict(self.shadow)
        return m


def loss_terms(model, batch, training):
    out = evaluate_structure(model, batch["positions"], batch["species"], batch["cell"], batch["sender"],
                             batch["receiver"], batch["shifts"], training=training)
    n_frames = batch["energy"].shape[0]
    e_pred = torch.zeros(n_frames, dtype=out["atomic_energies"].dtype, device=out["atomic_energies"].device)
    e_pred = e_pred.index_add(0, batch["frame_of_atom"], out["atomic_energies"])
    de_per_atom = (e_pred - batch["energy"]) / batch["num_atoms"]
    df = out["forces"] - batch["forces"]
    return de_per_atom, df


def validate(model, frames, dtype, device):
    de, df = [], []
    for fr in frames:
        b = batch_frames([fr], dtype, device)
        e, f = loss_terms(model, b, training=False)
        de.append(e.detach())
        df.append(f.detach().reshape(-1))
    de, df = torch.cat(de), torch.cat(df)
    return {"energy_rmse_meV_per_atom": 1e3 * de.pow(2).mean().sqrt().item(),
            "force_rmse_meV_per_A": 1e3 * df.pow(2).mean().sqrt().item(),
            "force_mae_meV_per_A": 1e3 * df.abs().mean().item()}


def select_device(name):
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def main(argv=None):
    args = parse_args(argv)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = select_device(args.device)
    dtype = torch.float32 if args.dtype == "float32" else torch.float64
    os.makedirs(args.out, exist_ok=True)
    ckpt_path = os.path.join(args.out, "checkpoint.pt")
    log = open(os.path.join(args.out, "log.txt"), "a")

    def say(msg):
        print(msg, flush=True)
        log.write(msg + "\n")
        log.flush()

    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    train = read_sets(args.data, args.train_sets, args.species, args.r_c)
    val = read_sets(args.data, args.val_sets, args.species, args.r_c)
    val_monitor = val if args.val_frames <= 0 else val[:: max(1, len(val) // args.val_frames)][: args.val_frames]

    resume = args.resume and os.path.exists(ckpt_path)
    if resume:
        ckpt = load_checkpoint(ckpt_path, map_location="cpu")
        hp = Hyperparameters.from_dict(ckpt["hyperparameters"])
        stats = ckpt["statistics"]
    else:
        stats = dataset_statistics(train, len(args.species))
        scale = stats["force_rms"] if args.energy_scale_from == "force_rms" else stats["energy_residual_std_per_atom"]
        hp = Hyperparameters(species=list(args.species), r_c=args.r_c, L=args.L, C=args.C, T=args.T, NB=args.NB,
                             H=args.H, A=args.A, dk=args.dk, Hr=args.Hr,
                             avg_num_neighbors=stats["avg_num_neighbors"], energy_scale=scale,
                             min_distance=stats["min_distance"])
    model = BatmobileModel(hp, seed=args.seed)
    model.E_ref.copy_(torch.tensor(stats["E_ref"]))
    model = model.to(device=device, dtype=dtype)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    ema = EMA(model, args.ema)
    step, elapsed_before = 0, 0.0
    if resume:
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        ema.shadow = {k: v.to(device=device, dtype=model.state_dict()[k].dtype) for k, v in ckpt["ema"].items()}
        step, elapsed_before = ckpt["step"], ckpt["elapsed_seconds"]
        torch.set_rng_state(ckpt["rng_cpu"])
        say(f"resumed at step {step} ({elapsed_before:.0f} s trained)")
    else:
        say(f"statistics: {json.dumps(stats)}")
    n_params = sum(p.numel() for p in model.parameters())
    say(f"device {device}, dtype {args.dtype}, {n_params} parameters, {len(train)} train / {len(val)} val frames")

    command = "python -m batmobile.train " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))

    def save():
        state = {"model": model.state_dict(), "ema": ema.shadow, "optimizer": opt.state_dict(), "step": step,
                 "elapsed_seconds": elapsed_before + time.time() - t_start, "hyperparameters": hp.to_dict(),
                 "statistics": stats, "args": vars(args), "train_command": command, "device": device_name,
                 "train_frames": len(train), "rng_cpu": torch.get_rng_state()}
        tmp = ckpt_path + ".tmp"
        torch.save(state, tmp)
        os.replace(tmp, ckpt_path)

    device_name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    t_start = time.time()
    max_seconds = args.max_minutes * 60.0
    order = []
    rng = np.random.default_rng(args.seed + step)
    last_print = 0.0
    running = None
    while step < args.steps:
        elapsed = elapsed_before + time.time() - t_start
        if max_seconds > 0 and elapsed >= max_seconds:
            say(f"wall-clock limit reached after {elapsed:.0f} s")
            break
        progress = max(step / args.steps, elapsed / max_seconds if max_seconds > 0 else 0.0)
        lr = args.lr * (args.lr_final_fraction + (1 - args.lr_final_fraction) * 0.5 * (1 + math.cos(math.pi * progress)))
        for g in opt.param_groups:
            g["lr"] = lr
        if len(order) < args.batch_frames:
            order += rng.permutation(len(train)).tolist()
        picked, order = order[: args.batch_frames], order[args.batch_frames:]
        batch = batch_frames([train[i] for i in picked], dtype, device)
        model.train()
        de, df = loss_terms(model, batch, training=True)
        s = hp.energy_scale
        loss = args.energy_weight * (de / s).pow(2).mean() + args.force_weight * (df / s).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        ema.update(model, step)
        step += 1
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        now = time.time()
        if now - last_print > 10 or step == 1:
            last_print = now
            el = elapsed_before + now - t_start
            limit = f"/{max_seconds:.0f}" if max_seconds > 0 else ""
            done = max(step / args.steps, el / max_seconds if max_seconds > 0 else 0)
            bar = "#" * int(30 * done) + "." * (30 - int(30 * done))
            say(f"[{bar}] step {step}/{args.steps} {el:.0f}{limit} s  {(el) / step if step else 0:.2f} s/step "
                f"loss {loss.item():.4g} (avg {running:.4g}) lr {lr:.2e} "
                f"E {1e3 * de.detach().abs().mean().item():.2f} meV/at F {1e3 * df.detach().pow(2).mean().sqrt().item():.1f} meV/A")
        if step % args.checkpoint_every == 0:
            save()
        if step % args.val_every == 0:
            metrics = validate(ema.model_copy(model), val_monitor, dtype, device)
            say(f"validation (EMA, {len(val_monitor)} frames) step {step}: {json.dumps(metrics)}")
    save()
    metrics = validate(ema.model_copy(model), val_monitor, dtype, device)
    say(f"final validation (EMA, {len(val_monitor)} frames): {json.dumps(metrics)}")
    say(f"checkpoint: {ckpt_path}")


if __name__ == "__main__":
    main()
