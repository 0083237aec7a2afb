#!/usr/bin/env bash
# precision mixed on the GPU, in device calls of <= 10 minutes on one warm machine (repo root, .carry/ carried; the
# LAMMPS build stays in $BATMOBILE_CACHE between calls):
#   scripts/gpu/precision_gpu.sh MODE [--model FILE] [--call-limit S] [--skip-frames] OUTDIR
#   MODE check     builds LAMMPS + KOKKOS(CUDA) with the styles; the GPU tests of the
#       precisions (mixed against double and single; single and double against PyTorch); single and mixed MD runs in
#       turn at 648, 10,368 and 97,200 atoms (md_ab.txt: run_md_bench.sh's raw lines); the validation frames of data_2
#       through LAMMPS in double, single and mixed (frames/lammps_frames.json: force and energy RMSE)
#       (--skip-frames: not those)
#   MODE frames    the validation frames alone; gates: frames beside md
#   MODE md        the MD gates, single and mixed side by side on the GPU: 10,000 NVE
#       steps each (nve_<prec>/results/nve_summary.json) and 30 ps NVT with the RDF (rdf_<prec>/results/summary.json)
#   MODE rdf       the RDF gate: the full water216 run (10 ps NVT + 50 ps production,
#       newton off) in single, then mixed, in /tmp/bm_rdf_<prec>, each stopped cleanly before its share of the call's
#       limit (--call-limit s, default 560, from the script's start) and continued from its restart file by
#       the next call on the same warm machine; OUTDIR/rdf_<prec>: logs and results/ (g_OO summary, gOO.png); with them
#       the GPU test of precision mixed
#   MODE roofline  Nsight Compute counters (FLOP, bytes, instructions, time) of every
#       model kernel of two MD steps at 648 and 97,200 atoms, single and mixed (ncu_<atoms>_<prec>.csv), summarised by
#       bench/profile/roofline.py into roofline.json
# --model: the model (default potentials/water_fast.pt). OUTDIR is packed into OUTDIR.tgz.
set -uo pipefail
usage() { echo "usage: precision_gpu.sh check|frames|md|gates|rdf|roofline [--model FILE] [--call-limit S] [--skip-frames] OUTDIR" >&2; exit 2; }
MODE=${1:-}; shift || true
[[ $MODE =~ ^(check|frames|md|gates|rdf|roofline)$ ]] || usage
REPO=$(cd "$(dirname "$0")/../.." && pwd)
MODEL=$REPO/potentials/water_fast.pt; CALL_LIMIT=560; SKIP_FRAMES=0
while [ $# -gt 1 ]; do
  case "$1" in
    --model) MODEL=$(realpath "$2"); shift;; --call-limit) CALL_LIMIT=$2; shift;; --skip-frames) SKIP_FRAMES=1;;
    *) echo "error: unknown option $1" >&2; usage;;
  esac
  shift
