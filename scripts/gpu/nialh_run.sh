#!/usr/bin/env bash
# The Ni-Al-H model end to end in one GPU-machine call (repo root, .carry/ carried):
#   scripts/gpu/nialh_run.sh OUTDIR POTENTIAL [TRAIN_MINUTES] [STAGES]
# POTENTIAL: LAMMPS's NiAlH_jea.eam.alloy. Builds a host LAMMPS with the MANYBODY package (eam/alloy) and the
# Batmobile styles on the machine's cores, labels frames with eam/alloy (examples/lammps_inputs/nialh/
# generate_frames.py), trains a model on the GPU for TRAIN_MINUTES (default 5), exports it as OUTDIR/nialh_eam.pt
# with its card (nialh_eam.json, parity PNGs; float64 validation incl. stress RMSE) and compares it with eam/alloy
# (compare.py: energy-volume curve, liquid RDFs). Everything lands in OUTDIR, packed as OUTDIR.tgz.
# STAGES (default "frames train compare"): a subset runs only those, on what OUTDIR holds from the others (e.g.
# frames and the comparison on a CPU machine, "train" on the GPU with OUTDIR/frames carried: it reads the DeePMD npy
# copies of the frames, so the GPU machine needs no ASE).
set -uo pipefail
USAGE="usage: nialh_run.sh OUTDIR POTENTIAL [TRAIN_MINUTES] [STAGES]"
OUT=$(mkdir -p "${1:?$USAGE}" && cd "$1" && pwd); POT=$(realpath "${2:?$USAGE}"); MIN=${3:-5}
STAGES=" ${4:-frames train compare} "; stage() { [[ "$STAGES" == *" $1 "* ]]; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd); cd "$ROOT"
export BATMOBILE_CACHE=${BATMOBILE_CACHE:-/tmp/batmobile-cache} CMAKE_POLICY_VERSION_MINIMUM=3.5
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
PY=python3
T0=$(date +%s); say() { echo "[nialh +$(( $(date +%s) - T0 ))s] $*"; }
pack() { tar czf "$OUT.tgz" -C "$(dirname "$OUT")" "$(basename "$OUT")"; }
trap pack EXIT
if stage frames || stage compare; then
  (source scripts/common.sh && source scripts/gpu/gpu_lib.sh && unpack_carry) > "$OUT/unpack.log" 2>&1 || say "unpack failed (is .carry/ carried?)"
  say "host LAMMPS + MANYBODY"
  LB=$(BATMOBILE_JOBS=$(nproc) BATMOBILE_LAMMPS_CMAKE_ARGS="-DPKG_MANYBODY=ON" scripts/build_lammps.sh --backend openmp \
       2> "$OUT/build_lammps.log" | tail -n1)
  source "$LB/batmobile-build.env" || { say "LAMMPS build failed: see build_lammps.log"; exit 1; }
fi
if stage frames; then
  say "frames (eam/alloy)"
  "$PY" examples/lammps_inputs/nialh/generate_frames.py --lmp "$LMP" --potential "$POT" --out "$OUT/frames" \
    --jobs "$(nproc)" > "$OUT/frames.log" 2>&1 || { say "frame generation failed"; tail -n 20 "$OUT/frames.log"; exit 1; }
  tail -n 1 "$OUT/frames.log"
  # the same frames as DeePMD npy systems: training and validation need neither ASE nor LAMMPS then
  for part in train val; do
    "$PY" -m batmobile.deepmd_io "$OUT/frames/$part.extxyz" --out "$OUT/frames/deepmd_$part" | tail -n 1
  done
fi
if stage train; then
  say "training ($MIN min)"
  "$PY" -m batmobile.train --train "$OUT"/frames/deepmd_train/sys_* --val "$OUT"/frames/deepmd_val/sys_* --species Ni Al H \
    --r_c 5.5 --T 2 --C 32 --force-weight 10 --energy-weight-final 5 --stress-weight 1 --steps 100000 \
    --total-minutes "$MIN" --device cuda --progress lines --log-every 500 --out "$OUT/run" > "$OUT/train.log" 2>&1
  tail -n 3 "$OUT/train.log"
  "$PY" -m batmobile.export "$OUT/run/checkpoint.pt" "$OUT/nialh_eam.pt" &&
    "$PY" -m batmobile.evaluate "$OUT/nialh_eam.pt" --frames "$OUT"/frames/deepmd_val/sys_* --device cuda \
      --plots "$OUT" --prefix nialh_eam_ --card "$OUT/nialh_eam.json" | tail -n 1
fi
stage compare || { say "done"; exit 0; }
say "comparison with eam/alloy"
"$PY" examples/lammps_inputs/nialh/compare.py --lmp "$LMP" --model "$OUT/nialh_eam.pt" --potential "$POT" \
  --threads 2 --jobs $(( $(nproc) / 2 )) --out "$OUT/compare" > "$OUT/compare.log" 2>&1
tail -n 1 "$OUT/compare.log"
say "done"
