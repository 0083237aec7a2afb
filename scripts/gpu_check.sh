#!/usr/bin/env bash
# The GPU check of a CUDA machine, in one command (docs/development.md "GPU check"):
#   1. builds LAMMPS 4 Feb 2025 + KOKKOS (CUDA) with both Batmobile styles (scripts/build_lammps.sh --backend cuda),
#      with --plugin also a stock LAMMPS and the plugin against it (--plugin-only: what users load into their own
#      LAMMPS), then the CUDA kernel tests against an in-tree CUDA Kokkos (no LAMMPS, no libtorch). The builds run in
#      a process session of their own: where they outlast the deadline (a fresh machine needs ~10 min), the same
#      command run again on that machine waits for them instead of starting over;
#   2. runs the MD benchmark alone on the GPU (bench/md/run_md_bench.sh: steps/s, peak memory, the PyTorch reference
#      and the same-size e3nn column) into OUTDIR/md/md_<card>.json;
#   3. then the kernel tests and the LAMMPS-level suite (ctest -L lammps: the styles against the PyTorch reference,
#      1/2/4 ranks, restarts, errors; lammps.* on the stock LAMMPS + plugin with --plugin, else on the built-in
#      build) on the same GPU, in what is left of the deadline;
#   4. with --kernel-bench, first the kernel benchmark against e3nn (bench/run_gpu_bench.sh) into OUTDIR/kernels.
# Sources: on a machine without network, carry .carry/ (scripts/prepare_carry.sh, run where Debian's archive is
# reachable); elsewhere the build scripts fetch them. Exit status 0 when every step passed; OUTDIR.tgz holds the logs.
#
#   scripts/gpu_check.sh [options] OUTDIR
#     --kernel-tests LIST|none  CUDA kernel tests to build and run (default "test_interaction test_sh_cg test_eaas")
#     --md-cases "CASES"|none   MD cases atoms:rx:ry:rz:steps:precision[:repeats] ... (default: run_md_bench.sh's)
#     --potential FILE          model of the MD benchmark (default potentials/water_fast.pt)
#     --deadline SECONDS        everything stops this long after the start (default 570)
#     --cuda-arch sm_NN         GPU architecture (default sm_90: H100, H200)
#     --kernel-bench            also the kernel benchmark (fused kernels and e3nn on random graphs)
#     --plugin                  also the stock LAMMPS + plugin build, for the LAMMPS-level tests
#     --stock-only              only the stock LAMMPS + plugin (what users run): its LAMMPS-level tests, no built-in
#                               build, so no MD benchmark (it runs on the built-in styles) and no lammps_builtin tests
set -uo pipefail
usage() { sed -n '17,26p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
KTESTS="test_interaction test_sh_cg test_eaas"; CASES=; POT=potentials/water_fast.pt; DEADLINE=570; ARCH=sm_90
KBENCH=0; PLUGIN=0; STOCK_ONLY=0
while [ $# -gt 1 ]; do
  [ "$1" = --kernel-bench ] && { KBENCH=1; shift; continue; }
  [ "$1" = --plugin ] && { PLUGIN=1; shift; continue; }
  [ "$1" = --stock-only ] && { STOCK_ONLY=1; PLUGIN=1; shift; continue; }
  case "$1" in
    --kernel-tests) KTESTS=$2;; --md-cases) CASES=$2;; --potential) POT=$2;; --deadline) DEADLINE=$2;;
    --cuda-arch) ARCH=$2;;
    *) echo "error: unknown option $1" >&2; usage;;
  esac
  shift 2
