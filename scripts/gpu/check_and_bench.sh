#!/usr/bin/env bash
# One device call (<= 10 min on the 2-GPU kind; repo root, .carry/ carried) that checks a change end to end:
#   1. the LAMMPS + KOKKOS(CUDA) build (scripts/build_lammps.sh) and, beside it, the kernel tests (default
#      test_interaction; BATMOBILE_CHECK_KERNEL_TESTS="test_interaction test_conv_weights ...") against an in-tree
#      CUDA Kokkos without LAMMPS or libtorch;
#   2. then, on the last GPU, those kernel tests followed by the LAMMPS-level tests (ctest -L lammps: pair style
#      against the PyTorch reference, KOKKOS on the GPU, MPI ranks, NVE; they need a configured test tree only),
#      while the MD throughput benchmark (bench/md/run_md_bench.sh; BATMOBILE_MD_CASES as there) runs on GPU 0.
#      With one GPU the benchmark runs first and alone, so that no test shares the GPU with its timings; the tests
#      get what is left of the deadline. BATMOBILE_CHECK_KERNEL_TESTS=none builds no kernel test.
# Everything stops by BATMOBILE_CHECK_DEADLINE_S (default 570 s) after the start. Logs, ctest output and
# OUTDIR/md/md_h200.json go to OUTDIR, which is packed into OUTDIR.tgz at the end (the device tool brings back a
# limited number of files). Exit status 0 if every step passed.
#   scripts/gpu/check_and_bench.sh OUTDIR
set -uo pipefail
OUT=$(mkdir -p "${1:?usage: check_and_bench.sh OUTDIR}" && cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd); cd "$REPO"
export BATMOBILE_CACHE=${BATMOBILE_CACHE:-/tmp/batmobile-cache} CMAKE_POLICY_VERSION_MINIMUM=3.5 NVCC_WRAPPER_DEFAULT_ARCH=sm_90
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NG=$(nvidia-smi -L 2>/dev/null | wc -l); LAST=$(( NG > 1 ? NG - 1 : 0 ))
T0=$(date +%s); DEADLINE=${BATMOBILE_CHECK_DEADLINE_S:-570}
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
budget() { local b=$(( $(left) - $1 )); echo $(( b > 5 ? b : 5 )); }  # seconds left less a margin, at least 5
say() { echo "[check_and_bench +$(( $(date +%s) - T0 ))s] $*"; }
rc=0
LV=$(scripts/gpu/unpack_carry.sh 2> "$OUT/unpack.log" | tail -n1)
[ -d "$LV/lib/kokkos" ] || { say "unpack failed: see unpack.log (is .carry/ carried?)"; exit 1; }
source scripts/gpu/cuda_tree.sh
KTESTS=(${BATMOBILE_CHECK_KERNEL_TESTS:-test_interaction})
[ "${KTESTS[*]}" = none ] && KTESTS=()
KB=$BATMOBILE_CACHE/build/kernels-cuda
KPID=
if [ ${#KTESTS[@]} -gt 0 ]; then
  configure_cuda_tree . "$KB" -DBATMOBILE_WITH_TORCH=OFF > "$OUT/configure_kernels.log" 2>&1 || say "kernel tree: configure failed"
  # a third of the cores: the LAMMPS build takes the rest (the interaction tests are several nvcc processes)
  timeout "$(budget 0)" cmake --build "$KB" -j $(( $(nproc) / 3 + 1 )) --target "${KTESTS[@]}" > "$OUT/build_kernels.log" 2>&1 &
  KPID=$!
fi
LAMMPS_BUILD=$(BATMOBILE_JOBS=$(nproc) scripts/build_lammps.sh --backend cuda 2> "$OUT/build_lammps.log" | tail -n1)
source "$LAMMPS_BUILD/batmobile-build.env" || { say "LAMMPS build failed: see build_lammps.log"; exit 1; }
say "LAMMPS built; MD benchmark on GPU 0"
( export CUDA_VISIBLE_DEVICES=0
  BATMOBILE_MD_CASE_TIMEOUT=${BATMOBILE_MD_CASE_TIMEOUT:-90} timeout "$(budget 10)" \
    bench/md/run_md_bench.sh "$LMP" potentials/water_fast.pt "$OUT/md" > "$OUT/md_bench.log" 2>&1 ) &
MDP=$!
if [ "$NG" -le 1 ]; then
  wait $MDP || { say "MD benchmark incomplete (md_bench.log)"; rc=1; }
  MDP=
  say "MD benchmark done; tests on the same GPU"
fi
[ -z "$KPID" ] || wait $KPID || { say "kernel tests: build failed or timed out (build_kernels.log)"; rc=1; }
for t in "${KTESTS[@]}"; do
  say "$t on GPU $LAST"
  CUDA_VISIBLE_DEVICES=$LAST timeout "$(budget 20)" "$KB/tests/kernels/$t" > "$OUT/$t.log" 2>&1 || rc=1
  grep -E "^\[  PASSED|^\[  FAILED|^\[  SKIPPED" "$OUT/$t.log" | head -20
done
# the LAMMPS-level tests run lmp through Python: a configured test tree is enough (nothing to compile)
TB=$BATMOBILE_CACHE/build/test-cuda
configure_cuda_tree . "$TB" -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null)" \
  -DBATMOBILE_LAMMPS_BUILD="$LAMMPS_BUILD" -DBATMOBILE_LAMMPS_STOCK_BUILD="$LAMMPS_BUILD" > "$OUT/configure_tests.log" 2>&1 ||
  say "test tree: configure failed"
say "LAMMPS-level tests on GPU $LAST (at most $(budget 15)s)"
CUDA_VISIBLE_DEVICES=$LAST timeout "$(budget 15)" ctest --test-dir "$TB" -L lammps -j 4 --output-on-failure \
  --timeout 200 > "$OUT/ctest_lammps.log" 2>&1 || rc=1
grep -hE "tests passed|tests failed|\*\*\*Failed|Not Run|Skipped|Timeout" "$OUT/ctest_lammps.log" | head -n 20
[ -z "$MDP" ] || wait $MDP || { say "MD benchmark incomplete (md_bench.log)"; rc=1; }
tail -n 4 "$OUT/md_bench.log"
tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")" && say "packed $OUT.tgz"
say "done (rc=$rc)"
exit $rc
