#!/usr/bin/env python3
"""LAMMPS-level tests of pair_style batmobile (and batmobile/kk), run by CTest through the built lmp.

    run_batmobile_test.py --build LAMMPS_BUILD_DIR --ref REFDIR TEST [ARGS]

REFDIR is written by make_lammps_reference.py (model file, water data, float64 PyTorch reference).
Exit codes: 0 pass, 1 fail, 77 skip (reason printed).
Tests:
  reference VARIANT   run 0 on the water box vs the PyTorch reference: energy, forces, pe/atom, virial,
                      stress/atom; sum of pe/atom == pe. VARIANT: double | single | fused | kk | kk_single |
                      kk_fused | kk_mpi2 | mpi2 | mpi4 | plugin | gpu | gpu_single | gpu_reference (-k on g 1)
  ranks               run 0 on 1, 2 and 4 MPI ranks agree to 1e-10 (relative)
  kk                  batmobile/kk (host) agrees with batmobile to 1e-10
  kk_comm             batmobile/kk on 1, 2, 4 ranks with LAMMPS's device forward pair communication (and on 2 ranks
                      with the host one) agrees with batmobile; `compute pair` counts which path the exchanges took
  kk_md N [PATH]      40-step trajectory of batmobile/kk on N ranks follows batmobile (PATH: comm/pair/forward)
  fd                  finite-difference forces and pressure (strain derivative) through LAMMPS
  errors              every bad input stops with its documented message
  nve                 short NVE run of the water box; reports the energy drift
  slab                water slab with vacuum on 4 ranks (empty ranks join the feature exchange) vs reference
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
NKTV2P = 1.6021765e6  # metal units: eV/A^3 -> bar


def skip(msg):
    print("SKIP:", msg)
    sys.exit(SKIP)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


class Env:
    def __init__(self, build, ref):
        envf = os.path.join(build or "", "batmobile-build.env")
        if not build or not os.path.isfile(envf):
            skip(f"no LAMMPS build (batmobile-build.env) in '{build}'; run scripts/build_lammps.sh")
        self.vars = dict(l.strip().split("=", 1) for l in open(envf) if "=" in l)
        self.lmp = self.vars["LMP"]
        self.ref = ref
        if not os.path.isfile(os.path.join(ref, "model.pt")):
            fail(f"no reference data in {ref}")

    def has_style(self, name):
        out = subprocess.run([self.lmp, "-h"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
        return re.search(rf"\b{re.escape(name)}\b", out) is not None


def run_lmp(env, script, nranks=1, kokkos=False, threads=1, expect_fail=False, gpu=False, kokkos_pk=()):
    tmp = tempfile.mkdtemp(prefix="bm_lmp_")
    with open(os.path.join(tmp, "in.test"), "w") as f:
        f.write(script)
    cmd = [env.lmp, "-in", "in.test", "-log", "log.lammps", "-screen", "none" if not expect_fail else "none"]
    if gpu or (kokkos and env.vars.get("BACKEND") == "cuda"):  # a CUDA build runs every /kk style on the GPU
        cmd += ["-k", "on", "g", "1", "-sf", "kk", "-pk", "kokkos", "newton", "on", "neigh", "full", *kokkos_pk]
    elif kokkos:
        cmd += ["-k", "on", "t", str(threads), "-sf", "kk", "-pk", "kokkos", "newton", "on", "neigh", "full",
                *kokkos_pk]
    if nranks > 1:
        mpirun = shutil.which("mpirun")
        if mpirun is None:
            skip("mpirun not found")
        pre = [mpirun, "-np", str(nranks), "--oversubscribe"]
        if os.geteuid() == 0:
            pre.append("--allow-run-as-root")
        cmd = pre + cmd
    envv = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="false")
    p = subprocess.run(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900,
                       env=envv)
    log = open(os.path.join(tmp, "log.lammps")).read() if os.path.isfile(os.path.join(tmp, "log.lammps")) else ""
    if p.returncode != 0 and not expect_fail:
        print(log[-3000:], p.stdout[-3000:])
        fail(f"lmp failed ({p.returncode}): {' '.join(cmd)}")
    return p.returncode, log + p.stdout, tmp


def base_script(env, data="water.data", style="batmobile", precision=None, species="O H", extra_pre="",
                kernels=None):
    ps = f"pair_style {style}" + (f" precision {precision}" if precision else "") + \
        (f" kernels {kernels}" if kernels else "")
    return f"""units metal
