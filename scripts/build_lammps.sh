#!/usr/bin/env bash
# Builds LAMMPS (PLUGIN, MPI when available, shared libraries) with the Batmobile styles compiled in, plus
# batmobileplugin.so, through cmake/lammps/CMakeLists.txt. Incremental: the build directory lives in the
# cache, keyed by versions, Kokkos patch hash, backend, compiler and checkout path, so after a change to
# our sources only those are recompiled.
#   scripts/build_lammps.sh [--lammps 2021|2025] [--backend openmp|cuda] [--mpi auto|on|off] [--plugin-only]
# --lammps 2021 (default): LAMMPS 29 Sep 2021 with KOKKOS (batmobile and batmobile/kk).
# --lammps 2025: LAMMPS 4 Feb 2025 without KOKKOS (pair_style batmobile; the model runs on the styles' own Kokkos:
#   a host Kokkos, or with --backend cuda a CUDA Kokkos built in the project, for `pair_style batmobile device cuda`).
# --plugin-only: a stock LAMMPS (none of our styles inside) and batmobileplugin.so built against it.
# Environment: BATMOBILE_JOBS, BATMOBILE_TORCH_PREFIX, BATMOBILE_LAMMPS_CMAKE_ARGS (extra CMake arguments).
# Last line of output: the build directory. It contains batmobile-build.env with LMP=..., PLUGIN=...
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
BACKEND=openmp; MPI=auto; VERSION=2021; BUILTIN=ON
while [ $# -gt 0 ]; do
  case "$1" in
    --lammps) VERSION=$2; shift 2;;
    --plugin-only) BUILTIN=OFF; shift;;
    --backend) BACKEND=$2; shift 2;;
    --mpi) MPI=$2; shift 2;;
    *) echo "unknown argument $1" >&2; exit 2;;
  esac
done
if [ "$MPI" = auto ]; then
  if command -v mpicxx >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then MPI=on; else MPI=off; fi
fi
ARGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DPKG_PLUGIN=ON -DBUILD_SHARED_LIBS=ON
      -DBUILD_MPI=$([ "$MPI" = on ] && echo ON || echo OFF) -DBATMOBILE_STYLES_BUILTIN=$BUILTIN)
case "$VERSION" in
  2021)
    TAG=$LAMMPS_TAG; KOKKOS_KEY=$KOKKOS_TAG-p$(kokkos_patch_hash)
    LV=$("$HERE/prepare_sources.sh" | tail -n1)
    ARGS+=(-DPKG_KOKKOS=ON -DKokkos_ENABLE_SERIAL=ON);;
  2025)
    # LAMMPS's KOKKOS package of 2025 needs Kokkos >= 4, which Debian does not ship as sources: no batmobile/kk.
    TAG=$LAMMPS2025_TAG; KOKKOS_KEY=host-$KOKKOS_TAG
    "$HERE/fetch_sources.sh" >&2
    LV=$BATMOBILE_CACHE/src/lammps-$LAMMPS2025_TAG
    ARGS+=(-DPKG_KOKKOS=OFF -DPKG_MANYBODY=ON)
    if [ "$BACKEND" = cuda ]; then
      # the styles' own Kokkos with CUDA, built in this project from the patched Kokkos 3.4 (CUDA 13, sm_90)
      KSRC=$(readlink -f "$("$HERE/prepare_sources.sh" | tail -n1)/lib/kokkos"); KOKKOS_KEY=$KOKKOS_TAG-p$(kokkos_patch_hash)
      ARGS+=(-DBATMOBILE_KOKKOS_SOURCE="$KSRC" -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON)
    else
      ARGS+=(-DKokkos_ROOT="$("$HERE/build_kokkos_host.sh" | tail -n1)")
    fi
    # LAMMPS's force-style harness (test_pair_style) runs on the build with our style compiled in
    [ "$BUILTIN" = ON ] && ARGS+=(-DBATMOBILE_LAMMPS_HARNESS=ON);;
  *) echo "unknown LAMMPS version $VERSION (2021 or 2025)" >&2; exit 2;;