done
[ $# -eq 1 ] || usage
[ -f "$MODEL" ] || { echo "error: --model: no such file" >&2; exit 2; }
OUT=$(mkdir -p "$1" && cd "$1" && pwd)
cd "$REPO"
export BATMOBILE_CACHE=${BATMOBILE_CACHE:-/tmp/batmobile-cache} CMAKE_POLICY_VERSION_MINIMUM=3.5 NVCC_WRAPPER_DEFAULT_ARCH=sm_90
export PYTHONPATH=$REPO/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1 CUDA_VISIBLE_DEVICES=0
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
KK=(-k on g 1 -sf kk -pk kokkos newton on neigh half)
COMMIT=$(cat .commit 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
T0=$(date +%s); say() { echo "[precision_gpu $MODE +$(( $(date +%s) - T0 ))s] $*" | tee -a "$OUT/summary.txt"; }
pack() { tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"; }
trap pack EXIT
(source scripts/common.sh && source scripts/gpu/gpu_lib.sh && unpack_carry) > "$OUT/unpack.log" 2>&1 || say "unpack failed (is .carry/ carried?)"
LAMMPS_BUILD=$(BATMOBILE_JOBS=$(nproc) scripts/build_lammps.sh --backend cuda 2> "$OUT/build_lammps.log" | tail -n1)
source "$LAMMPS_BUILD/batmobile-build.env" || { say "LAMMPS build failed: see build_lammps.log"; exit 1; }
say "LAMMPS built: $LMP"
DATA=examples/lammps_inputs/water216/water216_start.lmp

case "$MODE" in
check)
  REF=/tmp/bm_precision_ref
  [ -f "$REF/model.pt" ] || python3 tests/lammps/batmobile/make_lammps_reference.py "$REF" > "$OUT/make_ref.log" 2>&1
  T=tests/lammps/batmobile/run_batmobile_test.py
  for t in "mixed gpu" "reference gpu_single" "reference gpu"; do
    name=${t// /_}
    python3 $T --build "$LAMMPS_BUILD" --ref "$REF" $t > "$OUT/test_$name.log" 2>&1
    say "test $t: rc=$? $(grep -E '^(PASS|FAIL|SKIP)' "$OUT/test_$name.log" | tail -n1)"
  done
  grep -E "vs double|launch line" "$OUT/test_mixed_gpu.log" | head -n 14
  cases=""
  for c in 648:1:1:1:1000 10368:2:2:4:100 97200:5:5:6:30; do
    reps=3; [ "${c%%:*}" = 648 ] && reps=5
    for ((r = 0; r < reps; ++r)); do cases+=" $c:single $c:mixed"; done
  done
  BATMOBILE_MD_CASES="$cases" BATMOBILE_MD_REFERENCE_MAX_ATOMS=0 BATMOBILE_MD_E3NN_MAX_ATOMS=0 \
    BATMOBILE_MD_CASE_TIMEOUT=60 timeout 300 bench/md/run_md_bench.sh "$LMP" "$MODEL" "$OUT/md_ab" > "$OUT/md_ab.log" 2>&1
  cp "$OUT/md_ab/md_raw.txt" "$OUT/md_ab.txt" 2>/dev/null
  say "MD single/mixed in turn: $(tr '\n' ';' < "$OUT/md_ab.txt" 2>/dev/null)"
  [ $SKIP_FRAMES = 1 ] && exit 0
  ;&
frames)
  timeout 150 python3 bench/accuracy/lammps_frames.py --lmp "$LMP" --model "$MODEL" --out "$OUT/frames" \
    --lmp-args "${KK[*]}" --commit "$COMMIT" --machine "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1)" \
    > "$OUT/frames.log" 2>&1
  say "frames: rc=$? $(grep -E '^\[lammps_frames\] [a-z]+: \{' "$OUT/frames.log" | tr '\n' ' ')"
  ;;
gates)
  "$0" frames "$OUT/frames_run" > "$OUT/frames_run.log" 2>&1 &
  ;&
md)
  for prec in single mixed; do
    BATMOBILE_MODEL=$MODEL BATMOBILE_DEVICE_NAME="NVIDIA H200" timeout 560 examples/lammps_inputs/water216/run.sh "$LMP" \
      "$OUT/nve_$prec" nve -var prec "$prec" "${KK[@]}" > "$OUT/nve_$prec.log" 2>&1 &
    BATMOBILE_MODEL=$MODEL BATMOBILE_DEVICE_NAME="NVIDIA H200" timeout 560 examples/lammps_inputs/water216/run.sh "$LMP" \
      "$OUT/rdf_$prec" full -var prec "$prec" -var steps 60000 "${KK[@]}" > "$OUT/rdf_$prec.log" 2>&1 &
  done
  wait
  for prec in single mixed; do
    say "$prec NVE: $(tr -d '\n ' < "$OUT/nve_$prec/results/nve_summary.json" 2>/dev/null | head -c 300)"
    say "$prec RDF: $(tr -d '\n ' < "$OUT/rdf_$prec/results/summary.json" 2>/dev/null | head -c 400)"
  done
  rm -f "$OUT"/*/water216.restart.* "$OUT"/*/water216_final.restart
  ;;
