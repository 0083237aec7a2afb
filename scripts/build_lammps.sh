#!/usr/bin/env bash
# Builds LAMMPS (KOKKOS, PLUGIN, MPI when available) with the Batmobile styles compiled in, plus
# batmobileplugin.so, through cmake/lammps/CMakeLists.txt. Incremental: the build directory lives in the
# cache, keyed by versions, Kokkos patch hash, backend, compiler and checkout path, so after a change to
# our sources only those are recompiled.
#   scripts/build_lammps.sh [--backend openmp|cuda] [--mpi auto|on|off]
# Environment: BATMOBILE_JOBS, BATMOBILE_TORCH_PREFIX, BATMOBILE_LAMMPS_CMAKE_ARGS (extra CMake arguments).
# Last line of output: the build directory. It contains batmobile-build.env with LMP=..., PLUGIN=...
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
BACKEND=openmp; MPI=auto
while [ $# -gt 0 ]; do
  case "$1" in
    --backend) BACKEND=$2; shift 2;;
    --mpi) MPI=$2; shift 2;;
    *) echo "unknown argument $1" >&2; exit 2;;
  esac
done
if [ "$MPI" = auto ]; then
  if command -v mpicxx >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then MPI=on; else MPI=off; fi
fi
LV=$("$HERE/prepare_sources.sh" | tail -n1)

ARGS=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DBATMOBILE_LAMMPS_TREE="$LV"
      -DCMAKE_CXX_STANDARD=17 -DPKG_KOKKOS=ON -DPKG_PLUGIN=ON -DBUILD_SHARED_LIBS=ON
      -DBUILD_MPI=$([ "$MPI" = on ] && echo ON || echo OFF) -DKokkos_ENABLE_SERIAL=ON)
case "$BACKEND" in
  openmp)
    ARGS+=(-DKokkos_ENABLE_OPENMP=ON -DBUILD_OMP=ON)
    COMPILER_ID="$(${CXX:-c++} --version | head -n1)";;
  cuda)
    # nvcc_wrapper compiles everything; HOPPER90 comes from patches/kokkos (native sm_90 for the H200).
    ARGS+=(-DKokkos_ENABLE_CUDA=ON -DKokkos_ARCH_HOPPER90=ON -DKokkos_ENABLE_OPENMP=OFF -DBUILD_OMP=OFF
           -DCMAKE_CXX_COMPILER="$LV/lib/kokkos/bin/nvcc_wrapper")
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

KEY=$(printf '%s\n' "lammps=$LAMMPS_TAG" "kokkos=$KOKKOS_TAG-p$(kokkos_patch_hash)" "backend=$BACKEND" \
      "mpi=$MPI" "compiler=$COMPILER_ID" "checkout=$BATMOBILE_REPO" | sha1sum | cut -c1-10)
B=$BATMOBILE_CACHE/build/lammps-$LAMMPS_TAG-$BACKEND-$KEY
mkdir -p "$B"
# Several people (and CI) share the cache: one build per build dir at a time.
exec 9> "$B/.lock"
flock -n 9 || { log "waiting for another build in $B"; flock 9; }
log "LAMMPS build dir $B (backend $BACKEND, MPI $MPI)"
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
PLUGIN=$B/batmobileplugin.so
[ -x "$LMP" ] || { log "no lmp binary at $LMP"; exit 1; }
printf 'LMP=%s\nPLUGIN=%s\nBACKEND=%s\nMPI=%s\n' "$LMP" "$PLUGIN" "$BACKEND" "$MPI" > "$B/batmobile-build.env"
echo "$B"
