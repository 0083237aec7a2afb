#!/usr/bin/env bash
# Kernel benchmark driver (GPU machine). Usage: bench/run_gpu_bench.sh OUTDIR
#   Called by scripts/gpu_check.sh --kernel-bench from the repository root. Environment:
#     BATMOBILE_BENCH_BIN   path of the batmobile_bench executable; default
#                           $BATMOBILE_TEST_BUILD/bench/batmobile_bench (the stand-alone CUDA build of gpu_check.sh)
#     PYTHON                python with torch + e3nn 0.6 (default python3)
#     BATMOBILE_BENCH_REPS  timed repetitions (default 50, median reported; 5 warm-up runs)
#     BATMOBILE_BENCH_CASES full (default: 1000 atoms x 20 nbrs C=32, 10000 x 30 C=64) or quick (tiny smoke test)
#     BATMOBILE_E3NN_BACKEND e3nn (default) or dense (torch einsum over cg_l3.npz: to test this script without e3nn)
#     BATMOBILE_BENCH_RADIAL radial modes of the attention ops: all (default: 0, 1, 2 and 4; mode 1 ops end in
#                           _radial_gemm, mode 2 (tensor cores) in _radial_mma, mode 4 (f16) in _radial_mma_f16),
#                           both (0 and 1), 0, 1, 2 or 4
#   Steps: (1) e3nn cross-check: batmobile_bench --check-dump (fp64 kernels on the device) vs e3nn (SH, conv
#   output, dE/dh, dE/dw, forces) -> OUTDIR/e3nn_check.json; (2) batmobile timings on random graphs (graphs
#   written to OUTDIR/graphs) -> OUTDIR/batmobile.jsonl; (3) e3nn timings on the same graphs -> OUTDIR/e3nn.jsonl;
#   (4) merge -> OUTDIR/kernels_h200.json and bench/results/kernels_h200.json, whose "provenance" names the commit
#   (BATMOBILE_COMMIT, else git), the GPU and this command.
set -uo pipefail
OUT=$(mkdir -p "${1:?usage: run_gpu_bench.sh OUTDIR}" && cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${BATMOBILE_BENCH_BIN:-${BATMOBILE_TEST_BUILD:-build}/bench/batmobile_bench}
PY=${PYTHON:-python3}
REPS=${BATMOBILE_BENCH_REPS:-50}
CASES=${BATMOBILE_BENCH_CASES:-full}
BACKEND=${BATMOBILE_E3NN_BACKEND:-e3nn}
RADIAL=${BATMOBILE_BENCH_RADIAL:-all}
rc=0
if [ ! -x "$BIN" ]; then
  echo "run_gpu_bench: no benchmark binary at $BIN (set BATMOBILE_BENCH_BIN)" >&2
  exit 2
fi
DEVICE_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)
DEVICE_NAME=${DEVICE_NAME:-unknown}

mkdir -p "$OUT/check" "$OUT/graphs"
echo "== e3nn cross-check"
if "$BIN" --check-dump "$OUT/check" && "$PY" "$HERE/e3nn_bench.py" --check "$OUT/check" --backend "$BACKEND" | tee "$OUT/e3nn_check.json"; then
  echo "e3nn cross-check passed"
else
  echo "e3nn cross-check FAILED" >&2
  rc=1
fi

echo "== batmobile timings"
"$BIN" --reps "$REPS" --warmup 5 --cases "$CASES" --radial-mode "$RADIAL" --graph-dir "$OUT/graphs" \
  --out "$OUT/batmobile.jsonl" || rc=1
cat "$OUT/batmobile.jsonl"

echo "== e3nn timings"
"$PY" "$HERE/e3nn_bench.py" --graph-dir "$OUT/graphs" --out "$OUT/e3nn.jsonl" --reps "$REPS" --warmup 5 \
  --cases "$CASES" --backend "$BACKEND" || rc=1
cat "$OUT/e3nn.jsonl" 2>/dev/null

echo "== merge"
touch "$OUT/e3nn.jsonl"
COMMIT=${BATMOBILE_COMMIT:-$(git -C "$HERE/.." rev-parse --short HEAD 2>/dev/null || echo unknown)}
if "$PY" "$HERE/e3nn_bench.py" --merge "$OUT/batmobile.jsonl" "$OUT/e3nn.jsonl" --device-name "$DEVICE_NAME" \
    --out-json "$OUT/kernels_h200.json" --commit "$COMMIT" \
    --command "BATMOBILE_BENCH_REPS=$REPS BATMOBILE_BENCH_RADIAL=$RADIAL bench/run_gpu_bench.sh OUTDIR"; then
  # only real measurements go to the checked-in results file
  if [ "$CASES" = full ] && [ "$BACKEND" = e3nn ]; then
    mkdir -p "$HERE/results" && cp "$OUT/kernels_h200.json" "$HERE/results/kernels_h200.json"
  fi
else
  rc=1
fi
exit $rc
