#!/usr/bin/env python3
"""Training throughput of batmobile.train: frames per second of the training step at several batch sizes.

  PYTHONPATH=python python3 bench/accuracy/training_throughput.py --out bench/results/training_throughput.json \
      [--models fast accurate] [--batch-sizes 1 4 8 16] [--steps 20] [--warmup 5] [--device auto]
  ... --quick --steps 3        (a smoke run on a CPU: small synthetic frames, under a minute)
  ... --correlation 2           (the same models with the product basis, docs/model.md step 3)

Each case builds the trainer of batmobile.train (batmobile.train.Trainer) for the model sizes of the bundled
potentials (fast: potentials/water_fast.json's hyperparameters, T=2; accurate: potentials/water_accurate.json's,
T=3; both trained with force weight 10) on the bundled water training frames (240 frames of 192 atoms), runs
--warmup steps, then times --steps steps of --batch-size frames between two device synchronisations. A step is
what the training loop does per step: batch assembly and upload, forward, forces by autograd, the loss, its
gradient (double backward), Adam and the EMA update; progress lines, curve points, validation and checkpoints
(every N steps) are not in it. frames_per_second = steps x batch size / seconds. On CUDA two further untimed
steps run under torch.cuda.set_sync_debug_mode("error"): each result's sync_check says whether the step made a
synchronising call (an .item(), a copy to pageable memory, ...).

--quick replaces the water frames by synthetic water boxes of 2 and 3 molecules with r_c 3 A (mixed sizes,
about 10 neighbours per atom) and warms up with one step: it checks that the benchmark runs, its numbers say
nothing about the real frames.
"""
import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))

from batmobile import train  # noqa: E402
from batmobile.data import DEFAULT_ROOT, TRAIN_SETS, Frame, dataset_statistics, read_sets  # noqa: E402
from batmobile.model import Hyperparameters  # noqa: E402

CARDS = {"fast": "water_fast.json", "accurate": "water_accurate.json"}
FALLBACK_T = {"fast": 2, "accurate": 3}   # the cards' T, should a card lack its hyperparameters
FORCE_WEIGHT = 10.0                        # the bundled models' recipe (their cards' train_command)


def card_hyperparameters(model):
    path = os.path.join(ROOT, "potentials", CARDS[model])
    try:
        with open(path) as f:
            hp = json.load(f)["hyperparameters"]
        return Hyperparameters.from_dict(hp)
    except (OSError, KeyError, ValueError):
        return Hyperparameters(T=FALLBACK_T[model])


def synthetic_water(count, seed, r_c):
    """Boxes of 2 or 3 water molecules at liquid density (one molecule per 29.9 A^3), random labels."""
    rng = np.random.default_rng(seed)
    frames = []
    for k in range(count):
        molecules = 2 + k % 2
        side = (29.9 * molecules) ** (1.0 / 3.0)
        cell = side * np.eye(3)
        oxygen = (np.arange(molecules)[:, None] * np.array([0.5, 0.37, 0.23]) % 1.0 + 0.1) * side
        pos, species = [], []
        for o in oxygen:
            d = rng.normal(size=(2, 3))
            d /= np.linalg.norm(d, axis=1, keepdims=True)
            pos += [o, o + 0.96 * d[0], o + 0.96 * d[1]]
            species += [0, 1, 1]
        n = len(pos)
        fr = Frame(positions=np.array(pos), cell=cell, species=np.array(species), energy=float(rng.normal()),
                   forces=rng.normal(size=(n, 3)))
        fr.build_neighbors(r_c)
        frames.append(fr)
    return frames


