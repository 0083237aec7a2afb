#!/usr/bin/env bash
# Downloads the LAMMPS and Kokkos sources from Debian's source archive (the only source we may use)
# and unpacks trimmed trees into the build cache:
#   $BATMOBILE_CACHE/src/lammps-20210929u2/   (LAMMPS stable 29 Sep 2021 update 2, trimmed)
#   $BATMOBILE_CACHE/src/kokkos-3.4.01/       (packages/kokkos of the trilinos 13.2.0 source)
# Idempotent: does nothing when both trees exist.
set -euo pipefail
CACHE=${BATMOBILE_CACHE:-$HOME/.cache/batmobile}
LAMMPS_DEB_VERSION=20220106.git7586adbb6a+ds1-2
TRILINOS_DEB_VERSION=13.2.0-4
SRC=$CACHE/src
mkdir -p "$SRC" "$CACHE/dl"
if [ -f "$SRC/lammps-20210929u2/.complete" ] && [ -f "$SRC/kokkos-3.4.01/.complete" ]; then
  echo "[fetch] sources present in $SRC"; exit 0
fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
# deb-src entry for bookworm, on the same archive host as the deb entries.
if ! grep -rqs "deb-src" /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null && \
   ! grep -rqs "Types:.*deb-src" /etc/apt/sources.list.d/ 2>/dev/null; then
  # first active archive URI (deb822 "URIs:" or one-line "deb URI"), comments ignored
  host=$( (grep -rhE "^(URIs:|deb )" /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null || true) \
          | grep -oE "https?://[^ ]+/debian/?( |$)" | grep -v security | head -n1 | tr -d ' ' || true)
  host=${host:-http://deb.debian.org/debian}
  echo "[fetch] adding deb-src for bookworm from $host"
  echo "deb-src $host bookworm main" | $SUDO tee /etc/apt/sources.list.d/batmobile-src.list >/dev/null
  $SUDO apt-get update -qq
fi
cd "$CACHE/dl"
[ -f lammps_20220106.git7586adbb6a+ds1.orig.tar.xz ] || apt-get source --download-only "lammps=$LAMMPS_DEB_VERSION"
[ -f trilinos_13.2.0.orig.tar.gz ] || apt-get source --download-only "trilinos=$TRILINOS_DEB_VERSION"

if [ ! -f "$SRC/kokkos-3.4.01/.complete" ]; then
  echo "[fetch] extracting Kokkos 3.4.01 from trilinos"
  rm -rf "$SRC/kokkos-3.4.01" "$SRC/tmp-tri"; mkdir -p "$SRC/tmp-tri"
  top=$(tar tzf trilinos_13.2.0.orig.tar.gz | head -n1 | cut -d/ -f1 || true)
  tar xzf trilinos_13.2.0.orig.tar.gz -C "$SRC/tmp-tri" "$top/packages/kokkos"
  mv "$SRC/tmp-tri/$top/packages/kokkos" "$SRC/kokkos-3.4.01"; rm -rf "$SRC/tmp-tri"
  grep -q "3.4.01\|KOKKOS_VERSION_PATCH 01\|Kokkos_VERSION_PATCH 01" -r "$SRC/kokkos-3.4.01/CMakeLists.txt" || true
  touch "$SRC/kokkos-3.4.01/.complete"
fi
if [ ! -f "$SRC/lammps-20210929u2/.complete" ]; then
  echo "[fetch] extracting trimmed LAMMPS"
  rm -rf "$SRC/lammps-20210929u2" "$SRC/tmp-lmp"; mkdir -p "$SRC/tmp-lmp"
  top=$(tar tJf lammps_20220106.git7586adbb6a+ds1.orig.tar.xz | head -n1 | cut -d/ -f1 || true)
  tar xJf lammps_20220106.git7586adbb6a+ds1.orig.tar.xz -C "$SRC/tmp-lmp" \
      --wildcards "$top/cmake" "$top/src/*.cpp" "$top/src/*.h" "$top/src/fmt" "$top/src/KOKKOS" \
      "$top/src/STUBS" "$top/src/PLUGIN" "$top/src/KSPACE" "$top/src/MOLECULE" "$top/src/EXTRA-COMPUTE" \
      "$top/src/MANYBODY" "$top/src/OPENMP" "$top/examples/plugins" "$top/LICENSE" "$top/README" 2>/dev/null || \
  tar xJf lammps_20220106.git7586adbb6a+ds1.orig.tar.xz -C "$SRC/tmp-lmp" \
      --wildcards "$top/cmake" "$top/src/*.cpp" "$top/src/*.h" "$top/src/fmt" "$top/src/KOKKOS" \
      "$top/src/STUBS" "$top/src/PLUGIN" "$top/src/KSPACE" "$top/src/MOLECULE" "$top/src/EXTRA-COMPUTE" "$top/LICENSE"
  mv "$SRC/tmp-lmp/$top" "$SRC/lammps-20210929u2"; rm -rf "$SRC/tmp-lmp"
  touch "$SRC/lammps-20210929u2/.complete"
fi
echo "[fetch] done: $SRC"
