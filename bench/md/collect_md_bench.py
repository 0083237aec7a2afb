#!/usr/bin/env python3
"""Collects the LAMMPS MD benchmark (run_md_bench.sh) and times the PyTorch reference model on the same boxes.

usage: collect_md_bench.py RAW POTENTIAL DATAFILE OUT.json [--reference-max-atoms N] [--e3nn-max-atoms N]
       [--command TEXT]
RAW lines: "atoms rc steps_per_second peak_MiB baseline_MiB precision" (one per run, from run_md_bench.sh; the
consecutive runs of a repeated case form one case: steps_per_second is their mean, steps_per_second_runs each run's).
md_launch.txt beside RAW, where present, gives each case's "launch": how the pair style's edge kernels launched.
The reference timing is one energy+forces evaluation (eager autograd, float32, GPU when present) of the same
replicated box, median of 5 after 2 warm-ups; cases above --reference-max-atoms, or that run out of memory, get null.
The e3nn peer (e3nn_steps_per_second, e3nn_peak_device_bytes, speedup_vs_e3nn): a NequIP-style e3nn model of the
potential's size (bench/accuracy/e3nn_train.py's architecture with the potential's C, L, T, NB, H, Hr and r_c; random
weights: the timing does not depend on them), energy + forces by autograd in float32 on the same box, its neighbour
list built once and not timed, median of 5 after 2 warm-ups; once per box size up to --e3nn-max-atoms (needs e3nn).
OUT.json starts with "provenance": the commit, the machine and the command that produced it.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))


def group_runs(lines):
    """The raw lines as runs, consecutive runs of the same (atoms, precision) grouped: one group per case."""
    groups = []
    for line in lines:
        if not line.strip():
            continue
        n, rc, sps, peak, base, prec = line.split()
        run = {"atoms": int(n), "rc": int(rc), "sps": float(sps) if sps != "nan" else None, "peak": float(peak),
               "base": float(base), "precision": prec}
        if groups and (groups[-1][0]["atoms"], groups[-1][0]["precision"]) == (run["atoms"], prec):
            groups[-1].append(run)
        else:
            groups.append([run])
    return groups


def read_launches(lines):
    """run_md_bench.sh's md_launch.txt ("atoms precision LINE": the style's launch line of each run) as
    {(atoms, precision): LINE}, the first run's line of each case (repeats launch alike); empty lines skipped."""
    out = {}
    for line in lines:
        parts = line.split(maxsplit=2)
        if len(parts) == 3:
            out.setdefault((int(parts[0]), parts[1]), parts[2])
    return out


def summarize(group):
    """One case from its runs: steps/s the mean of the runs (None if any run failed), the largest peak memory."""
    n, prec = group[0]["atoms"], group[0]["precision"]
    rc = max((r["rc"] for r in group), key=abs)  # (any failed run fails the case)
    runs = [r["sps"] for r in group]
    ok = [v for v in runs if v is not None]
    sps = round(sum(ok) / len(ok), 3) if ok and rc == 0 else None
    peak = max(r["peak"] for r in group)
    case = {"atoms": n, "precision": prec, "exit_code": rc, "steps_per_second": sps,
            "atom_steps_per_second": sps * n if sps else None,
            "peak_device_bytes": int(peak * 2**20) if peak > 0 else None,
            "baseline_device_bytes": int(group[0]["base"] * 2**20), "reference_steps_per_second": None}
    if len(group) > 1:
        case["steps_per_second_runs"] = runs
        if len(ok) > 1:
            case["steps_per_second_min_max"] = [min(ok), max(ok)]
    return case


def source_commit(root):
    """Short commit of the checkout at root: BATMOBILE_COMMIT, else root/.commit (a device copy's .git may not be
    the code that runs), else git's HEAD, else 'unknown'."""
    if os.environ.get("BATMOBILE_COMMIT"):
        return os.environ["BATMOBILE_COMMIT"]
    try:
        with open(os.path.join(root, ".commit")) as f:
            commit = f.read().strip()
        if commit:
            return commit
    except OSError:
        pass
    try:
        out = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def provenance(commit, device, cpu_cores, command):
    """The result file's provenance record: which code ran, where, and how."""
    return {"commit": commit, "machine": f"{device}, {cpu_cores} CPU cores", "command": command}


