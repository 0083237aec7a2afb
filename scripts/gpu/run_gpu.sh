#!/usr/bin/env bash
# Run on the GPU machine (H200, no network) from the repo root, with .carry/ from scripts/gpu/prepare_carry.sh:
#   scripts/gpu/run_gpu.sh OUTDIR
# Unpacks and patches the sources, builds LAMMPS + KOKKOS(CUDA, HOPPER90) + Batmobile styles and plugin, builds
# the stand-alone project (kernels, model, tests) against an in-tree CUDA Kokkos, runs ctest (including the
# LAMMPS harness on the GPU), the 648-atom NVE water run on the GPU (energy drift, examples/lammps_inputs/water216,
# mode nve, single-precision kernels), a short MD throughput probe (bench/md; BATMOBILE_GPU_MD_CASES, default
# 648 + 10,368 atoms, precision mixed) and the kernel benchmark bench/run_gpu_bench.sh; logs + summary.txt go to OUTDIR.
# BATMOBILE_GPU_SKIP: space-separated step names not to run (e.g. "water_nve bench").
# Every step runs even when an earlier one failed (where it can); a step that would overrun the overall
# deadline (BATMOBILE_GPU_DEADLINE_S, default 570 s) is cut short by `timeout`. Exit status: 0 if all passed.
set -uo pipefail
OUT=$(mkdir -p "${1:?usage: run_gpu.sh OUTDIR}" && cd "$1" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
cd "$REPO"
exec > >(tee "$OUT/run_gpu.log") 2>&1
export BATMOBILE_CACHE=${BATMOBILE_CACHE:-/tmp/batmobile-cache}
export BATMOBILE_JOBS=${BATMOBILE_JOBS:-$(nproc)}
export CMAKE_POLICY_VERSION_MINIMUM=3.5   # CMake 4 refuses projects that declare an older minimum
export NVCC_WRAPPER_DEFAULT_ARCH=sm_90
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
source scripts/common.sh
T0=$(date +%s)
DEADLINE=${BATMOBILE_GPU_DEADLINE_S:-570}
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
declare -a SUMMARY
step() {  # step NAME MAX_SECONDS COMMAND...: runs COMMAND with a timeout, logs to OUT/NAME.log, records rc
  local name=$1 max=$2; shift 2
  if [[ " ${BATMOBILE_GPU_SKIP:-} " == *" $name "* ]]; then SUMMARY+=("$name: skipped (BATMOBILE_GPU_SKIP)"); return 0; fi
  local budget; budget=$(left)
  [ "$budget" -gt "$max" ] && budget=$max
  if [ "$budget" -le 5 ]; then SUMMARY+=("$name: SKIPPED (no time left)"); return 1; fi
  log "step $name (limit ${budget}s)"
  local t=$(date +%s) rc
  ( set -x; timeout "$budget" "$@" ) > "$OUT/$name.log" 2>&1; rc=$?
  SUMMARY+=("$name: rc=$rc $(( $(date +%s) - t ))s$([ $rc -eq 124 ] && echo ' (timed out)')")
  tail -n 15 "$OUT/$name.log"
  return $rc
}

step env 30 bash -c 'nvidia-smi; nvcc --version; g++ --version | head -1; cmake --version | head -1;
  ninja --version; which mpirun mpicxx; python3 -c "import torch;print(torch.__version__, torch.utils.cmake_prefix_path)"; nproc; free -g'

step unpack 60 scripts/gpu/unpack_carry.sh || log "no sources: was .carry/ carried along?"
LV=$(scripts/prepare_sources.sh 2>/dev/null | tail -n1)

if ! step build_lammps 360 scripts/build_lammps.sh --backend cuda && grep -q "configure failed" "$OUT/build_lammps.log"; then
  # libtorch's CMake config is the likeliest configure failure under nvcc; a build without the model-file
  # loader still exercises the KOKKOS(CUDA) styles. Recorded in the summary, never silent.
  export BATMOBILE_LAMMPS_CMAKE_ARGS="-DBATMOBILE_WITH_TORCH=OFF"
  step build_lammps_without_torch 300 scripts/build_lammps.sh --backend cuda
fi
LAMMPS_BUILD=$(ls -d "$BATMOBILE_CACHE"/build/lammps-*-cuda-* 2>/dev/null | head -n1)
[ -n "$LAMMPS_BUILD" ] && cp "$LAMMPS_BUILD/configure.log" "$OUT/lammps_configure.log" 2>/dev/null

B=$BATMOBILE_CACHE/build/test-cuda
TORCH_PREFIX=$(python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null)
source scripts/gpu/cuda_tree.sh
configure_tests() {
  configure_cuda_tree . "$B" -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" -DBATMOBILE_LAMMPS_BUILD="$LAMMPS_BUILD" "$@"
}
export -f configure_tests configure_cuda_tree; export B LV TORCH_PREFIX LAMMPS_BUILD BATMOBILE_CACHE   # `timeout` runs it in a child bash
if ! step configure_tests 90 bash -c 'configure_tests'; then
  step configure_tests_without_torch 90 bash -c 'configure_tests -DBATMOBILE_WITH_TORCH=OFF'
fi
step build_tests 240 cmake --build "$B" -j "$BATMOBILE_JOBS" -- -k 0
step ctest 240 ctest --test-dir "$B" -j "${BATMOBILE_CTEST_JOBS:-4}" --output-on-failure --timeout 200 --output-junit "$OUT/ctest.xml"

export LMP=$LAMMPS_BUILD/lmp BATMOBILE_DEVICE_NAME="$(nvidia-smi -i "${CUDA_VISIBLE_DEVICES:-0}" --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)"
KK_GPU=(-k on g 1 -sf kk -pk kokkos newton on neigh half)
export BATMOBILE_MD_CASES=${BATMOBILE_GPU_MD_CASES:-"648:1:1:1:1000:mixed 10368:2:2:4:100:mixed"}
step md_probe 150 bench/md/run_md_bench.sh "$LMP" potentials/water_fast.pt "$OUT/md_probe"
step water_nve 240 examples/lammps_inputs/water216/run.sh "$LMP" "$OUT/water_nve" nve "${KK_GPU[@]}" -var prec single

if [ -x bench/run_gpu_bench.sh ]; then
  export LMP=$LAMMPS_BUILD/lmp BATMOBILE_LAMMPS_BUILD=$LAMMPS_BUILD BATMOBILE_TEST_BUILD=$B
  step bench 600 bench/run_gpu_bench.sh "$OUT/bench"
else
  SUMMARY+=("bench: not run (no bench/run_gpu_bench.sh)")
fi

{
  # the device copy's .git can lag the copied tree: the sources' content hash says
  # which code ran
  SRC_HASH=$(find src bench tests -type f \( -name '*.hpp' -o -name '*.h' -o -name '*.cpp' \) -print0 | sort -z |
    xargs -0 sha1sum | sha1sum | cut -c1-12)
  echo "run_gpu.sh summary ($(date -u), $(( $(date +%s) - T0 )) s total, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), sources $SRC_HASH)"
  printf '%s\n' "${SUMMARY[@]}"
  grep -hE "tests passed|tests failed|Skipped|\*\*\*Failed|Not Run" "$OUT/ctest.log" 2>/dev/null | head -n 60
} | tee "$OUT/summary.txt"
! grep -q "rc=[1-9]" "$OUT/summary.txt"
