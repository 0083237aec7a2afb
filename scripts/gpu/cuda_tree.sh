# Sourced by the GPU scripts. configure_cuda_tree SRC BUILD [CMAKE_ARGS...]: configures a Batmobile source tree
# (Ninja, Release, C++17 as LAMMPS 2025's KOKKOS build) against the in-tree CUDA Kokkos 4.5.01 of LV/lib/kokkos
# (HOPPER90, compiled through its nvcc_wrapper; Kokkos 4 always enables device lambdas) and the carried GoogleTest.
# Needs LV (the prepared sources: last line of scripts/gpu/unpack_carry.sh) and BATMOBILE_CACHE.
# -arch=sm_90 leads CMAKE_CXX_FLAGS (a -DCMAKE_CXX_FLAGS=... among CMAKE_ARGS is appended to it): Kokkos 4's
# nvcc_wrapper falls back to sm_70 without an -arch (it ignores NVCC_WRAPPER_DEFAULT_ARCH), which nvcc 13 rejects,
# and CMake's compiler checks run it before Kokkos adds its own -arch=sm_90.
configure_cuda_tree() {
  local src=$1 build=$2 flags=-arch=sm_90 a
  local args=()
  shift 2
  for a in "$@"; do
    case "$a" in
      -DCMAKE_CXX_FLAGS=*) flags+=" ${a#-DCMAKE_CXX_FLAGS=}";;
      *) args+=("$a");;
    esac
  done
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER="$LV/lib/kokkos/bin/nvcc_wrapper" \
    -DCMAKE_CXX_STANDARD=17 -DBATMOBILE_KOKKOS_SOURCE="$LV/lib/kokkos" -DKokkos_ENABLE_CUDA=ON \
    -DKokkos_ENABLE_SERIAL=ON -DKokkos_ARCH_HOPPER90=ON -DCMAKE_CXX_FLAGS="$flags" \
    -DBATMOBILE_GTEST_SOURCE="$BATMOBILE_CACHE/src/googletest" -DBATMOBILE_PYTHON="$(command -v python3)" "${args[@]}"
}
