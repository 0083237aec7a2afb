#!/usr/bin/env bash
# Unpacks .carry/ (scripts/gpu/prepare_carry.sh) into $BATMOBILE_CACHE/src, so that the build scripts find every source
# tree without network, then prepares the LAMMPS 2025 tree with the patched Kokkos (prints its path on the last line).
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
source "$HERE/common.sh"
C=$BATMOBILE_REPO/.carry
[ -f "$C/SHA256SUMS" ] || { log "no $C/SHA256SUMS: run scripts/gpu/prepare_carry.sh and carry .carry"; exit 1; }
(cd "$C" && sha256sum -c --quiet SHA256SUMS)
mkdir -p "$BATMOBILE_CACHE/src"
for a in "$C"/*.tar.xz; do
  t=$(basename "$a" .tar.xz)
  if [ ! -f "$BATMOBILE_CACHE/src/$t/.complete" ]; then
    rm -rf "${BATMOBILE_CACHE:?}/src/$t"
    tar -C "$BATMOBILE_CACHE/src" -xJf "$a"
    touch "$BATMOBILE_CACHE/src/$t/.complete"
  fi
done
"$HERE/prepare_sources.sh" lammps-2025
