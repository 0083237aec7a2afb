#!/usr/bin/env bash
# Issue-6 runs on the GPU machine (run from the repo root with .carry/ carried; no network there):
#   scripts/gpu/run_md_gpu.sh OUTDIR [WALLTIME_SECONDS_FOR_WATER216, default 300]
# Builds LAMMPS + KOKKOS(CUDA) + Batmobile (cached in $BATMOBILE_CACHE), runs the MD throughput benchmark
# (bench/md/run_md_bench.sh -> OUTDIR/md_h200.json) and the water216 NVT run with RDFs, stopped cleanly after
# WALLTIME by LAMMPS's `timer timeout`, then analyze_rdf.py (OUTDIR/water216/results/{gOO.png,summary.json}).
set -uo pipefail
OUT=$(mkdir -p "${1:?usage: run_md_gpu.sh OUTDIR [WALLTIME]}" && cd "$1" && pwd)
WALL=${2:-300}
REPO=$(cd "$(dirname "$0")/../.." && pwd); cd "$REPO"
export BATMOBILE_CACHE=${BATMOBILE_CACHE:-/tmp/batmobile-cache} BATMOBILE_JOBS=${BATMOBILE_JOBS:-$(nproc)}
export CMAKE_POLICY_VERSION_MINIMUM=3.5 NVCC_WRAPPER_DEFAULT_ARCH=sm_90
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
scripts/gpu/unpack_carry.sh > "$OUT/unpack.log" 2>&1
LAMMPS_BUILD=$(scripts/build_lammps.sh --backend cuda 2> "$OUT/build_lammps.log" | tail -n1)
source "$LAMMPS_BUILD/batmobile-build.env" || { echo "LAMMPS build failed: $OUT/build_lammps.log"; exit 1; }
POT=$REPO/potentials/water_dft.pt
bench/md/run_md_bench.sh "$LMP" "$POT" "$OUT/md" > "$OUT/md_bench.log" 2>&1
cp "$OUT/md/md_h200.json" "$OUT/" 2>/dev/null && mkdir -p bench/results && cp "$OUT/md_h200.json" bench/results/
examples/lammps_inputs/water216/run.sh "$LMP" "$OUT/water216" full -var walltime "$WALL" \
  -k on g 1 -sf kk -pk kokkos newton on neigh half > "$OUT/water216.log" 2>&1
tail -n 25 "$OUT/md_bench.log" "$OUT/water216.log"
