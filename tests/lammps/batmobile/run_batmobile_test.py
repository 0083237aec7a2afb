#!/usr/bin/env python3
"""LAMMPS-level tests of pair_style batmobile (and batmobile/kk), run by CTest through the built lmp.

    run_batmobile_test.py --build LAMMPS_BUILD_DIR --ref REFDIR [--model c2] TEST [ARGS]

REFDIR is written by make_lammps_reference.py (model file, water data, float64 PyTorch reference).
--model c2: the reference test with the product-basis model (correlation 2, format version 3, three layers: model_c2.pt
and ref_water_c2.txt) instead of model.pt (correlation 1, format version 2, two layers); --model l3: with the model of
degree L = 3 (three layers: model_l3.pt, ref_water_l3.txt).
Exit codes: 0 pass, 1 fail, 77 skip (reason printed).
Tests:
  reference VARIANT   run 0 on the water box vs the PyTorch reference: energy, forces, pe/atom, virial,
                      stress/atom; sum of pe/atom == pe; the pair_coeff line names the model's format version,
                      L, C, T and correlation. VARIANT: double | single | reference_kernels | kk | kk_single |
                      kk_reference_kernels | kk_mpi2 | mpi2 | mpi4 | gpu | gpu_single | gpu_reference (-k on g 1)
                      | device_cuda | device_cuda_single | device_cuda_mpi2 (pair_style batmobile device cuda: a build
                      whose styles' Kokkos has CUDA, e.g. scripts/build_lammps.sh --lammps 2025 --backend cuda)
  ranks               run 0 on 1, 2 and 4 MPI ranks agree to 1e-10 (relative)
  kk                  batmobile/kk (host) agrees with batmobile to 1e-10
  kk_comm             batmobile/kk on 1, 2, 4 ranks with its own device swap exchange (ghost_comm device) and with
                      LAMMPS's pair communication (ghost_comm lammps, comm_style tiled) agrees with batmobile and
                      with each other; `compute pair` counts which path the exchanges took and how each swap went
  kk_md N [GHOST_COMM] 40-step trajectory of batmobile/kk on N ranks follows batmobile (ghost_comm device|lammps)
  device_md N         40-step trajectory of batmobile device cuda on N ranks follows batmobile on the CPU
  no_gpu              a CUDA build of the styles where the process sees no GPU stops with its message
  fd                  finite-difference forces and pressure (strain derivative) through LAMMPS
  errors              every bad input stops with its documented message (pair_coeff, pair_style keywords, ...)
  keywords            batmobile/kk's distance_check, mpi_buffers (2 ranks) and graph_team: same results whatever
                      their value, and the launch line echoes every setting in effect
  checksum            the model file's checksum: format version 2 verified over header and weights (logged with the
                      Batmobile version that wrote it); version 1 with the weights-only checksum or none (a warning,
                      runs); one flipped weight bit or the species order swapped in the header (pair_coeff stops),
                      for batmobile and batmobile/kk
  nve                 short NVE run of the water box; reports the energy drift
  slab [kk]           water slab with vacuum on 4 ranks (empty ranks join the feature exchange) vs reference;
                      kk: batmobile/kk through its device swap exchange
  hybrid              pair_style hybrid/overlay batmobile (O NULL) + zero vs the model on the O atoms alone
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

SKIP = 77
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
NKTV2P = 1.6021765e6  # metal units: eV/A^3 -> bar
with open(os.path.join(REPO, "VERSION")) as _f:
    VERSION = _f.read().strip()  # the Batmobile version the styles were built as (the launch line says it)


def skip(msg):
    print("SKIP:", msg)
    sys.exit(SKIP)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


# the reference models of make_lammps_reference.py: (model file, reference set ref_<name>.txt, what the pair_coeff line
# says of it after the written-by part)
MODELS = {
    "default": ("model.pt", "water", "format version 2", "species O H, cutoff 4 A; L 2, C 8, T 2, correlation 1"),
    "c2": ("model_c2.pt", "water_c2", "format version 3", "species O H, cutoff 4 A; L 2, C 8, T 3, correlation 2"),
    "l3": ("model_l3.pt", "water_l3", "format version 2", "species O H, cutoff 4 A; L 3, C 8, T 3, correlation 1"),
}


class Env:
    def __init__(self, build, ref, model="default"):
        envf = os.path.join(build or "", "batmobile-build.env")
        if not build or not os.path.isfile(envf):
            skip(f"no LAMMPS build (batmobile-build.env) in '{build}'; run scripts/build_lammps.sh")
        self.vars = dict(l.strip().split("=", 1) for l in open(envf) if "=" in l)
        self.lmp = self.vars["LMP"]
        self.ref = ref
        self.model, self.ref_name, self.model_version, self.model_summary = MODELS[model]
        if not os.path.isfile(os.path.join(ref, self.model)):
            fail(f"no reference data ({self.model}) in {ref}")

    @property
    def stock(self):
        """A stock LAMMPS: every run loads the styles from batmobileplugin.so (run_lmp)."""
        return self.vars.get("BUILTIN") == "OFF"

    def has_style(self, name):
        if self.stock:  # the plugin carries batmobile, and batmobile/kk where LAMMPS has KOKKOS
            return os.path.isfile(self.vars.get("PLUGIN", "")) and \
                (not name.endswith("/kk") or self.vars.get("KOKKOS") == "ON")
        out = subprocess.run([self.lmp, "-h"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
        return re.search(rf"\b{re.escape(name)}\b", out) is not None

    def plugin_prefix(self, script):
        """`plugin load` before a script for a stock LAMMPS (unless the script loads the plugin itself)."""
        if self.stock and "plugin load" not in script:
            return f"plugin load {self.vars.get('PLUGIN', '')}\n"
        return ""


def runs_on_gpu(env, kokkos=False, gpu=False):
    """Whether a run with these run_lmp arguments is on the GPU: a CUDA build runs every /kk style there."""
    return bool(gpu or (kokkos and env.vars.get("BACKEND") == "cuda"))


def pin_double_precision(script):
    """The script with `precision double` after the batmobile style name of every pair_style line that names no
    precision: on a GPU the styles' default is precision mixed, and the tests compare with float64 references."""
    out = []
    for line in script.splitlines():
        words = line.split()
        if words[:1] == ["pair_style"] and "precision" not in words:
            for k, w in enumerate(words):
                if w in ("batmobile", "batmobile/kk"):
                    line = " ".join(words[:k + 1] + ["precision", "double"] + words[k + 1:])
                    break
        out.append(line)
    return "\n".join(out) + "\n"


def run_lmp(env, script, nranks=1, kokkos=False, threads=1, expect_fail=False, gpu=False, kokkos_pk=(), extra_env=None,
            default_precision=False):
    """default_precision: a GPU run keeps the styles' default precision (else it is pinned to double)."""
    if (runs_on_gpu(env, kokkos, gpu) or "device cuda" in script) and not default_precision:
        script = pin_double_precision(script)
    script = env.plugin_prefix(script) + script
    tmp = tempfile.mkdtemp(prefix="bm_lmp_")
    with open(os.path.join(tmp, "in.test"), "w") as f:
        f.write(script)
    cmd = [env.lmp, "-in", "in.test", "-log", "log.lammps", "-screen", "none" if not expect_fail else "none"]
    if runs_on_gpu(env, kokkos, gpu):
        cmd += ["-k", "on", "g", "1", "-sf", "kk", "-pk", "kokkos", "newton", "on", "neigh", "half", *kokkos_pk]
    elif kokkos:
        cmd += ["-k", "on", "t", str(threads), "-sf", "kk", "-pk", "kokkos", "newton", "on", "neigh", "half",
                *kokkos_pk]
    if nranks > 1:
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            skip("mpirun not found")
        pre = [mpirun, "-np", str(nranks), "--oversubscribe"]
        if os.geteuid() == 0:
            pre.append("--allow-run-as-root")
        cmd = pre + cmd
    envv = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="false", **(extra_env or {}))
    p = subprocess.run(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900,
                       env=envv)
    log = open(os.path.join(tmp, "log.lammps")).read() if os.path.isfile(os.path.join(tmp, "log.lammps")) else ""
    if p.returncode != 0 and not expect_fail:
        print(log[-3000:], p.stdout[-3000:])
        fail(f"lmp failed ({p.returncode}): {' '.join(cmd)}")
    return p.returncode, log + p.stdout, tmp


