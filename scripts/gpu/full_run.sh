#!/usr/bin/env bash
# The full GPU run (build, benchmark, all tests, kernel benchmark, NVE drift, profiles and, optionally, the 216-water
# RDF production run) as two calls of <= 10 minutes on one warm 2-GPU machine (repo root, .carry/ carried):
#   scripts/gpu/full_run.sh start  OUTDIR [WALL_S]   builds LAMMPS+KOKKOS(CUDA); with WALL_S > 0 starts the 216-water
#       NVT run (examples/lammps_inputs/water216, full: 10 ps + 50 ps, single-precision kernels, `timer timeout
#       WALL_S`) in its own process session on the last GPU, so that it outlives this call; runs the MD throughput
#       benchmark (bench/md) on GPU 0 while the test suite builds (run_gpu.sh, no ctest yet). run_gpu.sh must not
#       rebuild LAMMPS here: relinking liblammps.so under the running benchmark makes its later cases fail to start.
#   scripts/gpu/full_run.sh finish OUTDIR [MAXWAIT_S] the test suite (ctest) on the last GPU while the kernel
#       benchmark (bench/run_gpu_bench.sh), the NVE energy-drift run (BATMOBILE_FULL_NVE=0: none) and a per-kernel
#       profile (bench/profile) run on GPU 0; BATMOBILE_FULL_FIT="rx:ry:rz ...": the largest-box search on GPU 0
#       with the time left; then waits at most MAXWAIT_S (default 420) for the tests and the water run and copies
#       the water log, RDFs, analysis (results/gOO.png, summary.json) and restart files to OUTDIR.
# With one GPU everything shares GPU 0 (the benchmark numbers then include the other jobs' load).
# State between the two calls: $BATMOBILE_CACHE (default /tmp/batmobile-cache) and /tmp/bm_full_run.
set -uo pipefail
MODE=${1:?usage: full_run.sh start|finish OUTDIR [seconds]}
OUT=$(mkdir -p "${2:?usage: full_run.sh start|finish OUTDIR [seconds]}" && cd "$2" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd); cd "$REPO"
export BATMOBILE_CACHE=${BATMOBILE_CACHE:-/tmp/batmobile-cache} CMAKE_POLICY_VERSION_MINIMUM=3.5 NVCC_WRAPPER_DEFAULT_ARCH=sm_90
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
S=/tmp/bm_full_run; mkdir -p "$S"
NG=$(nvidia-smi -L 2>/dev/null | wc -l); LAST=$(( NG > 1 ? NG - 1 : 0 ))
KK=(-k on g 1 -sf kk -pk kokkos newton on neigh half)
gpu_name() { nvidia-smi -i "$1" --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1; }
T0=$(date +%s); say() { echo "[full_run $MODE +$(( $(date +%s) - T0 ))s] $*"; }
# OUTDIR is also packed into OUTDIR.tgz at the end: the device tool brings back a limited number of files
pack_out() { tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")" && say "packed $OUT.tgz"; }

if [ "$MODE" = start ]; then
  WALL=${3:-0}
  scripts/gpu/unpack_carry.sh > "$OUT/unpack.log" 2>&1 || say "unpack failed (is .carry/ carried?)"
  LAMMPS_BUILD=$(BATMOBILE_JOBS=$(nproc) scripts/build_lammps.sh --backend cuda 2> "$OUT/build_lammps.log" | tail -n1)
  source "$LAMMPS_BUILD/batmobile-build.env" || { say "LAMMPS build failed: see build_lammps.log"; exit 1; }
  echo "$LAMMPS_BUILD" > "$S/lammps_build"
  rm -f "$S/water.pid"
  if [ "$WALL" -gt 0 ]; then
    say "LAMMPS built; water216 on GPU $LAST for at most ${WALL}s"
    BATMOBILE_DEVICE_NAME="$(gpu_name $LAST)" CUDA_VISIBLE_DEVICES=$LAST setsid nohup \
      examples/lammps_inputs/water216/run.sh "$LMP" "$S/water216" full -var walltime "$WALL" -var prec single "${KK[@]}" \
      > "$S/water216.out" 2>&1 < /dev/null &
    echo $! > "$S/water.pid"
  fi
  # what is left of this call's 10 minutes after the LAMMPS build goes to the MD benchmark
  LEFT=$(( 560 - ($(date +%s) - T0) )); [ "$LEFT" -lt 60 ] && LEFT=60; [ "$LEFT" -gt 270 ] && LEFT=270
  say "MD benchmark on GPU 0 (at most ${LEFT}s); tests build meanwhile (nice)"
  CUDA_VISIBLE_DEVICES=0 BATMOBILE_MD_CASE_TIMEOUT=90 timeout "$LEFT" \
    bench/md/run_md_bench.sh "$LMP" potentials/water_fast.pt "$OUT/md" > "$OUT/md_bench.log" 2>&1 &
  MDP=$!
  CUDA_VISIBLE_DEVICES=$LAST BATMOBILE_JOBS=24 BATMOBILE_GPU_SKIP="build_lammps ctest md_probe water_nve bench" \
    BATMOBILE_GPU_DEADLINE_S=${BATMOBILE_GPU_DEADLINE_S:-$LEFT} nice -n 10 scripts/gpu/run_gpu.sh "$OUT/tests" > "$OUT/run_gpu.out" 2>&1
  wait $MDP
  cp "$OUT/md/md_h200.json" bench/results/md_h200.json 2>/dev/null
  pack_out; say "done"; cat "$OUT/tests/summary.txt" 2>/dev/null; tail -n 12 "$OUT/md_bench.log"; tail -n 3 "$S/water216/log.lammps" 2>/dev/null
  exit 0
