#!/usr/bin/env bash
# Run HERE (a CPU machine that reaches Debian's archive). Packs what the GPU machine cannot download into the ignored
# folder .carry/ of the repo (.tar.xz of unpacked source trees, SHA256SUMS):
#   kokkos-4.5.01            Kokkos 4.5.01 as unpacked (scripts/fetch_sources.sh; patched there by prepare_sources.sh)
#   lammps-20250204-*        the trimmed LAMMPS 4 Feb 2025 tree (with src/KOKKOS and the force-style harness)
#   googletest               Debian's GoogleTest sources (/usr/src/googletest from libgtest-dev)
#   with --legacy TREE also the LAMMPS 29 Sep 2021 and Kokkos 3.4.01 trees that an older checkout TREE (carried
#   as .old_tree for scripts/gpu/compare_builds.sh) builds, fetched by that checkout's own fetch_sources.sh
# Then carry .carry to the GPU machine with the repo; unpack_carry (scripts/gpu/gpu_lib.sh) unpacks it there.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
"$HERE/fetch_sources.sh" "kokkos-$KOKKOS_TAG" lammps-2025
SRC=$BATMOBILE_CACHE/src
C=$BATMOBILE_REPO/.carry
mkdir -p "$C"
[ -d /usr/src/googletest ] || "$HERE/install_debian_deps.sh"
pack() {  # pack PARENT DIR [tar options...]: PARENT/DIR into .carry/DIR.tar.xz
  local parent=$1 dir=$2; shift 2
  log "packing $dir"
  tar -C "$parent" --exclude=.complete "$@" -cf - "$dir" | xz -6 -T2 > "$C/$dir.tar.xz.tmp"
  mv "$C/$dir.tar.xz.tmp" "$C/$dir.tar.xz"
}
rm -f "$C"/*.tar.xz
# Kokkos's CMake adds example/ and benchmarks/ as subdirectories even when they are not built; doc/ is unused.
pack "$SRC" "kokkos-$KOKKOS_TAG" --exclude="kokkos-$KOKKOS_TAG/doc"
L25=$(basename "$(lammps_src 2025)")
pack "$SRC" "$L25" --exclude="$L25/examples"
pack /usr/src googletest
if [ "${1:-}" = --legacy ]; then
  OLD=$(cd "${2:?usage: prepare_carry.sh [--legacy OLD_TREE]}" && pwd)
  BATMOBILE_CACHE=$BATMOBILE_CACHE "$OLD/scripts/fetch_sources.sh" >&2
  for t in kokkos-3.4.01 lammps-20210929u2; do pack "$SRC" "$t" --exclude="$t/examples" --exclude="$t/doc"; done
fi
(cd "$C" && sha256sum ./*.tar.xz > SHA256SUMS)
du -sh "$C"/* >&2
log "done: carry .carry to the GPU machine (run(carry=['.carry'], ...)); scripts/gpu/gpu_lib.sh unpacks it"
