#!/usr/bin/env python3
"""LAMMPS-level tests of committees in pair_style batmobile (pair_coeff * * m1.pt m2.pt m3.pt O H, out_freq/out_file).

    run_committee_test.py --build LAMMPS_BUILD_DIR --ref REFDIR TEST

REFDIR as for run_batmobile_test.py (make_lammps_reference.py: model.pt and water.data). The two further members
are the reference model with its weights perturbed (seeded), written next to a run's files.
Tests:
  values[_kk]  run 0: the model-deviation line and the per-atom deviation (fix property/atom d_batmobile_devi_f)
           equal what the members evaluated one at a time give (numpy, DeePMD-kit's definitions); the committee's
           energy and forces are those of the first model alone; 1, 2 and 4 MPI ranks agree (_kk: batmobile/kk
           on 1 and 2 ranks)
  values_device  values with pair_style batmobile device cuda (the styles' CUDA Kokkos) on 1 and 2 ranks
  steps[_kk]   a 6-step NVE run with out_freq 3 writes steps 0, 3, 6 only and follows the first model alone bit for bit
           (to 1e-9 relative with batmobile/kk on a GPU, whose neighbour order changes from run to run)
  errors   members with other species or another cutoff, a missing or corrupt member, out_freq <= 0, out_file in a
           directory that does not exist (a LAMMPS error at pair_style on every rank, no MPI_ABORT) or that cannot be
           opened (at the start of the run); and batmobile/kk
Exit codes: 0 pass, 1 fail, 77 skip (reason printed).
"""
import argparse
import os
import shutil
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
from run_batmobile_test import (NKTV2P, Env, fail, rel, require_device_cuda, run_lmp, skip, stopped_with,  # noqa: E402
                                thermo_rows)


def write_member(env, path, seed, scale=0.05, species=None, r_c=None):
    # r_c: a change of the cutoff (A)
    """The reference model with each weight multiplied by (1 + scale * N(0, 1)), through the product's exporter; other
    species names or cutoff where given. The reference file (tests/model's contract writer) keeps its
    hyperparameters in meta.<key> buffers."""
    import json
    import torch
    from batmobile.export import save_potential
    from batmobile.model import BatmobileModel, Hyperparameters
    buffers = dict(torch.jit.load(os.path.join(env.ref, "model.pt"), map_location="cpu").named_buffers())
    header = json.loads(bytes(buffers["meta.header_json"].tolist()).decode("utf-8"))
    numbers = {k[5:]: v.item() for k, v in buffers.items() if k.startswith("meta.") and k != "meta.header_json"}
    ints = ("L", "C", "T", "NB", "H", "A", "dk", "Hr")
    hp = Hyperparameters(species=list(header["species"]),
                         **{k: (int(v) if k in ints else v) for k, v in numbers.items()
                            if k in Hyperparameters.__dataclass_fields__})
    model = BatmobileModel(hp).double()
    model.load_state_dict({k: v for k, v in buffers.items() if not k.startswith("meta.")}, strict=True)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1 + scale * torch.randn(p.shape, generator=gen, dtype=p.dtype))
    if species is not None:
        model.hp.species = species
    if r_c is not None:
        model.hp.r_c = hp.r_c + r_c
    save_potential(model, path)
    return path


def script(env, models, style="batmobile", keywords="", run="run 0", dump_devi=True, dump_every=1):
    devi = "fix dv all property/atom d_batmobile_devi_f\n" if dump_devi else ""
    cols = "id fx fy fz" + (" d_batmobile_devi_f" if dump_devi else "")
    # a stock LAMMPS gets the styles from the plugin
    plugin = f"plugin load {env.vars.get('PLUGIN', '')}\n" if env.vars.get("BUILTIN") == "OFF" else ""
    return f"""{plugin}units metal
atom_style atomic
boundary p p p
read_data {os.path.join(env.ref, 'water.data')}
{devi}pair_style {style} {keywords}
pair_coeff * * {' '.join(models)} O H
neighbor 1.0 bin
compute pv all pressure NULL virial
variable W1 equal c_pv[1]*vol/{NKTV2P!r}
variable W2 equal c_pv[2]*vol/{NKTV2P!r}
variable W3 equal c_pv[3]*vol/{NKTV2P!r}
variable W4 equal c_pv[4]*vol/{NKTV2P!r}
variable W5 equal c_pv[5]*vol/{NKTV2P!r}
variable W6 equal c_pv[6]*vol/{NKTV2P!r}
thermo_style custom step pe v_W1 v_W2 v_W3 v_W4 v_W5 v_W6
thermo_modify format float %.17g
dump d all custom {dump_every} dump.txt {cols}
dump_modify d format float %.17g sort id
{run}
"""