def base_script(env, data="water.data", style="batmobile", precision=None, species="O H", extra_pre="",
                kernels=None, ghost_comm=None, keywords="", model="model.pt"):
    """keywords: more pair_style keywords (batmobile/kk's distance_check, mpi_buffers, graph_team)."""
    ps = f"pair_style {style}" + (f" precision {precision}" if precision else "") + \
        (f" kernels {kernels}" if kernels else "") + (f" ghost_comm {ghost_comm}" if ghost_comm else "") + \
        (f" {keywords}" if keywords else "")
    return f"""units metal
atom_style atomic
boundary p p p
{extra_pre}
read_data {os.path.join(env.ref, data)}
{ps}
pair_coeff * * {os.path.join(env.ref, model)} {species}
neighbor 1.0 bin
"""


OBSERVE = """compute pe all pe/atom
compute st all stress/atom NULL virial
compute pv all pressure NULL virial
variable W1 equal c_pv[1]*vol/{n}
variable W2 equal c_pv[2]*vol/{n}
variable W3 equal c_pv[3]*vol/{n}
variable W4 equal c_pv[4]*vol/{n}
variable W5 equal c_pv[5]*vol/{n}
variable W6 equal c_pv[6]*vol/{n}
compute sumpe all reduce sum c_pe
thermo_style custom step pe c_sumpe v_W1 v_W2 v_W3 v_W4 v_W5 v_W6
thermo_modify format float %.17g
dump d all custom 1 dump.txt id fx fy fz c_pe c_st[1] c_st[2] c_st[3] c_st[4] c_st[5] c_st[6]
dump_modify d format float %.17g sort id
run 0
""".replace("{n}", repr(NKTV2P))


def dump_rows(path):
    """The rows of a one-snapshot LAMMPS custom dump (after its ITEM: ATOMS line), as a float array."""
    lines = open(path).read().splitlines()
    start = lines.index(next(l for l in lines if l.startswith("ITEM: ATOMS"))) + 1
    return np.array([[float(v) for v in l.split()] for l in lines[start:]])


def thermo_rows(log):
    rows, header = [], None
    for line in log.splitlines():
        s = line.split()
        if s and s[0] == "Step":
            header = s
            continue
        if header and len(s) == len(header):
            try:
                rows.append(dict(zip(header, map(float, s))))
            except ValueError:
                header = None
    return rows


def observe(env, **kw):
    plugin = kw.pop("plugin", False)
    nranks = kw.pop("nranks", 1)
    kokkos = kw.pop("kokkos", False)
    threads = kw.pop("threads", 1)
    gpu = kw.pop("gpu", False)
    kokkos_pk = kw.pop("kokkos_pk", ())
    exchanges = kw.pop("exchanges", False)  # batmobile/kk's exchange counts (compute pair; pair_batmobile_kokkos.h)
    default_precision = kw.pop("default_precision", False)
    pre = f"plugin load {env.vars.get('PLUGIN', '')}\n" if plugin else ""
    obs = OBSERVE
    if exchanges:
        obs = obs.replace("thermo_style custom step pe c_sumpe", "compute bmx all pair batmobile\n"
                          "thermo_style custom step pe c_sumpe " + KK_COUNT_COLUMNS)
    _, log, tmp = run_lmp(env, pre + base_script(env, **kw) + obs, nranks=nranks, kokkos=kokkos,
                          threads=threads, gpu=gpu, kokkos_pk=kokkos_pk, default_precision=default_precision)
    row = thermo_rows(log)[-1]
    d = dump_rows(os.path.join(tmp, "dump.txt"))
    return {
        "energy": row["PotEng"],
        "sum_pe_atom": row["c_sumpe"],
        "virial": np.array([row[f"v_W{k}"] for k in range(1, 7)]),
        "forces": d[:, 1:4],
        "atomic_energies": d[:, 4],
        "atomic_virial": -d[:, 5:11] / NKTV2P,
        "exchanges": kk_counts(row) if exchanges else None,
        "log": log,
    }


# batmobile/kk's exchange statistics (compute pair, pvector; pair_batmobile_kokkos.h), per evaluation, summed over
# ranks: exchanges through its own device swap exchange (forward, reverse) and through LAMMPS's pair communication
# (forward, reverse); the own exchange's swaps with the rank itself, with MPI on the device buffers, with MPI
# through host copies of the buffers.
KK_COUNTS = ("swap_fwd", "swap_rev", "lammps_fwd", "lammps_rev", "self", "mpi_direct", "mpi_staged")
KK_COUNT_COLUMNS = " ".join(f"c_bmx[{k}]" for k in range(1, len(KK_COUNTS) + 1))


def kk_counts(row):
    return dict(zip(KK_COUNTS, (int(row[f"c_bmx[{k}]"]) for k in range(1, len(KK_COUNTS) + 1))))


def expected_kk_counts(env, log, nranks, route, layers=2, data="water.data"):
    """What batmobile/kk's counters must read for one evaluation: each rank exchanges T-1 times each way; the own
    exchange replays CommBrick's swaps, 2 * need_d per dimension d with need_d = int(cutghost * p_d / L_d) + 1
    (CommBrick::setup, uniform periodic grid p_d, box length L_d), all with the rank itself where p_d == 1.
    mpi_direct / mpi_staged are left out: which one MPI swaps take depends on the build (see check_kk_counts)."""
    n = nranks * (layers - 1)
    zero = dict.fromkeys(KK_COUNTS, 0)
    if route == "images":
        return zero
    if route == "lammps":
        return dict(zero, lammps_fwd=n, lammps_rev=n)
    grid = [int(v) for v in re.search(r"(\d+) by (\d+) by (\d+) MPI processor grid", log).groups()]
    cut = float(re.search(r"master list distance cutoff = ([0-9.eE+-]+)", log).group(1))
    lo_hi = {}
    for line in open(os.path.join(env.ref, data)):
        m = re.match(r"\s*(\S+)\s+(\S+)\s+([xyz])lo\s+[xyz]hi", line)
        if m:
            lo_hi[m.group(3)] = float(m.group(2)) - float(m.group(1))
    need = [int(cut * p / lo_hi[d]) + 1 for p, d in zip(grid, "xyz")]
    self_swaps = 2 * sum(k for k, p in zip(need, grid) if p == 1)
    mpi_swaps = 2 * sum(need) - self_swaps
    # forward + reverse, every rank
    return dict(zero, swap_fwd=n, swap_rev=n, self=2 * n * self_swaps, mpi=2 * n * mpi_swaps)


def check_kk_counts(env, name, got, want, forced=False):
    """got (kk_counts) against want (expected_kk_counts): MPI swaps must all be direct on host builds; on GPU
    builds they are direct with GPU-aware MPI and staged through host buffers otherwise, never mixed; all staged
    with forced=True (mpi_buffers host)."""
    want = dict(want)
    mpi = want.pop("mpi", 0)
    got = dict(got)
    direct, staged = got.pop("mpi_direct"), got.pop("mpi_staged")
    want.pop("mpi_direct")
    want.pop("mpi_staged")
    if forced:
        allowed, how = [(0, mpi)], "staged"
    elif env.vars.get("BACKEND") == "cuda":
        allowed, how = [(mpi, 0), (0, mpi)], "direct or staged"
    else:
        allowed, how = [(mpi, 0)], "direct"
    ok = got == want and (direct, staged) in allowed
    print(f"  {name}: counts {dict(got, mpi_direct=direct, mpi_staged=staged)}; expected {want} and {mpi} MPI swaps "
          f"{how}: {'ok' if ok else 'WRONG'}")
    return ok


def same_results(env, name, a, b, precision=None, threads=1):
    """a == b bit for bit on host builds run with one thread per rank; else to 1e-12 (double) / 1e-5 (single)
    relative: LAMMPS's KOKKOS neighbour lists on a GPU, or on several host threads (atoms binned through atomic
    counters), order neighbours differently from run to run, so two such runs differ in the last bits."""
    keys = ("energy", "forces", "atomic_energies", "virial", "atomic_virial")
    if env.vars.get("BACKEND") != "cuda" and threads == 1:
        same = all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in keys)
        print(f"  {name}: {'bitwise identical' if same else 'DIFFERENT'}")
        return same
    tol = 1e-5 if precision == "single" else 1e-12
    worst = max(rel(a[k], b[k]) for k in keys)
    where = "GPU build" if env.vars.get("BACKEND") == "cuda" else f"{threads} threads"
    print(f"  {name}: max rel diff {worst:.3e} (tol {tol:g}, {where})")
    return worst <= tol


