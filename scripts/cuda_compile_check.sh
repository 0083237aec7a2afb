#!/usr/bin/env bash
# CUDA compile check without a GPU (here, before spending device time): nvcc must be installed (/usr/local/cuda).
#   1. compiles the KOKKOS pair style (src/pair_batmobile/pair_batmobile_kokkos.cpp) for CUDA (sm_90) through the
#      nvcc_wrapper of the patched Kokkos 4.5.01 (scripts/prepare_sources.sh kokkos) against the LAMMPS 4 Feb 2025
#      sources (scripts/prepare_sources.sh lammps-2025): host-only builds accept code that nvcc rejects (e.g. a
#      reducer with a host result space over a device view). As C++17, as LAMMPS's CUDA KOKKOS build compiles it,
#      against a Kokkos configured as that build configures it (CUDA + Serial, HOPPER90; build/cuda-check/kokkos17,
#      configure only, a few s once);
#   2. with --next instead, the same against Kokkos 4.6.01 (patches/kokkos applied to a copy:
#      $BATMOBILE_CACHE/src/kokkos-4.6.01-p<patch hash>) as C++20 with Kokkos_ENABLE_DEPRECATED_CODE_4=OFF
#      (build/cuda-check/kokkos20-next): the CUDA side of the Kokkos 5 readiness check (scripts/check_kokkos_next.sh
#      is the host side; LAMMPS 2025's memory_kokkos.h is compiled as there, with view_host() for DualView::h_view);
#      only the pair style (--tests and --kernels use Kokkos 4.5.01);
#   3. with --kernels, also the model's CUDA objects (fused_layer_l2_float_bundled, the kernels MD runs for the bundled
#      potentials, fused_layer_l2_float and _double, model_device_float; ~3 min each on 2 cores; or the objects named
#      after --kernels), in build/cuda-check (the stand-alone tree against the in-tree CUDA Kokkos 4.5.01, sm_90,
#      ptxas verbose; configured on first use)
#      and prints ptxas's registers and spill stores of the fused kernels, and their static instruction counts
#      (scripts/cubin_sizes.py; the objects are built with uncompressed device code for it).
#   4. with --tests, first the kernel tests for CUDA (test_interaction and the other GoogleTest executables of
#      tests/kernels; ~6 min on 2 cores): ptxas rejects sources that the host build accepts, e.g. one whose fused
#      kernels' constant-memory launch slots (cuda_launch.hpp) exceed 64 KB.
#   scripts/cuda_compile_check.sh [--next] [--tests] [--kernels [OBJECT ...]]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
cd "$BATMOBILE_REPO"
export PATH=/usr/local/cuda/bin:$PATH NVCC_WRAPPER_DEFAULT_ARCH=sm_90
command -v nvcc > /dev/null || { log "no nvcc: install the CUDA toolkit first"; exit 1; }
NEXT=0; [ "${1:-}" = --next ] && { NEXT=1; shift; }
[ $NEXT = 1 ] && [ $# -gt 0 ] && { log "--next compiles the pair style only (no $*)"; exit 2; }
LV=$("$HERE/prepare_sources.sh" lammps-2025 | tail -n1)   # LAMMPS 2025 with lib/kokkos -> patched Kokkos 4.5.01
[ -d "$LV/lib/kokkos/core/src" ] || { log "no prepared LAMMPS 2025 sources ($LV)"; exit 1; }
B=build/cuda-check
mkdir -p "$B"

# Configures (only) a CUDA Kokkos from SRC in DIR as LAMMPS's CUDA build does, with extra CMake args, once. (-arch:
# nvcc_wrapper's default sm_70, which nvcc 13 rejects, would fail CMake's compiler check; see gpu_lib.sh.)
configure_kokkos() {
  local src=$1 dir=$2; shift 2
  [ -f "$dir/KokkosCore_config.h" ] && return
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$src/bin/nvcc_wrapper" \
    -DCMAKE_CXX_FLAGS=-arch=sm_90 -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_SERIAL=ON -DKokkos_ARCH_HOPPER90=ON "$@" \
    > "$dir.configure.log" 2>&1 \
    || { tail -n 20 "$dir.configure.log"; log "Kokkos configure failed ($dir.configure.log)"; exit 1; }
}

if [ $NEXT = 1 ]; then
  KS=$("$HERE/prepare_sources.sh" kokkos-next | tail -n1); KB=$B/kokkos20-next; STD=20
  configure_kokkos "$KS" "$KB" -DCMAKE_CXX_STANDARD=20 -DKokkos_ENABLE_DEPRECATED_CODE_4=OFF
  grep -q "^#define KOKKOS_ENABLE_DEPRECATED_CODE_4" "$KB/KokkosCore_config.h" && { log "$KB: deprecated code on"; exit 1; }
  WHAT="Kokkos $KOKKOS_NEXT_TAG, C++20, no deprecated code"
  # LAMMPS 2025's memory_kokkos.h reads DualView::h_view, private without deprecated code: a copy reads view_host()
  # (as LAMMPS 4 Jul 2026 does), ahead of LAMMPS's src/KOKKOS on the include path (as scripts/check_kokkos_next.sh)
  OV=$B/lammps-overlay-next; mkdir -p "$OV"
  sed -E 's/\.h_view\b/.view_host()/g' "$LV/src/KOKKOS/memory_kokkos.h" > "$OV/memory_kokkos.h"
  LINC=(-I"$OV")
else
  KS=$LV/lib/kokkos; KB=$B/kokkos17; STD=17; LINC=()
  configure_kokkos "$KS" "$KB" -DCMAKE_CXX_STANDARD=17
  WHAT="Kokkos $KOKKOS_TAG, C++17"
fi
log "pair style for CUDA ($WHAT)"
KINC=(-I"$KB" -I"$KB/core/src" -I"$KS/core/src" -I"$KS/tpls/desul/include" -I"$KS/tpls/mdspan/include"
      -I"$KB/containers/src" -I"$KS/containers/src" -I"$KB/algorithms/src" -I"$KS/algorithms/src" -I"$KB/simd/src"
      -I"$KS/simd/src")
"$KS/bin/nvcc_wrapper" -DBATMOBILE_WITH_TORCH=1 -DBATMOBILE_LAMMPS_VERSION=$LAMMPS2025_TAG -DLAMMPS_SMALLBIG -DLMP_KOKKOS \
  -DOMPI_SKIP_MPICXX -DMPICH_SKIP_MPICXX -Isrc/pair_batmobile -Isrc "${LINC[@]}" -I"$LV/src" -I"$LV/src/KOKKOS" "${KINC[@]}" \
  -isystem /usr/lib/x86_64-linux-gnu/openmpi/include -isystem /usr/lib/x86_64-linux-gnu/openmpi/include/openmpi \
  -O1 -std=c++$STD -fPIC -extended-lambda -Wext-lambda-captures-this -arch=sm_90 \
  -c src/pair_batmobile/pair_batmobile_kokkos.cpp -o "$B/pair_batmobile_kokkos_check$STD.o"
log "pair style ($WHAT): ok"
[ $NEXT = 1 ] && exit 0

if [ "${1:-}" = --tests ] || [ "${1:-}" = --kernels ]; then
  # the stand-alone tree against the in-tree CUDA Kokkos 4.5.01 (configured again when that Kokkos moved)
  if [ ! -f "$B/build.ninja" ] || ! grep -qx "BATMOBILE_KOKKOS_SOURCE:[A-Z]*=$LV/lib/kokkos" "$B/CMakeCache.txt"; then
    rm -rf "$B/CMakeCache.txt" "$B/CMakeFiles"
    source scripts/gpu/gpu_lib.sh
    configure_cuda_tree . "$B" sm_90 -DBATMOBILE_WITH_TORCH=OFF -DBATMOBILE_GTEST_SOURCE=/usr/src/googletest \
      -DBATMOBILE_BUILD_BENCH=OFF -DCMAKE_CXX_FLAGS=-Xptxas=-v > "$B/configure.log" 2>&1 \
      || { tail -n 20 "$B/configure.log"; log "configure failed ($B/configure.log)"; exit 1; }
  fi
fi
if [ "${1:-}" = --tests ]; then
  shift
  log "kernel tests for CUDA"
  ninja -C "$B" -j "$(build_jobs)" test_interaction test_conv_weights test_sh_cg test_eaas > "$B/tests_build.log" 2>&1 ||
    { grep -m5 -B2 -A3 "error" "$B/tests_build.log"; log "kernel tests: FAILED ($B/tests_build.log)"; exit 1; }
  log "kernel tests: ok"
fi
if [ "${1:-}" = --kernels ]; then
  shift
  objs=("$@")
  [ ${#objs[@]} -gt 0 ] || objs=(fused_layer_l2_float_bundled fused_layer_l2_float fused_layer_l2_double model_device_float)
  for o in "${objs[@]}"; do
    rm -f "$B/src/model/CMakeFiles/batmobile_model.dir/$o.cpp.o"  # (compiled again for ptxas's report)
    NVCC_APPEND_FLAGS="${NVCC_APPEND_FLAGS:-} -no-compress" ninja -C "$B" "src/model/CMakeFiles/batmobile_model.dir/$o.cpp.o" 2>&1 |
      awk '/Compiling entry function/ {name = $(NF - 2)} /bytes spill stores/ {spill = $5 " B spill stores"}
           /Used [0-9]+ registers/ && name ~ /InteractionKernel/ && name ~ /LaunchBounds/ {
             match($0, /Used [0-9]+ registers/); regs = substr($0, RSTART + 5, RLENGTH - 15)
             kind = name ~ /ForwardT/ ? "forward" : (name ~ /PairAdjT/ ? "pair adjoint" : "sender adjoint")
             t = name ~ /InteractionKernelIf/ ? "float" : "double"
             match(name, /ELi[0-9]+ELb1ELi[0-9]+ELi[0-9]+E/); lr = substr(name, RSTART, RLENGTH)
             print t, kind, "(L, ATTN, DKM, ROLE: " lr "):", regs, "registers,", spill }' | sort | uniq
  done
  for o in fused_layer_l2_float_bundled fused_layer_l2_float; do
    f=$B/src/model/CMakeFiles/batmobile_model.dir/$o.cpp.o
    [ -f "$f" ] || continue
    echo "static SASS instructions of the fused kernels that MD launches ($o):"
    python3 scripts/cubin_sizes.py "$f"
  done
fi