fi

[ "$MODE" = finish ] || { echo "unknown mode $MODE"; exit 2; }
MAXWAIT=${3:-420}
LAMMPS_BUILD=$(cat "$S/lammps_build"); source "$LAMMPS_BUILD/batmobile-build.env"
export CUDA_VISIBLE_DEVICES=0
B=$BATMOBILE_CACHE/build/test-cuda
say "completing the test build (if the start call ran out of time for it)"
timeout 300 cmake --build "$B" -j "$(nproc)" > "$OUT/build_tests_finish.log" 2>&1 || say "test build incomplete: see build_tests_finish.log"
say "test suite on GPU $LAST (background)"
( CUDA_VISIBLE_DEVICES=$LAST timeout "$MAXWAIT" ctest --test-dir "$B" -j 4 --output-on-failure --timeout 200 \
    --output-junit "$OUT/ctest.xml" > "$OUT/ctest.log" 2>&1 ) &
CTP=$!
say "kernel benchmark"
BATMOBILE_TEST_BUILD=$B timeout 240 bench/run_gpu_bench.sh "$OUT/kbench" > "$OUT/kbench.log" 2>&1
if [ "${BATMOBILE_FULL_NVE:-1}" = 1 ]; then
  say "NVE drift run"
  BATMOBILE_DEVICE_NAME="$(gpu_name 0)" timeout 200 examples/lammps_inputs/water216/run.sh "$LMP" "$OUT/nve" nve -var prec single "${KK[@]}" \
    > "$OUT/nve.log" 2>&1
fi
say "kernel profile"
g++ -O2 -shared -fPIC -o "$S/libbm_kernel_timer.so" bench/profile/kokkos_kernel_timer.cpp
DATA=examples/lammps_inputs/water216/water216_start.lmp
for c in 648:1:1:1:200 10368:2:2:4:40; do
  IFS=: read -r n rx ry rz ns <<<"$c"
  CUDA_LAUNCH_BLOCKING=1 KOKKOS_PROFILE_LIBRARY="$S/libbm_kernel_timer.so" BM_KERNEL_TIMER_OUT="$OUT/profile_$n.txt" \
    timeout 120 "$LMP" "${KK[@]}" -in bench/md/in.md_bench -log "$OUT/profile_$n.log" -screen none -var data "$DATA" \
    -var pot potentials/water_fast.pt -var rx $rx -var ry $ry -var rz $rz -var nsteps $ns -var nwarm 5 -var prec single
done
# BATMOBILE_FULL_FIT="rx:ry:rz ...": the largest-box search (run_md_bench.sh BATMOBILE_MD_FIT) on GPU 0 with
# what is left of MAXWAIT, beside the tests; OUTDIR/fit/md_h200.json
if [ -n "${BATMOBILE_FULL_FIT:-}" ]; then
  LEFT=$(( MAXWAIT - 10 - ($(date +%s) - T0) ))
  say "largest-box search ${BATMOBILE_FULL_FIT} (at most ${LEFT}s)"
  BATMOBILE_MD_CASES=" " BATMOBILE_MD_FIT="$BATMOBILE_FULL_FIT" BATMOBILE_MD_REFERENCE_MAX_ATOMS=0 \
    BATMOBILE_MD_CASE_TIMEOUT=${BATMOBILE_MD_CASE_TIMEOUT:-200} timeout "$LEFT" \
    bench/md/run_md_bench.sh "$LMP" potentials/water_fast.pt "$OUT/fit" > "$OUT/fit.log" 2>&1
  tail -n 8 "$OUT/fit.log"
fi
say "waiting for the tests"
wait $CTP
grep -hE "tests passed|tests failed|\*\*\*Failed|Not Run|Skipped" "$OUT/ctest.log" | head -n 20
[ -f "$S/water.pid" ] && say "waiting for water216 (at most ${MAXWAIT}s from the start of this call)"
PID=$(cat "$S/water.pid" 2>/dev/null)
if [ -n "$PID" ]; then
  while kill -0 "$PID" 2>/dev/null && [ $(( $(date +%s) - T0 )) -lt "$MAXWAIT" ]; do sleep 5; done
  kill -0 "$PID" 2>/dev/null && say "water216 still running: copying its partial output (analyse with analyze_rdf.py)"
  mkdir -p "$OUT/water216"
  cp "$S/water216.out" "$S/water216/"log*.lammps "$S/water216/"rdf*.dat "$OUT/water216/" 2>/dev/null
  # restart files (~60 KB each) so that a later call can continue the run: run.sh LMP OUT continue FILE
  cp "$S/water216/"water216_final.restart "$S/water216/"water216.restart.? "$OUT/water216/" 2>/dev/null
  cp -r "$S/water216/results" "$OUT/water216/" 2>/dev/null
fi
pack_out; say "done"; tail -n 4 "$OUT/kbench.log"; cat "$OUT/nve/results/nve_summary.json" 2>/dev/null; head -n 14 "$OUT/profile_648.txt" 2>/dev/null
cat "$OUT/water216/results/summary.json" 2>/dev/null
