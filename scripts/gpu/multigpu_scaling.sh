#!/usr/bin/env bash
# Multi-GPU scaling and correctness of batmobile/kk on one host, one MPI rank per GPU:
#   scripts/gpu/multigpu_scaling.sh LMP OUTDIR [--gpus "1 2 4 8"] [--cpu]
# LMP: a CUDA LAMMPS build's lmp (scripts/build_lammps.sh --backend cuda). For each GPU count N of --gpus (default:
# 1 up to the GPUs nvidia-smi lists, in powers of two):
#   correctness  10,368 atoms, 60 NVE steps from 600 K (atoms migrate between the ranks' subdomains), fp64 and fp32
#                kernels: thermo every 10 steps and the final forces, against N = 1
#   strong       97,200 atoms x 30 steps and 1,049,760 atoms x 3 steps, fp32 kernels
#   weak         about 1.05e6 atoms per GPU (15 x 12 x 9 boxes of 648 atoms per GPU) x 3 steps, fp32 kernels
# then bench/md/collect_multigpu.py writes OUTDIR/md_h200_multigpu.json (steps/s, atom-steps/s, efficiencies, LAMMPS's
# Comm share, max_rel_diff_fp64 / fp32) and packs OUTDIR into OUTDIR.tgz (the device tool returns few files).
# --cpu: the same stages on the host KOKKOS back-end (-k on t 1) with small boxes, to check the script and the
# collector without GPUs (python/tests/test_multigpu_collect.py runs the collector; this runs everything).
set -uo pipefail
USAGE="usage: multigpu_scaling.sh LMP OUTDIR [--gpus \"1 2 4\"] [--cpu]"
LMP=${1:?$USAGE}; OUT=$(mkdir -p "${2:?$USAGE}" && cd "$2" && pwd); shift 2
GPUS=""; CPU=0
while [ $# -gt 0 ]; do
  case "$1" in
    --gpus) GPUS=$2; shift 2;;
    --cpu) CPU=1; shift;;
    *) echo "$USAGE" >&2; exit 2;;
  esac
done
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/bench/md/bench_common.sh"
DATA=$ROOT/examples/lammps_inputs/water216/water216_start.lmp
POT=$ROOT/potentials/water_fast.pt
if [ -z "$GPUS" ]; then
  NG=$([ "$CPU" = 1 ] && echo 2 || nvidia-smi -L 2>/dev/null | wc -l)
  GPUS=1; for n in 2 4 8; do [ "$n" -le "$NG" ] && GPUS="$GPUS $n"; done
fi
MPI=(mpirun --oversubscribe); [ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)
# boxes: correctness, strong (two sizes), weak (per GPU); --cpu shrinks them
if [ "$CPU" = 1 ]; then
  CHECK="2 1 1"; STRONG="2:1:1:6 2:2:1:3"; WEAK_BASE="1 1 1"; WEAK_STEPS=3; CHECK_STEPS=20
else
  CHECK="2 2 4"; STRONG="5:5:6:30 15:12:9:3"; WEAK_BASE="15 12 9"; WEAK_STEPS=3; CHECK_STEPS=60
fi
accel() {  # accel N: the LAMMPS accelerator arguments for N ranks
  if [ "$CPU" = 1 ]; then echo "-k on t 1 -sf kk -pk kokkos newton on neigh half"
  else echo "-k on g $1 -sf kk -pk kokkos newton on neigh half"; fi
}
run() {  # run NAME N RX RY RZ STEPS PREC EXTRA...: one LAMMPS run into OUT/NAME.log
  local name=$1 n=$2 rx=$3 ry=$4 rz=$5 ns=$6 prec=$7; shift 7
  echo "[multigpu $(date +%T)] $name: $n rank(s), $rx x $ry x $rz boxes, $ns steps, $prec"
  # shellcheck disable=SC2046
  timeout 580 "${MPI[@]}" -np "$n" "$LMP" $(accel "$n") -in "$ROOT/bench/md/in.md_bench" -log "$OUT/$name.log" \
    -screen none -var data "$DATA" -var pot "$POT" -var rx "$rx" -var ry "$ry" -var rz "$rz" -var nsteps "$ns" \
    -var nwarm 2 -var prec "$prec" -var newton on "$@" \
    || echo "[multigpu] $name failed (rc $?): $(tail -n 2 "$OUT/$name.log" 2>/dev/null | tr '\n' ' ')"
}
for n in $GPUS; do
  for prec in double single; do
    # shellcheck disable=SC2086
    run "check_${prec}_$n" "$n" $CHECK "$CHECK_STEPS" "$prec" -var temp 600 -var thermo_every 10 \
      -var dump_flag 1 -var dump_forces "$OUT/forces_${prec}_$n.txt"
  done
  for c in $STRONG; do
    IFS=: read -r rx ry rz ns <<<"$c"
    run "strong_$((648 * rx * ry * rz))_$n" "$n" "$rx" "$ry" "$rz" "$ns" single
  done
  # weak: the per-GPU box stacked along x, then y, then z as N doubles
  read -r bx by bz <<<"$WEAK_BASE"
  case $n in 1) f="1 1 1";; 2) f="2 1 1";; 4) f="2 2 1";; 8) f="2 2 2";; *) f="$n 1 1";; esac
  read -r fx fy fz <<<"$f"
  run "weak_$n" "$n" $((bx * fx)) $((by * fy)) $((bz * fz)) "$WEAK_STEPS" single
done
COMMIT=$(bench_commit)
MACHINE=$([ "$CPU" = 1 ] && echo "host CPU ($(nproc) cores, KOKKOS host back-end)" \
  || nvidia-smi --query-gpu=name --format=csv,noheader | sort | uniq -c | sed 's/^ *//' | paste -sd' ')
PY=/usr/bin/python3
for c in python3 /usr/bin/python3; do "$c" -c 'import numpy' 2>/dev/null && { PY=$c; break; }; done
"$PY" "$ROOT/bench/md/collect_multigpu.py" "$OUT" --gpus $GPUS --commit "$COMMIT" --machine "$MACHINE" \
  --command "scripts/gpu/multigpu_scaling.sh LMP OUTDIR --gpus \"$GPUS\"$([ "$CPU" = 1 ] && echo ' --cpu')" \
  --out "$OUT/md_h200_multigpu.json"
rc=$?
tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"
exit $rc
