# Sourced by the GPU scripts. configure_cuda_tree SRC BUILD [CMAKE_ARGS...]: configures a Batmobile source tree
# (Ninja, Release) against the in-tree CUDA Kokkos (HOPPER90, compiled through its nvcc_wrapper) and the carried
# GoogleTest. Needs LV (the prepared sources: last line of scripts/gpu/unpack_carry.sh) and BATMOBILE_CACHE.
configure_cuda_tree() {
  local src=$1 build=$2
  shift 2
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$LV/lib/kokkos/bin/nvcc_wrapper" \
    -DCMAKE_CXX_STANDARD=17 -DBATMOBILE_KOKKOS_SOURCE="$LV/lib/kokkos" -DKokkos_ENABLE_CUDA=ON \
    -DKokkos_ENABLE_CUDA_LAMBDA=ON -DKokkos_ENABLE_SERIAL=ON -DKokkos_ARCH_HOPPER90=ON \
    -DBATMOBILE_GTEST_SOURCE="$BATMOBILE_CACHE/src/googletest" -DBATMOBILE_PYTHON="$(command -v python3)" "$@"
}
