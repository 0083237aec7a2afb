#!/usr/bin/env bash
# The main example, from a fresh Debian 12 machine: builds LAMMPS with the Batmobile styles (cached) and
# runs the 216-water MD example on the CPU (pair_style batmobile, Kokkos host space, 2 OpenMP threads) with the
# bundled potential, then plots g_OO (OUTDIR/results/gOO.png, default OUTDIR build/example).
# The water example is run through examples/lammps_inputs/water216/run.sh LMP OUTDIR (owned by the example).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
cd "$BATMOBILE_REPO"
"$HERE/install_debian_deps.sh"
LAMMPS_BUILD=$("$HERE/build_lammps.sh" --backend openmp | tail -n1)
source "$LAMMPS_BUILD/batmobile-build.env"
OUT=${1:-$BATMOBILE_REPO/build/example}
mkdir -p "$OUT"
export OMP_PROC_BIND=false
[ -f potentials/water_fast.pt ] || { log "potentials/water_fast.pt is missing: is this a complete checkout?"; exit 1; }
log "water216 example -> $OUT (progress every 10 steps; g_OO plot in $OUT/results/gOO.png)"
exec examples/lammps_inputs/water216/run.sh "$LMP" "$OUT" short
