#!/usr/bin/env bash
# Trains the bundled water potential on a GPU machine, exports it and writes its model card.
#   scripts/gpu/train_gpu.sh [--data DIR] OUTDIR [MINUTES] [extra batmobile.train options...]
# Data: --data DIR, else the bundled data/water/dft_train.
# Writes OUTDIR/{water_fast.pt, water_fast.json, parity_energy.png, parity_forces.png, train_log.txt, checkpoint.pt}.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DATA=$ROOT/data/water/dft_train
[ "${1:-}" = --data ] && { DATA=$(realpath "${2:?--data DIR}"); shift 2; }
OUT=$(mkdir -p "${1:?usage: train_gpu.sh [--data DIR] OUTDIR [MINUTES]}" && cd "$1" && pwd); shift
MIN=${1:-8}; shift || true
PY=python3
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
RUN=$OUT/run
"$PY" -m batmobile.train --data "$DATA" --out "$RUN" --max-minutes "$MIN" --device auto "$@"
"$PY" -m batmobile.export "$RUN/checkpoint.pt" "$OUT/water_fast.pt"
"$PY" -m batmobile.evaluate "$OUT/water_fast.pt" --data "$DATA" --plots "$OUT" --card "$OUT/water_fast.json"
cp "$RUN/log.txt" "$OUT/train_log.txt"; mv "$RUN/checkpoint.pt" "$OUT/checkpoint.pt"; rm -rf "$RUN"
