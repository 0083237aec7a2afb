#!/usr/bin/env bash
# Second device call on a machine still warm from scripts/gpu/md_ab.sh (which built LAMMPS + KOKKOS(CUDA) into
# BATMOBILE_CACHE; repo root, .carry/ carried): configures and builds the CUDA test tree against that LAMMPS build
# (~300 s on 16 cores), runs the whole CTest on the GPU (~110 s: kernel tests, model tests, LAMMPS-level tests),
# then the MD throughput benchmark (bench/md/run_md_bench.sh, BATMOBILE_MD_CASES as there) with the time left before
# BATMOBILE_WARM_DEADLINE_S (default 585 s after the start); where both do not fit, CTest gets the time.
# Logs and OUTDIR/md go to OUTDIR, packed into OUTDIR.tgz. Exit status: CTest's.
#   scripts/gpu/warm_check.sh OUTDIR
set -uo pipefail
OUT=$(mkdir -p "${1:?usage: warm_check.sh OUTDIR}" && cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd); cd "$REPO"
T0=$(date +%s); DEADLINE=${BATMOBILE_WARM_DEADLINE_S:-585}
say() { echo "[warm_check +$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/warm_check.out"; }
export BATMOBILE_CACHE=${BATMOBILE_CACHE:-/tmp/batmobile-cache} CMAKE_POLICY_VERSION_MINIMUM=3.5 NVCC_WRAPPER_DEFAULT_ARCH=sm_90
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
# the CUDA LAMMPS build of this checkout (compare_builds.sh leaves another one, of its old tree, beside it)
LMP=
for l in "$BATMOBILE_CACHE"/build/lammps-*-cuda-*/lmp; do
  grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$REPO/cmake/lammps" "${l%/lmp}/CMakeCache.txt" 2>/dev/null &&
    { LMP=$l; break; }
done
[ -x "$LMP" ] || { say "no CUDA LAMMPS build of $REPO in $BATMOBILE_CACHE (run scripts/gpu/md_ab.sh first)"; exit 2; }
LV=$(scripts/gpu/unpack_carry.sh 2> "$OUT/unpack.log" | tail -n1)
source scripts/gpu/cuda_tree.sh
TB=${BATMOBILE_WARM_TEST_BUILD:-/tmp/batmobile-test-cuda}
configure_cuda_tree . "$TB" -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
  -DBATMOBILE_LAMMPS_BUILD="$(dirname "$(dirname "$LMP")")" > "$OUT/configure_tests.log" 2>&1 ||
  say "test tree: configure failed (configure_tests.log)"
cmake --build "$TB" -j "$(nproc)" > "$OUT/build_tests.log" 2>&1 || say "test tree: build failed (build_tests.log)"
say "test tree built"
source scripts/gpu/ab_runs.sh
slowest_build_steps "$TB" "$OUT/build_tests_slowest.txt"
# The tests come first: the benchmark keeps its 60 s only where CTest still gets the ~125 s it needs
LEFT=$(( DEADLINE - ($(date +%s) - T0) )); CT=$(( LEFT - 60 ))
[ "$CT" -ge 130 ] || CT=$(( LEFT - 5 ))
[ "$CT" -ge 30 ] || CT=30
timeout "$CT" ctest --test-dir "$TB" -j 4 --timeout 300 > "$OUT/ctest_all.log" 2>&1
rc=$?
[ "$rc" = 124 ] && say "ctest stopped after ${CT}s, the time left: not every test ran"
say "ctest exit $rc: $(grep -E "tests passed|tests failed" "$OUT/ctest_all.log" | tail -n1)"
md_bench_with_time_left 45
tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")" && say "packed $OUT.tgz"
exit "$rc"