def read_ref(env, name="water"):
    ref = {}
    for line in open(os.path.join(env.ref, f"ref_{name}.txt")):
        s = line.split()
        ref[s[0]] = np.array([float(v) for v in s[2:]])
    ref["forces"] = ref["forces"].reshape(-1, 3)
    ref["atomic_virial"] = ref["atomic_virial"].reshape(-1, 6)
    return ref


def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def compare(name, got, want, tol):
    # every backend tallies the symmetrised edge virial -(r (x) g + g (x) r)/2 half per atom (docs/model.md), as
    # does the reference: all six per-atom components are compared
    ok = True
    for key in ("energy", "atomic_energies", "forces", "virial", "atomic_virial"):
        e = rel(got[key], want[key])
        print(f"  {name} {key:16s} rel err {e:.3e} (tol {tol:g})")
        ok &= e <= tol
    return ok


def test_reference(env, variant):
    kw = {}
    tol = 1e-9
    if variant in ("single", "kk_single"):
        kw["precision"] = "single"
        tol = 1e-4
    if variant.startswith("kk"):
        if not env.has_style("batmobile/kk"):
            skip("this lmp has no batmobile/kk")
        kw.update(kokkos=True, threads=2)
    if variant.startswith("gpu"):
        if env.vars.get("BACKEND") != "cuda":
            skip(f"LAMMPS build backend is {env.vars.get('BACKEND')}, not cuda: no GPU run")
        kw.update(gpu=True)
        if variant == "gpu_single":
            kw["precision"] = "single"
            tol = 1e-4
        if variant == "gpu_reference":
            kw["kernels"] = "reference"
    if variant.startswith("device_cuda"):
        require_device_cuda(env)
        kw.update(keywords="device cuda", plugin=env.vars.get("BUILTIN") == "OFF")
        if variant == "device_cuda_single":
            kw["precision"] = "single"
            tol = 1e-4
        if variant == "device_cuda_mpi2":
            kw["nranks"] = 2
    if variant.startswith("mpi"):
        kw["nranks"] = int(variant[3:])
    if variant.startswith("kk_mpi"):  # batmobile/kk on N ranks x 1 thread
        kw.update(nranks=int(variant[6:]), threads=1)
    if variant.endswith("reference_kernels"):  # the per-edge reference backend (the default is fused everywhere)
        kw["kernels"] = "reference"
    if variant.endswith("newton_off"):  # batmobile/kk on one rank: the model folds the images' forces itself
        kw["extra_pre"] = "newton off"
    got = observe(env, model=env.model, **kw)
    want = read_ref(env, env.ref_name)
    ok = compare(variant, got, want, tol)
    kk = kw.get("kokkos") or kw.get("gpu")
    ok &= check_model_line(env, got["log"], "batmobile/kk" if kk else "batmobile")
    device = "cuda" if variant.startswith("device_cuda") else None
    on_gpu = runs_on_gpu(env, kw.get("kokkos", False), kw.get("gpu", False)) or device == "cuda"
    ok &= check_launch_line(got["log"], "batmobile/kk" if kk else "batmobile", kw.get("kernels") == "reference",
                            on_gpu, default_settings(env, kk, on_gpu, kw.get("precision"), kw.get("kernels"), device))
    s = abs(got["sum_pe_atom"] - got["energy"]) / abs(got["energy"])
    print(f"  sum pe/atom vs pe rel diff {s:.3e}")
    ok &= s <= (1e-12 if tol < 1e-6 else 1e-6)
    if not ok:
        fail(f"reference comparison ({variant})")
    print("PASS")


def check_model_line(env, log, style):
    """pair_coeff logs the model file once with its format version, the Batmobile that wrote it (make_lammps_reference
    writes or upgrades every reference model with the package's exporter), species, cutoff and hyperparameters."""
    path = os.path.join(env.ref, env.model)
    want = f"; {env.model_version}, written by batmobile {VERSION}; {env.model_summary}"
    lines = [ln for ln in log.splitlines() if ln.startswith(f"pair_coeff {style}: model file '{path}': ")]
    ok = len(lines) == 1 and lines[0].endswith(want)
    print(f"  pair_coeff line {'ok' if ok else f'WRONG (expected one ending with {want!r})'}: {lines}")
    return ok


def test_mixed(env, variant):
    """precision mixed (the radial MLP's GEMM on f16 tensor cores, fp32 accumulation) against double with the
    bundled water model (H = 32: the f16 path applies) on the 216-water box: energy, forces, virial and their per-atom
    values within 3e-3 of the largest value (f16 keeps 11 significant bits of the GEMM's operands: about 1e-4 is
    expected, a misplaced fragment gives errors of order one), single within 1e-4. On a GPU the launch line must name
    "tensor cores f16"; on host back-ends mixed must warn and equal single bit for bit. Without the precision keyword
    a GPU runs mixed (launch line; the same results as precision mixed) and a host double (bit for bit). variant: kk
    (host threads; the GPU in a CUDA build), gpu (batmobile/kk on the GPU), device_cuda (pair_style batmobile device
    cuda)."""
    kw = dict(model=os.path.join(REPO, "potentials", "water_fast.pt"))
    if variant == "kk":
        if not env.has_style("batmobile/kk"):
            skip("this lmp has no batmobile/kk")
        kw.update(kokkos=True, threads=1)  # (one thread: the bitwise comparisons below need run-to-run equal lists)
    elif variant == "gpu":
        if env.vars.get("BACKEND") != "cuda":
            skip(f"LAMMPS build backend is {env.vars.get('BACKEND')}, not cuda: no GPU run")
        kw.update(gpu=True)
    else:
        require_device_cuda(env)
        kw.update(keywords="device cuda", plugin=env.vars.get("BUILTIN") == "OFF")
    on_gpu = runs_on_gpu(env, kw.get("kokkos", False), kw.get("gpu", False)) or variant == "device_cuda"
    want = observe(env, precision="double", **kw)
    single = observe(env, precision="single", **kw)
    mixed = observe(env, precision="mixed", **kw)
    ok = compare("single vs double", single, want, 1e-4)
    # the box's virial is a sum of per-atom terms that largely cancel: its error is taken relative to the largest
    # per-atom virial times the atom count's square root (the size of a sum of independent per-atom errors)
    scale = np.abs(want["atomic_virial"]).max() * np.sqrt(len(want["forces"]))
    ok &= compare("mixed vs double", dict(mixed, virial=want["virial"]), want, 3e-3)
    e = float(np.abs(mixed["virial"] - want["virial"]).max() / scale)
    print(f"  mixed vs double virial           err {e:.3e} of the per-atom scale (tol 0.003)")
    ok &= e <= 3e-3
    style = "batmobile" if variant == "device_cuda" else "batmobile/kk"
    launch = [ln for ln in mixed["log"].splitlines() if ln.startswith(f"pair_style {style}: precision mixed")]
    print(f"  launch line: {launch}")
    ok &= len(launch) == 1
    warned = "precision mixed needs the f16 tensor cores" in mixed["log"]
    if on_gpu:
        ok &= bool(launch) and "tensor cores f16" in launch[0] and not warned
    else:
        same = all(np.array_equal(mixed[k], single[k]) for k in ("forces", "atomic_energies", "atomic_virial"))
        print(f"  host: warned {warned}, mixed equals single bit for bit: {same}")
        ok &= warned and same
    # the default precision of this back-end: mixed on a GPU, double elsewhere
    default = observe(env, default_precision=True, **kw)
    expected = "mixed" if on_gpu else "double"
    shown = [ln for ln in default["log"].splitlines() if ln.startswith(f"pair_style {style}: precision {expected},")]
    print(f"  no precision keyword: launch line names precision {expected}: {len(shown) == 1}")
    ok &= len(shown) == 1
    if on_gpu:  # (LAMMPS's GPU neighbour lists order neighbours nondeterministically: not bit for bit)
        worst = max(rel(default[k], mixed[k]) for k in ("energy", "forces", "atomic_energies", "atomic_virial"))
        print(f"  default vs precision mixed: max rel diff {worst:.3e} (tol 1e-5)")
        ok &= worst <= 1e-5
    else:
        ok &= same_results(env, "default vs precision double", default, want)
    if not ok:
        fail(f"precision mixed ({variant})")
    print("PASS")


