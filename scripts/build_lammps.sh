#!/usr/bin/env bash
# Builds LAMMPS (PLUGIN, MPI when available, shared libraries) and batmobileplugin.so against it, through
# cmake/lammps/CMakeLists.txt, with the Batmobile styles compiled in or (--plugin-only) a stock LAMMPS.
# Incremental: the build directory lives in the cache, keyed by versions, Kokkos patch hash, back-end, compiler and
# checkout path, so after a change to our sources only those are recompiled.
#   scripts/build_lammps.sh [--lammps 2025|2026] [--backend openmp|cuda] [--cuda-arch sm_NN] [--mpi auto|on|off]
#                           [--plugin-only]
# --lammps 2025 (default): LAMMPS 4 Feb 2025 with its KOKKOS package on Kokkos 4.5.01 (batmobile and batmobile/kk;
#   the model runs on LAMMPS's Kokkos).
# --lammps 2026: LAMMPS 4 Jul 2026 without KOKKOS (its KOKKOS package needs Kokkos >= 5.1): pair_style batmobile,
#   whose model runs on the styles' own Kokkos 4.5 (host, or with --backend cuda a CUDA Kokkos built here).
# --backend cuda: CUDA for the GPU generation --cuda-arch names (default sm_90: H100, H200; sm_80 A100, sm_89 L40S).
# Environment: BATMOBILE_JOBS, BATMOBILE_TORCH_PREFIX, BATMOBILE_LAMMPS_CMAKE_ARGS (extra CMake arguments).
# Last line of output: the build directory. It contains batmobile-build.env with LMP=..., PLUGIN=...
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
BACKEND=openmp; MPI=auto; VERSION=2025; BUILTIN=ON; CUDA_ARCH=sm_90
usage() {
  echo "usage: build_lammps.sh [--lammps 2025|2026] [--backend openmp|cuda] [--cuda-arch sm_NN] [--mpi auto|on|off]" \
       "[--plugin-only]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --lammps) VERSION=${2:-}; shift 2 || usage;;
    --plugin-only) BUILTIN=OFF; shift;;
    --backend) BACKEND=${2:-}; shift 2 || usage;;
    --cuda-arch) CUDA_ARCH=${2:-}; shift 2 || usage;;
    --mpi) MPI=${2:-}; shift 2 || usage;;
    *) echo "error: unknown argument $1" >&2; usage;;
  esac
done
case "$BACKEND" in openmp|cuda) ;; *) echo "error: unknown backend '$BACKEND' (openmp or cuda)" >&2; exit 2;; esac
# Kokkos's name of each CUDA architecture
case "$CUDA_ARCH" in
  sm_70) KOKKOS_ARCH=VOLTA70;; sm_75) KOKKOS_ARCH=TURING75;; sm_80) KOKKOS_ARCH=AMPERE80;; sm_86) KOKKOS_ARCH=AMPERE86;;
  sm_89) KOKKOS_ARCH=ADA89;; sm_90) KOKKOS_ARCH=HOPPER90;;
  *) echo "error: unknown --cuda-arch '$CUDA_ARCH' (sm_70, sm_75, sm_80, sm_86, sm_89 or sm_90)" >&2; exit 2;;
esac
if [ "$MPI" = auto ]; then
  if command -v mpicxx >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then MPI=on; else MPI=off; fi
fi
ARGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DPKG_PLUGIN=ON -DBUILD_SHARED_LIBS=ON
      -DPKG_MANYBODY=ON -DBUILD_MPI=$([ "$MPI" = on ] && echo ON || echo OFF) -DBATMOBILE_STYLES_BUILTIN=$BUILTIN)
KSRC=$("$HERE/prepare_sources.sh" kokkos | tail -n1)   # the patched Kokkos 4.5.01 (nvcc_wrapper, in-tree builds)
case "$VERSION" in
  2025)
    TAG=$LAMMPS2025_TAG; KOKKOS=ON
    LV=$("$HERE/prepare_sources.sh" lammps-2025 | tail -n1)
    ARGS+=(-DPKG_KOKKOS=ON -DKokkos_ENABLE_SERIAL=ON)
    # LAMMPS's force-style harness (test_pair_style) runs on the build with our styles compiled in
    [ "$BUILTIN" = ON ] && ARGS+=(-DBATMOBILE_LAMMPS_HARNESS=ON);;
  2026)
    TAG=$LAMMPS2026_TAG; KOKKOS=OFF
    LV=$("$HERE/prepare_sources.sh" lammps-2026 | tail -n1)
    ARGS+=(-DPKG_KOKKOS=OFF)
    if [ "$BACKEND" = cuda ]; then
      ARGS+=(-DBATMOBILE_KOKKOS_SOURCE="$KSRC" -DKokkos_ENABLE_SERIAL=ON)
    else
      ARGS+=(-DKokkos_ROOT="$("$HERE/build_kokkos_host.sh" | tail -n1)")
    fi;;
  *) echo "error: unknown LAMMPS version '$VERSION' (2025 or 2026)" >&2; exit 2;;
