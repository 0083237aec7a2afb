#!/usr/bin/env bash
# Builds and installs a host-only Kokkos 3.4.01 (Serial + OpenMP) for the stand-alone kernel/model tests.
# Cached in $BATMOBILE_CACHE/install/kokkos-3.4.01-host-<key>; prints the install prefix on the last line.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${BATMOBILE_CACHE:-$HOME/.cache/batmobile}
"$HERE/fetch_sources.sh" >&2
SRC=$CACHE/src/kokkos-3.4.01
KEY=$(echo "kokkos-3.4.01 serial openmp cxx17 $(g++ -dumpfullversion)" | sha1sum | cut -c1-10)
PREFIX=$CACHE/install/kokkos-3.4.01-host-$KEY
if [ ! -f "$PREFIX/.complete" ]; then
  B=$CACHE/build/kokkos-host-$KEY; rm -rf "$B"; mkdir -p "$B"
  cmake -S "$SRC" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX" \
    -DCMAKE_CXX_STANDARD=17 -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_OPENMP=ON \
    -DCMAKE_POSITION_INDEPENDENT_CODE=ON >&2
  cmake --build "$B" -j "$(nproc)" >&2
  cmake --install "$B" >&2
  touch "$PREFIX/.complete"
fi
echo "$PREFIX"
