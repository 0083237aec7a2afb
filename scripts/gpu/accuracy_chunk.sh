#!/usr/bin/env bash
# One GPU call of the model study: a chunk of a checkpointed Batmobile training and, beside it, the e3nn reference.
#   scripts/gpu/accuracy_chunk.sh OUTDIR COMMIT CHUNK_MINUTES E3NN_MINUTES [batmobile.train options...]
# OUTDIR/run holds the training run (checkpoint.pt, log.txt, curve.json/png): put a previous chunk's files there to
# resume it (the options then come from its checkpoint). E3NN_MINUTES 0 skips the e3nn model.
# Writes OUTDIR/{run/{checkpoint.pt,log.txt,curve.json,curve.png}, chunk_eval.json, e3nn_water.json, e3nn_log.txt}.
set -uo pipefail
USAGE="usage: accuracy_chunk.sh OUTDIR COMMIT CHUNK_MINUTES E3NN_MINUTES [train options]"
OUT=$(mkdir -p "${1:?$USAGE}" && cd "$1" && pwd)
COMMIT=$2 CHUNK=$3 E3NN_MIN=$4; shift 4
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=python3
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
cd "$ROOT"
TMPDIR_EXPORT=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
E3NN_PID=
if [ "$E3NN_MIN" != 0 ]; then
  "$PY" bench/accuracy/e3nn_train.py --minutes "$E3NN_MIN" --commit "$COMMIT" --out-json "$OUT/e3nn_water.json" \
    >"$OUT/e3nn_log.txt" 2>&1 &
  E3NN_PID=$!
fi
RESUME=()
[ -f "$OUT/run/checkpoint.pt" ] && RESUME=(--resume)
"$PY" -m batmobile.train --out "$OUT/run" --device cuda --chunk-minutes "$CHUNK" "${RESUME[@]}" "$@" 2>&1
train_rc=$?
# the chunk's EMA weights on every validation frame, float64 on the GPU
"$PY" -m batmobile.export "$OUT/run/checkpoint.pt" "$TMPDIR_EXPORT/chunk.pt" &&
  "$PY" -m batmobile.evaluate "$TMPDIR_EXPORT/chunk.pt" --device cuda --json "$OUT/chunk_eval.json"
eval_rc=$?
e3nn_rc=0
if [ -n "$E3NN_PID" ]; then wait "$E3NN_PID"; e3nn_rc=$?; tail -n 5 "$OUT/e3nn_log.txt"; fi
echo "train exit $train_rc, evaluation exit $eval_rc, e3nn exit $e3nn_rc"
[ "$train_rc" = 0 ] && [ "$eval_rc" = 0 ] && [ "$e3nn_rc" = 0 ]