def require_device_cuda(env):
    """Skips unless this build's styles run with `device cuda` (their Kokkos built for CUDA)."""
    if env.vars.get("BACKEND") != "cuda":
        skip(f"LAMMPS build backend is {env.vars.get('BACKEND')}, not cuda: no 'device cuda'")
    if env.vars.get("BUILTIN") == "OFF" and not os.path.isfile(env.vars.get("PLUGIN", "")):
        skip("a stock LAMMPS without batmobileplugin.so")


def default_settings(env, kk, gpu, precision=None, kernels=None, device=None):
    """The settings a run with these pair_style keywords logs (docs/pair_style.md): batmobile/kk's auto values are
    deferred distance checks and 32 threads per atom on a GPU, immediate checks and one thread on host back-ends;
    MPI reads the buffers in place on host builds (a GPU build with GPU-aware MPI too, else mpi_buffers host)."""
    settings = {"precision": precision or "double", "kernels": kernels or "fused"}
    if not kk:
        settings["device"] = device or "cpu"
    if kk:
        settings.update(ghost_comm="device", distance_check="deferred" if gpu else "immediate",
                        graph_team="32" if gpu else "1")
        if env.vars.get("BACKEND") != "cuda":
            settings["mpi_buffers"] = "direct"
    return settings


def check_launch_line(log, style, reference, gpu, settings):
    """The style logs once per run its settings in effect and how its edge kernels launch (Model::launch_summary):
    "pair_style <style>: precision P, kernels K[, device D][, ghost_comm G, distance_check D, mpi_buffers M, graph_team N];
    batmobile <VERSION>; <launch summary>", one line for this run 0, fused kernels per layer unless the reference ones
    were asked for; more than one thread per atom only on a GPU. settings: {keyword: value} the line must show."""
    lines = [ln for ln in log.splitlines() if ln.startswith(f"pair_style {style}: ")]
    if len(lines) != 1:
        print(f"  expected one launch line of pair_style {style}, got {len(lines)}")
        return False
    line = lines[0]
    head = line.split("; ")[0][len(f"pair_style {style}: "):]
    shown = dict(item.split(" ", 1) for item in head.split(", "))
    keys = ["precision", "kernels"] + (["ghost_comm", "distance_check", "mpi_buffers", "graph_team"]
                                       if style == "batmobile/kk" else ["device"])
    if list(shown) != keys or any(shown[k] != v for k, v in settings.items()):
        print(f"  launch line settings WRONG: {head!r}, expected {keys} with {settings}")
        return False
    if line.split("; ")[1] != f"batmobile {VERSION}":
        print(f"  launch line does not name batmobile {VERSION} after the settings: {line!r}")
        return False
    if reference:
        ok = line.endswith("reference edge kernels (per-edge arrays)")
    else:
        ok = re.search(r"fused kernels for \d+ local atoms, per atom: layer 0 forward \d+ thread", line) is not None
        ok &= (" 1 thread " in line) != gpu
    print(f"  launch line {'ok' if ok else 'WRONG'}: {line}")
    return ok


def test_hybrid(env):
    """pair_style hybrid/overlay with `batmobile ... O NULL`: H atoms are not model atoms; the result must be the
    model on the oxygen sub-system (reference computed on the O atoms alone), with zero forces/energies on H."""
    script = base_script(env).replace("pair_style batmobile", "pair_style hybrid/overlay batmobile zero 4.0").replace(
        f"pair_coeff * * {os.path.join(env.ref, 'model.pt')} O H",
        f"pair_coeff * * batmobile {os.path.join(env.ref, 'model.pt')} O NULL\npair_coeff * * zero")
    _, log, tmp = run_lmp(env, script + OBSERVE)
    row = thermo_rows(log)[-1]
    d = dump_rows(os.path.join(tmp, "dump.txt"))
    ref = {}
    for line in open(os.path.join(env.ref, "ref_water_oxygen.txt")):
        s = line.split()
        ref[s[0]] = np.array([float(v) for v in s[2:]])
    is_o = (np.arange(len(d)) % 3) == 0  # water.data lists O, H, H per molecule
    got = {"energy": row["PotEng"], "atomic_energies": d[is_o, 4], "forces": d[is_o, 1:4].ravel(),
           "virial": np.array([row[f"v_W{k}"] for k in range(1, 7)]), "atomic_virial": -d[is_o, 5:11].ravel() / NKTV2P}
    ok = compare("hybrid O NULL", got, ref, 1e-9)
    h_max = np.abs(d[~is_o, 1:5]).max()
    print(f"  max |force, pe/atom| on H (NULL) atoms: {h_max:.3e}")
    ok &= h_max == 0.0
    if not ok:
        fail("hybrid with NULL species")
    print("PASS")


def test_hybrid_sum(env):
    """batmobile/kk adds its forces to LAMMPS's force array (Results::add_forces): under `pair_style hybrid/overlay
    lj/cut 3.0 batmobile` (lj/cut first, so its forces are in the array when batmobile/kk runs) energy and forces
    must be the sums of the two styles run alone, with newton on and off (one rank)."""
    if not env.has_style("batmobile/kk"):
        skip("this lmp has no batmobile/kk")
    model = os.path.join(env.ref, "model.pt")
    styles = {  # (a weak lj/cut: its forces of the model's size, so that a lost or overwritten term shows)
        "sum": f"pair_style hybrid/overlay lj/cut 3.0 batmobile\npair_coeff * * lj/cut 1e-7 2.5\n"
               f"pair_coeff * * batmobile {model} O H",
        "batmobile": f"pair_style batmobile\npair_coeff * * {model} O H",
        "lj": "pair_style lj/cut 3.0\npair_coeff * * 1e-7 2.5"}
    ok = True
    for newton in ("on", "off"):
        got = {}
        for name, pair in styles.items():
            script = f"""units metal
atom_style atomic
boundary p p p
newton {newton}
read_data {os.path.join(env.ref, 'water.data')}
{pair}
neighbor 1.0 bin
thermo_style custom step pe
thermo_modify format float %.17g
dump d all custom 1 dump.txt id fx fy fz
dump_modify d format float %.17g sort id
run 0
"""
            _, log, tmp = run_lmp(env, script, kokkos=True, threads=2)
            got[name] = (thermo_rows(log)[-1]["PotEng"], dump_rows(os.path.join(tmp, "dump.txt"))[:, 1:])
        (e_sum, f_sum), (e_bm, f_bm), (e_lj, f_lj) = got["sum"], got["batmobile"], got["lj"]
        e_err = abs(e_sum - (e_bm + e_lj)) / abs(e_sum)
        f_err = np.abs(f_sum - (f_bm + f_lj)).max() / np.abs(f_sum).max()
        print(f"  newton {newton}: max |f| batmobile {np.abs(f_bm).max():.3e}, lj/cut {np.abs(f_lj).max():.3e}; "
              f"hybrid vs sum: energy rel {e_err:.2e}, forces rel {f_err:.2e} (tol 1e-12)")
        ok &= e_err <= 1e-12 and f_err <= 1e-12 and np.abs(f_lj).max() > 1e-2 * np.abs(f_bm).max()
    if not ok:
        fail("hybrid/overlay lj/cut + batmobile/kk is not the sum of the two")
    print("PASS")


def test_slab(env, variant=None):
    """Water slab with vacuum on 4 ranks (processors 1 1 4): ranks without atoms or ghosts must still join the
    forward/reverse exchange of node features (else the run hangs); results vs the PyTorch reference. variant kk:
    batmobile/kk through its device swap exchange (every swap counted, see kk_comm)."""
    kw = dict(data="slab.data", nranks=4, extra_pre="processors 1 1 4")
    if variant == "kk":
        if not env.has_style("batmobile/kk"):
            skip("this lmp has no batmobile/kk")
        kw.update(kokkos=True, threads=1, exchanges=True)
    got = observe(env, **kw)
    ok = compare(f"slab 4 ranks {variant or ''}", got, read_ref(env, "slab"), 1e-9)
    if variant == "kk":
        want = expected_kk_counts(env, got["log"], 4, "swaps", data="slab.data")
        ok &= check_kk_counts(env, "batmobile/kk slab 4 ranks", got["exchanges"], want)
    if not ok:
        fail("slab on 4 ranks")
    print("PASS")


