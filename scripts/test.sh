#!/usr/bin/env bash
# Everything, from a fresh Debian 12 machine to test results: installs Debian packages, fetches the sources (Kokkos
# from ../shared/vendor or upstream, LAMMPS from Debian's archive), builds a host Kokkos 4.5, LAMMPS 4 Feb 2025 with
# KOKKOS twice (stock with batmobileplugin.so built against it, as users run it; with our styles compiled in, sharing
# LAMMPS's objects through ccache), a stock LAMMPS 4 Jul 2026 with its plugin, and the Kokkos 5 readiness compile
# check (Kokkos 4.6, C++20, deprecated code off), all cached under $BATMOBILE_CACHE (default ~/.cache/batmobile);
# then builds the stand-alone project with its tests and runs CTest (GoogleTest suites + LAMMPS tests) and the
# Python tests. Exits non-zero on any failure.
# Environment: BATMOBILE_JOBS (parallel jobs, default nproc), BATMOBILE_TEST_BUILD (default build/test-cpu).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
cd "$BATMOBILE_REPO"
T0=$(date +%s)
stage() { log "=== $* ($(( $(date +%s) - T0 )) s elapsed)"; }

stage "Debian packages"
"$HERE/install_debian_deps.sh"
stage "sources + host Kokkos $KOKKOS_TAG"
"$HERE/fetch_sources.sh"
KOKKOS_PREFIX=$("$HERE/build_kokkos_host.sh" | tail -n1)
stage "LAMMPS 4 Feb 2025 + KOKKOS, stock, and the plugin"
LAMMPS_STOCK=$("$HERE/build_lammps.sh" --plugin-only | tail -n1)
stage "LAMMPS 4 Feb 2025 + KOKKOS with the Batmobile styles compiled in"
LAMMPS_BUILD=$("$HERE/build_lammps.sh" | tail -n1)
stage "LAMMPS 4 Jul 2026, stock, and the plugin"
LAMMPS2026_STOCK=$("$HERE/build_lammps.sh" --lammps 2026 --plugin-only | tail -n1)
stage "Kokkos 5 readiness: Kokkos $KOKKOS_NEXT_TAG, C++20, deprecated code off"
"$HERE/check_kokkos_next.sh"

stage "stand-alone project (kernels, model, tests)"
B=${BATMOBILE_TEST_BUILD:-$BATMOBILE_REPO/build/test-cpu}
TORCH_PREFIX=$(/usr/bin/python3 -c 'import torch;print(torch.utils.cmake_prefix_path)')
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DKokkos_ROOT="$KOKKOS_PREFIX" \
  -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DBATMOBILE_LAMMPS_BUILD="$LAMMPS_BUILD" \
  -DBATMOBILE_LAMMPS_STOCK_BUILD="$LAMMPS_STOCK" -DBATMOBILE_LAMMPS2026_STOCK_BUILD="$LAMMPS2026_STOCK" \
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
  # the package as users install it (pip install ./python into a venv on Debian's torch and numpy), tested from
  # outside python/ so that the installed copy is imported (test_package.py checks which; it also runs the
  # batmobile-* console scripts)
  stage "python package (pip install into $B/venv) and python tests"
  V=$(cd "$B" && pwd)/venv
  rm -rf python/build   # setuptools' in-tree build directory: a stale copy would ship modules removed since
  { [ -x "$V/bin/python" ] || /usr/bin/python3 -m venv --system-site-packages "$V"; } &&
    "$V/bin/python" -m pip install -q --no-build-isolation --no-deps ./python &&
    (cd "$B" && "$V/bin/python" -m pytest -q --installed "$BATMOBILE_REPO/python/tests") ||
    failed+=(pytest)
fi
stage "done"
if [ ${#failed[@]} -gt 0 ]; then
  log "FAILED: ${failed[*]}"; exit 1
fi
log "all tests passed (skipped tests are listed by ctest above with their reason)"