done
[ $# -eq 1 ] && [[ $1 != -* ]] || usage
[[ $DEADLINE =~ ^[0-9]+$ ]] || { echo "error: --deadline takes seconds, not '$DEADLINE'" >&2; exit 2; }
[[ $ARCH =~ ^sm_[0-9]+$ ]] || { echo "error: --cuda-arch takes sm_NN, not '$ARCH'" >&2; exit 2; }
REPO=$(cd "$(dirname "$0")/.." && pwd)
[ -f "$POT" ] || POT=$REPO/$POT   # relative to here, else to the repository
[ -f "$POT" ] || { echo "error: --potential: no such model file" >&2; exit 2; }
POT=$(cd "$(dirname "$POT")" && pwd)/$(basename "$POT")
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
cd "$REPO"
command -v nvidia-smi > /dev/null && nvidia-smi -L > /dev/null 2>&1 || { echo "error: no NVIDIA GPU visible (nvidia-smi -L)" >&2; exit 2; }
export BATMOBILE_CACHE=${BATMOBILE_CACHE:-$HOME/.cache/batmobile} CMAKE_POLICY_VERSION_MINIMUM=3.5
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
T0=$(date +%s)
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
budget() { local b=$(( $(left) - $1 )); echo $(( b > 5 ? b : 5 )); }  # seconds left less a margin, at least 5
say() { echo "[gpu_check +$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/gpu_check.out"; }
trap 'tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"' EXIT
rc=0

source scripts/common.sh
source scripts/gpu/gpu_lib.sh
if [ -f .carry/SHA256SUMS ]; then
  LV=$(unpack_carry 2> "$OUT/sources.log" | tail -n1)
else
  LV=$(scripts/fetch_sources.sh "kokkos-4.5.01" lammps-2025 > "$OUT/sources.log" 2>&1 &&
       scripts/prepare_sources.sh lammps-2025 2>> "$OUT/sources.log" | tail -n1)
fi
[ -d "${LV:-}/lib/kokkos" ] || { say "sources: not ready (sources.log)"; exit 1; }

KB=$BATMOBILE_CACHE/build/kernels-cuda-$ARCH
KTARGETS=$([ "$KTESTS" != none ] && echo "$KTESTS")$([ $KBENCH = 1 ] && echo " batmobile_bench")
STATE=$BATMOBILE_CACHE/gpu_check-$ARCH
mkdir -p "$STATE"
# builds STEP...: each step writes STATE/STEP.ok (LAMMPS: its build directory) or STATE/STEP.failed; logs in STATE
builds() {
  local step dir
  for step in "$@"; do
    case "$step" in
      builtin|stock)
        dir=$(BATMOBILE_JOBS=$(nproc) scripts/build_lammps.sh --backend cuda --cuda-arch "$ARCH" \
              $([ "$step" = stock ] && echo --plugin-only) 2> "$STATE/$step.log" | tail -n1)
        if [ -f "${dir:-/nonexistent}/batmobile-build.env" ]; then echo "$dir" > "$STATE/$step.ok"; else touch "$STATE/$step.failed"; fi;;
      kernels)
        { configure_cuda_tree . "$KB" "$ARCH" -DBATMOBILE_WITH_TORCH=OFF &&
          cmake --build "$KB" -j "$(nproc)" --target $KTARGETS; } > "$STATE/kernels.log" 2>&1 &&
          touch "$STATE/kernels.ok" || touch "$STATE/kernels.failed";;
    esac
  done
}
# wait_for STEP: 0 once STEP built, 1 if it failed or the deadline came first
wait_for() {
  while [ ! -f "$STATE/$1.ok" ] && [ ! -f "$STATE/$1.failed" ]; do
    [ "$(left)" -gt 30 ] || { say "$1: still building at the deadline: run this command again on this machine"; return 1; }
    sleep 5
  done
  cp "$STATE/$1.log" "$OUT/build_$1.log" 2>/dev/null
  [ -f "$STATE/$1.ok" ] || { say "$1: build failed (build_$1.log)"; return 1; }
}
STEPS="$([ $STOCK_ONLY = 1 ] || echo "builtin ")$([ $PLUGIN = 1 ] && echo "stock")$([ -n "$KTARGETS" ] && echo " kernels")"
if [ -f "$STATE/running" ] && pgrep -f "gpu_check_builds $ARCH" > /dev/null; then
  say "builds of an earlier call still running: waiting for them"
