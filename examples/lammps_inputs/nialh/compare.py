#!/usr/bin/env python3
"""A Batmobile Ni-Al-H model against the potential that labelled its data, both run by LAMMPS: the energy-volume
curve of perfect B2 NiAl and the partial radial distribution functions of liquid NiAl. A test of generality (does
the training reproduce a known potential?), not a physics result. Writes OUT/compare.json and OUT/compare.png.

  examples/lammps_inputs/nialh/compare.py --lmp LMP --model potentials/nialh_eam.pt \
      --potential NiAlH_jea.eam.alloy --out OUT

--pair-style / --pair-coeff replace the reference potential's two lines, as in generate_frames.py.
LMP needs pair_style batmobile (built in, or --plugin FILE for `plugin load`) and the reference style.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SPECIES = "Ni Al H"


def run_lmp(lmp, script, d, variables, plugin=None, threads=1):
    os.makedirs(d, exist_ok=True)
    args = [lmp, "-in", os.path.join(HERE, script), "-log", "log.lammps", "-screen", "none"]
    if plugin:
        # the plugin's styles are registered by a command before the input runs
        with open(os.path.join(d, "pre.in"), "w") as f:
            f.write(f"plugin load {plugin}\ninclude {os.path.join(HERE, script)}\n")
        args[2] = os.path.join(d, "pre.in")
    for k, v in variables.items():
        args += ["-var", k, str(v)]
    p = subprocess.run(args, cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="false"))
    log = open(os.path.join(d, "log.lammps")).read() if os.path.isfile(os.path.join(d, "log.lammps")) else ""
    if p.returncode != 0:
        raise SystemExit(f"{d}: LAMMPS failed ({p.returncode}):\n{(log + p.stdout)[-2000:]}")
    return log


def energy_per_atom(log):
    rows = re.findall(r"^\s*0\s+(\S+)\s+(\S+)\s+(\d+)\s*$", log, re.M)
    pe, vol, n = rows[-1]
    return float(pe) / int(n), float(vol) / int(n)


def read_rdf(path):
    """The last block of a compute rdf file: r and g(r) of each pair (columns 3, 5, 7, ...)."""
    lines = [l for l in open(path) if not l.startswith("#")]
    blocks, k = [], 0
    while k < len(lines):
        head = lines[k].split()
        n = int(head[1])
        blocks.append(np.array([[float(v) for v in l.split()] for l in lines[k + 1:k + 1 + n]]))
        k += 1 + n
    last = blocks[-1]
    return last[:, 1], last[:, 2::2]


def quadratic_fit(v, e):
    c = np.polyfit(v, e, 2)
    v0 = -c[1] / (2 * c[0])
    return {"v0_A3_per_atom": float(v0), "e0_eV_per_atom": float(np.polyval(c, v0)),
            "bulk_modulus_GPa": float(2 * c[0] * v0 * 160.21766)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lmp", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--potential", default=None)
    p.add_argument("--pair-style", default="pair_style eam/alloy")
    p.add_argument("--pair-coeff", default=None)
    p.add_argument("--plugin", default=None, help="batmobileplugin.so for a LAMMPS without the styles built in")
    p.add_argument("--cells", type=int, default=4)
    p.add_argument("--T", type=float, default=2200.0)
    p.add_argument("--melt-T", type=float, default=3000.0, help="start of the melt (K), cooled to --T")
    p.add_argument("--neq", type=int, default=2000)
    p.add_argument("--nprod", type=int, default=2000)
    p.add_argument("--threads", type=int, default=1, help="OpenMP threads of each batmobile run")
    p.add_argument("--jobs", type=int, default=os.cpu_count())
    a = p.parse_args(argv)
    if a.pair_coeff is None:
        if not a.potential or not os.path.isfile(a.potential):
            raise SystemExit("--potential NiAlH_jea.eam.alloy is needed (or --pair-coeff with another style)")
        a.pair_coeff = f"pair_coeff * * {os.path.abspath(a.potential)} {SPECIES}"
    styles = {"reference": (a.pair_style, a.pair_coeff),
              "batmobile": ("pair_style batmobile", f"pair_coeff * * {os.path.abspath(a.model)} {SPECIES}")}
    scales = np.linspace(0.94, 1.06, 9)
    jobs = []
    with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        for name, (ps, pc) in styles.items():
            for s in scales:
                d = os.path.join(a.out, f"ev_{name}_{s:.3f}")
                jobs.append(("ev", name, s, pool.submit(run_lmp, a.lmp, "in.nialh_ev", d, {
                    "pair_style_line": ps, "pair_coeff_line": pc, "a": 2.88 * s, "nx": a.cells},
                    a.plugin if name == "batmobile" else None, a.threads)))
            d = os.path.join(a.out, f"liquid_{name}")
            jobs.append(("rdf", name, d, pool.submit(run_lmp, a.lmp, "in.nialh_liquid", d, {
                "pair_style_line": ps, "pair_coeff_line": pc, "nx": a.cells, "T": a.T, "Tmelt": a.melt_T, "seed": 7, "neq": a.neq,
                "nprod": a.nprod}, a.plugin if name == "batmobile" else None, a.threads)))
        ev = {n: [] for n in styles}
        rdf = {}
        for kind, name, arg, fut in jobs:
            log = fut.result()
            if kind == "ev":
                ev[name].append(energy_per_atom(log))
            else:
                rdf[name] = read_rdf(os.path.join(arg, "rdf.dat"))
    result = {"what": __doc__.split("\n\n")[0].replace("\n", " "),
              "provenance": {"command": "examples/lammps_inputs/nialh/compare.py " + " ".join(
                  shlex.quote(s) for s in (argv if argv is not None else sys.argv[1:]))},
              "energy_volume": {}, "liquid_rdf": {"T_K": a.T, "pairs": ["Ni-Ni", "Al-Al", "Ni-Al"]}}
    for name, pts in ev.items():
        e, v = np.array([q[0] for q in pts]), np.array([q[1] for q in pts])
        result["energy_volume"][name] = {"volume_A3_per_atom": v.tolist(), "energy_eV_per_atom": e.tolist(),
                                         **quadratic_fit(v, e)}
    e_ref = np.array(result["energy_volume"]["reference"]["energy_eV_per_atom"])
    e_bm = np.array(result["energy_volume"]["batmobile"]["energy_eV_per_atom"])
    result["energy_volume"]["max_abs_difference_meV_per_atom"] = float(1e3 * np.abs(e_bm - e_ref).max())
    for name, (r, g) in rdf.items():
        result["liquid_rdf"][name] = {"r_A": r.tolist(), "g": g.T.tolist(),
                                      "first_peak_r_A": [float(r[np.argmax(col)]) for col in g.T]}
    with open(os.path.join(a.out, "compare.json"), "w") as f:
        json.dump(result, f, indent=1)
    plot(result, os.path.join(a.out, "compare.png"))
    print(json.dumps({"ev_max_abs_difference_meV_per_atom": result["energy_volume"]["max_abs_difference_meV_per_atom"],
                      "first_peaks": {n: result["liquid_rdf"][n]["first_peak_r_A"] for n in rdf}}))
    return result


def plot(result, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.3))
    for k, name in enumerate(("reference", "batmobile")):
        ev = result["energy_volume"][name]
        ax.plot(ev["volume_A3_per_atom"], ev["energy_eV_per_atom"], "o-" if k == 0 else "s--", label=name)
        rd = result["liquid_rdf"][name]
        for j, pair in enumerate(result["liquid_rdf"]["pairs"]):
            bx.plot(rd["r_A"], rd["g"][j], color=f"C{j}", ls="-" if k == 0 else "--",
                    label=f"{pair} ({name})")
    ax.set_xlabel("volume [A^3/atom]")
    ax.set_ylabel("energy [eV/atom]")
    ax.set_title("B2 NiAl: energy-volume curve")
    ax.legend()
    bx.set_xlabel("r [A]")
    bx.set_ylabel("g(r)")
    bx.set_title(f"liquid NiAl at {result['liquid_rdf']['T_K']:g} K")
    bx.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
