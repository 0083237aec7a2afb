#!/usr/bin/env bash
# MD throughput on one GPU: replicated 216-water boxes with `-k on g 1 -sf kk`, plus the PyTorch reference model
# and a same-size e3nn model on the same GPU for the ratios. Writes OUTDIR/md_h200.json.
# usage: bench/md/run_md_bench.sh LMP_BINARY POTENTIAL OUTDIR
# Environment:
#   BATMOBILE_MD_CASES   space-separated atoms:rx:ry:rz:steps:precision[:repeats] (default below; repeats: that many
#                        runs of the case one after the other, each its own LAMMPS process; md_h200.json reports
#                        their mean and each run: one 648-atom run spreads by +-3 % on the H200)
#   BATMOBILE_GPU_INDEX  GPU whose memory nvidia-smi samples (default: first of CUDA_VISIBLE_DEVICES, else 0)
#   BATMOBILE_MD_CASE_TIMEOUT  seconds per LAMMPS case (default 240)
#   BATMOBILE_MD_REFERENCE_MAX_ATOMS  largest case timed with the PyTorch reference too (default 20000)
#   BATMOBILE_MD_E3NN_MAX_ATOMS  largest box timed with the same-size e3nn peer (collect_md_bench.py; default 100000,
#                        0: none)
#   BATMOBILE_MD_RANKS  MPI ranks, one GPU each (default 1; peak memory is then that of BATMOBILE_GPU_INDEX only)
#   BATMOBILE_MD_FIT     increasing replications rx:ry:rz of the 648-atom box, run until the first failure, to
#                        bound the largest box that fits on one GPU (e.g. "15:15:15 17:17:17 19:19:19 21:21:21")
#   LMP_ARGS             LAMMPS accelerator arguments (default: -k on g 1 -sf kk -pk kokkos newton on neigh half)
#   BATMOBILE_MD_NEWTON  the input's newton setting: off (default on one rank: batmobile/kk then folds the images'
#                        forces itself and LAMMPS skips its reverse communication: docs/performance.md) or on (the default with BATMOBILE_MD_RANKS > 1, where off is an error; also
#                        needed with LMP_ARGS that do not select batmobile/kk)
set -uo pipefail
LMP=$1; POT=$2; OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
DATA=$ROOT/examples/lammps_inputs/water216/water216_start.lmp
mkdir -p "$OUT"
# 648 atoms in the GPU default precision (mixed, three times) and in fp64; 10,368; 97,200; then ~1.05e6 atoms to show
# what fits on one GPU
CASES=${BATMOBILE_MD_CASES:-"648:1:1:1:2000:mixed:3 648:1:1:1:500:double 10368:2:2:4:200:mixed 97200:5:5:6:30:mixed 1049760:15:12:9:3:mixed"}
for c in $CASES; do  # a malformed case would only show up as a failed run after the others
  [[ $c =~ ^[0-9]+(:[0-9]+){4}:(single|mixed|double)(:[0-9]+)?$ ]] ||
    { echo "run_md_bench.sh: case '$c' is not atoms:rx:ry:rz:steps:precision[:repeats] (precision single, mixed or double)" >&2; exit 2; }
done
GPU=${BATMOBILE_GPU_INDEX:-${CUDA_VISIBLE_DEVICES:-0}}; GPU=${GPU%%,*}
CASE_TIMEOUT=${BATMOBILE_MD_CASE_TIMEOUT:-240}
# BATMOBILE_MD_RANKS=N: N MPI ranks, one GPU each (LAMMPS's domain decomposition; multi-GPU scaling)
RANKS=${BATMOBILE_MD_RANKS:-1}
NEWTON=${BATMOBILE_MD_NEWTON:-$([ "$RANKS" -gt 1 ] && echo on || echo off)}
export BATMOBILE_MD_NEWTON=$NEWTON   # (collect_md_bench.py records it)
read -r -a ACCEL <<<"${LMP_ARGS:--k on g $RANKS -sf kk -pk kokkos newton on neigh half}"
LAUNCH=()
if [ "$RANKS" -gt 1 ]; then
  LAUNCH=(mpirun -np "$RANKS" --oversubscribe)
  [ "$(id -u)" = 0 ] && LAUNCH+=(--allow-run-as-root)
