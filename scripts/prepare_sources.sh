#!/usr/bin/env bash
# Prepares a source tree for the builds and prints its path (last line):
#   prepare_sources.sh kokkos        Kokkos 4.5.01 with patches/kokkos applied (the CUDA 13 guard):
#                                    $BATMOBILE_CACHE/src/kokkos-4.5.01-p<patch hash>/
#   prepare_sources.sh kokkos-next   the same for Kokkos 4.6.01 (the Kokkos 5 readiness check for CUDA)
#   prepare_sources.sh lammps-2025   the trimmed LAMMPS 4 Feb 2025 tree (hard links, cheap) whose lib/kokkos is that
#                                    Kokkos, which LAMMPS's KOKKOS package then builds in-tree
#   prepare_sources.sh lammps-2026   the trimmed LAMMPS 4 Jul 2026 tree as unpacked (no KOKKOS)
# Works offline when the unpacked trees exist.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
SRC=$BATMOBILE_CACHE/src
WHAT=${1:-lammps-2025}

patched_kokkos() {  # patched_kokkos [TAG] (default KOKKOS_TAG)
  local tag=${1:-$KOKKOS_TAG}
  [ -f "$SRC/kokkos-$tag/.complete" ] || "$HERE/fetch_sources.sh" "kokkos-$tag"
  local kp=$SRC/kokkos-$tag-p$(kokkos_patch_hash)
  if [ ! -f "$kp/.complete" ]; then
    log "patching Kokkos into $kp"
    rm -rf "$kp"; cp -a "$SRC/kokkos-$tag" "$kp"; rm -f "$kp/.complete"
    "$HERE/apply_kokkos_patches.sh" "$kp"
    touch "$kp/.complete"
  fi
  echo "$kp"
}

case "$WHAT" in
  kokkos) patched_kokkos;;
  kokkos-next) patched_kokkos "$KOKKOS_NEXT_TAG";;
  lammps-2025)
    KP=$(patched_kokkos)
    LT=$(lammps_src 2025)
    [ -f "$LT/.complete" ] || "$HERE/fetch_sources.sh" lammps-2025
    LV=$LT-kokkos-p$(kokkos_patch_hash)
    if [ ! -f "$LV/.complete" ]; then
      log "assembling LAMMPS tree $LV"
      rm -rf "$LV"; cp -al "$LT" "$LV"; rm -f "$LV/.complete"
      mkdir -p "$LV/lib"; ln -sfn "$KP" "$LV/lib/kokkos"
      touch "$LV/.complete"
    fi
    echo "$LV";;
  lammps-2026)
    LT=$(lammps_src 2026)
    [ -f "$LT/.complete" ] || "$HERE/fetch_sources.sh" lammps-2026
    echo "$LT";;
  *) log "prepare_sources.sh: unknown tree $WHAT (kokkos, kokkos-next, lammps-2025 or lammps-2026)"; exit 2;;
esac