def read_lammps_data(path):
    """216-water data file (atom_style atomic, orthogonal box): positions, types (1-based), box lengths."""
    lines = open(path).read().splitlines()
    lo_hi, atoms, i = {}, [], 0
    while i < len(lines):
        tok = lines[i].split()
        if len(tok) >= 4 and tok[2] in ("xlo", "ylo", "zlo"):
            lo_hi[tok[2][0]] = (float(tok[0]), float(tok[1]))
        if tok and tok[0] == "Atoms":
            i += 2
            while i < len(lines) and lines[i].strip():
                t = lines[i].split()
                atoms.append((int(t[0]), int(t[1]), float(t[2]), float(t[3]), float(t[4])))
                i += 1
            break
        i += 1
    atoms.sort()
    x = np.array([a[2:] for a in atoms])
    types = np.array([a[1] for a in atoms])
    box = np.array([lo_hi[k][1] - lo_hi[k][0] for k in "xyz"])
    return x, types, box


def replicate(x, types, box, n):
    shifts = np.array([[i, j, k] for i in range(n[0]) for j in range(n[1]) for k in range(n[2])]) * box
    X = (x[None, :, :] + shifts[:, None, :]).reshape(-1, 3)
    return X, np.tile(types, len(shifts)), box * np.array(n)


def edges(X, box, r_c):
    """Full edge list (sender, receiver, integer shifts). Large boxes (every side >= 2 r_c) use a periodic
    k-d tree (scipy) instead of the reference's O(N^2) search, which needs N^2 x 24 bytes of host memory."""
    from batmobile.neighbors import neighbor_list
    if len(X) < 5000 or np.any(box < 2 * r_c):
        return neighbor_list(X, np.diag(box), r_c)
    from scipy.spatial import cKDTree
    Xw = X - np.floor(X / box) * box
    pairs = cKDTree(Xw, boxsize=box).query_pairs(r_c, output_type="ndarray")
    i, j = np.concatenate([pairs[:, 0], pairs[:, 1]]), np.concatenate([pairs[:, 1], pairs[:, 0]])
    d = Xw[j] - Xw[i]
    S = -np.round(d / box).astype(np.int64)          # minimum image: x_j + S box is the neighbour of x_i
    S += (np.floor(X / box)[i] - np.floor(X / box)[j]).astype(np.int64)  # back to the unwrapped positions
    order = np.argsort(i, kind="stable")
    return j[order], i[order], S[order]


def reference_steps_per_second(pot, X, types, box):
    import torch
    import batmobile
    from batmobile.model import evaluate_structure
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = batmobile.load_potential(pot).to(device=dev, dtype=torch.float32)
    cell = np.diag(box)
    sender, receiver, shifts = edges(X, box, model.hp.r_c)
    args = [torch.tensor(v, device=dev) for v in (X, types - 1, cell, sender, receiver, shifts)]
    args[0] = args[0].float(); args[2] = args[2].float()
    times = []
    for it in range(7):
        if dev.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        out = evaluate_structure(model, *args)
        out["forces"].sum().item()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        if it >= 2:
            times.append(time.perf_counter() - t)
    return 1.0 / float(np.median(times))


def e3nn_peer(pot, X, types, box):
    """(steps/s, peak device bytes) of the same-size e3nn model on this box (see the module docstring)."""
    import torch
    import batmobile
    sys.path.insert(0, os.path.join(HERE, "..", "accuracy"))
    from e3nn_train import build_e3nn_model, time_energy_forces
    hp = batmobile.load_potential(pot).hp
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(0)
    model = build_e3nn_model(len(hp.species), hp.C, hp.L, hp.T, hp.NB, hp.r_c, hp.H, hp.Hr, hp.avg_num_neighbors,
                             1.0, [0.0] * len(hp.species)).to(device=dev, dtype=torch.float32)
    t = time_energy_forces(model, X, types - 1, np.diag(box), hp.r_c, torch.float32, dev, warmup=2, reps=5)
    del model
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    return t["evaluations_per_second"], t["peak_device_bytes"]


