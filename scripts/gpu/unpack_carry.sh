#!/usr/bin/env bash
# Unpacks .carry/ (scripts/gpu/prepare_carry.sh) into $BATMOBILE_CACHE/src so that the build scripts find
# the sources without network, then prepares the patched LAMMPS tree (prints its path on the last line).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
source "$HERE/common.sh"
C=$BATMOBILE_REPO/.carry
[ -f "$C/SHA256SUMS" ] || { log "no $C/SHA256SUMS: run scripts/gpu/prepare_carry.sh and carry .carry"; exit 1; }
(cd "$C" && sha256sum -c --quiet SHA256SUMS)
mkdir -p "$BATMOBILE_CACHE/src"
for t in kokkos-$KOKKOS_TAG lammps-$LAMMPS_TAG lammps-$LAMMPS2025_TAG; do
  if [ ! -f "$BATMOBILE_CACHE/src/$t/.complete" ] && [ -f "$C/$t.tar.xz" ]; then
    tar -C "$BATMOBILE_CACHE/src" -xJf "$C/$t.tar.xz"
    touch "$BATMOBILE_CACHE/src/$t/.complete"
  fi
done
[ -d "$BATMOBILE_CACHE/src/googletest" ] || tar -C "$BATMOBILE_CACHE/src" -xJf "$C/googletest.tar.xz"
"$HERE/prepare_sources.sh"
