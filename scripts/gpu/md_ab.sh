#!/usr/bin/env bash
# One device call on any GPU kind (one GPU is enough; repo root, .carry/ carried): builds LAMMPS + KOKKOS(CUDA) with
# Batmobile (scripts/build_lammps.sh), then, on GPU 0 with nothing else running,
#   1. the same-call MD comparison runs listed in BATMOBILE_MD_AB ("VAR=VALUE[+VAR=VALUE]:name ...", ':name' required;
#      each runs BATMOBILE_MD_AB_CASES, default 648 atoms x 1,000 steps and 10,368 x 100, precision mixed, no
#      reference; 40 s limit each), then those in BATMOBILE_MD_AB_LARGE on BATMOBILE_MD_AB_LARGE_CASES (default
#      97,200 atoms x 30 steps; 45 s limit each; names distinct from the first list's),
#   2. the MD throughput benchmark (bench/md/run_md_bench.sh, its default cases: 648 mixed + fp64 with the PyTorch
#      reference (the mixed case three times, their mean reported), 10,368 with it, 97,200, 1,049,760; BATMOBILE_MD_CASES
#      as there) with the time left before
#      BATMOBILE_MD_AB_DEADLINE_S (default 575 s after the start).
#   5. (BATMOBILE_MD_TRACE="atoms:rx:ry:rz:steps ...", before 1.) the GPU's timeline of each case (CUPTI), see below.
#   4. (BATMOBILE_MD_NCU=REGEX, after 3.) an Nsight Compute report of the matching kernels of one MD step, see below.
#   3. (BATMOBILE_MD_PROFILE="atoms:rx:ry:rz:steps ...", before 1.) a GPU-event profile of each case
#      (bench/profile/kokkos_gpu_timer.cpp: per-operation GPU time and the GPU's idle gaps, without serialising
#      launches) into OUTDIR/gpu_profile_<atoms>.txt. Profiles and timelines run as the benchmark does: precision
#      mixed, newton off.
# Prints each comparison run's md_raw.txt line (atoms, exit code, steps/s, MB, ..., precision) and the benchmark's,
# and packs OUTDIR into OUTDIR.tgz (the device tool brings back a limited number of files); bench/md/collect_ab_runs.py
# turns OUTDIR/md_ab.out into one JSON with each setting's mean and standard error.
# Old against new build in one call (the machine stays warm between the two calls):
#   call 1, old tree:  BATMOBILE_MD_SAVE_LIB=/tmp/old_lib BATMOBILE_MD_AB_DEADLINE_S=0 scripts/gpu/md_ab.sh OUTDIR
#   call 2, new tree:  BATMOBILE_MD_AB="LD_LIBRARY_PATH=/tmp/old_lib:old1 X=1:new1 LD_LIBRARY_PATH=/tmp/old_lib:old2 X=2:new2" \
#                      scripts/gpu/md_ab.sh OUTDIR
set -uo pipefail
OUT=$(mkdir -p "${1:?usage: md_ab.sh OUTDIR}" && cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd); cd "$REPO"
export BATMOBILE_CACHE=${BATMOBILE_CACHE:-/tmp/batmobile-cache} CMAKE_POLICY_VERSION_MINIMUM=3.5 NVCC_WRAPPER_DEFAULT_ARCH=sm_90
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
T0=$(date +%s); DEADLINE=${BATMOBILE_MD_AB_DEADLINE_S:-575}
# (also into OUTDIR/md_ab.out, packed with the rest: bench/md/collect_ab_runs.py reads the A/B lines from it)
say() { echo "[md_ab +$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/md_ab.out"; }
pack_out() { tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")" && say "packed $OUT.tgz"; }
scripts/gpu/unpack_carry.sh > "$OUT/unpack.log" 2>&1 || { say "unpack failed (is .carry/ carried?)"; exit 1; }
LAMMPS_BUILD=$(BATMOBILE_JOBS=$(nproc) scripts/build_lammps.sh --backend cuda 2> "$OUT/build_lammps.log" | tail -n1)
source "$LAMMPS_BUILD/batmobile-build.env" || { say "LAMMPS build failed: see build_lammps.log"; pack_out; exit 1; }
say "LAMMPS built"
source scripts/gpu/ab_runs.sh
slowest_build_steps "$LAMMPS_BUILD" "$OUT/build_lammps_slowest.txt"
if [ -n "${BATMOBILE_MD_SAVE_LIB:-}" ]; then
  # BATMOBILE_MD_SAVE_LIB=DIR: a copy of this build's liblammps (which holds the Batmobile styles) for A/B runs of
  # two builds on one machine: after a change and a rebuild, an A/B entry "LD_LIBRARY_PATH=DIR:name" runs the
  # saved one (lmp's RUNPATH yields to LD_LIBRARY_PATH; each run's log says which library it loaded)
  mkdir -p "$BATMOBILE_MD_SAVE_LIB" && cp -L "$(dirname "$LMP")"/liblammps.so.0 "$BATMOBILE_MD_SAVE_LIB/" &&
    say "saved liblammps.so.0 to $BATMOBILE_MD_SAVE_LIB"
