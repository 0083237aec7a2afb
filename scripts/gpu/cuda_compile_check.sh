#!/usr/bin/env bash
# CUDA compile check without a GPU (here, before spending device time): nvcc must be installed (/usr/local/cuda).
#   1. configures build/cuda-check (the stand-alone tree against the in-tree CUDA Kokkos, sm_90, ptxas verbose) once;
#   2. compiles the KOKKOS pair style (src/pair_batmobile/pair_batmobile_kokkos.cpp) for CUDA against the LAMMPS
#      sources (~20 s): host-only builds accept code that nvcc rejects (e.g. a reducer with a host result space over
#      a device view). As C++14, against a Kokkos configured for C++14 (build/cuda-check/kokkos14, configure only,
#      ~2 s once): the CUDA LAMMPS build compiles its sources so (a C++17 check passes std::optional, which that build
#      rejects);
#   3. with --kernels, also the model's CUDA objects (fused_layer_l2_float_bundled, the kernels MD runs for the bundled
#      potentials, fused_layer_l2_float and _double, model_device_float; ~3 min each on 2 cores; or the objects named
#      after --kernels)
#      and prints ptxas's registers and spill stores of the fused kernels, and their static instruction counts
#      (scripts/gpu/cubin_sizes.py; the objects are built with uncompressed device code for it).
#   4. with --tests, first the kernel tests for CUDA (test_interaction and the other GoogleTest executables of
#      tests/kernels; ~6 min on 2 cores): ptxas rejects sources that the host build accepts, e.g. one whose fused
#      kernels' constant-memory launch slots (cuda_launch.hpp) exceed 64 KB.
#   scripts/gpu/cuda_compile_check.sh [--tests] [--kernels [OBJECT ...]]
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
source "$HERE/common.sh"
cd "$BATMOBILE_REPO"
export PATH=/usr/local/cuda/bin:$PATH NVCC_WRAPPER_DEFAULT_ARCH=sm_90
command -v nvcc > /dev/null || { log "no nvcc: install the CUDA toolkit first"; exit 1; }
LV=$(ls -d "$BATMOBILE_CACHE"/src/lammps-*-kokkos-* 2> /dev/null | head -n1)
[ -d "$LV/lib/kokkos" ] || { log "no prepared LAMMPS sources under $BATMOBILE_CACHE/src: run scripts/test.sh once"; exit 1; }
B=build/cuda-check
if [ ! -f "$B/build.ninja" ]; then
  source scripts/gpu/cuda_tree.sh
  configure_cuda_tree . "$B" -DBATMOBILE_WITH_TORCH=OFF -DBATMOBILE_GTEST_SOURCE=/usr/src/googletest \
    -DCMAKE_CXX_FLAGS=-Xptxas=-v > /dev/null
fi
LB=$(ls -td "$BATMOBILE_CACHE"/build/lammps-*/lammps/includes 2> /dev/null | head -n1)  # generated style headers
# the pair style as the CUDA LAMMPS build compiles it: C++14 (Kokkos 3.4's default standard for CUDA there)
KB=$B/kokkos14
[ -f "$KB/KokkosCore_config.h" ] || cmake -S "$LV/lib/kokkos" -B "$KB" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$LV/lib/kokkos/bin/nvcc_wrapper" -DCMAKE_CXX_STANDARD=14 -DKokkos_ENABLE_CUDA=ON \
  -DKokkos_ENABLE_CUDA_LAMBDA=ON -DKokkos_ENABLE_SERIAL=ON -DKokkos_ARCH_HOPPER90=ON > "$B/kokkos14_configure.log"
log "pair style for CUDA (C++14)"
"$LV/lib/kokkos/bin/nvcc_wrapper" -DBATMOBILE_WITH_TORCH=1 -DBATMOBILE_LAMMPS_VERSION=20210929 -DLAMMPS_SMALLBIG -DLMP_KOKKOS -DOMPI_SKIP_MPICXX \
  -Isrc/pair_batmobile -Isrc -I"$LV/src" -I"$LV/src/KOKKOS" -I"$KB" -I"$KB/core/src" -I"$LV/lib/kokkos/core/src" \
  -I"$KB/containers/src" -I"$LV/lib/kokkos/containers/src" -I"$KB/algorithms/src" -I"$LV/lib/kokkos/algorithms/src" \
  ${LB:+-I"$LB"} -isystem /usr/lib/x86_64-linux-gnu/openmpi/include \
  -isystem /usr/lib/x86_64-linux-gnu/openmpi/include/openmpi -O1 -std=c++14 -fPIC -expt-extended-lambda -arch=sm_90 \
  -c src/pair_batmobile/pair_batmobile_kokkos.cpp -o "$B/pair_batmobile_kokkos_check.o"
log "pair style: ok"
if [ "${1:-}" = --tests ]; then
  shift
  log "kernel tests for CUDA"
  ninja -C "$B" test_interaction test_conv_weights test_sh_cg test_eaas > "$B/tests_build.log" 2>&1 ||
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
    python3 scripts/gpu/cubin_sizes.py "$f"
  done
fi
