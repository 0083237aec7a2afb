#!/usr/bin/env python3
"""LAMMPS-level test runner, driven by CTest (tests/lammps/CMakeLists.txt).

Runs the lmp (and plugin) built by scripts/build_lammps.sh and checks its output. Exit codes:
0 pass, 1 fail, 77 skip (CTest SKIP_RETURN_CODE; the reason is printed on the last line).

Tests:
  help          lmp -h lists the PLUGIN package (and KOKKOS where the build has it) and the styles the build compiles
                in (batmobile; batmobile/kk with KOKKOS), or none of them in a --plugin-only (stock) build
  plugin        `plugin load batmobileplugin.so` registers every style the plugin was built with
  plugin_version --other BUILD   the plugin of --build loaded into the lmp of another LAMMPS version stops LAMMPS
                with an error naming both versions
  lj VARIANT    LJ liquid (examples/lammps_inputs/smoke/in.lj): step-0 energy and virial pressure against an
                independent numpy double-precision evaluation, NVE energy conservation, and every thermo
                line against the plain serial run. VARIANT: serial | kk_t1 | kk_t2 | mpiN | mpiN_kk | kk_gpu
"""
import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

SKIP = 77
REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SMOKE = os.path.join(REPO, "examples", "lammps_inputs", "smoke")
STYLE_DIR = os.path.join(REPO, "src", "pair_batmobile")


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def fail(reason):
    print(f"FAIL: {reason}")
    sys.exit(1)


def read_build_env(build_dir):
    env_file = os.path.join(build_dir or "", "batmobile-build.env")
    if not build_dir or not os.path.isfile(env_file):
        skip(f"no LAMMPS build (batmobile-build.env) in '{build_dir}'; run scripts/build_lammps.sh and "
             "configure with -DBATMOBILE_LAMMPS_BUILD=<its last output line>")
    env = {}
    with open(env_file) as f:
        for line in f:
            if "=" in line:
                k, v = line.strip().split("=", 1)
                env[k] = v
    return env


def run(cmd, cwd, timeout=600, extra_env=None):
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OMP_PROC_BIND", "false")
    if extra_env:
        env.update(extra_env)
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, env=env)
    return p.returncode, p.stdout