esac
ARGS+=(-DBATMOBILE_LAMMPS_TREE="$LV")
# ccache when present (CMAKE_CXX_COMPILER_LAUNCHER in the environment wins). Paths relative to the cache let the
# builds of one LAMMPS version (with our styles and --plugin-only) share LAMMPS's objects.
if [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && command -v ccache >/dev/null 2>&1; then
  ARGS+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$BATMOBILE_CACHE}
case "$BACKEND" in
  openmp)
    [ "$KOKKOS" = ON ] && ARGS+=(-DKokkos_ENABLE_OPENMP=ON)
    ARGS+=(-DBUILD_OMP=ON)
    COMPILER_ID="$(${CXX:-c++} --version | head -n1)";;
  cuda)
    # nvcc_wrapper compiles everything. Its built-in arch (sm_70) is one that nvcc 13 no longer accepts, and CMake's
    # compiler check runs it before Kokkos adds the arch flag: the arch leads CMAKE_CXX_FLAGS.
    ARGS+=(-DKokkos_ENABLE_CUDA=ON "-DKokkos_ARCH_$KOKKOS_ARCH=ON" -DKokkos_ENABLE_OPENMP=OFF -DBUILD_OMP=OFF
           -DCMAKE_CXX_COMPILER="$KSRC/bin/nvcc_wrapper" "-DCMAKE_CXX_FLAGS=-arch=$CUDA_ARCH")
    COMPILER_ID="$(nvcc --version | tail -n1) $(${NVCC_WRAPPER_DEFAULT_COMPILER:-g++} -dumpfullversion) $CUDA_ARCH";;
esac
# libtorch for src/model (Debian's python3-torch here, the pip torch on the GPU machine).
TORCH_PREFIX=${BATMOBILE_TORCH_PREFIX:-$(/usr/bin/python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null \
  || python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)}
[ -n "$TORCH_PREFIX" ] && ARGS+=(-DCMAKE_PREFIX_PATH="$TORCH_PREFIX")
# Extra CMake arguments, e.g. BATMOBILE_LAMMPS_CMAKE_ARGS="-DBATMOBILE_WITH_TORCH=OFF".
read -r -a EXTRA <<< "${BATMOBILE_LAMMPS_CMAKE_ARGS:-}"
ARGS+=("${EXTRA[@]}")

SUFFIX=""; [ "$BUILTIN" = ON ] || SUFFIX=-stock
KEY=$(printf '%s\n' "lammps=$TAG" "kokkos=$KOKKOS_TAG-p$(kokkos_patch_hash)" "backend=$BACKEND" \
      "mpi=$MPI" "compiler=$COMPILER_ID" "checkout=$BATMOBILE_REPO" | sha1sum | cut -c1-10)
B=$BATMOBILE_CACHE/build/lammps-$TAG-$BACKEND$SUFFIX-$KEY
mkdir -p "$B"
# Several people (and CI) share the cache: one build per build dir at a time.
exec 9> "$B/.lock"
flock -n 9 || { log "waiting for another build in $B"; flock 9; }
log "LAMMPS $VERSION build dir $B (backend $BACKEND, KOKKOS $KOKKOS, MPI $MPI, styles built in: $BUILTIN)"
t0=$(date +%s)
# Configure only when needed: ninja re-runs CMake by itself when a CMake file or a globbed directory changes.
ARGS_HASH=$(printf '%s\n' "${ARGS[@]}" | sha1sum | cut -c1-16)
if [ ! -f "$B/build.ninja" ] || [ "$(cat "$B/.configure-args" 2>/dev/null)" != "$ARGS_HASH" ]; then
  rm -f "$B/.configure-args"
  cmake -S "$BATMOBILE_REPO/cmake/lammps" -B "$B" "${ARGS[@]}" > "$B/configure.log" 2>&1 \
    || { tail -n 40 "$B/configure.log" >&2; log "configure failed, see $B/configure.log"; exit 1; }
  echo "$ARGS_HASH" > "$B/.configure-args"
fi
cmake --build "$B" -j "$(build_jobs)" >&2
log "LAMMPS build took $(( $(date +%s) - t0 )) s"
LMP=$B/lmp
PLUGIN=$B/batmobileplugin.so
[ -x "$LMP" ] || { log "no lmp binary at $LMP"; exit 1; }
HARNESS=""; [ -x "$B/test_pair_style" ] && HARNESS=$B/test_pair_style
printf 'LMP=%s\nPLUGIN=%s\nBACKEND=%s\nMPI=%s\nLAMMPS=%s\nBUILTIN=%s\nKOKKOS=%s\nHARNESS=%s\n' "$LMP" "$PLUGIN" \
  "$BACKEND" "$MPI" "$VERSION" "$BUILTIN" "$KOKKOS" "$HARNESS" > "$B/batmobile-build.env"
echo "$B"