atom_style atomic
boundary p p p
{extra_pre}
read_data {os.path.join(env.ref, data)}
{ps}
pair_coeff * * {os.path.join(env.ref, 'model.pt')} {species}
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
    pre = f"plugin load {env.vars.get('PLUGIN', '')}\n" if plugin else ""
    obs = OBSERVE
    if exchanges:
        obs = obs.replace("thermo_style custom step pe c_sumpe", "compute bmx all pair batmobile\n"
                          "thermo_style custom step pe c_sumpe c_bmx[1] c_bmx[2] c_bmx[3]")
    _, log, tmp = run_lmp(env, pre + base_script(env, **kw) + obs, nranks=nranks, kokkos=kokkos,
                          threads=threads, gpu=gpu, kokkos_pk=kokkos_pk)
    row = thermo_rows(log)[-1]
    lines = open(os.path.join(tmp, "dump.txt")).read().splitlines()
    start = lines.index(next(l for l in lines if l.startswith("ITEM: ATOMS"))) + 1
    d = np.array([[float(v) for v in l.split()] for l in lines[start:]])
    return {
        "energy": row["PotEng"],
        "sum_pe_atom": row["c_sumpe"],
        "virial": np.array([row[f"v_W{k}"] for k in range(1, 7)]),
        "forces": d[:, 1:4],
        "atomic_energies": d[:, 4],
        "atomic_virial": -d[:, 5:11] / NKTV2P,
        "exchanges": tuple(int(row[f"c_bmx[{k}]"]) for k in (1, 2, 3)) if exchanges else None,
    }


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
    if variant.startswith("mpi"):
        kw["nranks"] = int(variant[3:])
    if variant.startswith("kk_mpi"):  # batmobile/kk on N ranks x 1 thread
        kw.update(nranks=int(variant[6:]), threads=1)
    if variant.endswith("fused"):
        kw["kernels"] = "fused"
    if variant == "plugin":  # the styles from batmobileplugin.so (they override the built-in ones)
        if not os.path.isfile(env.vars.get("PLUGIN", "")):
            skip("no batmobileplugin.so in this build")
        kw["plugin"] = True
    got = observe(env, **kw)
    want = read_ref(env)
    ok = compare(variant, got, want, tol)
    s = abs(got["sum_pe_atom"] - got["energy"]) / abs(got["energy"])
    print(f"  sum pe/atom vs pe rel diff {s:.3e}")
    ok &= s <= (1e-12 if tol < 1e-6 else 1e-6)
    if not ok:
        fail(f"reference comparison ({variant})")
    print("PASS")


def test_hybrid(env):
    """pair_style hybrid/overlay with `batmobile ... O NULL`: H atoms are not model atoms; the result must be the
    model on the oxygen sub-system (reference computed on the O atoms alone), with zero forces/energies on H."""
    script = base_script(env).replace("pair_style batmobile", "pair_style hybrid/overlay batmobile zero 4.0").replace(
        f"pair_coeff * * {os.path.join(env.ref, 'model.pt')} O H",
        f"pair_coeff * * batmobile {os.path.join(env.ref, 'model.pt')} O NULL\npair_coeff * * zero")
    _, log, tmp = run_lmp(env, script + OBSERVE)
    row = thermo_rows(log)[-1]
    lines = open(os.path.join(tmp, "dump.txt")).read().splitlines()
    start = lines.index(next(l for l in lines if l.startswith("ITEM: ATOMS"))) + 1
    d = np.array([[float(v) for v in l.split()] for l in lines[start:]])
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


def test_slab(env):
    """Water slab with vacuum on 4 ranks (processors 1 1 4): ranks without atoms or ghosts must still join the
    forward/reverse exchange of node features (else the run hangs); results vs the PyTorch reference."""
    got = observe(env, data="slab.data", nranks=4, extra_pre="processors 1 1 4")
    ok = compare("slab 4 ranks", got, read_ref(env, "slab"), 1e-9)
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


