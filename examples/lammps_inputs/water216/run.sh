#!/usr/bin/env bash
# Runs the water216 example: run.sh LMP OUTDIR [short|full] [extra lmp args...]
#   short (default): in.water216_short on the CPU with pair_style batmobile (KOKKOS host runtime, 2 threads)
#   full:            in.water216 (30 ps) followed by analyze_rdf.py
# The model file defaults to potentials/water.pt; override with BATMOBILE_MODEL=/path/model.pt.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LMP=$1; OUT=$2; MODE=${3:-short}; shift 3 2>/dev/null || shift $#
MODEL=${BATMOBILE_MODEL:-$HERE/../../../potentials/water.pt}
mkdir -p "$OUT"
cp "$HERE/water216_start.lmp" "$OUT/"
cd "$OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} OMP_PROC_BIND=${OMP_PROC_BIND:-false}
if [ "$MODE" = full ]; then
  "$LMP" -in "$HERE/in.water216" -var model "$MODEL" -log log.lammps "$@"
  /usr/bin/python3 "$HERE/analyze_rdf.py" --rdf rdf.dat --log log.lammps --out "$OUT/results"
else
  "$LMP" -in "$HERE/in.water216_short" -var model "$MODEL" -log log.lammps "$@"
fi
echo "water216 ($MODE) finished: $OUT/log.lammps"