else
  rm -f "$STATE"/*.ok "$STATE"/*.failed; touch "$STATE/running"
  export -f builds configure_cuda_tree build_jobs log; export STATE KB KTARGETS ARCH LV BATMOBILE_CACHE
  setsid bash -c "builds $STEPS; rm -f '$STATE/running'" gpu_check_builds "$ARCH" < /dev/null > /dev/null 2>&1 &
fi
if [ $STOCK_ONLY = 1 ]; then
  wait_for stock || exit 1
  LAMMPS_BUILD= STOCK_BUILD=$(cat "$STATE/stock.ok")
  say "stock LAMMPS and plugin built ($STOCK_BUILD); no built-in build: no MD benchmark, no lammps_builtin tests"
  CASES=none
else
  wait_for builtin || exit 1
  LAMMPS_BUILD=$(cat "$STATE/builtin.ok")
  STOCK_BUILD=$LAMMPS_BUILD
  source "$LAMMPS_BUILD/batmobile-build.env"
  say "LAMMPS built ($LAMMPS_BUILD)"
  # every build done before the benchmark, so that no compiler shares the host with its timings
  if [ $PLUGIN = 1 ]; then
    if wait_for stock; then STOCK_BUILD=$(cat "$STATE/stock.ok"); else rc=1; fi
  fi
fi
if [ -n "$KTARGETS" ]; then
  wait_for kernels || { rc=1; KTESTS=none; KBENCH=0; }
fi
if [ "$CASES" != none ]; then
  say "MD benchmark alone on the GPU"
  ( [ -n "$CASES" ] && export BATMOBILE_MD_CASES=$CASES
    export BATMOBILE_MD_CASE_TIMEOUT=90
    timeout "$(budget 10)" bench/md/run_md_bench.sh "$LMP" "$POT" "$OUT/md" > "$OUT/md_bench.log" 2>&1 ) ||
    { say "MD benchmark incomplete (md_bench.log)"; rc=1; }
  tail -n 4 "$OUT/md_bench.log"
fi
if [ $KBENCH = 1 ]; then
  say "kernel benchmark (at most $(budget 60) s)"
  BATMOBILE_BENCH_BIN=$KB/bench/batmobile_bench timeout "$(budget 60)" bench/run_gpu_bench.sh "$OUT/kernels" \
    > "$OUT/kernel_bench.log" 2>&1 || { say "kernel benchmark incomplete (kernel_bench.log)"; rc=1; }
fi
if [ "$KTESTS" != none ]; then
  for t in $KTESTS; do
    say "$t"
    timeout "$(budget 20)" "$KB/tests/kernels/$t" > "$OUT/$t.log" 2>&1 || { say "$t FAILED ($t.log)"; rc=1; }
    grep -E "^\[  PASSED|^\[  FAILED|^\[  SKIPPED" "$OUT/$t.log" | head -20
  done
fi
# the LAMMPS-level tests run lmp through Python: a configured test tree is enough (nothing to compile)
TB=$BATMOBILE_CACHE/build/test-cuda-$ARCH
configure_cuda_tree . "$TB" "$ARCH" -DCMAKE_PREFIX_PATH="$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null)" \
  -DBATMOBILE_LAMMPS_BUILD="$LAMMPS_BUILD" -DBATMOBILE_LAMMPS_STOCK_BUILD="$STOCK_BUILD" > "$OUT/configure_tests.log" 2>&1 ||
  say "LAMMPS-level tests: configure failed (configure_tests.log)"
say "LAMMPS-level tests (at most $(budget 15) s)"
timeout "$(budget 15)" ctest --test-dir "$TB" -L lammps -j 4 --output-on-failure --timeout 200 > "$OUT/ctest_lammps.log" 2>&1 || rc=1
grep -hE "tests passed|tests failed|\*\*\*Failed|Not Run|Timeout" "$OUT/ctest_lammps.log" | head -n 30
say "done (rc=$rc)"
exit $rc