fi
smi() { nvidia-smi -i "$GPU" --query-gpu=memory.used --format=csv,noheader,nounits "$@" 2>/dev/null; }
results=()
rm -f "$OUT/md_launch.txt"
run_case() {  # run_case ATOMS RX RY RZ STEPS PRECISION WARMUP [RUN]: one LAMMPS run; appends to results, returns its rc
  local n=$1 rx=$2 ry=$3 rz=$4 ns=$5 prec=$6 nwarm=$7
  local tag=${n}_${prec}${8:+_r$8} base mon rc peak sps ran
  local log=$OUT/md_$tag.log
  base=$(smi | head -n1)
  # nvidia-smi itself in the background (not a function's subshell): `kill $mon` must stop the sampler
  nvidia-smi -i "$GPU" --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$OUT/mem_${tag}.txt" 2>/dev/null &
  mon=$!
  echo "[md-bench $(date +%T)] $n atoms ($rx x $ry x $rz), $ns steps, $prec"
  timeout "$CASE_TIMEOUT" "${LAUNCH[@]}" "$LMP" "${ACCEL[@]}" -in "$HERE/in.md_bench" -log "$log" -screen none \
     -var data "$DATA" -var pot "$POT" -var rx $rx -var ry $ry -var rz $rz -var nsteps $ns -var nwarm $nwarm \
     -var prec "$prec" -var newton "$NEWTON"
  rc=$?
  kill $mon 2>/dev/null; wait $mon 2>/dev/null
  peak=$(sort -n "$OUT/mem_${tag}.txt" | tail -n1)
  sps=$(grep -oE "[0-9.]+ timesteps/s" "$log" 2>/dev/null | tail -n1 | cut -d' ' -f1)
  # the atom count LAMMPS ran, not the case label (a label that disagrees with rx*ry*rz once mislabelled a run)
  ran=$(grep -oE "steps with [0-9]+ atoms" "$log" 2>/dev/null | tail -n1 | cut -d' ' -f3)
  if [ -n "$ran" ] && [ "$ran" != "$n" ]; then
    echo "[md-bench] WARNING: case labelled $n atoms ran $ran atoms; reporting $ran"; n=$ran
  fi
  results+=("$n $rc ${sps:-nan} ${peak:-0} ${base:-0} $prec")
  # how the edge kernels launched in the timed run (the style's last launch line: Model::launch_summary)
  echo "$n $prec $(grep -E "^pair_style batmobile(/kk)?: " "$log" 2>/dev/null | tail -n1 | sed 's/^pair_style [^:]*: //')" \
    >> "$OUT/md_launch.txt"
  echo "[md-bench] $n atoms $prec: rc=$rc ${sps:-?} steps/s, peak ${peak:-?} MiB"
  [ $rc -eq 0 ] || tail -n 5 "$log" 2>/dev/null
  return $rc
}
for c in $CASES; do
  IFS=: read -r n rx ry rz ns prec reps <<<"$c"
  if [ "${reps:-1}" -le 1 ]; then
    run_case "$n" "$rx" "$ry" "$rz" "$ns" "$prec" 5
  else
    for ((r = 1; r <= reps; ++r)); do run_case "$n" "$rx" "$ry" "$rz" "$ns" "$prec" 5 "$r"; done
  fi
done
# Largest box on one GPU: BATMOBILE_MD_FIT="rx:ry:rz ..." (increasing), 2 steps each after 1 warm-up, until the
# first one that fails (out of memory or over BATMOBILE_MD_CASE_TIMEOUT): that size bounds the search.
fit_failed=0
for f in ${BATMOBILE_MD_FIT:-}; do
  IFS=: read -r rx ry rz <<<"$f"
  n=$(( 648 * rx * ry * rz ))
  if ! run_case "$n" "$rx" "$ry" "$rz" 2 single 1; then fit_failed=$n; break; fi
done
printf "%s\n" "${results[@]}" > "$OUT/md_raw.txt"
timeout 300 python3 "$HERE/collect_md_bench.py" "$OUT/md_raw.txt" "$POT" "$DATA" "$OUT/md_h200.json" \
  --reference-max-atoms "${BATMOBILE_MD_REFERENCE_MAX_ATOMS:-20000}" --fit-failed "$fit_failed" \
  --e3nn-max-atoms "${BATMOBILE_MD_E3NN_MAX_ATOMS:-100000}" \
  --command "BATMOBILE_MD_CASES=\"$CASES\" BATMOBILE_MD_RANKS=$RANKS BATMOBILE_MD_NEWTON=$NEWTON${BATMOBILE_MD_FIT:+ BATMOBILE_MD_FIT=\"$BATMOBILE_MD_FIT\"}${BATMOBILE_MD_E3NN_MAX_ATOMS:+ BATMOBILE_MD_E3NN_MAX_ATOMS=$BATMOBILE_MD_E3NN_MAX_ATOMS} bench/md/run_md_bench.sh LMP $(basename "$POT") OUTDIR (${ACCEL[*]})"