def last_snapshot(path):
    """The rows of the last snapshot of a LAMMPS custom dump, as a float array."""
    lines = open(path).read().splitlines()
    start = max(k for k, l in enumerate(lines) if l.startswith("ITEM: ATOMS")) + 1
    return np.array([[float(v) for v in l.split()] for l in lines[start:]])


def evaluate(env, models, nranks=1, kokkos=False, **kw):
    _, log, tmp = run_lmp(env, script(env, models, **kw), nranks=nranks, kokkos=kokkos)
    row = thermo_rows(log)[-1]
    return {"energy": row["PotEng"], "virial": np.array([row[f"v_W{k}"] for k in range(1, 7)]),
            "dump": last_snapshot(os.path.join(tmp, "dump.txt")), "dir": tmp, "log": log}


def devi_rows(path):
    rows = [l.split() for l in open(path) if not l.startswith("#")]
    return np.array([[float(v) for v in r] for r in rows])


def expected_deviation(forces, virials, n_atoms):
    """DeePMD-kit's model deviation from K members' forces (K, N, 3) and virials (K, 6), written independently of
    the C++ (numpy std over members; the 9 tensor components from the 6 Voigt ones)."""
    eps_f = np.linalg.norm(np.std(forces, axis=0), axis=-1)
    W = np.array([[[v[0], v[3], v[4]], [v[3], v[1], v[5]], [v[4], v[5], v[2]]] for v in virials])
    eps_v = np.std(W.reshape(len(virials), 9), axis=0) / n_atoms
    return np.array([eps_v.max(), eps_v.min(), eps_v.mean(), eps_f.max(), eps_f.min(), eps_f.mean()]), eps_f


def members(env, tmp):
    return [os.path.join(env.ref, "model.pt"), write_member(env, os.path.join(tmp, "m1.pt"), 1),
            write_member(env, os.path.join(tmp, "m2.pt"), 2)]


def test_values(env, kokkos=False, device=False):
    if kokkos and not env.has_style("batmobile/kk"):
        skip("this LAMMPS build has no KOKKOS package")
    if device:
        require_device_cuda(env)
    tmp = tempfile.mkdtemp(prefix="bm_committee_")
    paths = members(env, tmp)
    alone = [evaluate(env, [p], dump_devi=False) for p in paths]
    forces = np.array([a["dump"][:, 1:4] for a in alone])
    virials = np.array([a["virial"] for a in alone])
    want, want_atom = expected_deviation(forces, virials, forces.shape[1])
    print(f"expected: devi_v max/min/avg {want[:3]}, devi_f max/min/avg {want[3:]}")
    if want[3] < 1e-4:
        fail("the perturbed members barely differ: the test would not see a wrong deviation")
    ok = True
    for nranks in ((1, 2) if kokkos or device else (1, 2, 4)):
        out = os.path.join(tmp, f"devi_{nranks}.out")
        got = evaluate(env, paths, nranks=nranks, kokkos=kokkos,
                       keywords=("device cuda " if device else "") + f"out_freq 10 out_file {out}")
        rows = devi_rows(out)
        if rows.shape != (1, 7) or rows[0, 0] != 0:
            fail(f"{nranks} ranks: expected one line for step 0 in {out}, got {rows.tolist()}")
        e_line = rel(rows[0, 1:], want)
        e_atom = rel(got["dump"][:, 4], want_atom)
        e_first = max(rel(got["dump"][:, 1:4], forces[0]), rel(got["energy"], alone[0]["energy"]))
        tol_line = 1e-6   # the file prints 7 significant digits
        on_gpu = device or (kokkos and env.vars.get("BACKEND") == "cuda")
        tol = 1e-9 if on_gpu else 1e-10  # GPU sums in another order
        good = e_line <= tol_line and e_atom <= tol and e_first <= tol
        print(f"  {nranks} rank(s): deviation line rel err {e_line:.2e} (tol {tol_line:g}), per-atom {e_atom:.2e}, "
              f"energy/forces vs first model alone {e_first:.2e}: {'ok' if good else 'FAIL'}")
        ok &= good
        if nranks == 1 and "committee of 3 models (model deviation every 10 steps" not in got["log"]:
            fail("the launch line does not echo the committee settings")
    return ok