def test_ranks(env):
    results = {n: observe(env, nranks=n) for n in (1, 2, 4)}
    ok = True
    for n in (2, 4):
        ok &= compare(f"{n} ranks vs 1", results[n], results[1], 1e-10)
    if not ok:
        fail("MPI rank counts disagree")
    print("PASS")


def test_kk(env):
    if not env.has_style("batmobile/kk"):
        skip("this lmp has no batmobile/kk")
    a = observe(env)
    ok = True
    for style in ("batmobile/kk", "batmobile/kk/host"):
        if not env.has_style(style):
            continue
        b = observe(env, kokkos=True, threads=2, style=style)
        ok &= compare(f"{style} vs batmobile", b, a, 1e-10)
    if not ok:
        fail("batmobile/kk differs from batmobile")
    print("PASS")


def test_keywords(env):
    """batmobile/kk's keywords change how, not what: graph_team 2 (the team-parallel edge-list build, count + ordered
    team scan, as on GPUs with 32 threads) gives the same edges in the same order as one thread per atom;
    distance_check deferred (the GPU default: edge arrays sized by the neighbour list's capacity, the statistics read
    back without waiting) and immediate (the host default) the same results; on 2 ranks mpi_buffers host (every MPI
    message through host copies) the same as auto. Bitwise on host builds with one thread (same_results). Each run's
    launch line shows its settings."""
    if not env.has_style("batmobile/kk"):
        skip("this lmp has no batmobile/kk")
    gpu = runs_on_gpu(env, kokkos=True)
    base = default_settings(env, True, gpu)
    a = observe(env)
    one = observe(env, kokkos=True, threads=2)
    ok = check_launch_line(one["log"], "batmobile/kk", False, gpu, base)
    for keywords, against in (("graph_team 2", one), ("graph_team 1", one),
                              ("distance_check deferred", one), ("distance_check immediate", one),
                              ("distance_check auto graph_team auto", one)):
        got = observe(env, kokkos=True, threads=2, keywords=keywords)
        shown = dict(zip(keywords.split()[::2], keywords.split()[1::2]))
        shown = {k: (base[k] if v == "auto" else v) for k, v in shown.items()}
        ok &= check_launch_line(got["log"], "batmobile/kk", False, gpu, dict(base, **shown))
        ok &= same_results(env, f"batmobile/kk {keywords} vs defaults", got, against, threads=2)
    ok &= compare("batmobile/kk graph_team 2 vs batmobile", observe(env, kokkos=True, threads=2,
                                                                  keywords="graph_team 2"), a, 1e-10)
    # on 2 ranks the own swap exchange: every MPI message staged through host copies vs auto (direct on host builds)
    if shutil.which("mpirun"):
        auto = observe(env, kokkos=True, threads=1, nranks=2, exchanges=True)
        host = observe(env, kokkos=True, threads=1, nranks=2, exchanges=True, keywords="mpi_buffers host")
        ok &= check_launch_line(host["log"], "batmobile/kk", False, gpu, dict(base, mpi_buffers="host"))
        ok &= check_launch_line(auto["log"], "batmobile/kk", False, gpu, base)
        ok &= host["exchanges"]["mpi_staged"] > 0 and host["exchanges"]["mpi_direct"] == 0
        print(f"  mpi_buffers host: {host['exchanges']['mpi_staged']} swaps staged, "
              f"{host['exchanges']['mpi_direct']} direct")
        ok &= same_results(env, "batmobile/kk 2 ranks mpi_buffers host vs auto", host, auto)
    # everything at once, ghost_comm lammps and the CPU style's keywords included: all echoed
    got = observe(env, kokkos=True, threads=2, precision="single", kernels="reference", ghost_comm="lammps",
                  keywords="distance_check deferred mpi_buffers host graph_team 2")
    ok &= check_launch_line(got["log"], "batmobile/kk", True, gpu,
                            dict(precision="single", kernels="reference", ghost_comm="lammps",
                                 distance_check="deferred", mpi_buffers="host", graph_team="2"))
    got = observe(env, precision="single", kernels="reference")
    ok &= check_launch_line(got["log"], "batmobile", True, False, dict(precision="single", kernels="reference"))
    # a second pair_style command without keywords: all of them back to their defaults (LAMMPS re-uses the style
    # object and calls its settings() again), the fused kernels in use again
    for kk in (False, True):
        first = base_script(env, precision="single", kernels="reference",
                            keywords="ghost_comm lammps distance_check deferred graph_team 2" if kk else "device cpu")
        again = first + f"pair_style batmobile\npair_coeff * * {os.path.join(env.ref, 'model.pt')} O H\nrun 0\n"
        _, log, _ = run_lmp(env, again, kokkos=kk, threads=1)
        ok &= check_launch_line(log, "batmobile/kk" if kk else "batmobile", False, gpu and kk,
                                default_settings(env, kk, gpu and kk))
    if not ok:
        fail("a batmobile/kk keyword changed the results or is not echoed")
    print("PASS")


def test_kk_comm(env):
    """batmobile/kk's ghost-feature exchange on 1, 2 and 4 ranks. ghost_comm device (default): one rank copies images
    through the device image map, several ranks with comm_style brick replay CommBrick's swaps on the device
    (pair_batmobile_kokkos_comm.h), including swaps with the rank itself (dimensions with one rank) and, on the
    4 x 1 x 1 grid, two swaps per direction along x (the second passes on rows the first received). ghost_comm
    lammps and comm_style tiled: LAMMPS's host pair communication. `compute pair batmobile` counts the exchanges
    and swaps by route (check_kk_counts). Results equal batmobile (CPU style, one rank, double: 1e-10; single
    precision 1e-4), and the device swap exchange equals the LAMMPS path of the same decomposition bit for bit on
    host builds (same_results). With the 2-layer test model each rank exchanges once each way per evaluation."""
    if not env.has_style("batmobile/kk"):
        skip("this lmp has no batmobile/kk")
    cpu = observe(env)
    ok = True
    results = {}
    grids = {None: "", "4x1x1": "processors 4 1 1", "tiled": "comm_style tiled"}
    cases = [(1, None, "device", p) for p in (None, "single")]
    cases += [(n, g, route, p) for p in (None, "single") for n, g in ((2, None), (4, None), (4, "4x1x1"))
              for route in ("device", "lammps") if (n, g) != (4, None) or route == "device"]
    cases += [(1, None, "lammps", None), (2, "tiled", "device", None)]
    # MPI through host copies of the buffers (the route of GPUs without GPU-aware MPI), forced on any build
    cases += [(2, None, "staged", None), (4, "4x1x1", "staged", "single")]
    for nranks, grid, ghost_comm, precision in cases:
        forced = ghost_comm == "staged"
        got = observe(env, kokkos=True, threads=1, nranks=nranks, exchanges=True, precision=precision,
                      ghost_comm="device" if forced else ghost_comm, extra_pre=grids[grid],
                      keywords="mpi_buffers host" if forced else "")
        name = (f"batmobile/kk {precision or 'double'} {nranks} rank{'s' if nranks > 1 else ''}"
                f"{' ' + grid if grid else ''}, ghost_comm {'device, MPI staged' if forced else ghost_comm}")
        results[(nranks, grid, ghost_comm, precision)] = got
        route = ghost_comm
        if ghost_comm in ("device", "staged"):
            route = "images" if nranks == 1 else "lammps" if grid == "tiled" else "swaps"
        want = expected_kk_counts(env, got["log"], nranks, route)
        ok &= check_kk_counts(env, name, got["exchanges"], want, forced)
        if route == "swaps" and want["self"] == 0:
            fail(f"{name}: no swap with the rank itself in this decomposition; the test would not exercise it")
        ok &= compare(f"{name} vs batmobile", got, cpu, 1e-4 if precision else 1e-10)
    # (on one rank the image map adds an atom's images in another order than LAMMPS's swaps: not compared)
    for (nranks, grid, ghost_comm, precision), got in results.items():
        for other, what in (("lammps", "LAMMPS's pair communication"), ("staged", "MPI staged through host buffers")):
            if ghost_comm == "device" and nranks > 1 and (nranks, grid, other, precision) in results:
                ok &= same_results(env, f"{precision or 'double'}, {nranks} ranks{' ' + grid if grid else ''}, device "
                                   f"swaps vs {what}", got, results[(nranks, grid, other, precision)], precision)
    # the keyword: only batmobile/kk has it, and only with these values
    for style, value, message in (("batmobile/kk", "quad", "unknown ghost_comm 'quad' (use device or lammps)"),
                                  ("batmobile", "device", "unknown keyword 'ghost_comm'")):
        rc, out, _ = run_lmp(env, base_script(env, style=style, ghost_comm=value), kokkos=style.endswith("/kk"),
                             expect_fail=True)
        good = rc != 0 and message in out
        print(f"  pair_style {style} ghost_comm {value}: {'stops with' if good else 'does NOT stop with'} '{message}'")
        ok &= good
    if not ok:
        fail("batmobile/kk exchange paths")
    print("PASS")


