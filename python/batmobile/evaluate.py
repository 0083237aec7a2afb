"""Evaluate a model file: python -m batmobile.evaluate MODEL.pt [--frames SOURCE ...] [--sets data_2/set.000]
[--plots DIR] [--json metrics.json] [--card card.json] [--device cuda]. Prints energy/force MAE and RMSE, writes
parity plots. --frames takes extended XYZ files or DeePMD directories, each optionally PATH@START:STOP
(batmobile/sources.py); without it, the DeePMD sets --sets under --data."""
import json
import os
import sys
import time

import numpy as np
import torch

from .cli import ArgumentParser, run
from .data import DEFAULT_ROOT, VALIDATION_SETS
from .io_utils import InputError, load_model_file
from .model import evaluate_structure
from .sources import prepare, read_sources


def predict(model, frames, dtype=torch.float64, device="cpu"):
    model = model.to(device=device, dtype=dtype)
    e_ref, e_pred, f_ref, f_pred, n_atoms = [], [], [], [], []
    for fr in frames:
        T = lambda x, dt=dtype: torch.as_tensor(x, dtype=dt, device=device)
        out = evaluate_structure(model, T(fr.positions), T(fr.species, torch.long), T(fr.cell),
                                 T(fr.sender, torch.long), T(fr.receiver, torch.long), T(fr.shifts, torch.long))
        e_ref.append(fr.energy)
        e_pred.append(out["energy"].item())
        f_ref.append(fr.forces.reshape(-1))
        f_pred.append(out["forces"].detach().cpu().numpy().reshape(-1))
        n_atoms.append(len(fr.species))
    return (np.array(e_ref), np.array(e_pred), np.concatenate(f_ref), np.concatenate(f_pred), np.array(n_atoms))


def stress_metrics(model, frames, dtype=torch.float64, device="cpu"):
    """Virial RMSE (meV/atom, over the 9 components) and stress RMSE (GPa, virial / volume) over the frames that
    carry a virial; {} when none does."""
    model = model.to(device=device, dtype=dtype)
    dw, ds = [], []
    for fr in frames:
        if fr.virial is None:
            continue
        T = lambda x, dt=dtype: torch.as_tensor(x, dtype=dt, device=device)
        out = evaluate_structure(model, T(fr.positions), T(fr.species, torch.long), T(fr.cell),
                                 T(fr.sender, torch.long), T(fr.receiver, torch.long), T(fr.shifts, torch.long),
                                 virial=True)
        d = out["virial"].detach().cpu().numpy() - fr.virial
        dw.append(d.reshape(-1) / len(fr.species))
        ds.append(d.reshape(-1) / abs(np.linalg.det(fr.cell)) * 160.21766)   # eV/A^3 -> GPa
    if not dw:
        return {}
    return {"virial_rmse_meV_per_atom": 1e3 * float(np.sqrt(np.mean(np.concatenate(dw) ** 2))),
            "stress_rmse_GPa": float(np.sqrt(np.mean(np.concatenate(ds) ** 2))), "stress_frames": len(dw)}


def metrics(e_ref, e_pred, f_ref, f_pred, n_atoms):
    de = (e_pred - e_ref) / n_atoms
    df = f_pred - f_ref
    return {"energy_mae_meV_per_atom": 1e3 * float(np.abs(de).mean()),
            "energy_rmse_meV_per_atom": 1e3 * float(np.sqrt((de ** 2).mean())),
            "force_mae_meV_per_A": 1e3 * float(np.abs(df).mean()),
            "force_rmse_meV_per_A": 1e3 * float(np.sqrt((df ** 2).mean()))}


def parity_plots(e_ref, e_pred, f_ref, f_pred, n_atoms, out_dir, prefix):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, x, y, unit in [("energy", e_ref / n_atoms, e_pred / n_atoms, "eV/atom"),
                             ("forces", f_ref, f_pred, "eV/A")]:
        fig, ax = plt.subplots(figsize=(4.5, 4.5))
        ax.scatter(x, y, s=3 if name == "forces" else 10, alpha=0.5)
        lo, hi = min(x.min(), y.min()), max(x.max(), y.max())
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        ax.set_xlabel(f"reference {name} [{unit}]")
        ax.set_ylabel(f"model {name} [{unit}]")
        rmse = np.sqrt(np.mean((y - x) ** 2))
        ax.set_title(f"{name}: RMSE {1e3 * rmse:.2f} m{unit}")
        fig.tight_layout()
        path = os.path.join(out_dir, f"{prefix}parity_{name}.png")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv=None):
    p = ArgumentParser(description=__doc__)
    p.add_argument("model", help="model file (batmobile-export)")
    p.add_argument("--data", default=DEFAULT_ROOT)
    p.add_argument("--sets", nargs="+", default=list(VALIDATION_SETS))
    p.add_argument("--frames", nargs="+", default=None, metavar="SOURCE",
                   help="extended XYZ files or DeePMD directories, each optionally PATH@START:STOP")
    for kind in ("energy", "forces"):
        p.add_argument(f"--{kind}-key", default=kind, help=f"extended XYZ key of the {kind}")
    p.add_argument("--plots", default=None, help="directory for parity PNGs")
    p.add_argument("--prefix", default="", help="file-name prefix of the PNGs")
    p.add_argument("--json", default=None, help="write the metrics here")
    p.add_argument("--card", default=None, help="write a model card (python/README.md) here")
    p.add_argument("--device", default="cpu", help="cpu, cuda, ... (float64 everywhere)")
    a = p.parse_args(argv)
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        raise InputError(f"--device {a.device}: torch sees no CUDA device here; use --device cpu")
    model = load_model_file(a.model)
    if not a.frames and not os.path.isdir(a.data):
        raise InputError(f"--data {a.data}: no such directory; without --frames the DeePMD sets --sets are read under "
                         f"--data (the bundled water data: the repository's data/water/dft_train, or set "
                         f"BATMOBILE_WATER_DATA); or give --frames")
    specs = a.frames or [os.path.join(a.data, s) for s in a.sets]
    frames = prepare(read_sources(specs, {"energy_key": a.energy_key, "forces_key": a.forces_key}),
                     model.hp.species, model.hp.r_c)
    t0 = time.time()
    res = predict(model, frames, device=a.device)
    m = dict(metrics(*res), **stress_metrics(model, frames, device=a.device))
    print(f"{len(frames)} frames ({time.time() - t0:.1f} s): " + ", ".join(f"{k} {v:.3f}" for k, v in m.items()))
    if a.plots:
        for path in parity_plots(*res, a.plots, a.prefix):
            print("wrote", path)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(m, f, indent=1)
    if a.card:
        header = model.header
        training = header.get("training", {}) or {}
        where = "" if a.frames else f"{a.data} "
        card = {"data": f"{where}(train: {' + '.join(training.get('train_sets') or ['data_0/set.000', 'data_1/set.000', 'data_1/set.001'])}; validation: {' + '.join(a.frames or a.sets)})",
                "train_frames": training.get("train_frames"), "validation_frames": len(frames),
                "validation": {k: m[k] for k in ("energy_rmse_meV_per_atom", "force_rmse_meV_per_A",
                                                 "force_mae_meV_per_A")},
                "validation_all_metrics": m, "hyperparameters": header["hyperparameters"],
                "train_command": training.get("train_command"), "train_seconds": training.get("elapsed_seconds"),
                "train_steps": training.get("step"), "device": training.get("device")}
        with open(a.card, "w") as f:
            json.dump(card, f, indent=1)
        print("wrote", a.card)


if __name__ == "__main__":
    sys.exit(run(main))
