#!/usr/bin/env bash
# Everything, from a fresh Debian 12 machine to test results: installs Debian packages, fetches the LAMMPS
# and Kokkos sources from Debian's archive, builds a host Kokkos, LAMMPS 29 Sep 2021 with the Batmobile styles
# and LAMMPS 4 Feb 2025 twice (with the CPU style compiled in; stock, for the plugin), all cached under
# $BATMOBILE_CACHE (default ~/.cache/batmobile), builds the stand-alone project with its tests, runs CTest
# (GoogleTest suites + LAMMPS tests of both versions) and the Python tests. Exits non-zero on any failure.
# Environment: BATMOBILE_JOBS (parallel jobs, default nproc), BATMOBILE_TEST_BUILD (default build/test-cpu).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
cd "$BATMOBILE_REPO"
T0=$(date +%s)
stage() { log "=== $* ($(( $(date +%s) - T0 )) s elapsed)"; }

stage "Debian packages"
"$HERE/install_debian_deps.sh"
stage "sources + host Kokkos"
KOKKOS_PREFIX=$("$HERE/build_kokkos_host.sh" | tail -n1)
stage "LAMMPS + KOKKOS + Batmobile styles"
LAMMPS_BUILD=$("$HERE/build_lammps.sh" --backend openmp | tail -n1)
stage "LAMMPS 4 Feb 2025, stock (for the plugin)"
LAMMPS2025_STOCK=$("$HERE/build_lammps.sh" --lammps 2025 --plugin-only | tail -n1)
stage "LAMMPS 4 Feb 2025 + pair_style batmobile"
LAMMPS2025_BUILD=$("$HERE/build_lammps.sh" --lammps 2025 | tail -n1)

stage "stand-alone project (kernels, model, tests)"
B=${BATMOBILE_TEST_BUILD:-$BATMOBILE_REPO/build/test-cpu}
TORCH_PREFIX=$(/usr/bin/python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$KOKKOS_PREFIX" \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DBATMOBILE_LAMMPS_BUILD="$LAMMPS_BUILD" \
  -DBATMOBILE_LAMMPS2025_BUILD="$LAMMPS2025_BUILD" -DBATMOBILE_LAMMPS2025_STOCK_BUILD="$LAMMPS2025_STOCK" \
  -DBATMOBILE_PYTHON=/usr/bin/python3 -DPython3_EXECUTABLE=/usr/bin/python3
cmake --build "$B" -j "$(build_jobs)"

failed=()
# LAMMPS started without mpirun (an Open MPI singleton) runs without forking Open MPI's support daemon: that fork is
# the slow part of a singleton's start and on a loaded machine it sometimes fails ("Unable to start a daemon on the
# local node"); nothing here spawns MPI processes from a singleton.
export OMPI_MCA_ess_singleton_isolated=1
stage "ctest"
ctest --test-dir "$B" --output-on-failure --timeout 1800 || failed+=(ctest)
if [ -d python/tests ]; then
  stage "python tests"
  /usr/bin/python3 -m pytest -q python/tests || failed+=(pytest)
fi
stage "done"
if [ ${#failed[@]} -gt 0 ]; then
  log "FAILED: ${failed[*]}"; exit 1
fi
log "all tests passed (skipped tests are listed by ctest above with their reason)"
