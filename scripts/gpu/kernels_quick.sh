#!/usr/bin/env bash
# Quick GPU check of the kernel library alone (no LAMMPS, no libtorch; ~5 min on the H200 machine, most of it the
# CUDA build): builds test_interaction, test_conv_weights and batmobile_bench against an in-tree CUDA Kokkos
# (HOPPER90), runs the interaction tests (BATMOBILE_QUICK_FILTER, default all) and the attention/conv benchmark
# (BATMOBILE_QUICK_CASES, space-separated N:k:C, default "1000:20:32 10000:30:64"; radial modes 0, 1 and 2);
# BATMOBILE_QUICK_NCU=REGEX: also an Nsight Compute report (launch, occupancy, scheduler and warp-state sections)
# of the first BATMOBILE_QUICK_NCU_COUNT (default 1) kernels matching REGEX in the first case;
# BATMOBILE_QUICK_E3NN=1: then bench/run_gpu_bench.sh with this build's benchmark (e3nn 0.6 cross-check and timings
# in the same run, BATMOBILE_BENCH_REPS default 20 here; writes bench/results/kernels_h200.json, ~1.5 min more;
# set BATMOBILE_QUICK_CASES=200:10:8 to skip the quick bench's own timings);
# BATMOBILE_QUICK_BASE="TAR [TAR ...]": an A/B against one or more baseline trees (TAR = `git archive REV` of a
# baseline, relative to the repo root, e.g. in .carry/): their benchmarks are built beside this one and all run back
# to back, in radial mode 4 as MD's default precision mixed does, on BATMOBILE_QUICK_AB_CASES (default the quick
# cases) into OUTDIR/ab_{base,base2,...,new}_CASE.jsonl (the benchmark's kernels take their dimensions at run time,
# so this A/B also covers models with dimensions other than the bundled ones; bench/kernels_ab.py prints the times
# side by side with their ratios to the first baseline, into OUTDIR/ab_summary.txt);
# BATMOBILE_QUICK_BASE_TESTS=1: the baselines' interaction tests are built and run as well (test_interaction_base*.log);
# BATMOBILE_QUICK_AB_VARIANTS="NAME=OPTIONS ...": this build's benchmark also with these extra options on the A/B cases
# (commas for spaces, e.g. "t96=--team,96 t128=--team,128"; NAME of letters, digits, '.', '+', '-'), into
# OUTDIR/ab_v-NAME_CASE.jsonl: launch settings compared without a second build (with or without baselines);
# BATMOBILE_QUICK_CXXFLAGS: extra compiler flags of both builds (e.g. -lineinfo for Nsight source views);
# BATMOBILE_QUICK_CONV=0: neither build nor run test_conv_weights (a shorter build when only the fused kernels
# changed).
# Logs go to OUTDIR, packed into OUTDIR.tgz at exit.
#   scripts/gpu/kernels_quick.sh OUTDIR        (repo root, .carry/ carried; see scripts/gpu/prepare_carry.sh)
set -uo pipefail
OUT=$(mkdir -p "${1:?usage: kernels_quick.sh OUTDIR}" && cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd); cd "$REPO"
export BATMOBILE_CACHE=${BATMOBILE_CACHE:-/tmp/batmobile-cache} CMAKE_POLICY_VERSION_MINIMUM=3.5
export NVCC_WRAPPER_DEFAULT_ARCH=sm_90
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
source scripts/common.sh
trap 'pack_outdir "$OUT"' EXIT
T0=$(date +%s); say() { echo "[kernels_quick +$(( $(date +%s) - T0 ))s] $*"; }
LV=$(scripts/gpu/unpack_carry.sh 2> "$OUT/unpack.log" | tail -n1)
[ -d "$LV/lib/kokkos" ] || { say "unpack failed: see unpack.log"; exit 1; }
source scripts/gpu/cuda_tree.sh
configure() {  # configure SRC BUILD LOG
  configure_cuda_tree "$1" "$2" -DCMAKE_CXX_FLAGS="${BATMOBILE_QUICK_CXXFLAGS:-}" -DBATMOBILE_WITH_TORCH=OFF \
    > "$3" 2>&1 || { say "configure failed ($3)"; tail -20 "$3"; exit 1; }
}
B=$BATMOBILE_CACHE/build/kernels-cuda
build_of() { [ "$1" = new ] && echo "$B" || echo "$B-$1"; }  # build_of SIDE: the build directory of new or a base
configure . "$B" "$OUT/configure.log"
SIDES=() BPIDS=()  # the baselines' names (base, base2, ...) and build processes, built beside this tree's targets
BASE_TARGETS="batmobile_bench $([ "${BATMOBILE_QUICK_BASE_TESTS:-0}" = 1 ] && echo test_interaction)"
: > "$OUT/bases.txt"
for tarball in ${BATMOBILE_QUICK_BASE:-}; do
  side=base
  [ ${#SIDES[@]} -gt 0 ] && side=base$(( ${#SIDES[@]} + 1 ))
  BS=$BATMOBILE_CACHE/$side-src
  rm -rf "$BS" && mkdir -p "$BS" && tar -xf "$tarball" -C "$BS" || { say "cannot unpack $tarball"; exit 1; }
  configure "$BS" "$(build_of "$side")" "$OUT/configure_$side.log"
  cmake --build "$(build_of "$side")" -j "$(nproc)" --target $BASE_TARGETS > "$OUT/build_$side.log" 2>&1 &
  SIDES+=("$side") BPIDS+=($!)
  echo "$side: $tarball" >> "$OUT/bases.txt"
done
say "configured"
CONV=${BATMOBILE_QUICK_CONV:-1}
cmake --build "$B" -j "$(nproc)" --target test_interaction batmobile_bench $([ "$CONV" = 1 ] && echo test_conv_weights) \
  > "$OUT/build.log" 2>&1 ||
  { say "build failed"; grep -m5 -A5 "error" "$OUT/build.log"; exit 1; }
for i in "${!SIDES[@]}"; do
  wait "${BPIDS[$i]}" ||
    { say "${SIDES[$i]} build failed"; grep -m5 -A5 "error" "$OUT/build_${SIDES[$i]}.log"; exit 1; }
done
say "built"
rc=0
interaction_tests() {  # interaction_tests SIDE LOG: this tree's (new) or a baseline's interaction tests on the GPU
  "$(build_of "$1")/tests/kernels/test_interaction" --gtest_filter="${BATMOBILE_QUICK_FILTER:-*}" > "$2" 2>&1 || rc=1
  echo "== $1"; tail -n 5 "$2"; grep -E "^\[  FAILED|Failure" "$2" | head -20
}
interaction_tests new "$OUT/test_interaction.log"
if [ "${BATMOBILE_QUICK_BASE_TESTS:-0}" = 1 ]; then
  for side in "${SIDES[@]}"; do interaction_tests "$side" "$OUT/test_interaction_$side.log"; done
fi
if [ "$CONV" = 1 ]; then
  "$B/tests/kernels/test_conv_weights" > "$OUT/test_conv_weights.log" 2>&1 || rc=1
  tail -n 2 "$OUT/test_conv_weights.log"
fi
say "tests done (rc=$rc)"
CASES=(${BATMOBILE_QUICK_CASES:-1000:20:32 10000:30:64})
for c in "${CASES[@]}"; do
  "$B/bench/batmobile_bench" --cases "$c" --radial-mode all --reps 20 --out "$OUT/bench_${c//:/_}.jsonl" \
    >> "$OUT/bench.log" 2>&1 || rc=1
  cat "$OUT/bench_${c//:/_}.jsonl"
done
VARIANTS=(${BATMOBILE_QUICK_AB_VARIANTS:-})
ab_bench() {  # ab_bench SIDE CASE BUILD_SIDE [OPTION ...]: one A/B run into OUTDIR/ab_SIDE_CASE.jsonl
  local side=$1 c=$2 b=$3
  shift 3
  "$(build_of "$b")/bench/batmobile_bench" --cases "$c" --radial-mode 4 --role-radial-mode 4 --reps 20 "$@" \
    --out "$OUT/ab_${side}_${c//:/_}.jsonl" >> "$OUT/bench.log" 2>&1 || rc=1
  echo "== $side $c: $(wc -l < "$OUT/ab_${side}_${c//:/_}.jsonl") rows"
}
if [ ${#SIDES[@]} -gt 0 ] || [ ${#VARIANTS[@]} -gt 0 ]; then
  for c in ${BATMOBILE_QUICK_AB_CASES:-${CASES[@]}}; do
    for side in "${SIDES[@]}" new; do ab_bench "$side" "$c" "$side"; done
    for v in "${VARIANTS[@]}"; do
      opts=${v#*=}
      ab_bench "v-${v%%=*}" "$c" new ${opts//,/ }
    done
  done
  say "A/B done"
  python3 bench/kernels_ab.py "$OUT" | tee "$OUT/ab_summary.txt"
fi
if [ -n "${BATMOBILE_QUICK_NCU:-}" ] && command -v ncu > /dev/null; then
  # Kokkos launches every kernel through one wrapper function: match the demangled name (functor and tag)
  ncu --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats \
    --section SpeedOfLight --kernel-name-base demangled -k "regex:${BATMOBILE_QUICK_NCU}" \
    -c "${BATMOBILE_QUICK_NCU_COUNT:-1}" "$B/bench/batmobile_bench" --cases "${CASES[0]}" --radial-mode 2 --reps 1 \
    --warmup 1 --out /dev/null > "$OUT/ncu.txt" 2>&1 || echo "ncu failed (see ncu.txt)"
  grep -E "Duration|Registers|Occupancy|Issued Warp|No Eligible|Stall|Warp Cycles|profiled" "$OUT/ncu.txt" | head -40
fi
if [ "${BATMOBILE_QUICK_E3NN:-0}" = 1 ]; then
  BATMOBILE_BENCH_BIN="$B/bench/batmobile_bench" BATMOBILE_BENCH_REPS=${BATMOBILE_BENCH_REPS:-20} \
    bench/run_gpu_bench.sh "$OUT/e3nn_bench" > "$OUT/e3nn_bench.log" 2>&1 || rc=1
  grep -E "cross-check" "$OUT/e3nn_bench.log"; cp bench/results/kernels_h200.json "$OUT/" 2>/dev/null
fi
say "done (rc=$rc)"
exit $rc