def test_kk_comm(env):
    """batmobile/kk's ghost-feature exchange on several ranks: forward through CommKokkos's device pair communication
    (pack/unpack_forward_comm_kokkos; `package kokkos comm/pair/forward device`, the default with GPUs) or through
    host buffers (`host`, the default of host-only builds), reverse through LAMMPS's host reverse communication.
    `compute pair batmobile` reports per step, summed over ranks, the forward exchanges packed by
    pack_forward_comm_kokkos, those packed by the host pack_forward_comm, and the reverse exchanges: the test checks
    that each run took the path it asked for, and that its results equal batmobile's (CPU style, one rank, double;
    1e-4 for single precision), the two forward paths bit for bit. One rank uses the device image map (no LAMMPS
    exchange: all counts 0). With a 2-layer model each rank exchanges forward and reverse once per step."""
    if not env.has_style("batmobile/kk"):
        skip("this lmp has no batmobile/kk")
    layers = 2  # T of the test model (make_lammps_reference.py)
    default_path = "device" if env.vars.get("BACKEND") == "cuda" else "host"
    cpu = observe(env)
    ok = True
    results = {}
    for nranks, path, precision in ((1, "device", None), (2, "device", None), (4, "device", None), (2, "host", None),
                                    (2, None, None), (2, "device", "single"), (2, "host", "single")):
        pk = ("comm/pair/forward", path) if path else ()
        got = observe(env, kokkos=True, threads=1, nranks=nranks, kokkos_pk=pk, exchanges=True, precision=precision)
        name = (f"batmobile/kk {precision or 'double'} {nranks} rank{'s' if nranks > 1 else ''}, "
                f"forward {path or 'default'}")
        results[(nranks, path, precision)] = got
        per_step = nranks * (layers - 1)
        if nranks == 1:
            want = (0, 0, 0)
        elif (path or default_path) == "device":
            want = (per_step, 0, per_step)
        else:
            want = (0, per_step, per_step)
        print(f"  {name}: exchanges (device forward, host forward, reverse) {got['exchanges']}, expected {want}")
        ok &= got["exchanges"] == want
        ok &= compare(f"{name} vs batmobile", got, cpu, 1e-4 if precision else 1e-10)
    # the same decomposition through either forward path: the same numbers, to the last bit
    for precision in (None, "single"):
        a, b = results[(2, "device", precision)], results[(2, "host", precision)]
        same = all(np.array_equal(np.asarray(a[k]), np.asarray(b[k]))
                   for k in ("energy", "forces", "atomic_energies", "virial", "atomic_virial"))
        print(f"  {precision or 'double'}, 2 ranks, device vs host forward path: "
              f"{'bitwise identical' if same else 'DIFFERENT'}")
        ok &= same
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
    flines = open(os.path.join(tmp, "f.txt")).read().splitlines()
    start = flines.index(next(l for l in flines if l.startswith("ITEM: ATOMS"))) + 1
    F = {int(l.split()[0]): np.array([float(v) for v in l.split()[1:4]]) for l in flines[start:]}
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


def test_errors(env):
    ref = env.ref
    model = os.path.join(ref, "model.pt")
    cases = [
        ("wrong species count", base_script(env, species="O"), "expected '* * model.pt' followed by 2 species names"),
        ("unknown species", base_script(env, species="O C"), "species 'C' is not in the model"),
        ("missing file", base_script(env).replace(model, os.path.join(ref, "nope.pt")), "cannot open"),
        ("corrupt file", base_script(env).replace(model, os.path.join(ref, "corrupt.pt")),
         "not a readable TorchScript archive"),
        ("wrong version", base_script(env).replace(model, os.path.join(ref, "bad_version.pt")),
         "unsupported format version 99"),
        ("units real", base_script(env).replace("units metal", "units real") + "run 0\n", "needs 'units metal'"),
        ("newton off", base_script(env, extra_pre="newton off") + "run 0\n", "needs 'newton on'"),
        ("thin box", base_script(env, data="thin.data") + "run 0\n", "thinner than the model cutoff"),
        ("atoms too close", base_script(env, data="water_close.data") + "run 0\n", "closer than half the smallest"),
        ("bad keyword", base_script(env).replace("pair_style batmobile", "pair_style batmobile precision quad"),
         "unknown precision 'quad'"),
    ]
    ok = True
    for name, script, message in cases:
        rc, out, _ = run_lmp(env, script, expect_fail=True)
        good = rc != 0 and message in out
        err = next((l for l in out.splitlines() if "ERROR" in l), "(no ERROR line)")
        print(f"  {name:20s} {'ok ' if good else 'BAD'} rc={rc}: {err.strip()}")
        ok &= good
    if not ok:
        fail("an error case did not stop with its message")
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