rdf)
  REF=/tmp/bm_precision_ref  # (as in check: made once per machine)
  { [ -f "$REF/model.pt" ] ||
    python3 tests/lammps/batmobile/make_lammps_reference.py "$REF" > "$OUT/make_ref.log" 2>&1; } &&
    python3 tests/lammps/batmobile/run_batmobile_test.py --build "$LAMMPS_BUILD" --ref "$REF" mixed gpu \
      > "$OUT/test_mixed_gpu.log" 2>&1 &
  left=2  # one run at a time: processes sharing a GPU are time-sliced and each runs at a fraction of its speed
  export BATMOBILE_DEVICE_NAME="NVIDIA H200"
  for prec in single mixed; do
    run=/tmp/bm_rdf_$prec
    wall=$(( ($CALL_LIMIT - 40 - ($(date +%s) - T0)) / left )); left=$((left - 1))
    args=(-var prec "$prec" -var newton off -var walltime "$wall" "${KK[@]}")
    if grep -qs "^ *120000 " "$run"/log*.lammps; then
      continue
    elif [ -f "$run/log.lammps" ]; then  # from where the last call stopped (its final restart file, the newest)
      restart=$(ls -t "$run"/water216.restart.[ab] "$run"/water216_final.restart 2>/dev/null | head -n1)
      examples/lammps_inputs/water216/run.sh "$LMP" "$run" continue "$restart" "${args[@]}" > "$OUT/rdf_$prec.log" 2>&1
    else
      examples/lammps_inputs/water216/run.sh "$LMP" "$run" full "${args[@]}" > "$OUT/rdf_$prec.log" 2>&1
    fi
    say "$prec: $wall s of wall time"
  done
  wait
  say "test mixed gpu: $(grep -E '^(PASS|FAIL|SKIP)' "$OUT/test_mixed_gpu.log" | tail -n1)"
  for prec in single mixed; do
    run=/tmp/bm_rdf_$prec
    mkdir -p "$OUT/rdf_$prec" && cp -r "$run"/log*.lammps "$run"/rdf*.dat "$run"/results "$OUT/rdf_$prec/" 2>/dev/null
    say "$prec: last step $(grep -h -E '^ +[0-9]+ ' "$run"/log*.lammps | awk '{print $1}' | sort -n | tail -n1); RDF $(tr -d '\n ' < "$run/results/summary.json" 2>/dev/null | head -c 400)"
  done
  ;;
roofline)
  command -v ncu > /dev/null || { say "no ncu"; exit 1; }
  # the model's kernels only (their names hold the batmobile namespace; LAMMPS's set-up launches hundreds of others)
  metrics=gpu__time_duration.sum,smsp__inst_executed.sum,sm__cycles_elapsed.avg
  metrics+=,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,smsp__sass_thread_inst_executed_op_fadd_pred_on.sum
  metrics+=,smsp__sass_thread_inst_executed_op_fmul_pred_on.sum,sm__inst_executed_pipe_tensor_op_hmma.sum
  metrics+=,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_bytes.sum,l1tex__t_bytes.sum
  for c in 648:1:1:1 97200:5:5:6; do
    IFS=: read -r n rx ry rz <<<"$c"
    for prec in single mixed; do
      timeout 110 ncu --clock-control none --csv --page raw --print-units base --kernel-name-base demangled \
        --kernel-name regex:batmobile --metrics "$metrics" \
        "$LMP" "${KK[@]}" -in bench/md/in.md_bench -log none -screen none -var data "$DATA" -var pot "$MODEL" \
        -var rx "$rx" -var ry "$ry" -var rz "$rz" -var nsteps 2 -var nwarm 0 -var prec "$prec" -var newton off \
        > "$OUT/ncu_${n}_$prec.csv" 2> "$OUT/ncu_${n}_$prec.err"
      say "ncu $n $prec: rc=$? $(grep -c '^"' "$OUT/ncu_${n}_$prec.csv") rows"
    done
  done
  python3 bench/profile/roofline.py "$OUT"/ncu_*.csv --out "$OUT/roofline.json" --commit "$COMMIT" > "$OUT/roofline.md" 2>&1
  say "roofline: rc=$? (roofline.md, roofline.json)"
  ;;
esac
say "done"
