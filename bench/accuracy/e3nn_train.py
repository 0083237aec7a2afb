#!/usr/bin/env python3
"""A NequIP-style e3nn 0.6 reference model trained on Batmobile's water split, then timed on water boxes.

  PYTHONPATH=python python3 bench/accuracy/e3nn_train.py --minutes 4 --out-json e3nn_water.json \
      [--commit HASH] [--device cuda]

Model: one-hot species -> Linear to C x 0e; T interaction layers, each: Linear, channel-wise ("uvu") tensor
product of the sender features with the spherical harmonics Y^{l<=L} of the edge direction, its per-edge weights from
a radial MLP (NB Bessel functions x polynomial envelope, r_c) -> sum over neighbours / sqrt(mean neighbour count)
(NequIP's choice; --neighbor-norm mean divides by the count itself, as Batmobile does) ->
Linear, plus a self-connection (tensor product with the species one-hot), gate nonlinearity (SiLU on scalars, sigmoid
gates on l > 0), residual from the second layer on; readout Linear -> Hr x 0e -> Linear -> 1 x 0e; atomic energy =
s * readout + E_ref[species]. Features carry natural parity (0e, 1o, 2e), as Batmobile's do.
Training: per-species energies E_ref by least squares, loss (dE/N/s)^2 + 10 (dF/s)^2 with s the training force RMS
(batmobile.train's loss with --force-weight 10), Adam 5e-3 with cosine decay over the wall-clock budget to 1 %, EMA
0.99, one frame per step, float32. Validation: EMA weights, float64, every frame of the validation sets.
Timing: energy + forces (autograd of the energy) of the trained model on the 216-water box of
examples/lammps_inputs/water216 (648 atoms) and its 2 x 2 x 4 replica (10,368 atoms), as bench/md replicates it;
neighbour lists built once, outside the timing; median of --reps calls after --warmup; peak GPU memory.

The e3nn imports live in build_e3nn_model(), so the data, neighbour, loss and training parts run without e3nn
(python/tests/test_e3nn_train_parts.py).
"""
import argparse
import json
import math
import os
import platform
import shlex
import statistics
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

from batmobile.data import DEFAULT_ROOT, TRAIN_SETS, VALIDATION_SETS, dataset_statistics, read_sets  # noqa: E402
from batmobile.data import batch_frames  # noqa: E402
from batmobile.model import bessel_basis, envelope, evaluate_structure  # noqa: E402
from batmobile.train import EMA, loss_terms, validate  # noqa: E402

WATER_BOX = os.path.join(ROOT, "examples", "lammps_inputs", "water216", "water216_start.lmp")
TIMING_REPLICAS = {648: (1, 1, 1), 10368: (2, 2, 4)}


def read_lammps_atomic(path):
    """positions (N, 3), 0-based types (N,), cell (3, 3) of an orthogonal `atom_style atomic` data file."""
    lines = open(path).read().splitlines()
    bounds, atoms, in_atoms = {}, [], False
    for line in lines:
        words = line.split("#")[0].split()
        if len(words) == 4 and words[2].endswith("lo") and words[3].endswith("hi"):
            bounds[words[2][0]] = float(words[1]) - float(words[0])
        elif line.startswith("Atoms"):
            in_atoms = True
        elif in_atoms and len(words) >= 5:
            atoms.append([float(w) for w in words[:5]])
        elif in_atoms and words and len(words) < 5:
            break
    atoms = np.array(sorted(atoms))
    return atoms[:, 2:5], atoms[:, 1].astype(np.int64) - 1, np.diag([bounds["x"], bounds["y"], bounds["z"]])


def replicate(positions, species, cell, reps):
    """The box repeated reps = (nx, ny, nz) times along its lattice vectors."""
    shifts = np.array([[i, j, k] for i in range(reps[0]) for j in range(reps[1]) for k in range(reps[2])], float)
    pos = (positions[None, :, :] + (shifts @ cell)[:, None, :]).reshape(-1, 3)
    return pos, np.tile(species, len(shifts)), cell * np.asarray(reps, float)[:, None]


