#!/usr/bin/env bash
# Runs the water216 example: run.sh LMP OUTDIR [short|full] [extra lmp args...]
#   short (default): in.water216_short on the CPU with pair_style batmobile (KOKKOS host runtime, 2 threads)
#   full:            in.water216 (10 ps equilibration + 50 ps production) followed by analyze_rdf.py
#   continue FILE:   in.water216 from restart FILE (written every 10,000 steps as OUTDIR/water216.restart.a / .b in
#                    turn -- take the newer -- and at the end as water216_final.restart, also after a walltime
#                    stop) up to the same final step; the analysis then averages the
#                    RDF blocks of every part (rdf.dat, rdf_cont_N.dat) and reads every log
#   nve:             in.water216_nve (1 ps NVT + 10,000 NVE steps) followed by analyze_nve.py
# short and full end with analyze_rdf.py: OUTDIR/results/{gOO.png, summary.json, rdf_production.dat};
# nve with analyze_nve.py: OUTDIR/results/{nve_summary.json, nve_etotal.png}.
# The model file defaults to potentials/water_fast.pt; override with BATMOBILE_MODEL=/path/model.pt.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LMP=$1; OUT=$2; MODE=${3:-short}; shift 3 2>/dev/null || shift $#
MODEL=${BATMOBILE_MODEL:-$HERE/../../../potentials/water_fast.pt}
# analysis python: the first of BATMOBILE_PYTHON, python3, /usr/bin/python3 that has numpy and matplotlib
PY=
for c in ${BATMOBILE_PYTHON:-} python3 /usr/bin/python3; do
  "$c" -c 'import numpy, matplotlib' 2>/dev/null && { PY=$c; break; }
done
PY=${PY:-/usr/bin/python3}
DEVICE=${BATMOBILE_DEVICE_NAME:-}
mkdir -p "$OUT"
cp "$HERE/water216_start.lmp" "$OUT/"
cd "$OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_PROC_BIND=${OMP_PROC_BIND:-false}
if [ "$MODE" = full ]; then
  "$LMP" -in "$HERE/in.water216" -var model "$MODEL" -log log.lammps "$@"
  "$PY" "$HERE/analyze_rdf.py" --rdf rdf.dat --log log.lammps --out "$OUT/results" ${DEVICE:+--device "$DEVICE"}
elif [ "$MODE" = continue ]; then
  RESTART=$(cd "$(dirname "${1:?usage: run.sh LMP OUTDIR continue RESTART_FILE [lmp args]}")" && pwd)/$(basename "$1"); shift
  n=1
  while [ -e "log_cont_$n.lammps" ]; do n=$((n + 1)); done
  "$LMP" -in "$HERE/in.water216" -var model "$MODEL" -var continued 1 -var restart "$RESTART" -var rdf_file "rdf_cont_$n.dat" \
    -log "log_cont_$n.lammps" "$@"
  "$PY" "$HERE/analyze_rdf.py" --rdf rdf*.dat --log log*.lammps --out "$OUT/results" ${DEVICE:+--device "$DEVICE"}
elif [ "$MODE" = nve ]; then
  "$LMP" -in "$HERE/in.water216_nve" -var model "$MODEL" -log log.lammps "$@"
  "$PY" "$HERE/analyze_nve.py" --log log.lammps --out "$OUT/results" ${DEVICE:+--device "$DEVICE"}
else
  "$LMP" -in "$HERE/in.water216_short" -var model "$MODEL" -log log.lammps "$@"
  # a short run has no equilibrated part: every RDF sample is averaged (the plot is a smoke check, not a result)
  "$PY" "$HERE/analyze_rdf.py" --rdf rdf.dat --log log.lammps --out "$OUT/results" --equil-ps 0 \
    --device "CPU, $(nproc) cores, OMP_NUM_THREADS=$OMP_NUM_THREADS"
fi
echo "water216 ($MODE) finished: $OUT/log.lammps"