fi
export CUDA_VISIBLE_DEVICES=0
if [ -n "${BATMOBILE_MD_PROFILE:-}" ]; then
  g++ -O2 -shared -fPIC -o "$OUT/libbm_gpu_timer.so" bench/profile/kokkos_gpu_timer.cpp -ldl
  for c in $BATMOBILE_MD_PROFILE; do
    IFS=: read -r n rx ry rz ns <<<"$c"
    # the window starts after set-up and 20 warm-up steps (the 23rd compute: two set-ups + 20 steps + 1)
    # BATMOBILE_MD_PROFILE_HOST=1: also a host-clock profile (no events: BM_GPU_TIMER_HOST=1) into gpu_host_profile_<atoms>.txt
    for mode in event ${BATMOBILE_MD_PROFILE_HOST:+host}; do
      prof=gpu_profile_$n; [ "$mode" = host ] && prof=gpu_host_profile_$n
      md_bench_args "$OUT/$prof.log" potentials/water_fast.pt "$rx" "$ry" "$rz" "$ns" 20 mixed
      KOKKOS_PROFILE_LIBRARY="$OUT/libbm_gpu_timer.so" BM_GPU_TIMER_OUT="$OUT/$prof.txt" \
        BM_GPU_TIMER_HOST=$([ "$mode" = host ] && echo 1 || echo 0) \
        BM_GPU_TIMER_START=bm_kk_atoms:23 timeout 60 "$LMP" "${MD_BENCH_ARGS[@]}"
      say "profile ($mode) $n atoms: $(grep "Loop time" "$OUT/$prof.log" | tail -n1)"
      head -n 4 "$OUT/$prof.txt" 2>/dev/null
    done
  done