def mpirun_prefix(nranks):
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        skip("mpirun not found: MPI variants need OpenMPI (openmpi-bin)")
    cmd = [mpirun, "-np", str(nranks), "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    return cmd


LAMMPS_VERSIONS = {"2025": ("4 Feb 2025", 20250204), "2026": ("4 Jul 2026", 20260704)}


def lammps_of(env):
    """'2025' or '2026': the LAMMPS version of a build."""
    return env.get("LAMMPS", "2025")


def has_kokkos(env):
    """Whether the build's LAMMPS has the KOKKOS package (then the plugin and the build carry batmobile/kk too)."""
    return env.get("KOKKOS", "OFF") == "ON"


def built_styles(env):
    """(kind, name) of the styles a build compiles: every style macro, less the KOKKOS ones without KOKKOS."""
    kokkos = has_kokkos(env)
    return [(k, n) for k, n in style_macros() if kokkos or not (n.endswith("/kk") or "/kk/" in n)]


def style_macros():
    """(kind, name) of every style macro in src/pair_batmobile/*.h."""
    found = []
    for fname in sorted(os.listdir(STYLE_DIR)):
        if fname.endswith(".h"):
            with open(os.path.join(STYLE_DIR, fname)) as f:
                for m in re.finditer(r"^\s*(Pair|Fix|Compute)Style\(\s*([^,\s]+)\s*,", f.read(), re.M):
                    found.append((m.group(1).lower(), m.group(2)))
    return found


def help_sections(text):
    """Maps '* Pair styles' like headers and 'Installed packages' of `lmp -h` to their word sets."""
    sections, current = {}, None
    for line in text.splitlines():
        header = re.match(r"^(\* )?([A-Za-z ]+styles|Installed packages):?\s*$", line.strip())
        if header:
            current = header.group(2).lower()
            sections[current] = set()
        elif current is not None:
            if line.startswith("* ") or line.startswith("List of "):
                current = None
            else:
                sections[current].update(line.split())
    return sections


def test_help(env):
    rc, out = run([env["LMP"], "-h"], cwd=REPO)
    print(out[-3000:])
    if rc != 0:
        fail(f"lmp -h exited with {rc}")
    sec = help_sections(out)
    packages = sec.get("installed packages", set())
    wanted = ("KOKKOS", "PLUGIN") if has_kokkos(env) else ("PLUGIN",)
    for pkg in wanted:
        if pkg not in packages:
            fail(f"package {pkg} missing from `lmp -h` installed packages: {sorted(packages)}")
    # (LAMMPS lists no /kk/host and /kk/device variants in `lmp -h`; `plugin list` shows them registered)
    expected = [(k, n) for k, n in built_styles(env) if not re.search(r"/kk/(host|device)$", n)]
    if not expected:
        fail(f"no style macros found in {STYLE_DIR}")
    builtin = env.get("BUILTIN", "ON") == "ON"
    for kind, name in expected:
        if (name in sec.get(f"{kind} styles", set())) != builtin:
            fail(f"{kind} style {name} {'not ' if builtin else ''}registered in lmp (lmp -h)")
    print(f"PASS: {', '.join(wanted)} installed; {', '.join(n for _, n in expected)}",
          "registered" if builtin else "absent (stock LAMMPS)")


def run_script(lmp, script):
    """Runs an input script with lmp in a scratch directory; (exit code, screen output)."""
    with tempfile.TemporaryDirectory() as tmp:
        inp = os.path.join(tmp, "in.test")
        with open(inp, "w") as f:
            f.write(script)
        return run([lmp, "-in", inp, "-log", "none"], cwd=tmp)


def test_plugin(env):
    plugin = env.get("PLUGIN", "")
    if not os.path.isfile(plugin):
        fail(f"plugin {plugin} was not built")
    rc, out = run_script(env["LMP"], f"plugin load {plugin}\nplugin list\nprint 'after the plugin'\n")
    print(out)
    if env.get("BUILTIN") == "ON":  # the styles are compiled in: the plugin refuses to load a second copy
        expected = "ERROR: pair style batmobile is compiled into this LAMMPS: use it without plugin load"
        if expected not in out or rc == 0 or "after the plugin" in out:
            fail(f"expected LAMMPS to stop with '{expected} ...' (exit code {rc})")
        print(f"PASS: a LAMMPS with the styles compiled in refuses the plugin with a clear error (exit code {rc})")
        return
    if rc != 0:
        fail(f"lmp exited with {rc}")
    if "Loading plugin:" not in out:
        fail("plugin did not load")
    for kind, name in built_styles(env):
        if not re.search(rf"\b{kind} style plugin {re.escape(name)}\s*$", out, re.M):
            fail(f"plugin list lacks {kind} style {name}")
    print("PASS: plugin loaded and registered its styles")


def test_plugin_version(env, other):
    """The plugin of `env` in the lmp of `other` (another LAMMPS version): LAMMPS stops with a clear error."""
    built, running = LAMMPS_VERSIONS[lammps_of(env)], LAMMPS_VERSIONS[lammps_of(other)]
    if built == running:
        fail(f"both builds are LAMMPS {built[0]}: pass a build of another version with --other")
    rc, out = run_script(other["LMP"], f"plugin load {env.get('PLUGIN', '')}\nplugin list\nprint 'after the plugin'\n")
    print(out)
    expected = (f"ERROR: batmobileplugin.so was built for LAMMPS {built[0]} ({built[1]}), but this LAMMPS is "
                f"version {running[1]}")
    if expected not in out:
        fail(f"no '{expected}' in the output")
    if rc == 0 or "after the plugin" in out:
        fail(f"LAMMPS went on after the version error (exit code {rc})")
    print(f"PASS: the LAMMPS {built[0]} plugin stops LAMMPS {running[0]} with a clear error (exit code {rc})")


# ---------------------------------------------------------------- LJ smoke test
DENSITY, CELLS, RC, SEED = 0.8442, 4, 2.5, 2021


def lj_configuration():
    """fcc lattice with seeded random displacements (so forces and virial are non-trivial)."""
    a = (4.0 / DENSITY) ** (1.0 / 3.0)
    basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    cells = np.array([[i, j, k] for i in range(CELLS) for j in range(CELLS) for k in range(CELLS)])
    x = ((cells[:, None, :] + basis[None, :, :]).reshape(-1, 3)) * a
    x += np.random.default_rng(SEED).uniform(-0.03, 0.03, x.shape) * a  # small: dt 0.005 stays accurate
    box = CELLS * a
    return x % box, box


def lj_reference(x, box):
    """Potential energy per atom and virial pressure, plain pair sum in double precision (minimum image)."""
    n = len(x)
    d = x[:, None, :] - x[None, :, :]
    d -= box * np.round(d / box)
    r2 = (d ** 2).sum(-1)
    iu = np.triu_indices(n, 1)
    r2 = r2[iu]
    inside = r2 < RC * RC
    inv6 = 1.0 / r2[inside] ** 3
    shift = 4.0 * (RC ** -12 - RC ** -6)  # pair_modify shift yes
    energy = (4.0 * (inv6 * inv6 - inv6) - shift).sum()
    virial = (24.0 * (2.0 * inv6 * inv6 - inv6)).sum()  # sum over pairs of r . f
    return energy / n, virial / (3.0 * box ** 3)


def write_data(path, x, box):
    with open(path, "w") as f:
        f.write(f"LJ smoke configuration\n\n{len(x)} atoms\n1 atom types\n\n")
        for lo_hi in ("x", "y", "z"):
            f.write(f"0.0 {box:.17g} {lo_hi}lo {lo_hi}hi\n")
        f.write("\nAtoms # atomic\n\n")
        for i, p in enumerate(x):
            f.write(f"{i + 1} 1 {p[0]:.17g} {p[1]:.17g} {p[2]:.17g}\n")


def thermo_rows(out):
    rows, active = [], False
    for line in out.splitlines():
        cols = line.split()
        if cols[:5] == ["Step", "PotEng", "KinEng", "TotEng", "c_pvir"]:
            active = True
            continue
        if active:
            try:
                rows.append([float(c) for c in cols[:5]])
            except ValueError:
                active = False
    return np.array(rows)


def variant_command(env, variant):
    lmp = env["LMP"]
    if variant == "serial":
        return [lmp]
    gpu_build = env.get("BACKEND") == "cuda"
    if variant in ("kk_t1", "kk_t2"):
        if gpu_build:
            skip("host-thread KOKKOS variant: this LAMMPS is a CUDA build (use kk_gpu); needs an OpenMP build")
        return [lmp, "-k", "on", "t", variant[-1], "-sf", "kk"]
    if variant == "kk_gpu":
        if env.get("BACKEND") != "cuda":
            skip(f"needs a CUDA (GPU) build of LAMMPS; this build's Kokkos backend is {env.get('BACKEND')}")
        return [lmp, "-k", "on", "g", "1", "-sf", "kk", "-pk", "kokkos", "newton", "on", "neigh", "half"]
    m = re.fullmatch(r"mpi(\d+)(_kk)?", variant)
    if m:
        if env.get("MPI") != "on":
            skip("LAMMPS was built without MPI (BUILD_MPI=OFF)")
        cmd = mpirun_prefix(int(m.group(1))) + [lmp]
        if m.group(2):  # ranks share the one GPU on a CUDA build
            cmd += ["-k", "on", "g" if gpu_build else "t", "1", "-sf", "kk"]
        return cmd
    fail(f"unknown variant {variant}")


def run_lj(cmd, tmp):
    rc, out = run(cmd + ["-in", os.path.join(SMOKE, "in.lj"), "-var", "datafile", "lj.data", "-log", "none"],
                  cwd=tmp)
    if rc != 0:
        print(out[-4000:])
        fail(f"LAMMPS exited with {rc}")
    rows = thermo_rows(out)
    if len(rows) != 6:
        print(out[-4000:])
        fail(f"expected 6 thermo lines (steps 0..50), got {len(rows)}")
    return rows, out


def test_lj(env, variant):
    cmd = variant_command(env, variant)
    x, box = lj_configuration()
    pe_ref, pvir_ref = lj_reference(x, box)
    with tempfile.TemporaryDirectory() as tmp:
        write_data(os.path.join(tmp, "lj.data"), x, box)
        rows, out = run_lj(cmd, tmp)
        baseline = rows if variant == "serial" else run_lj([env["LMP"]], tmp)[0]
    print(out[-1500:])
    pe0, pvir0 = rows[0, 1], rows[0, 4]
    print(f"step 0: PotEng {pe0:.12g} (numpy {pe_ref:.12g}), virial pressure {pvir0:.12g} (numpy {pvir_ref:.12g})")
    if not math.isclose(pe0, pe_ref, rel_tol=1e-9):
        fail("step-0 potential energy differs from the independent reference")
    if not math.isclose(pvir0, pvir_ref, rel_tol=1e-9):
        fail("step-0 virial pressure differs from the independent reference")
    drift = abs(rows[-1, 3] - rows[0, 3]) / abs(rows[0, 3])
    print(f"NVE relative total-energy drift over 50 steps: {drift:.3e}")
    if drift > 1e-4:  # velocity Verlet, dt 0.005, 50 steps: ~1e-6 for this system
        fail("total energy not conserved in NVE")
    worst = np.max(np.abs(rows - baseline) / np.maximum(np.abs(baseline), 1e-12))
    print(f"largest relative deviation from the plain serial run: {worst:.3e}")
    if worst > 1e-7:
        fail("thermo output differs from the plain serial run")
    print(f"PASS: LJ smoke ({variant})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="", help="LAMMPS build dir from scripts/build_lammps.sh")
    ap.add_argument("--other", default="", help="plugin_version: a LAMMPS build of another version")
    ap.add_argument("test", choices=["help", "plugin", "plugin_version", "lj"])
    ap.add_argument("variant", nargs="?", default="serial")
    args = ap.parse_args()
    env = read_build_env(args.build)
    if not os.access(env.get("LMP", ""), os.X_OK):
        fail(f"lmp binary {env.get('LMP')} missing")
    {"help": lambda: test_help(env), "plugin": lambda: test_plugin(env),
     "plugin_version": lambda: test_plugin_version(env, read_build_env(args.other)),
     "lj": lambda: test_lj(env, args.variant)}[args.test]()


if __name__ == "__main__":
    main()