def minimum_image_neighbors(positions, cell, r_c, chunk=2048):
    """Full neighbour list (sender j, receiver i, integer shifts S) with r_ij = x_j - x_i + S @ cell, in torch.

    Minimum image: needs every distance between opposite cell faces > 2 r_c (checked). Runs on the device of
    `positions` in blocks of `chunk` receivers, so a 10,000-atom box builds in well under a second on a GPU."""
    cell = cell.to(positions)
    widths = 1.0 / torch.linalg.inv(cell).T.norm(dim=1)
    if bool((widths <= 2 * r_c).any()):
        raise ValueError(f"cell widths {widths.tolist()} must exceed 2 r_c = {2 * r_c} for minimum-image neighbours")
    frac = positions @ torch.linalg.inv(cell)
    senders, receivers, shifts = [], [], []
    idx = torch.arange(len(positions), device=positions.device)
    for start in range(0, len(positions), chunk):
        i = idx[start:start + chunk]
        d = frac[None, :, :] - frac[i, None, :]             # (chunk, N, 3): x_j - x_i in fractions
        n = -torch.round(d)
        vec = (d + n) @ cell
        mask = (vec * vec).sum(-1) < r_c * r_c
        mask[torch.arange(len(i), device=positions.device), i] = False
        ri, sj = torch.nonzero(mask, as_tuple=True)
        receivers.append(i[ri])
        senders.append(sj)
        shifts.append(n[ri, sj].long())
    return torch.cat(senders), torch.cat(receivers), torch.cat(shifts)