def test_steps(env, kokkos=False):
    if kokkos and not env.has_style("batmobile/kk"):
        skip("this LAMMPS build has no KOKKOS package")
    tmp = tempfile.mkdtemp(prefix="bm_committee_")
    paths = members(env, tmp)
    out = os.path.join(tmp, "devi.out")
    md = "velocity all create 300 4 loop geom\nfix nve all nve\ntimestep 0.0005\nthermo 1\nrun 6"
    com = evaluate(env, paths, kokkos=kokkos, keywords=f"out_freq 3 out_file {out}", run=md, dump_devi=False,
                   dump_every=6)
    one = evaluate(env, paths[:1], kokkos=kokkos, run=md, dump_devi=False, dump_every=6)
    steps = devi_rows(out)[:, 0].tolist()
    if kokkos and env.vars.get("BACKEND") == "cuda":
        # LAMMPS's GPU neighbour lists order neighbours differently from run to run: two GPU runs agree to rounding
        diff = max(rel(com["dump"], one["dump"]), rel(com["energy"], one["energy"]))
        same = diff <= 1e-9
        print(f"  deviation written at steps {steps}; trajectory vs the first model alone: max rel diff {diff:.2e} "
              f"(tol 1e-9, GPU build)")
    else:
        same = np.array_equal(com["dump"], one["dump"]) and com["energy"] == one["energy"]
        print(f"  deviation written at steps {steps}; trajectory identical to the first model alone: {same}")
    return steps == [0.0, 3.0, 6.0] and same


def test_errors(env):
    tmp = tempfile.mkdtemp(prefix="bm_committee_")
    ref = os.path.join(env.ref, "model.pt")
    swapped = write_member(env, os.path.join(tmp, "swapped.pt"), 3, species=["H", "O"])
    short = write_member(env, os.path.join(tmp, "short.pt"), 4, r_c=-0.5)
    corrupt = os.path.join(tmp, "corrupt.pt")
    with open(corrupt, "wb") as f:
        f.write(os.urandom(4096))
    cases = [
        ("species", [ref, swapped], "", "has species H O but the first model"),
        ("cutoff", [ref, short], "", "must share their cutoff"),
        ("missing", [ref, os.path.join(tmp, "nope.pt")], "", "is not a readable model file"),
        ("corrupt", [ref, corrupt], "", "committee member"),
        ("out_freq 0", [ref, ref], "out_freq 0", "out_freq must be a positive number of steps"),
        ("out_freq -5", [ref, ref], "out_freq -5", "out_freq must be a positive number of steps"),
        ("out_freq value", [ref, ref], "out_freq", "'out_freq' needs a value"),
    ]
    ok = True
    for name, models, kw, message in cases:
        rc, out, _ = run_lmp(env, script(env, models, keywords=kw, dump_devi=False), expect_fail=True)
        ok &= stopped_with(name, rc, out, message)
    # out_file in a directory that does not exist: stopped at pair_style, naming the directory, on every rank
    missing = os.path.join(tmp, "no_such_dir")
    devi = os.path.join(missing, "devi.out")
    where = f"out_file '{devi}': its directory '{missing}' does not exist"
    runs = [("out_file dir", "batmobile", {}), ("out_file dir, 2 ranks", "batmobile", dict(nranks=2))]
    if env.has_style("batmobile/kk"):
        runs.append(("out_file dir (kk)", "batmobile/kk", dict(kokkos=True)))
    for name, style, kw in runs:
        if kw.get("nranks", 1) > 1 and shutil.which("mpirun") is None:
            continue
        rc, out, _ = run_lmp(env, script(env, [ref, ref], keywords=f"out_file {devi}", dump_devi=False),
                             expect_fail=True, **kw)
        good = stopped_with(name, rc, out, f"ERROR: pair_style {style}: {where}") and "MPI_ABORT" not in out
        ok &= good and "Step" not in out and not os.path.exists(missing)
    # out_file that cannot be opened (here: it is a directory): stopped when the run starts, on every rank
    for name, kw in (("out_file unwritable", {}), ("out_file unwritable, 2 ranks", dict(nranks=2))):
        if kw.get("nranks", 1) > 1 and shutil.which("mpirun") is None:
            continue
        rc, out, _ = run_lmp(env, script(env, [ref, ref], keywords=f"out_file {tmp}", dump_devi=False),
                             expect_fail=True, **kw)
        ok &= stopped_with(name, rc, out, f"ERROR: pair_style batmobile: out_file '{tmp}': cannot open the "
                           "model-deviation file for writing") and "MPI_ABORT" not in out
    if env.has_style("batmobile/kk"):
        rc, out, _ = run_lmp(env, script(env, [ref, swapped], dump_devi=False), kokkos=True, expect_fail=True)
        ok &= stopped_with("species (kk)", rc, out, "pair_coeff batmobile/kk: committee member")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="")
    ap.add_argument("--ref", required=True)
    ap.add_argument("test", choices=["values", "values_kk", "values_device", "steps", "steps_kk", "errors"])
    a = ap.parse_args()
    env = Env(a.build, a.ref)
    try:
        import torch  # noqa: F401
    except ImportError:
        skip("the members are written with torch, which this python lacks")
    tests = {"values": test_values, "values_kk": lambda e: test_values(e, kokkos=True),
             "values_device": lambda e: test_values(e, device=True), "steps": test_steps,
             "steps_kk": lambda e: test_steps(e, kokkos=True), "errors": test_errors}
    ok = tests[a.test](env)
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
