#!/usr/bin/env bash
# Builds and installs a host-only Kokkos (Serial + OpenMP) for the stand-alone kernel and model build, and prints
# its install prefix (last line). Cached in $BATMOBILE_CACHE/install/kokkos-<tag>-host-<key>.
#   scripts/build_kokkos_host.sh            Kokkos 4.5.01 (patched tree, as LAMMPS builds it), C++17
#   scripts/build_kokkos_host.sh --next     Kokkos 4.6.01, C++20, Kokkos_ENABLE_DEPRECATED_CODE_4=OFF: what the
#                                           Kokkos 5 readiness check compiles against
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
if [ "${1:-}" = --next ]; then
  "$HERE/fetch_sources.sh" "kokkos-$KOKKOS_NEXT_TAG"
  SRC=$BATMOBILE_CACHE/src/kokkos-$KOKKOS_NEXT_TAG; TAG=$KOKKOS_NEXT_TAG
  OPTS=(-DCMAKE_CXX_STANDARD=20 -DKokkos_ENABLE_DEPRECATED_CODE_4=OFF)
else
  SRC=$("$HERE/prepare_sources.sh" kokkos | tail -n1); TAG=$KOKKOS_TAG
  OPTS=(-DCMAKE_CXX_STANDARD=17)
fi
KEY=$(echo "$SRC ${OPTS[*]} serial openmp $(g++ -dumpfullversion)" | sha1sum | cut -c1-10)
PREFIX=$BATMOBILE_CACHE/install/kokkos-$TAG-host-$KEY
if [ ! -f "$PREFIX/.complete" ]; then
  B=$BATMOBILE_CACHE/build/kokkos-host-$KEY; rm -rf "$B"; mkdir -p "$B"
  log "building host Kokkos $TAG into $PREFIX"
  cmake -S "$SRC" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" "${OPTS[@]}" \
    -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON -DCMAKE_POSITION_INDEPENDENT_CODE=ON >&2
  cmake --build "$B" -j "$(build_jobs)" >&2
  cmake --install "$B" >&2
  touch "$PREFIX/.complete"
fi
echo "$PREFIX"
