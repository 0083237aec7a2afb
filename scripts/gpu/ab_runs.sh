# Sourced by md_ab.sh, warm_check.sh and compare_builds.sh: MD comparison runs in one device call, the MD benchmark in
# the time a device call has left, the benchmark's command line for one GPU, and CUPTI timelines of MD runs.
#   ab_runs "VAR=V[+VAR=V]:name ..." CASES TIMEOUT DIR
# runs each entry on CASES (bench/md/run_md_bench.sh's atoms:rx:ry:rz:steps:precision list, no PyTorch reference)
# in a process of its own with those variables set, into DIR/name (log DIR/name.log), at most TIMEOUT seconds each;
# reports through the caller's say() the liblammps each run loads and its md_raw.txt line. An entry that sets
# LD_LIBRARY_PATH to a saved liblammps (md_ab.sh BATMOBILE_MD_SAVE_LIB) runs that build: old and new builds
# alternate in one call; a dummy X=N entry repeats the current build. Needs LMP; stops early where the caller
# defines ab_time_ok and it fails.
ab_runs() {
  local ab name vars
  wait_gpu_idle 30
  for ab in $1; do
    name=${ab#*:}
    [ "$name" != "$ab" ] || { say "skipping '$ab': no ':name'"; continue; }
    if declare -F ab_time_ok > /dev/null && ! ab_time_ok; then say "A/B: no time left for $ab"; break; fi
    IFS=+ read -r -a vars <<<"${ab%%:*}"
    say "$name loads $(env "${vars[@]}" ldd "$LMP" | grep -o "[^ ]*liblammps[^ ]*" | tail -n1)"
    env "${vars[@]}" BATMOBILE_MD_CASES="$2" BATMOBILE_MD_REFERENCE_MAX_ATOMS=0 BATMOBILE_MD_E3NN_MAX_ATOMS=0 \
      timeout "$3" bench/md/run_md_bench.sh "$LMP" potentials/water_fast.pt "$4/$name" > "$4/$name.log" 2>&1
    say "A/B ${ab%%:*} ($name): $(tr '\n' ' ' < "$4/$name/md_raw.txt" 2>/dev/null)"
  done
}

# md_bench_with_time_left MIN_S: the MD throughput benchmark (bench/md/run_md_bench.sh, its default cases or
# BATMOBILE_MD_CASES; 90 s per case unless BATMOBILE_MD_CASE_TIMEOUT) into $OUT/md, limited to the time left before
# the caller's DEADLINE (seconds after T0), if that is more than MIN_S. Needs LMP, OUT, DEADLINE, T0 and say().
md_bench_with_time_left() {
  local left=$(( DEADLINE - ($(date +%s) - T0) ))
  if [ "$left" -gt "$1" ]; then
    wait_gpu_idle 30
    left=$(( DEADLINE - ($(date +%s) - T0) ))
    say "MD benchmark (at most ${left}s)"
    BATMOBILE_MD_CASE_TIMEOUT=${BATMOBILE_MD_CASE_TIMEOUT:-90} timeout "$left" \
      bench/md/run_md_bench.sh "$LMP" potentials/water_fast.pt "$OUT/md" > "$OUT/md_bench.log" 2>&1
    cat "$OUT/md/md_raw.txt" 2>/dev/null
  else
    say "no time left for the MD benchmark"
  fi
}

# wait_gpu_idle MAX_S: waits (at most MAX_S seconds) until no process holds GPU 0, so that timings run alone; says
# what still holds it if the wait runs out. Without nvidia-smi it returns at once. (Test processes that a timeout
# has just stopped can hold GPU memory for a while.)
wait_gpu_idle() {
  command -v nvidia-smi > /dev/null || return 0
  local t apps
  for (( t = 0; t <= $1; t++ )); do
    apps=$(nvidia-smi -i 0 --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>/dev/null)
    [ -z "$apps" ] && return 0
    [ "$t" -lt "$1" ] && sleep 1
  done
  say "GPU 0 still busy after $1 s, timings below are not alone: $(tr '\n' ';' <<<"$apps")"
}

# slowest_build_steps BUILD_DIR OUTFILE: the build's wall span and its 20 slowest steps (seconds, target), from
# BUILD_DIR/.ninja_log (the latest entry per target); tells which translation units hold a device build up. Meant for
# a build from scratch, as on a fresh device machine: ninja's log keeps older builds' entries (their targets too).
slowest_build_steps() {
  [ -f "$1/.ninja_log" ] || { echo "no $1/.ninja_log" > "$2"; return 0; }
  awk -F'\t' '!/^#/ { t[$4] = ($2 - $1) / 1000; if (min == "" || $1 < min) min = $1; if ($2 > max) max = $2 }
    END { printf "span %.1f s over %d steps\n", (max - min) / 1000, length(t); for (k in t) printf "%8.1f  %s\n", t[k], k }' \
    "$1/.ninja_log" | { read -r head; echo "$head"; sort -rn | head -n 20; } > "$2"
}

# build_cupti_trace LIB: bench/profile/kokkos_cupti_trace.cpp built against this machine's CUPTI into LIB (a Kokkos
# profiling library); status 1 where it does not build (LIB.log says why).
build_cupti_trace() {
  local repo cupti
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  cupti=$(dirname "$(ls /usr/local/cuda/lib64/libcupti.so /usr/local/cuda/extras/CUPTI/lib64/libcupti.so \
    /usr/local/cuda/targets/*/lib/libcupti.so /usr/local/cuda/lib/libcupti.so 2>/dev/null | head -n1)")
  g++ -O2 -shared -fPIC -I/usr/local/cuda/include -I/usr/local/cuda/extras/CUPTI/include -o "$1" \
    "$repo/bench/profile/kokkos_cupti_trace.cpp" -L"$cupti" -lcupti -Wl,-rpath,"$cupti" > "$1.log" 2>&1
}

# md_bench_args LOG POT RX RY RZ STEPS WARMUP PRECISION: the arguments of one run of the MD benchmark on one GPU
# (bench/md/in.md_bench on water216 replicated RX x RY x RZ, batmobile/kk with potential POT, newton off, log LOG),
# into the array MD_BENCH_ARGS: the command line that compare_builds.sh, md_ab.sh and cupti_trace share.
md_bench_args() {
  local repo
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  MD_BENCH_ARGS=(-k on g 1 -sf kk -pk kokkos newton on neigh half -in "$repo/bench/md/in.md_bench" -log "$1"
    -screen none -var data "$repo/examples/lammps_inputs/water216/water216_start.lmp" -var pot "$2" -var rx "$3"
    -var ry "$4" -var rz "$5" -var nsteps "$6" -var nwarm "$7" -var prec "$8" -var newton off)
}

# cupti_trace LIB LMP TREE PREFIX ATOMS RX RY RZ STEPS LABELS: the GPU's timeline of an MD run (bench/md/in.md_bench,
# TREE's water_fast.pt, precision mixed, newton off, 20 warm-up steps) under the library LIB from build_cupti_trace,
# from the 23rd compute on (two set-ups + 20 warm-up steps + 1): PREFIX.txt (per kernel: launches, mean duration,
# time per step, GPU idle before it), PREFIX.csv (every operation of the last step, in order), PREFIX.log. LABELS 1:
# each operation named by its Kokkos operation and each raw CUDA copy by its host call stack (CUPTI's API records slow
# the host, so only the durations hold).
cupti_trace() {
  md_bench_args "$4.log" "$3/potentials/water_fast.pt" "$6" "$7" "$8" "$9" 20 mixed
  KOKKOS_PROFILE_LIBRARY="$1" BM_TRACE_OUT="$4.txt" BM_TRACE_CSV="$4.csv" BM_TRACE_LABELS="${10}" BM_TRACE_CALLERS="${10}" \
    BM_TRACE_START=bm_kk_atoms:23 timeout 90 "$2" "${MD_BENCH_ARGS[@]}"
}
