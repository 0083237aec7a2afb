#!/usr/bin/env bash
# MD throughput on one GPU: replicated water boxes with `-k on g 1 -sf kk`, plus the PyTorch reference model
# on the same GPU for the ratio. Writes OUTDIR/md_h200.json (also copied to bench/results/md_h200.json).
# usage: bench/md/run_md_bench.sh LMP_BINARY POTENTIAL OUTDIR
set -uo pipefail
LMP=$1; POT=$2; OUT=$3
HERE=$(cd "$(dirname "$0")" && pwd); ROOT=$(cd "$HERE/../.." && pwd)
DATA=$ROOT/examples/lammps_inputs/water216/water216_start.lmp
[ -f "$DATA" ] || DATA=$ROOT/../shared/data/water/reference/water216_start.lmp
mkdir -p "$OUT"
# name:rx:ry:rz:steps  (648 atoms; 10,368; 97,200; then larger boxes to find what fits on one GPU)
CASES="648:1:1:1:500 10368:2:2:4:200 97200:5:5:6:50 1049760:15:12:9:5 2099520:18:15:12:3"
results=()
for c in $CASES; do
  IFS=: read -r n rx ry rz ns <<<"$c"
  log=$OUT/md_${n}.log
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 200 > "$OUT/mem_${n}.txt" 2>/dev/null &
  smi=$!
  base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -n1)
  echo "[md-bench] $n atoms ($rx x $ry x $rz), $ns steps"
  timeout 240 "$LMP" -k on g 1 -sf kk -pk kokkos newton on neigh half -log "$log" -screen none \
     -var data "$DATA" -var pot "$POT" -var rx $rx -var ry $ry -var rz $rz -var nsteps $ns -var nwarm 5
  rc=$?
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  peak=$(sort -n "$OUT/mem_${n}.txt" | tail -n1)
  sps=$(grep -oE "[0-9.]+ timesteps/s" "$log" 2>/dev/null | tail -n1 | cut -d' ' -f1)
  results+=("$n $rc ${sps:-nan} ${peak:-0} ${base:-0}")
  [ $rc -eq 0 ] || echo "[md-bench] $n atoms failed (rc=$rc)"
done
printf "%s\n" "${results[@]}" > "$OUT/md_raw.txt"
python3 "$HERE/collect_md_bench.py" "$OUT/md_raw.txt" "$POT" "$DATA" "$OUT/md_h200.json"