esac
ARGS+=(-DBATMOBILE_LAMMPS_TREE="$LV")
KSRC=${KSRC:-$LV/lib/kokkos}  # the Kokkos whose nvcc_wrapper compiles a CUDA build
# ccache when present (CMAKE_CXX_COMPILER_LAUNCHER in the environment wins). Paths relative to the cache let the
# builds of one LAMMPS version (with our styles and --plugin-only) share LAMMPS's objects.
if [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && command -v ccache >/dev/null 2>&1; then
  ARGS+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$BATMOBILE_CACHE}
case "$BACKEND" in
  openmp)
    [ "$VERSION" = 2021 ] && ARGS+=(-DKokkos_ENABLE_OPENMP=ON)
    ARGS+=(-DBUILD_OMP=ON)
    COMPILER_ID="$(${CXX:-c++} --version | head -n1)";;
  cuda)
    # nvcc_wrapper compiles everything; HOPPER90 comes from patches/kokkos (native sm_90 for the H200).
    ARGS+=(-DKokkos_ENABLE_CUDA=ON -DKokkos_ARCH_HOPPER90=ON -DKokkos_ENABLE_OPENMP=OFF -DBUILD_OMP=OFF
           -DCMAKE_CXX_COMPILER="$KSRC/bin/nvcc_wrapper")
    COMPILER_ID="$(nvcc --version | tail -n1) $(${NVCC_WRAPPER_DEFAULT_COMPILER:-g++} -dumpfullversion)";;
  *) echo "unknown backend $BACKEND" >&2; exit 2;;
esac
# libtorch for src/model (Debian's python3-torch here, the pip torch on the GPU machine).
TORCH_PREFIX=${BATMOBILE_TORCH_PREFIX:-$(/usr/bin/python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null \
  || python3 -c 'import torch;print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)}
[ -n "$TORCH_PREFIX" ] && ARGS+=(-DCMAKE_PREFIX_PATH="$TORCH_PREFIX")
# Extra CMake arguments, e.g. BATMOBILE_LAMMPS_CMAKE_ARGS="-DBATMOBILE_WITH_TORCH=OFF".
read -r -a EXTRA <<< "${BATMOBILE_LAMMPS_CMAKE_ARGS:-}"
ARGS+=("${EXTRA[@]}")

SUFFIX=""; [ "$BUILTIN" = ON ] || SUFFIX=-stock
KEY=$(printf '%s\n' "lammps=$TAG" "kokkos=$KOKKOS_KEY" "backend=$BACKEND" \
      "mpi=$MPI" "compiler=$COMPILER_ID" "checkout=$BATMOBILE_REPO" | sha1sum | cut -c1-10)
B=$BATMOBILE_CACHE/build/lammps-$TAG-$BACKEND$SUFFIX-$KEY
mkdir -p "$B"
# Several people (and CI) share the cache: one build per build dir at a time.
exec 9> "$B/.lock"
flock -n 9 || { log "waiting for another build in $B"; flock 9; }
log "LAMMPS $VERSION build dir $B (backend $BACKEND, MPI $MPI, styles built in: $BUILTIN)"
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
LMP=$B/lammps/lmp
[ -x "$LMP" ] || LMP=$B/lmp    # LAMMPS 2025 writes its binaries to the top build directory
PLUGIN=$B/batmobileplugin.so
[ -x "$LMP" ] || { log "no lmp binary at $LMP"; exit 1; }
HARNESS=""; [ -x "$B/test_pair_style" ] && HARNESS=$B/test_pair_style
printf 'LMP=%s\nPLUGIN=%s\nBACKEND=%s\nMPI=%s\nLAMMPS=%s\nBUILTIN=%s\nHARNESS=%s\n' "$LMP" "$PLUGIN" "$BACKEND" \
  "$MPI" "$VERSION" "$BUILTIN" "$HARNESS" > "$B/batmobile-build.env"
echo "$B"
