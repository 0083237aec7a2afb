#!/usr/bin/env bash
# Size / temperature g_OO study at the DFT frames' density (issue #64 item 3):
#   rdf_study.sh LMP OUTDIR [options] [LAMMPS / accelerator args...]
# Four cases, each in OUTDIR/<case>/: n64_T300, n64_T330 (water64_start.lmp: a DFT frame, 64 H2O, 12.444661 A) and
# n216_T300, n216_T330 (water216_dftrho_start.lmp: 216 H2O, 18.666992 A; both 0.9934 g/cm3, made by
# make_rdf_study_starts.py). Each runs in.water216 -- the input of run.sh's `full` run, with its NVT thermostat
# (Nose-Hoover, 0.05 ps), 0.5 fs step and RDF settings (200 bins to 6 A, a sample every 100 steps, blocks of
# 1000 steps) -- with only the start file and the temperature changed: 10 ps equilibration, then 50 ps production.
#
# Resumable: run the same command again and it skips finished cases (OUTDIR/<case>/DONE) and continues an
# unfinished one from its newest restart file (written every 10,000 steps, and at the end of a part, also after a
# --walltime stop), as run.sh's `continue` does (rdf_cont_N.dat, log_cont_N.lammps). Options:
#   --model FILE     model (default potentials/water_accurate.pt)
#   --ps N           production length in ps (default 50); shorter productions also get shorter RDF blocks
#                    (10 blocks at least), thermo and restart intervals -- for smoke tests only
#   --equil-ps N     equilibration in ps (default 10)
#   --walltime S     stop cleanly after S seconds of this call (restart written; run again to continue); use it on
#                    machines with a per-call limit, e.g. --walltime 540 for 10-minute calls
#   --cases LIST     comma-separated subset of n64_T300,n64_T330,n216_T300,n216_T330 (default all, in that order)
# Everything else goes to every LAMMPS call, e.g. on one GPU:
#   -k on g 1 -sf kk -pk kokkos newton on neigh half -var prec single
# A case's settings (model checksum, steps, temperature, LAMMPS args) are kept in <case>/case.env; continuing with
# different ones is refused (use another OUTDIR). After each finished case: <case>/results/{gOO.dat,summary.json};
# once all are finished: OUTDIR/results/rdf_size_temperature.{json,png} (analyze_rdf_study.py OUTDIR writes the
# same into this folder's results/).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
usage() { sed -n '2,3p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
LMP=$1; OUT=$2; shift 2
MODEL=$HERE/../../../potentials/water_accurate.pt
PROD_PS=50; EQUIL_PS=10; WALLTIME=0; CASES=n64_T300,n64_T330,n216_T300,n216_T330
LMP_ARGS=()
while [ $# -gt 0 ]; do
  case $1 in
    --model) MODEL=$2; shift 2 ;;
    --ps) PROD_PS=$2; shift 2 ;;
    --equil-ps) EQUIL_PS=$2; shift 2 ;;
    --walltime) WALLTIME=$2; shift 2 ;;
    --cases) CASES=$2; shift 2 ;;
    --help|-h) sed -n '2,30p' "$0"; exit 0 ;;
    --*) echo "rdf_study: unknown option $1" >&2; usage ;;
    *) LMP_ARGS+=("$1"); shift ;;
  esac
done
MODEL=$(cd "$(dirname "$MODEL")" && pwd)/$(basename "$MODEL")
[ -f "$MODEL" ] || { echo "rdf_study: no model file $MODEL" >&2; exit 2; }
LMP=$(command -v "$LMP") || { echo "rdf_study: LAMMPS executable not found" >&2; exit 2; }
# analysis python: as run.sh, the first of BATMOBILE_PYTHON, python3, /usr/bin/python3 with numpy and matplotlib
PY=
for c in ${BATMOBILE_PYTHON:-} python3 /usr/bin/python3; do
  "$c" -c 'import numpy, matplotlib' 2>/dev/null && { PY=$c; break; }
done
PY=${PY:-/usr/bin/python3}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_PROC_BIND=${OMP_PROC_BIND:-false}

# steps (0.5 fs): RDF blocks of 1000 steps (10 samples every 100 steps) unless the production is shorter than 10
# blocks; equilibration and production are whole blocks, so no block mixes the two
read -r EQUIL_STEPS TOTAL_STEPS BLOCK < <(awk -v p="$PROD_PS" -v e="$EQUIL_PS" 'BEGIN {
  ps = int(p * 2000 + 0.5); es = int(e * 2000 + 0.5); b = 1000
  if (ps < 10 * b) { b = int(ps / 100) * 10; if (b < 10) b = 10 }
  es = int(es / b + 0.5) * b; ps = int(ps / b + 0.5) * b; if (ps < b) ps = b
  print es, es + ps, b }')
THERMO=$(( BLOCK < 200 ? BLOCK : 200 ))
RESTART_EVERY=$(( 10 * BLOCK < 10000 ? 10 * BLOCK : 10000 ))
MODEL_SHA=$(sha256sum "$MODEL" | cut -c1-16)
mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
T0=$SECONDS
say() { printf '[rdf_study %s +%ds] %s\n' "$(date -u +%H:%M:%S)" $((SECONDS - T0)) "$*"; }
last_step() { awk '/^ *Step /{h=1; next} /^Loop time/{h=0} h && $1 ~ /^[0-9]+$/ && $1 + 0 > s {s = $1 + 0} END {print s + 0}' "$@" 2>/dev/null; }
say "LAMMPS $LMP; model $MODEL (sha256 $MODEL_SHA); steps: $EQUIL_STEPS equilibration + $((TOTAL_STEPS - EQUIL_STEPS)) production, RDF block $BLOCK; LAMMPS args: ${LMP_ARGS[*]:-none}"

