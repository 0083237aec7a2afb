#!/usr/bin/env bash
# Downloads the LAMMPS and Kokkos sources from Debian's source archive (the only source we may use)
# and unpacks trimmed trees into the build cache:
#   $BATMOBILE_CACHE/src/lammps-20210929u2/   (LAMMPS stable 29 Sep 2021 update 2, trimmed; bookworm)
#   $BATMOBILE_CACHE/src/kokkos-3.4.01/       (packages/kokkos of the trilinos 13.2.0 source; bookworm)
#   $BATMOBILE_CACHE/src/lammps-20250204/     (LAMMPS stable 4 Feb 2025, trimmed, no lib/kokkos; trixie)
# Only deb-src entries are added to apt (one per suite), so the binary packages apt installs do not change.
# Idempotent: does nothing when all trees exist.
set -euo pipefail
CACHE=${BATMOBILE_CACHE:-$HOME/.cache/batmobile}
LAMMPS_DEB_VERSION=20220106.git7586adbb6a+ds1-2
TRILINOS_DEB_VERSION=13.2.0-4
LAMMPS2025_DEB_VERSION=20250204+dfsg.1-2
LAMMPS2025_ORIG=lammps_20250204+dfsg.1.orig.tar.xz
# sha256 of LAMMPS2025_ORIG as listed in trixie's Sources index (its .dsc is not in the archive, so apt-get
# source cannot verify the tarball itself)
LAMMPS2025_SHA256=3671165bd52fad36734e0a9136c5bc5ecb225e03988f8c89aa13366a8b53b1c7
SRC=$CACHE/src
mkdir -p "$SRC" "$CACHE/dl"
if [ -f "$SRC/lammps-20210929u2/.complete" ] && [ -f "$SRC/kokkos-3.4.01/.complete" ] && \
   [ -f "$SRC/lammps-20250204/.complete" ]; then
  echo "[fetch] sources present in $SRC"; exit 0
fi
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
# A deb-src entry for SUITE on the same archive host as the deb entries, unless one exists.
ensure_deb_src() {
  local suite=$1 host
  if grep -rqsE "^deb-src .* $suite( |$)" /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null; then return; fi
  local deb822
  deb822=$(grep -rlsE "^Types:.*deb-src" /etc/apt/sources.list.d/ 2>/dev/null || true)
  if [ -n "$deb822" ] && echo "$deb822" | xargs grep -qsE "^Suites:.*\b$suite( |$)"; then return; fi
  # first active archive URI (deb822 "URIs:" or one-line "deb URI"), comments ignored
  host=$( (grep -rhE "^(URIs:|deb )" /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null || true) \
          | grep -oE "https?://[^ ]+/debian/?( |$)" | grep -v security | head -n1 | tr -d ' ' || true)
  host=${host:-http://deb.debian.org/debian}
  local list=/etc/apt/sources.list.d/batmobile-src.list
  [ "$suite" = bookworm ] || list=/etc/apt/sources.list.d/batmobile-src-$suite.list
  echo "[fetch] adding deb-src for $suite from $host"
  echo "deb-src $host $suite main" | $SUDO tee "$list" >/dev/null
  $SUDO apt-get update -qq
}
ensure_deb_src bookworm
ensure_deb_src trixie
cd "$CACHE/dl"
[ -f lammps_20220106.git7586adbb6a+ds1.orig.tar.xz ] || apt-get source --download-only "lammps=$LAMMPS_DEB_VERSION"
[ -f trilinos_13.2.0.orig.tar.gz ] || apt-get source --download-only "trilinos=$TRILINOS_DEB_VERSION"
if ! echo "$LAMMPS2025_SHA256  $LAMMPS2025_ORIG" | sha256sum -c --status 2>/dev/null; then
  rm -f "$LAMMPS2025_ORIG"
  # apt-get fails on the missing .dsc after fetching the tarballs; the checksum below decides
  apt-get source --download-only "lammps=$LAMMPS2025_DEB_VERSION" || true
  echo "$LAMMPS2025_SHA256  $LAMMPS2025_ORIG" | sha256sum -c --quiet \
    || { echo "[fetch] $LAMMPS2025_ORIG missing or corrupt" >&2; exit 1; }
fi

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
if [ ! -f "$SRC/lammps-20250204/.complete" ]; then
  echo "[fetch] extracting trimmed LAMMPS 4 Feb 2025"
  rm -rf "$SRC/lammps-20250204" "$SRC/tmp-lmp25"; mkdir -p "$SRC/tmp-lmp25"
  top=$(tar tJf "$LAMMPS2025_ORIG" | head -n1 | cut -d/ -f1 || true)
  # core, the packages we build (PLUGIN, MANYBODY), the force-style test harness and the plugin examples
  tar xJf "$LAMMPS2025_ORIG" -C "$SRC/tmp-lmp25" --wildcards --no-wildcards-match-slash "$top/cmake" "$top/src/*.cpp" "$top/src/*.h" \
      "$top/src/fmt" "$top/src/STUBS" "$top/src/PLUGIN" "$top/src/MANYBODY" "$top/unittest/force-styles" \
      "$top/unittest/testing" "$top/examples/plugins" "$top/LICENSE" "$top/README"
  mv "$SRC/tmp-lmp25/$top" "$SRC/lammps-20250204"; rm -rf "$SRC/tmp-lmp25"
  touch "$SRC/lammps-20250204/.complete"
fi
echo "[fetch] done: $SRC"