def cosine_lr(lr, progress, final_fraction=0.01):
    return lr * (final_fraction + (1 - final_fraction) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def train_for(factory, train, val_monitor, minutes, lr, force_weight, energy_scale, dtype, device, log, seed=0,
              curve_every=20, val_every=500, max_steps=0):
    """One frame per step for `minutes` of wall clock (or max_steps), cosine lr over the budget, EMA 0.99.
    factory() builds a model with atomic_energies(species, edge_vec, sender, receiver); the EMA weights go into a
    second one (no deepcopy of generated modules). Returns (EMA model, curve, steps, seconds)."""
    model = factory().to(device=device, dtype=dtype)

    def ema_model():
        m = factory().to(device=device, dtype=dtype)
        m.load_state_dict(ema.shadow)
        return m

    opt = torch.optim.Adam(model.parameters(), lr=lr)
    ema = EMA(model, 0.99)
    rng = np.random.default_rng(seed)
    batches = [batch_frames([fr], dtype, device) for fr in train]
    order, step, losses = [], 0, []
    curve = {"train": {"step": [], "elapsed_s": [], "loss": [], "lr": []}, "validation": []}
    budget = 60.0 * minutes
    t0 = time.time()
    while True:
        elapsed = time.time() - t0
        if (budget > 0 and elapsed >= budget) or (max_steps and step >= max_steps):
            break
        progress = elapsed / budget if budget > 0 else step / max_steps
        cur_lr = cosine_lr(lr, progress)
        for g in opt.param_groups:
            g["lr"] = cur_lr
        if not order:
            order = rng.permutation(len(train)).tolist()
        model.train()
        de, df = loss_terms(model, batches[order.pop()], training=True)
        loss = (de / energy_scale).pow(2).mean() + force_weight * (df / energy_scale).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        ema.update(model, step)
        step += 1
        losses.append(loss.item())
        if step % curve_every == 0:
            for key, value in (("step", step), ("elapsed_s", time.time() - t0), ("loss", float(np.mean(losses))),
                               ("lr", cur_lr)):
                curve["train"][key].append(value)
            losses = []
        if step % val_every == 0:
            m = validate(ema_model(), val_monitor, dtype, device)
            curve["validation"].append({"step": step, "elapsed_s": time.time() - t0, **m})
            log(f"step {step} {time.time() - t0:.0f}/{budget:.0f} s lr {cur_lr:.2e} "
                f"loss {curve['train']['loss'][-1]:.4g} "
                f"val({len(val_monitor)} frames) F {m['force_rmse_meV_per_A']:.1f} meV/A "
                f"E {m['energy_rmse_meV_per_atom']:.3f} meV/atom")
    return ema_model(), curve, step, time.time() - t0


def time_energy_forces(model, positions, species, cell, r_c, dtype, device, warmup, reps):
    """Median seconds of one energy + forces evaluation, peak device bytes, edge count."""
    pos = torch.as_tensor(positions, dtype=dtype, device=device)
    cel = torch.as_tensor(cell, dtype=dtype, device=device)
    spc = torch.as_tensor(species, dtype=torch.long, device=device)
    sender, receiver, shifts = minimum_image_neighbors(pos, cel, r_c)
    sync = torch.cuda.synchronize if pos.is_cuda else (lambda: None)
    if pos.is_cuda:
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    for k in range(warmup + reps):
        sync()
        t = time.perf_counter()
        out = evaluate_structure(model, pos, spc, cel, sender, receiver, shifts)
        out["forces"].sum().item()
        sync()
        if k >= warmup:
            times.append(time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated(device) if pos.is_cuda else None
    median = statistics.median(times)
    return {"seconds_per_evaluation": median, "evaluations_per_second": 1.0 / median,
            "seconds_min_max": [min(times), max(times)], "reps": reps, "warmup": warmup, "edges": int(len(sender)),
            "peak_device_bytes": peak}


class RadialEmbedding(torch.nn.Module):
    """Bessel basis times Batmobile's polynomial envelope (batmobile.model), (E,) -> (E, NB)."""

    def __init__(self, r_c, NB):
        super().__init__()
        self.r_c, self.NB = r_c, NB

    def forward(self, d):
        return bessel_basis(d, self.r_c, self.NB) * envelope(d, self.r_c)[:, None]


def build_e3nn_model(num_species, C, L, T, NB, r_c, radial_hidden, Hr, avg_num_neighbors, energy_scale, e_ref,
                     neighbor_norm="sqrt"):
    from e3nn import o3
    from e3nn.nn import FullyConnectedNet, Gate

    silu = torch.nn.functional.silu
    irreps_sh = o3.Irreps.spherical_harmonics(L)
    irreps_attr = o3.Irreps(f"{num_species}x0e")
    hidden_ls = [o3.Irrep(l, (-1) ** l) for l in range(L + 1)]
    message_divisor = math.sqrt(avg_num_neighbors) if neighbor_norm == "sqrt" else avg_num_neighbors

    class Interaction(torch.nn.Module):
        def __init__(self, irreps_in):
            super().__init__()
            self.lin_in = o3.Linear(irreps_in, irreps_in)
            mid, instructions = [], []
            for i1, (mul, ir1) in enumerate(irreps_in):
                for i2, (_, ir2) in enumerate(irreps_sh):
                    for ir_out in ir1 * ir2:
                        if ir_out in hidden_ls:
                            instructions.append((i1, i2, len(mid), "uvu", True))
                            mid.append((mul, ir_out))
            irreps_mid = o3.Irreps(mid)
            self.tp = o3.TensorProduct(irreps_in, irreps_sh, irreps_mid, instructions, shared_weights=False,
                                       internal_weights=False)
            self.radial = FullyConnectedNet([NB, radial_hidden, self.tp.weight_numel], silu)
            self.gate = Gate(f"{C}x0e", [silu], f"{C * L}x0e", [torch.sigmoid],
                             o3.Irreps([(C, ir) for ir in hidden_ls[1:]]))
            self.lin_out = o3.Linear(irreps_mid, self.gate.irreps_in)
            self.self_connection = o3.FullyConnectedTensorProduct(irreps_in, irreps_attr, self.gate.irreps_in)
            self.residual = o3.Irreps(irreps_in) == self.gate.irreps_out
            self.irreps_out = self.gate.irreps_out

        def forward(self, x, attr, sh, radial, sender, receiver):
            h = self.lin_in(x)
            msg = self.tp(h[sender], sh, self.radial(radial))
            agg = torch.zeros(x.shape[0], msg.shape[1], dtype=msg.dtype, device=msg.device).index_add(0, receiver, msg)
            y = self.gate(self.lin_out(agg / message_divisor) + self.self_connection(x, attr))
            return x + y if self.residual else y

    class NequipLike(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = o3.Linear(irreps_attr, f"{C}x0e")
            self.radial = RadialEmbedding(r_c, NB)
            layers, irreps = [], o3.Irreps(f"{C}x0e")
            for _ in range(T):
                layers.append(Interaction(irreps))
                irreps = layers[-1].irreps_out
            self.layers = torch.nn.ModuleList(layers)
            self.readout = torch.nn.Sequential(o3.Linear(irreps, f"{Hr}x0e"), o3.Linear(f"{Hr}x0e", "1x0e"))
            self.register_buffer("E_ref", torch.tensor(e_ref))
            self.energy_scale = energy_scale

        def atomic_energies(self, species, edge_vec, sender, receiver):
            attr = torch.nn.functional.one_hot(species, num_species).to(edge_vec.dtype)
            sh = o3.spherical_harmonics(irreps_sh, edge_vec, normalize=True, normalization="component")
            radial = self.radial(edge_vec.norm(dim=1))
            x = self.embed(attr)
            for layer in self.layers:
                x = layer(x, attr, sh, radial, sender, receiver)
            return self.energy_scale * self.readout(x)[:, 0] + self.E_ref.to(edge_vec.dtype)[species]

    return NequipLike()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=DEFAULT_ROOT)
    p.add_argument("--minutes", type=float, default=4.0, help="training wall-clock budget")
    p.add_argument("--out-json", required=True)
    p.add_argument("--commit", default="unknown", help="commit of the tree that runs (recorded)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--neighbor-norm", choices=["sqrt", "mean"], default="sqrt",
                   help="divide summed messages by sqrt(mean neighbour count) or by the count")
    for name, default in [("C", 32), ("L", 2), ("T", 3), ("NB", 8), ("radial_hidden", 64), ("Hr", 16),
                          ("r_c", 5.0), ("lr", 5e-3), ("force_weight", 10.0), ("seed", 0), ("warmup", 5),
                          ("reps", 20), ("val_every", 500)]:
        p.add_argument(f"--{name.replace('_', '-')}", dest=name, type=type(default), default=default)
    a = p.parse_args(argv)
    device = torch.device(a.device)
    torch.manual_seed(a.seed)
    log = lambda msg: print(msg, flush=True)
    train = read_sets(a.data, TRAIN_SETS, ["O", "H"], a.r_c)
    val = read_sets(a.data, VALIDATION_SETS, ["O", "H"], a.r_c)
    stats = dataset_statistics(train, 2)
    factory = lambda: build_e3nn_model(2, a.C, a.L, a.T, a.NB, a.r_c, a.radial_hidden, a.Hr,
                                       stats["avg_num_neighbors"], stats["force_rms"], stats["E_ref"],
                                       a.neighbor_norm)
    n_params = sum(q.numel() for q in factory().parameters())
    log(f"e3nn NequIP-style model: {n_params} parameters; {len(train)} train / {len(val)} validation frames")
    ema_model, curve, steps, seconds = train_for(factory, train, val[::10], a.minutes, a.lr, a.force_weight,
                                                 stats["force_rms"], torch.float32, device, log, seed=a.seed,
                                                 val_every=a.val_every)
    log(f"trained {steps} steps in {seconds:.0f} s")
    t, val_dtype = time.time(), "float64"
    try:
        metrics = validate(ema_model.double(), val, torch.float64, device)
    except (RuntimeError, TypeError) as err:   # a module that does not convert to float64: validate as trained
        log(f"float64 validation failed ({err}); float32 instead")
        val_dtype, metrics = "float32", validate(ema_model.float(), val, torch.float32, device)
    log(f"validation (EMA, all {len(val)} frames, {val_dtype}, {time.time() - t:.0f} s): {json.dumps(metrics)}")
    timings = {}
    ema_model = ema_model.float()
    x, species, cell = read_lammps_atomic(WATER_BOX)
    for n_atoms, reps in TIMING_REPLICAS.items():
        pos, spc, box = replicate(x, species, cell, reps)
        assert len(pos) == n_atoms
        timings[str(n_atoms)] = time_energy_forces(ema_model, pos, spc, box, a.r_c, torch.float32, device, a.warmup,
                                                   a.reps if n_atoms < 5000 else max(3, a.reps // 2))
        log(f"{n_atoms} atoms: {json.dumps(timings[str(n_atoms)])}")
    import e3nn
    result = {
        "what": "NequIP-style e3nn model trained on Batmobile's split (train: " + " + ".join(TRAIN_SETS)
                + "; validation: all of " + " + ".join(VALIDATION_SETS) + "), then energy + force timings",
        "commit": a.commit,
        "machine": {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor(),
                    "torch": torch.__version__, "e3nn": e3nn.__version__, "host": platform.node()},
        "command": "bench/accuracy/e3nn_train.py " + " ".join(shlex.quote(s) for s in (argv or sys.argv[1:])),
        "model": {"C": a.C, "L": a.L, "T": a.T, "NB": a.NB, "radial_hidden": a.radial_hidden, "Hr": a.Hr,
                  "r_c": a.r_c, "parameters": n_params, "features": "natural parity 0e + 1o + 2e, uvu, gate",
                  "neighbor_normalization": a.neighbor_norm},
        "training": {"minutes_budget": a.minutes, "steps": steps, "seconds": seconds, "lr": a.lr,
                     "force_weight": a.force_weight, "frames_per_step": 1, "dtype": "float32", "ema": 0.99},
        "validation": metrics, "validation_frames": len(val), "validation_dtype": val_dtype,
        "timing_float32": timings,
        "timing_note": "energy + forces by autograd, neighbour list excluded (built once); median of reps calls",
        "curve": curve,
    }
    with open(a.out_json, "w") as f:
        json.dump(result, f, indent=1)
    log(f"wrote {a.out_json}")


if __name__ == "__main__":
    main()