def add_e3nn(case, pot, box_args, cache):
    """Adds the e3nn peer's columns to a case (computed once per atom count; an error is recorded, not raised)."""
    n = case["atoms"]
    if n not in cache:
        try:
            cache[n] = e3nn_peer(pot, *box_args)
        except Exception as e:  # no e3nn, or out of memory: the case records why
            cache[n] = str(e)[:200]
    if isinstance(cache[n], str):
        case["e3nn_error"] = cache[n]
        return
    case["e3nn_steps_per_second"], case["e3nn_peak_device_bytes"] = cache[n]
    if case["steps_per_second"]:
        case["speedup_vs_e3nn"] = case["steps_per_second"] / cache[n][0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw"); ap.add_argument("potential"); ap.add_argument("data"); ap.add_argument("out")
    ap.add_argument("--reference-max-atoms", type=int, default=100000)
    ap.add_argument("--e3nn-max-atoms", type=int, default=100000,
                    help="largest box timed with the same-size e3nn peer (0: none)")
    ap.add_argument("--fit-failed", type=int, default=0,
                    help="atoms of the first box of the BATMOBILE_MD_FIT search that failed (0: none failed / no search)")
    ap.add_argument("--command", default="bench/md/run_md_bench.sh", help="the command line that ran the benchmark")
    a = ap.parse_args()
    x, types, box = read_lammps_data(a.data)
    reps = {648: (1, 1, 1), 10368: (2, 2, 4), 97200: (5, 5, 6)}
    device = "unknown"
    try:
        import torch
        device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    except Exception:
        pass
    cases, max_ok, e3nn_cache = [], 0, {}
    launch_file = os.path.join(os.path.dirname(os.path.abspath(a.raw)), "md_launch.txt")
    launches = read_launches(open(launch_file).read().splitlines()) if os.path.isfile(launch_file) else {}
    for group in group_runs(open(a.raw).read().splitlines()):
        case = summarize(group)
        if (case["atoms"], case["precision"]) in launches:
            case["launch"] = launches[(case["atoms"], case["precision"])]
        n, prec, rc, sps = case["atoms"], case["precision"], case["exit_code"], case["steps_per_second"]
        if rc == 0 and sps:
            max_ok = max(max_ok, n)
        if n in reps and n <= a.reference_max_atoms and prec == "single":  # reference runs float32
            try:
                case["reference_steps_per_second"] = reference_steps_per_second(a.potential, *replicate(x, types, box, reps[n]))
            except Exception as e:  # out of memory is a result, not a crash
                case["reference_error"] = str(e)[:200]
        if sps and case["reference_steps_per_second"]:
            case["speedup_vs_reference"] = sps / case["reference_steps_per_second"]
        if n in reps and n <= a.e3nn_max_atoms and prec != "double":
            add_e3nn(case, a.potential, replicate(x, types, box, reps[n]), e3nn_cache)
        cases.append(case)
    if a.fit_failed:
        note = (f"max_atoms_single_gpu is the largest box that ran; the next one tried, {a.fit_failed} atoms, "
                "failed (see its log): the limit lies between them")
    else:
        note = "max_atoms_single_gpu is the largest case that ran, not a searched limit"
    # the input's newton setting (run_md_bench.sh's BATMOBILE_MD_NEWTON): off skips LAMMPS's reverse communication
    doc = {"provenance": provenance(source_commit(os.path.join(HERE, "..", "..")), device, os.cpu_count(), a.command),
           "device": device, "potential": os.path.basename(a.potential),
           "lammps_newton": os.environ.get("BATMOBILE_MD_NEWTON", "unknown"), "cases": cases,
           "max_atoms_single_gpu": max_ok, "first_failed_atoms": a.fit_failed or None, "note": note}
    json.dump(doc, open(a.out, "w"), indent=1)
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