def test_fd(env):
    h = 1e-4
    atoms = [1, 2, 100, 333]
    lines = [base_script(env), "variable e equal pe", "thermo_style custom step pe",
             "thermo_modify format float %.17g", "dump d all custom 1 f.txt id fx fy fz",
             "dump_modify d format float %.17g sort id", "run 0", "undump d"]
    for a in atoms:
        lines.append(f"group g{a} id {a}")
        for k, ax in enumerate("xyz"):
            mv = ["0", "0", "0"]
            for sgn, tag in ((1, "p"), (-2, "m"), (1, "0")):
                mv[k] = repr(sgn * h)
                lines.append(f"displace_atoms g{a} move {' '.join(mv)} units box")
                lines.append("run 0 post no")
                if tag != "0":
                    lines.append(f'print "FD {a} {k} {tag} ${{e}}"')
    # strain: E(scale 1 +- h) along x, y, z (remap moves the atoms affinely)
    for k, ax in enumerate("xyz"):
        for s, tag in ((1 + h, "p"), (1 / (1 + h) * (1 - h), "m"), (1 / (1 - h), "0")):
            lines.append(f"change_box all {ax} scale {s!r} remap units box")
            lines.append("run 0 post no")
            if tag != "0":
                lines.append(f'print "ST {k} {tag} ${{e}}"')
    lines.append("compute pv all pressure NULL virial")
    lines.append(f"variable W1 equal c_pv[1]*vol/{NKTV2P!r}")
    lines.append(f"variable W2 equal c_pv[2]*vol/{NKTV2P!r}")
    lines.append(f"variable W3 equal c_pv[3]*vol/{NKTV2P!r}")
    lines.append("thermo_style custom step pe v_W1 v_W2 v_W3")
    lines.append("thermo_modify format float %.17g")
    lines.append("run 0 post no")
    _, log, tmp = run_lmp(env, "\n".join(lines) + "\n")
    variable = re.compile(r"^(FD|ST) (.*)$", re.M)
    vals = {}
    for m in variable.finditer(log):
        s = m.group(2).split()
        vals[(m.group(1),) + tuple(s[:-1])] = float(s[-1])
    F = {int(r[0]): r[1:4] for r in dump_rows(os.path.join(tmp, "f.txt"))}
    worst, scale = 0.0, 0.0
    for a in atoms:
        for k in range(3):
            fd = -(vals[("FD", str(a), str(k), "p")] - vals[("FD", str(a), str(k), "m")]) / (2 * h)
            print(f"  atom {a} dir {k}: F {F[a][k]: .10f}  FD {fd: .10f}")
            worst = max(worst, abs(fd - F[a][k]))
            scale = max(scale, abs(F[a][k]))
    row = thermo_rows(log)[-1]
    # FD truncation + 15-digit energy printout give ~1e-8 here
    ok = worst <= 1e-6 * max(scale, 1.0)
    for k in range(3):
        fd = -(vals[("ST", str(k), "p")] - vals[("ST", str(k), "m")]) / (2 * h)
        W = row[f"v_W{k + 1}"]
        print(f"  strain {'xyz'[k]}{'xyz'[k]}: virial {W: .10f}  -dE/deps {fd: .10f}")
        ok &= abs(fd - W) <= 1e-6 * max(abs(W), 1.0)
    print(f"  max |F - F_fd| = {worst:.3e}")
    if not ok:
        fail("finite differences disagree")
    print("PASS")


def stopped_with(name, rc, out, *messages):
    """Whether a run that must fail did, with every message in its output; prints its ERROR line."""
    good = rc != 0 and all(m in out for m in messages)
    err = next((l for l in out.splitlines() if "ERROR" in l), "(no ERROR line)")
    print(f"  {name:20s} {'ok ' if good else 'BAD'} rc={rc}: {err.strip()}")
    return good


def test_errors(env):
    ref = env.ref
    model = os.path.join(ref, "model.pt")
    coeff = f"pair_coeff * * {model} O H"
    usage = ("use 'pair_coeff * * model.pt' followed by one model species name (or NULL) per LAMMPS atom type, "
             "2 names for this system")
    cases = [
        ("pair_coeff 1 1", base_script(env).replace(coeff, f"pair_coeff 1 1 {model} O H"),
         "pair_coeff batmobile: one model covers all type pairs: " + usage + "; got type ranges '1 1'"),
        ("pair_coeff * 2", base_script(env).replace(coeff, f"pair_coeff * 2 {model} O H"), usage),
        ("wrong species count", base_script(env, species="O"),
         "expected '* * model.pt' followed by 2 species names (one per atom type, NULL to skip), got 1 names"),
        ("too many species", base_script(env, species="O H H"), "followed by 2 species names", "got 3 names"),
        ("no model file given", base_script(env).replace(coeff, "pair_coeff * *"), "got 0 names"),
        ("unknown species", base_script(env, species="O C"),
         "species 'C' is not in the model (model species: O H) in model file"),
        ("missing file", base_script(env).replace(model, os.path.join(ref, "nope.pt")), "cannot open"),
        ("corrupt file", base_script(env).replace(model, os.path.join(ref, "corrupt.pt")),
         "not a readable TorchScript archive"),
        ("wrong version", base_script(env).replace(model, os.path.join(ref, "bad_version.pt")),
         "unsupported format version 99"),
        ("units real", base_script(env).replace("units metal", "units real") + "run 0\n", "needs 'units metal'"),
        ("newton off", base_script(env, extra_pre="newton off") + "run 0\n", "needs 'newton on'"),
        ("thin box", base_script(env, data="thin.data") + "run 0\n", "thinner than the model cutoff"),
        ("atoms too close", base_script(env, data="water_close.data") + "run 0\n", "closer than half the smallest"),
        ("bad precision", base_script(env, precision="quad"), "unknown precision 'quad' (use double, single or mixed)"),
        ("bad kernels", base_script(env, kernels="fast"), "unknown kernels 'fast' (use fused or reference)"),
        ("missing value", base_script(env, keywords="precision"), "'precision' needs double, single or mixed"),
        ("kk-only keyword", base_script(env, keywords="distance_check deferred"),
         "unknown keyword 'distance_check' (usage: pair_style batmobile [precision double|single|mixed] "
         "[kernels fused|reference] [device cpu|cuda] [out_freq N] [out_file FILE])"),
        ("bad device", base_script(env, keywords="device gpu"), "unknown device 'gpu' (use cpu or cuda)"),
    ]
    if env.vars.get("BACKEND") != "cuda":  # a CPU build has no GPU path
        cases.append(("device cuda, CPU build", base_script(env, keywords="device cuda"),
                      "'device cuda' needs the styles built for CUDA (scripts/build_lammps.sh --lammps 2025 "
                      "--backend cuda --plugin-only); this build runs the model on the CPU only"))
    ok = True
    for name, script, *messages in cases:
        rc, out, _ = run_lmp(env, script, expect_fail=True)
        ok &= stopped_with(name, rc, out, *messages)
    if env.has_style("batmobile/kk"):
        kk = dict(kokkos=True, threads=2)
        # batmobile/kk with the closest-distance check deferred (the GPU default): still an error, at the step
        script = base_script(env, data="water_close.data", keywords="distance_check deferred") + "run 0\n"
        rc, out, _ = run_lmp(env, script, expect_fail=True, **kk)
        ok &= stopped_with("too close, kk", rc, out, "pair_style batmobile/kk: atoms at distance",
                           "closer than half the smallest", "at step 0")
        # the shared checks name the style that stops, batmobile/kk
        kk_cases = [
            ("units real, kk", base_script(env).replace("units metal", "units real") + "run 0\n",
             "pair_style batmobile/kk needs 'units metal'"),
            ("thin box, kk", base_script(env, data="thin.data") + "run 0\n",
             "pair_style batmobile/kk: periodic box thickness", "thinner than the model cutoff"),
            ("unknown species, kk", base_script(env, species="O C"),
             "pair_coeff batmobile/kk: species 'C' is not in the model"),
            ("pair_coeff 1 1, kk", base_script(env).replace(coeff, f"pair_coeff 1 1 {model} O H"),
             "pair_coeff batmobile/kk: one model covers all type pairs: " + usage),
            ("bad distance_check", base_script(env, keywords="distance_check sometimes"),
             "pair_style batmobile/kk: unknown distance_check 'sometimes' (use auto, deferred or immediate)"),
            ("bad mpi_buffers", base_script(env, keywords="mpi_buffers device"),
             "pair_style batmobile/kk: unknown mpi_buffers 'device' (use auto or host)"),
            ("missing mpi_buffers", base_script(env, keywords="mpi_buffers"), "'mpi_buffers' needs auto or host"),
            ("bad graph_team", base_script(env, keywords="graph_team 0"),
             "unknown graph_team '0' (use auto or a thread count 1 to 1024)"),
            ("graph_team word", base_script(env, keywords="graph_team warp"), "unknown graph_team 'warp'"),
            ("graph_team too big", base_script(env, keywords="graph_team 1024") + "run 0\n",
             "graph_team 1024 is more than this back-end's team size limit"),
            ("device, kk", base_script(env, keywords="device cuda"), "unknown keyword 'device'"),
            ("unknown keyword, kk", base_script(env, keywords="speed max"),
             "unknown keyword 'speed' (usage: pair_style batmobile/kk [precision double|single|mixed] [kernels "
             "fused|reference] [ghost_comm device|lammps] [distance_check auto|deferred|immediate] "
             "[mpi_buffers auto|host] [graph_team auto|N] [out_freq N] [out_file FILE])"),
        ]
        if env.vars.get("BACKEND") == "cuda":  # (a GPU's team size limit is 1024 or more)
            kk_cases = [c for c in kk_cases if c[0] != "graph_team too big"]
        for name, script, *messages in kk_cases:
            rc, out, _ = run_lmp(env, script, expect_fail=True, **kk)
            ok &= stopped_with(name, rc, out, *messages)
        # newton off only where the model folds the ghosts' forces: one rank, ghost_comm device, fused kernels
        # (kk_newton_off runs the allowed case)
        off = dict(extra_pre="newton off")
        for name, script, kw in (
                ("newton off, 2 ranks", base_script(env, **off), dict(nranks=2, threads=1)),
                ("newton off, lammps", base_script(env, ghost_comm="lammps", **off), {}),
                ("newton off, ref.", base_script(env, kernels="reference", **off), {})):
            if kw.get("nranks", 1) > 1 and shutil.which("mpirun") is None:
                continue
            kw = dict(kk, **kw)
            rc, out, _ = run_lmp(env, script + "run 0\n", expect_fail=True, **kw)
            ok &= stopped_with(name, rc, out, "needs 'newton on'")
    if not ok:
        fail("an error case did not stop with its message")
    print("PASS")


