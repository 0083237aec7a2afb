#!/usr/bin/env bash
# Run HERE (a CPU machine with network access to Debian's archive). Packs what the GPU machine cannot
# download into the ignored folder .carry/ of the repo (a few MB of .tar.xz):
#   kokkos-3.4.01.tar.xz        Kokkos 3.4.01 as unpacked from trilinos (unpatched; run_gpu.sh patches it)
#   lammps-20210929u2.tar.xz    the trimmed LAMMPS tree (cmake/, src/*.cpp|h, fmt, KOKKOS, STUBS, PLUGIN, ...)
#   lammps-20250204.tar.xz      the trimmed LAMMPS 4 Feb 2025 tree (without its unit tests and examples)
#   googletest.tar.xz           Debian's GoogleTest sources (/usr/src/googletest from libgtest-dev)
#   SHA256SUMS
# Then carry .carry to the GPU machine with the repo and run scripts/gpu/run_gpu.sh OUTDIR there.
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
source "$HERE/common.sh"
"$HERE/fetch_sources.sh" >&2
SRC=$BATMOBILE_CACHE/src
C=$BATMOBILE_REPO/.carry
mkdir -p "$C"
[ -d /usr/src/googletest ] || "$HERE/install_debian_deps.sh"
pack() {  # pack NAME DIR_PARENT DIR [tar options...]
  local name=$1 parent=$2 dir=$3; shift 3
  log "packing $name"
  tar -C "$parent" --exclude=.complete "$@" -cf - "$dir" | xz -6 -T2 > "$C/$name.tmp"
  mv "$C/$name.tmp" "$C/$name"
}
# Kokkos's CMake adds example/ and benchmarks/ as subdirectories even when they are not built; doc/ is unused.
pack kokkos-$KOKKOS_TAG.tar.xz "$SRC" kokkos-$KOKKOS_TAG --exclude="kokkos-$KOKKOS_TAG/doc"
pack lammps-$LAMMPS_TAG.tar.xz "$SRC" lammps-$LAMMPS_TAG --exclude="lammps-$LAMMPS_TAG/examples"
pack lammps-$LAMMPS2025_TAG.tar.xz "$SRC" lammps-$LAMMPS2025_TAG --exclude="lammps-$LAMMPS2025_TAG/examples" \
  --exclude="lammps-$LAMMPS2025_TAG/unittest"
pack googletest.tar.xz /usr/src googletest
(cd "$C" && sha256sum kokkos-$KOKKOS_TAG.tar.xz lammps-$LAMMPS_TAG.tar.xz lammps-$LAMMPS2025_TAG.tar.xz \
  googletest.tar.xz > SHA256SUMS)
du -sh "$C"/* >&2
log "done: carry $C to the GPU machine (e.g. run(carry=['.carry'], command='scripts/gpu/run_gpu.sh \$OUT'))"