def test_kk_md(env, nranks=1, forward=None):
    """batmobile/kk follows the batmobile trajectory through re-neighbouring (small skin, every step): on one rank
    the ghost features go through the device image map rebuilt at each re-neighbouring, on several ranks through
    LAMMPS's pair communication with atoms migrating between ranks. forward: LAMMPS's comm/pair/forward setting
    (device or host; its default when not given); when given, every thermo step's forward exchanges must have taken
    that path (compute pair, as in kk_comm)."""
    if not env.has_style("batmobile/kk"):
        skip("this lmp has no batmobile/kk")
    # cold and short: the seeded random model is not a water model and pulls atoms together when hot
    md = """neighbor 0.2 bin
neigh_modify every 1 delay 0 check yes
velocity all create 50.0 4928459 mom yes rot yes dist gaussian
timestep 0.0005
fix 1 all nve
thermo 5
thermo_style custom step pe ke press
thermo_modify format float %.15g
run 40
"""
    rows = {}
    kk = dict(kokkos=True, threads=1 if nranks > 1 else 2, nranks=nranks,
              kokkos_pk=("comm/pair/forward", forward) if forward else ())
    # batmobile/kk with a given forward path also prints its forward exchanges through pack_forward_comm_kokkos
    md_kk = md.replace("thermo_style custom step pe ke press",
                       "compute bmx all pair batmobile\nthermo_style custom step pe ke press c_bmx[1] c_bmx[2]")
    for name, kw, script in (("batmobile", {}, md), ("batmobile/kk", kk, md_kk if forward else md)):
        _, log, _ = run_lmp(env, base_script(env) + script, **kw)
        rows[name] = thermo_rows(log)
        builds = re.findall(r"Neighbor list builds = (\d+)", log)
        print(f"  {name}: {len(rows[name])} thermo rows, neighbor list builds {builds[-1] if builds else '?'}")
        if builds and int(builds[-1]) < 2:
            fail("the trajectory did not re-neighbour: the test would not exercise the ghost map rebuild")
    a, b = rows["batmobile"], rows["batmobile/kk"]
    if len(a) != len(b) or len(a) < 7:
        fail(f"thermo rows differ: {len(a)} vs {len(b)}")
    if forward and nranks > 1:
        per_step = nranks * 1  # the 2-layer test model: one forward exchange per rank and step
        want = (per_step, 0) if forward == "device" else (0, per_step)
        got = sorted({(int(r["c_bmx[1]"]), int(r["c_bmx[2]"])) for r in b})
        print(f"  forward exchanges per step (device, host) at the thermo steps: {got}, expected {[want]}")
        if got != [want]:
            fail(f"the forward exchanges did not all go through the {forward} path")
    worst = 0.0
    for ra, rb in zip(a, b):
        for key in ("PotEng", "KinEng", "Press"):
            worst = max(worst, abs(ra[key] - rb[key]) / max(abs(ra[key]), 1e-300))
    print(f"  max relative difference along 40 steps (pe, ke, press): {worst:.3e} (tol 1e-8)")
    if worst > 1e-8:
        fail("batmobile/kk trajectory differs from batmobile")
    print("PASS")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="")
    ap.add_argument("--ref", required=True)
    ap.add_argument("test")
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()
    env = Env(a.build, a.ref)
    {"reference": lambda: test_reference(env, *(a.args or ["double"])), "ranks": lambda: test_ranks(env),
     "kk": lambda: test_kk(env), "fd": lambda: test_fd(env), "errors": lambda: test_errors(env),
     "nve": lambda: test_nve(env), "hybrid": lambda: test_hybrid(env), "slab": lambda: test_slab(env),
     "kk_comm": lambda: test_kk_comm(env),
     "kk_md": lambda: test_kk_md(env, int(a.args[0]) if a.args else 1,
                                 a.args[1] if len(a.args) > 1 else None)}[a.test]()


if __name__ == "__main__":
    main()