def test_checksum(env):
    """The model checksum at pair_coeff (make_lammps_reference.py writes the files; model.pt's checksum is Python's,
    so "verified" means the C++ loader computes the same): model.pt (format version 2) verified over header and
    weights and logged with its format version and the Batmobile that wrote it; model_v1.pt (version 1, weights-only
    checksum) and model_no_checksum.pt (version 1, none) run with one warning each and the same results;
    model_flipped.pt (one weight bit flipped) and model_species_swapped.pt (species order swapped in the header,
    checksum unchanged) stop at pair_coeff naming the file, as does model_v1_flipped.pt. For batmobile and
    batmobile/kk."""
    styles = [("batmobile", {})]
    if env.has_style("batmobile/kk"):
        styles.append(("batmobile/kk", dict(kokkos=True, threads=2)))
    ok = True
    for style, kw in styles:
        path = os.path.join(env.ref, "model.pt")
        good = observe(env, style=style, **kw)
        line = f"pair_coeff {style}: model file '{path}': model checksum verified (header and weights, sha256 "
        tail = f"); format version 2, written by batmobile {VERSION}; species O H, cutoff "
        seen = line in good["log"] and tail in good["log"] and "WARNING: pair_coeff" not in good["log"]
        print(f"  {style} model.pt: {'checksum verified, no warning' if seen else 'NO verified line'}")
        ok &= seen
        upgrade = "so {} would go unnoticed; upgrade it with: python -m batmobile.export --upgrade {} NEW.pt"
        for name, covered, unnoticed, logged in (
                ("model_v1.pt", "whose checksum covers the weights but not the header (species, cutoff, "
                 "hyperparameters)", "an altered header", "weights checksum verified (sha256 "),
                ("model_no_checksum.pt", "without a checksum", "corrupted weights or an altered header",
                 "no checksum; format version 1, written by batmobile (version not recorded)")):
            old = observe(env, style=style, model=name, **kw)
            old_path = os.path.join(env.ref, name)
            warning = (f"WARNING: pair_coeff {style}: model file '{old_path}' is in model format version 1, "
                       f"{covered}, " + upgrade.format(unnoticed, old_path))
            warned = old["log"].count(warning) == 1 and logged in old["log"] and "header and weights" not in old["log"]
            print(f"  {style} {name}: {'one warning' if warned else 'NO (single) warning'}")
            ok &= warned and same_results(env, f"{style} {name} vs model.pt", old, good, threads=kw.get("threads", 1))
        altered = ("the header (species, cutoff, hyperparameters) or the weights were altered or corrupted after "
                   "export; re-export the model file")
        for name in ("model_flipped.pt", "model_species_swapped.pt"):
            bad = os.path.join(env.ref, name)
            rc, out, _ = run_lmp(env, base_script(env, style=style, model=name), expect_fail=True, **kw)
            ok &= stopped_with(f"{style} {name}", rc, out,
                               f"ERROR: pair_coeff {style}: Batmobile model file '{bad}': the model checksum does not "
                               f"match (stored sha256:", altered)
        bad = os.path.join(env.ref, "model_v1_flipped.pt")
        rc, out, _ = run_lmp(env, base_script(env, style=style, model="model_v1_flipped.pt"), expect_fail=True, **kw)
        ok &= stopped_with(f"{style} v1 flipped bit", rc, out,
                           f"ERROR: pair_coeff {style}: Batmobile model file '{bad}': the weights do not match "
                           f"the file's checksum (stored sha256:", "the weights are corrupted or altered; re-export "
                           "the model file")
    if not ok:
        fail("model checksum")
    print("PASS")


def test_nve(env):
    # The seeded random model is not a water model (it slowly pulls atoms together), so the run is short and
    # cold: it checks that forces are the exact gradient of the energy along a trajectory, not the physics.
    steps = 200
    script = base_script(env) + f"""velocity all create 50.0 4928459 mom yes rot yes dist gaussian
timestep 0.0001
fix 1 all nve
thermo 20
thermo_style custom step temp pe ke etotal
thermo_modify format float %.12g
run {steps}
"""
    _, log, _ = run_lmp(env, script)
    rows = thermo_rows(log)
    etot = np.array([r["TotEng"] for r in rows])
    n = 648
    drift = (etot[-1] - etot[0]) / n
    spread = (etot.max() - etot.min()) / n
    time_ps = steps * 0.0001
    print(f"  NVE {steps} steps x 0.1 fs: E_tot drift {drift:.3e} eV/atom ({drift / time_ps:.3e} eV/atom/ps), "
          f"max spread {spread:.3e} eV/atom, T {rows[0]['Temp']:.1f} -> {rows[-1]['Temp']:.1f} K")
    if not np.all(np.isfinite(etot)) or spread > 1e-5:
        fail("energy not conserved in NVE")
    print("PASS")


