#!/usr/bin/env python3
"""Runs LAMMPS's force-style harness (test_pair_style, built by scripts/build_lammps.sh --lammps 2025) on a YAML file
from make_harness_yaml.py. Exit codes: the harness's (0 pass), 77 skip (no harness in this build; reason printed).

    run_harness.py --build LAMMPS_BUILD_DIR --inputs DIR YAML
"""
import argparse
import os
import subprocess
import sys

SKIP = 77


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="")
    ap.add_argument("--inputs", required=True, help="folder of the YAML's input and data files")
    ap.add_argument("yaml")
    args = ap.parse_args()
    envf = os.path.join(args.build, "batmobile-build.env")
    if not args.build or not os.path.isfile(envf):
        print(f"SKIP: no LAMMPS build (batmobile-build.env) in '{args.build}'; run scripts/build_lammps.sh --lammps 2025")
        sys.exit(SKIP)
    env = dict(line.strip().split("=", 1) for line in open(envf) if "=" in line)
    harness = env.get("HARNESS", "")
    if not harness or not os.access(harness, os.X_OK):
        print("SKIP: this LAMMPS build has no force-style harness (built with the styles compiled in, LAMMPS 2025)")
        sys.exit(SKIP)
    cmd = [harness, os.path.join(args.inputs, args.yaml), "-d", args.inputs, "-s"]
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, cwd=args.inputs, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=1200,
                       env=dict(os.environ, OMP_NUM_THREADS="1", OMP_PROC_BIND="false"))
    print(p.stdout)
    if p.returncode == 0 and "[  PASSED  ]" not in p.stdout:
        print("FAIL: the harness exited 0 without GoogleTest's PASSED line")
        sys.exit(1)
    # a host KOKKOS build must run the KOKKOS variant (batmobile/kk), not skip it
    if env.get("KOKKOS") == "ON" and env.get("BACKEND") == "openmp" and "[       OK ] PairStyle.kokkos_omp" not in p.stdout:
        print("FAIL: LAMMPS has KOKKOS with OpenMP, but the harness did not run PairStyle.kokkos_omp")
        sys.exit(1)
    sys.exit(p.returncode)


if __name__ == "__main__":
    main()