fi
if [ -n "${BATMOBILE_MD_NCU:-}" ] && command -v ncu > /dev/null; then
  # Nsight Compute of the kernels matching BATMOBILE_MD_NCU (regex on the demangled name, e.g. InteractionKernel) in
  # the first MD step after set-up (LAUNCH_SKIP: the matching launches of the two set-up computes) of
  # BATMOBILE_MD_NCU_CASE (atoms:rx:ry:rz, default 10,368 atoms). SourceCounters lists the SASS lines with the most
  # stalls; for source lines, build with BATMOBILE_LAMMPS_CMAKE_ARGS="-DCMAKE_CXX_FLAGS=-lineinfo" (reconfigures: a full build)
  IFS=: read -r n rx ry rz <<<"${BATMOBILE_MD_NCU_CASE:-10368:2:2:4}"
  NCU_SAVE=()
  [ -n "${BATMOBILE_MD_NCU_SOURCE:-}" ] && NCU_SAVE=(--import-source yes -o "$OUT/ncu_$n")
  timeout "${BATMOBILE_MD_NCU_TIMEOUT:-150}" ncu --section SpeedOfLight --section LaunchStats --section Occupancy \
    --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis --section InstructionStats \
    --section SourceCounters \
    --kernel-name-base demangled -k "regex:$BATMOBILE_MD_NCU" -s "${BATMOBILE_MD_NCU_LAUNCH_SKIP:-12}" \
    -c "${BATMOBILE_MD_NCU_COUNT:-6}" "${NCU_SAVE[@]}" "$LMP" -k on g 1 -sf kk -pk kokkos newton on neigh half -in bench/md/in.md_bench \
    -log none -screen none -var data examples/lammps_inputs/water216/water216_start.lmp -var pot potentials/water_fast.pt \
    -var rx "$rx" -var ry "$ry" -var rz "$rz" -var nsteps 2 -var nwarm 0 -var prec mixed > "$OUT/ncu_$n.txt" 2>&1 ||
    say "ncu failed or timed out (ncu_$n.txt)"
  if [ -n "${BATMOBILE_MD_NCU_SOURCE:-}" ] && [ -f "$OUT/ncu_$n.ncu-rep" ]; then
    # BATMOBILE_MD_NCU_SOURCE=1: keep the report and export its details and its source pages (per CUDA source line
    # with a -lineinfo build, and per SASS instruction) as text; the report itself travels only if small
    ncu -i "$OUT/ncu_$n.ncu-rep" --print-units base > "$OUT/ncu_$n.txt" 2>&1
    for src in cuda sass; do
      timeout 120 ncu -i "$OUT/ncu_$n.ncu-rep" --page source --csv --print-source "$src" > "$OUT/ncu_${src}_$n.csv" \
        2> "$OUT/ncu_${src}_$n.err" || say "ncu source export ($src) failed: $(head -c 300 "$OUT/ncu_${src}_$n.err")"
    done
    [ "$(stat -c %s "$OUT/ncu_$n.ncu-rep")" -lt 12000000 ] || rm -f "$OUT/ncu_$n.ncu-rep"
  fi
  say "ncu $n atoms: $(grep -c "Section: Warp State Statistics" "$OUT/ncu_$n.txt") kernels profiled"
fi
if [ -n "${BATMOBILE_MD_TRACE:-}" ]; then
  # BATMOBILE_MD_TRACE="atoms:rx:ry:rz:steps ...": the GPU's own timeline of each case through CUPTI (cupti_trace in
  # ab_runs.sh): trace_<atoms>.* with the host at near its normal speed, trace_labels_<atoms>.* with each operation
  # named by its Kokkos operation and each raw CUDA copy by its host call stack (the host slower: only the durations
  # hold)
  if build_cupti_trace "$OUT/libbm_cupti_trace.so"; then
    for c in $BATMOBILE_MD_TRACE; do
      IFS=: read -r n rx ry rz ns <<<"$c"
      for labels in 0 1; do
        t=trace_$n; [ "$labels" = 1 ] && t=trace_labels_$n
        cupti_trace "$OUT/libbm_cupti_trace.so" "$LMP" "$REPO" "$OUT/$t" "$n" "$rx" "$ry" "$rz" "$ns" "$labels"
        say "$t: $(grep "Loop time" "$OUT/$t.log" | tail -n1)"
        head -n 1 "$OUT/$t.txt" 2>/dev/null
      done
    done
  else
    say "CUPTI trace library did not build: see libbm_cupti_trace.so.log"
  fi
fi
ab_runs "${BATMOBILE_MD_AB:-}" "${BATMOBILE_MD_AB_CASES:-648:1:1:1:1000:mixed 10368:2:2:4:100:mixed}" 40 "$OUT"
ab_runs "${BATMOBILE_MD_AB_LARGE:-}" "${BATMOBILE_MD_AB_LARGE_CASES:-97200:5:5:6:30:mixed}" 45 "$OUT"
md_bench_with_time_left 30
pack_out
say "done"