def commit_id(given):
    if given:
        return given
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_case(model, batch_size, frames, hp, stats, a, device, dtype):
    argv = ["--batch-size", str(batch_size), "--device", str(device), "--dtype", a.dtype,
            "--force-weight", str(FORCE_WEIGHT), "--seed", "0"]
    args, _ = train.parse_args(argv)
    args.species = list(hp.species)
    tr = train.Trainer(args, hp, stats, frames, device, dtype)
    lr, w_e = args.lr, args.energy_weight
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    for _ in range(a.warmup):
        tr.one_step(lr, w_e)
    sync(device)
    sync_check = None
    if device.type == "cuda":   # two more steps in which any synchronising call raises
        torch.cuda.set_sync_debug_mode("error")
        try:
            for _ in range(2):
                tr.one_step(lr, w_e)
            sync_check = "no host sync in the step"
        except RuntimeError as e:
            sync_check = "host sync: " + str(e).splitlines()[0]
        finally:
            torch.cuda.set_sync_debug_mode(0)
        sync(device)
    t0 = time.perf_counter()
    for _ in range(a.steps):
        tr.one_step(lr, w_e)
    sync(device)
    seconds = time.perf_counter() - t0
    loss = tr.take_log_means()[0]   # after the timing: the only device read
    result = {"model": model, "batch_size": batch_size, "frames_per_second": a.steps * batch_size / seconds,
              "steps_per_second": a.steps / seconds, "step_ms": 1e3 * seconds / a.steps, "steps": a.steps,
              "warmup": a.warmup, "T": hp.T, "L": hp.L, "C": hp.C, "correlation": hp.correlation, "mean_loss": loss}
    if sync_check is not None:
        result["sync_check"] = sync_check
    if device.type == "cuda":
        result["peak_device_bytes"] = torch.cuda.max_memory_allocated(device)
    return result


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="JSON file to write")
    p.add_argument("--models", nargs="+", choices=sorted(CARDS), default=["fast", "accurate"])
    p.add_argument("--batch-sizes", nargs="+", type=int, default=[1, 4, 8, 16])
    p.add_argument("--steps", type=int, default=20, help="timed steps per case")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 5; 1 with --quick)")
    p.add_argument("--correlation", type=int, choices=[1, 2], default=None,
                   help="the models' correlation (default: the cards'; 2: with the product basis)")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (0 = torch default)")
    p.add_argument("--quick", action="store_true", help="small synthetic frames: a smoke run on a CPU")
    p.add_argument("--data", default=DEFAULT_ROOT, help="root of the bundled water DeePMD sets")
    p.add_argument("--commit", default=None, help="commit to record (default: git rev-parse in the repository)")
    a = p.parse_args(argv)
    if a.warmup is None:
        a.warmup = 1 if a.quick else 5
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    device = train.select_device(a.device)
    dtype = torch.float32 if a.dtype == "float32" else torch.float64

    hps = {m: card_hyperparameters(m) for m in a.models}
    if a.correlation is not None:
        for hp in hps.values():
            hp.correlation = a.correlation
    if a.quick:
        r_c = 3.0
        frames = synthetic_water(12, seed=0, r_c=r_c)
        data = "synthetic water boxes of 2 and 3 molecules, r_c 3 A (--quick)"
    else:
        r_c = hps[a.models[0]].r_c
        frames = read_sets(a.data, TRAIN_SETS, ["O", "H"], r_c)
        data = f"bundled water training frames ({', '.join(TRAIN_SETS)}): {len(frames)} frames"
    stats = dataset_statistics(frames, 2)
    sizes = sorted({len(fr.species) for fr in frames})
    edges = float(np.mean([len(fr.sender) for fr in frames]))
    device_name = (torch.cuda.get_device_name(device) if device.type == "cuda"
                   else f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)")
    print(f"device {device_name}, torch {torch.__version__}, {a.dtype}; {data}; atoms per frame {sizes}, "
          f"{edges:.0f} edges per frame on average", flush=True)

    results = []
    for model in a.models:
        hp = hps[model]
        if a.quick:
            hp.r_c = r_c
        hp.avg_num_neighbors, hp.energy_scale = stats["avg_num_neighbors"], stats["force_rms"]
        for bs in a.batch_sizes:
            try:
                r = time_case(model, bs, frames, hp, stats, a, device, dtype)
            except RuntimeError as e:   # out of memory at a large batch: record it and go on
                r = {"model": model, "batch_size": bs, "frames_per_second": None, "error": str(e).splitlines()[0]}
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            results.append(r)
            fps = "failed: " + r["error"] if r["frames_per_second"] is None else f"{r['frames_per_second']:.2f}"
            print(f"{model:9s} T={hp.T} correlation {hp.correlation} batch {bs:3d}: frames/s {fps}" +
                  (f"  ({r['step_ms']:.1f} ms/step)" if r["frames_per_second"] else ""), flush=True)
        base = next((r["frames_per_second"] for r in results if r["model"] == model and r["batch_size"] == 1
                     and r["frames_per_second"]), None)
        for r in results:
            if r["model"] == model and base and r["frames_per_second"]:
                r["speedup_vs_batch_1"] = r["frames_per_second"] / base

    out = {"what": "batmobile.train's training step (batch assembly and upload, forward, forces, loss, double "
                   "backward, Adam, EMA), timed after warm-up between device synchronisations; "
                   "frames_per_second = steps x batch size / seconds",
           "device": device_name, "torch": torch.__version__, "dtype": a.dtype,
           "commit": commit_id(a.commit),
           "command": "python3 bench/accuracy/training_throughput.py " + " ".join(
               shlex.quote(x) for x in (argv if argv is not None else sys.argv[1:])),
           "data": data, "atoms_per_frame": sizes, "mean_edges_per_frame": edges, "force_weight": FORCE_WEIGHT,
           "quick": a.quick, "date": time.strftime("%Y-%m-%d"), "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