def require_rebuilds(name, log, rows, what):
    """Fails unless the run's log shows LAMMPS rebuilt its neighbour lists (else the test would not exercise `what`)."""
    builds = re.findall(r"Neighbor list builds = (\d+)", log)
    print(f"  {name}: {len(rows)} thermo rows, neighbor list builds {builds[-1] if builds else '?'}")
    if builds and int(builds[-1]) < 2:
        fail(f"the trajectory did not re-neighbour: the test would not exercise {what}")


# 40 steps through re-neighbouring at every step (small skin); cold and short: the seeded random model is not a water
# model and pulls atoms together when hot
COLD_MD = """neighbor 0.2 bin
neigh_modify every 1 delay 0 check yes
velocity all create 50.0 4928459 mom yes rot yes dist gaussian
timestep 0.0005
fix 1 all nve
thermo 5
thermo_style custom step pe ke press
thermo_modify format float %.15g
run 40
"""


def test_kk_md(env, nranks=1, ghost_comm=None, newton="on"):
    """batmobile/kk follows the batmobile trajectory through re-neighbouring (small skin, every step): on one rank
    the ghost features go through the device image map rebuilt at each re-neighbouring, on several ranks through
    batmobile/kk's device swap exchange (ghost_comm device, the default; its swap plan re-read at each
    re-neighbouring) or LAMMPS's pair communication (ghost_comm lammps), with atoms migrating between ranks. On
    several ranks every thermo step's exchanges must have taken that route (compute pair, as in kk_comm). newton off:
    the kk run with newton off (one rank: the model puts the images' forces on their atoms, LAMMPS folds nothing)."""
    if not env.has_style("batmobile/kk"):
        skip("this lmp has no batmobile/kk")
    md = COLD_MD
    rows = {}
    logs = {}
    # (the closest-distance check deferred, as on GPUs: the edge arrays sized by the neighbour list's capacity through
    # re-neighbouring, each step's statistics checked at the next step or on thermo steps)
    kk = dict(kokkos=True, threads=1 if nranks > 1 else 2, nranks=nranks)
    # the kk run also writes each atom's rank at steps 0 and 40 (migration check)
    md_kk = md.replace("thermo_style custom step pe ke press",
                       "compute bmx all pair batmobile\nthermo_style custom step pe ke press " + KK_COUNT_COLUMNS +
                       "\ncompute prc all property/atom proc\ndump prc all custom 40 procs.txt id c_prc\n"
                       "dump_modify prc sort id")
    for name, kw, script in (("batmobile", {}, base_script(env) + md),
                             ("batmobile/kk", kk, base_script(env, ghost_comm=ghost_comm, extra_pre=f"newton {newton}",
                                                              keywords="distance_check deferred") + md_kk)):
        _, log, tmp = run_lmp(env, script, **kw)
        rows[name] = thermo_rows(log)
        logs[name] = log
        if name == "batmobile/kk" and nranks > 1:
            snaps = open(os.path.join(tmp, "procs.txt")).read().split("ITEM: TIMESTEP")[1:]
            ranks = [np.array([int(l.split()[1]) for l in snap.split("ITEM: ATOMS id c_prc")[1].split("\n") if l.strip()])
                     for snap in snaps]
            moved = int(np.sum(ranks[0] != ranks[-1]))
            print(f"  {name}: {moved} atoms changed rank between steps 0 and 40")
            if moved == 0:
                fail("no atom migrated between ranks: the test would not exercise the swap plan after migration")
        require_rebuilds(name, log, rows[name], "the ghost map rebuild")
    a, b = rows["batmobile"], rows["batmobile/kk"]
    if len(a) != len(b) or len(a) < 7:
        fail(f"thermo rows differ: {len(a)} vs {len(b)}")
    route = "images" if nranks == 1 else "lammps" if ghost_comm == "lammps" else "swaps"
    want = expected_kk_counts(env, logs["batmobile/kk"], nranks, route)
    counts = {tuple(sorted(kk_counts(r).items())) for r in b}
    print(f"  exchange counts at the {len(b)} thermo steps ({len(counts)} distinct):")
    ok = all(check_kk_counts(env, f"ghost_comm {ghost_comm or 'default'}, {nranks} ranks", dict(c), want)
             for c in counts)
    if not ok:
        fail(f"the exchanges did not all go through the {route} route")
    worst = 0.0
    for ra, rb in zip(a, b):
        for key in ("PotEng", "KinEng", "Press"):
            worst = max(worst, abs(ra[key] - rb[key]) / max(abs(ra[key]), 1e-300))
    print(f"  max relative difference along 40 steps (pe, ke, press): {worst:.3e} (tol 1e-8)")
    if worst > 1e-8:
        fail("batmobile/kk trajectory differs from batmobile")
    print("PASS")


def test_device_md(env, nranks=1):
    """batmobile device cuda follows batmobile on the CPU through re-neighbouring (small skin, every step): the
    neighbour list uploaded at each rebuild, the edge list cut from it on the GPU every step, ghost features through
    the GPU image map (one rank) or LAMMPS's communication (several ranks, atoms migrating)."""
    require_device_cuda(env)
    md = COLD_MD
    pre = f"plugin load {env.vars.get('PLUGIN', '')}\n" if env.vars.get("BUILTIN") == "OFF" else ""
    rows = {}
    for device in ("cpu", "cuda"):
        _, log, _ = run_lmp(env, pre + base_script(env, keywords=f"device {device}") + md, nranks=nranks)
        rows[device] = thermo_rows(log)
        require_rebuilds(f"device {device}", log, rows[device], "the neighbour-list upload")
    a, b = rows["cpu"], rows["cuda"]
    if len(a) != len(b) or len(a) < 7:
        fail(f"thermo rows differ: {len(a)} vs {len(b)}")
    worst = max(abs(ra[k] - rb[k]) / max(abs(ra[k]), 1e-300) for ra, rb in zip(a, b) for k in ("PotEng", "KinEng", "Press"))
    print(f"  max relative difference along 40 steps (pe, ke, press), {nranks} ranks: {worst:.3e} (tol 1e-8)")
    if worst > 1e-8:
        fail("the device cuda trajectory differs from the CPU one")
    print("PASS")


def test_no_gpu(env):
    require_device_cuda(env)
    pre = f"plugin load {env.vars.get('PLUGIN', '')}\n" if env.vars.get("BUILTIN") == "OFF" else ""
    ok = True
    for device in ("cuda", "cpu"):  # (Kokkos starts its CUDA back-end for either)
        rc, out, _ = run_lmp(env, pre + base_script(env, keywords=f"device {device}") + "run 0\n", expect_fail=True,
                             extra_env={"CUDA_VISIBLE_DEVICES": ""})
        ok &= stopped_with(f"no GPU, device {device}", rc, out, "these styles were built for CUDA, but this process "
                           "sees no GPU")
    if not ok:
        fail("a CUDA build without a GPU did not stop with its message")
    print("PASS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="")
    ap.add_argument("--ref", required=True)
    ap.add_argument("--model", choices=sorted(MODELS), default="default",
                    help="the reference model of the reference test (c2: correlation 2, l3: L = 3)")
    ap.add_argument("test")
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()
    if a.model != "default" and a.test != "reference":
        ap.error(f"--model {a.model} is for the reference test only")
    env = Env(a.build, a.ref, a.model)
    {"reference": lambda: test_reference(env, *(a.args or ["double"])), "ranks": lambda: test_ranks(env),
     "kk": lambda: test_kk(env), "fd": lambda: test_fd(env), "errors": lambda: test_errors(env),
     "nve": lambda: test_nve(env), "keywords": lambda: test_keywords(env), "checksum": lambda: test_checksum(env),
     "hybrid": lambda: test_hybrid(env), "hybrid_sum": lambda: test_hybrid_sum(env),
     "slab": lambda: test_slab(env, *a.args),
     "device_md": lambda: test_device_md(env, int(a.args[0]) if a.args else 1),
     "no_gpu": lambda: test_no_gpu(env),
     "mixed": lambda: test_mixed(env, a.args[0] if a.args else "kk"),
     "kk_comm": lambda: test_kk_comm(env),
     "kk_md": lambda: test_kk_md(env, int(a.args[0]) if a.args else 1,
                                 a.args[1] if len(a.args) > 1 else None, a.args[2] if len(a.args) > 2 else "on")}[a.test]()


if __name__ == "__main__":
    main()