run_case() {   # name: runs (or continues) one case; returns 0 when finished, 3 when stopped by the walltime
  local name=$1 n=${1#n}; local T=${n#*_T}; n=${n%_T*}
  local dir=$OUT/$name data box
  if [ "$n" = 64 ]; then data=$HERE/water64_start.lmp; else data=$HERE/water216_dftrho_start.lmp; fi
  box=$(awk '/xlo xhi/ {printf "%.6f", $2 - $1; exit}' "$data")
  mkdir -p "$dir"; cd "$dir"   # case.env is written when LAMMPS first starts here
  local env
  env=$(printf '%s\n' "n_water=$n" "temperature=$T" "box=$box" "data='$(basename "$data")'" \
    "model='$(basename "$MODEL")'" "model_sha256=$MODEL_SHA" "timestep_fs=0.5" "equil_steps=$EQUIL_STEPS" \
    "total_steps=$TOTAL_STEPS" "rdf_block=$BLOCK" "lmp_args='${LMP_ARGS[*]:-}'")
  if [ -f case.env ] && [ "$env" != "$(cat case.env)" ]; then
    echo "rdf_study: $dir was started with other settings; use another OUTDIR (or remove that folder):" >&2
    diff <(cat case.env) <(echo "$env") >&2 || true
    exit 2
  fi
  if [ -f DONE ]; then say "$name: finished earlier, skipped"; return 0; fi
  local budget=0
  if [ "$WALLTIME" != 0 ]; then
    budget=$((WALLTIME - (SECONDS - T0)))
    if [ "$budget" -lt 30 ]; then say "$name: walltime used up, not started"; return 3; fi
  fi
  echo "$env" > case.env
  local vars=(-var model "$MODEL" -var data "$data" -var temperature "$T" -var steps "$TOTAL_STEPS"
    -var rdf_every $((BLOCK / 10)) -var rdf_repeat 10 -var rdf_block "$BLOCK" -var thermo_every "$THERMO"
    -var restart_every "$RESTART_EVERY" -var walltime "$budget")
  # the newest restart file (a.b alternate; final is written at the end of every part)
  local restarts=() f log rdf part rc=0
  for f in $(ls -t water216_final.restart water216.restart.a water216.restart.b 2>/dev/null); do restarts+=("$f"); done
  if [ ${#restarts[@]} -eq 0 ]; then
    log=log.lammps; rdf=rdf.dat; part="fresh start from $(basename "$data"), $T K"
    vars+=(-var rdf_file "$rdf")
  else
    part=1; while [ -e "log_cont_$part.lammps" ]; do part=$((part + 1)); done
    log=log_cont_$part.lammps; rdf=rdf_cont_$part.dat
    vars+=(-var continued 1 -var restart "${restarts[0]}" -var rdf_file "$rdf")
    part="continued from ${restarts[0]} (step $(last_step log*.lammps) reached by the earlier parts)"
  fi
  say "$name: $part; up to step $TOTAL_STEPS$([ "$budget" = 0 ] || echo ", walltime ${budget}s")"
  "$LMP" -in "$HERE/in.water216" "${vars[@]}" -log "$log" -screen "${log%.lammps}.screen" "${LMP_ARGS[@]}" &
  local pid=$!
  while kill -0 "$pid" 2>/dev/null; do   # progress every 60 s
    for _ in $(seq 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -0 "$pid" 2>/dev/null && say "$name: step $(last_step "$log") / $TOTAL_STEPS"
  done
  wait "$pid" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "rdf_study: $name: LAMMPS failed (exit $rc); the end of $dir/${log%.lammps}.screen:" >&2
    tail -n 20 "${log%.lammps}.screen" >&2
    exit 1
  fi
  local reached sps
  reached=$(last_step "$log")
  sps=$(grep -o '[0-9.]* timesteps/s' "$log" | tail -n1 || true)
  if [ "$reached" -ge "$TOTAL_STEPS" ]; then
    touch DONE
    say "$name: finished at step $reached (${sps:-speed n/a})"
    "$PY" "$HERE/analyze_rdf_study.py" --case "$dir" --brief
    return 0
  fi
  say "$name: stopped at step $reached of $TOTAL_STEPS (walltime; ${sps:-speed n/a}); run the same command again to continue"
  return 3
}

done_n=0; total_n=0; status=0
for name in ${CASES//,/ }; do
  case $name in n64_T300|n64_T330|n216_T300|n216_T330) ;; *) echo "rdf_study: unknown case $name" >&2; exit 2 ;; esac
  total_n=$((total_n + 1))
  if run_case "$name"; then done_n=$((done_n + 1)); else status=$?; [ "$status" = 3 ] || exit "$status"; fi
done
cd "$OUT"
if [ "$done_n" -eq "$total_n" ]; then
  say "the $total_n selected cases are finished"
  "$PY" "$HERE/analyze_rdf_study.py" "$OUT" --out "$OUT/results"
  all=$(ls -d "$OUT"/n64_T300/DONE "$OUT"/n64_T330/DONE "$OUT"/n216_T300/DONE "$OUT"/n216_T330/DONE 2>/dev/null | wc -l)
  if [ "$all" -eq 4 ]; then
    echo "RDF_STUDY: COMPLETE ($OUT/results/rdf_size_temperature.json)"
  else
    echo "RDF_STUDY: INCOMPLETE ($all of 4 cases finished in $OUT; the others were not selected)"
  fi
else
  echo "RDF_STUDY: INCOMPLETE ($done_n of $total_n selected cases finished): run the same command again to continue"
fi
