#!/usr/bin/env bash
# Applies patches/kokkos/*.patch to the Kokkos tree given as $1, idempotently:
# a patch whose reverse applies cleanly is already in and is skipped; one that applies neither way is an error.
# Uses `patch`, or `git apply` where `patch` is missing (the GPU image is minimal).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
TREE=${1:?usage: apply_kokkos_patches.sh KOKKOS_TREE}
cd "$TREE"
if command -v patch >/dev/null 2>&1; then
  applies()         { patch -p1 --dry-run -s -f < "$1" >/dev/null 2>&1; }
  already_applied() { patch -p1 -R --dry-run -s -f < "$1" >/dev/null 2>&1; }
  apply()           { patch -p1 -s -f < "$1"; }
else
  applies()         { git apply --check -p1 "$1" >/dev/null 2>&1; }
  already_applied() { git apply --check -R -p1 "$1" >/dev/null 2>&1; }
  apply()           { git apply -p1 "$1"; }
fi
for p in "$BATMOBILE_REPO"/patches/kokkos/*.patch; do
  name=$(basename "$p")
  if already_applied "$p"; then
    log "kokkos patch $name: already applied"
  elif applies "$p"; then
    apply "$p"; log "kokkos patch $name: applied"
  else
    log "kokkos patch $name: does not apply to $TREE"; exit 1
  fi
done
