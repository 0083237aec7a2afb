#!/usr/bin/env bash
# Prepares the LAMMPS source tree that the Batmobile LAMMPS build uses and prints its path (last line):
#   $BATMOBILE_CACHE/src/lammps-<tag>-kokkos-p<patchhash>/   = the trimmed LAMMPS tree (hard links, cheap)
#   with lib/kokkos = Kokkos 3.4.01 plus patches/kokkos applied (LAMMPS builds Kokkos from lib/kokkos;
#   pointing it at an installed Kokkos fails with CMake 4 + CUDA, see docs/development.md).
# Works offline when the unpacked trees exist (the GPU machine unpacks them from .carry/ first).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
SRC=$BATMOBILE_CACHE/src
if [ ! -f "$SRC/lammps-$LAMMPS_TAG/.complete" ] || [ ! -f "$SRC/kokkos-$KOKKOS_TAG/.complete" ]; then
  "$HERE/fetch_sources.sh" >&2
fi
PH=$(kokkos_patch_hash)
KP=$SRC/kokkos-$KOKKOS_TAG-p$PH
if [ ! -f "$KP/.complete" ]; then
  log "patching Kokkos into $KP"
  rm -rf "$KP"; cp -a "$SRC/kokkos-$KOKKOS_TAG" "$KP"; rm -f "$KP/.complete"
  "$HERE/apply_kokkos_patches.sh" "$KP"
  touch "$KP/.complete"
fi
LV=$SRC/lammps-$LAMMPS_TAG-kokkos-p$PH
if [ ! -f "$LV/.complete" ]; then
  log "assembling LAMMPS tree $LV"
  rm -rf "$LV"; cp -al "$SRC/lammps-$LAMMPS_TAG" "$LV"; rm -f "$LV/.complete"
  mkdir -p "$LV/lib"; ln -sfn "$KP" "$LV/lib/kokkos"
  touch "$LV/.complete"
fi
echo "$LV"
