# Shared settings for the Batmobile build scripts (sourced, not executed).
# Versions and the build-cache location live here so every script keys its cache the same way.
BATMOBILE_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BATMOBILE_CACHE=${BATMOBILE_CACHE:-$HOME/.cache/batmobile}
LAMMPS_TAG=20210929u2           # LAMMPS stable 29 Sep 2021 update 2 (Debian lammps 20220106+ds1)
LAMMPS2025_TAG=20250204        # LAMMPS stable 4 Feb 2025 (Debian trixie lammps 20250204+dfsg.1)
KOKKOS_TAG=3.4.01               # packages/kokkos of Debian's trilinos 13.2.0
export BATMOBILE_CACHE

# Short hash of the Kokkos patch set: a new patch gives a new patched tree and new build dirs.
kokkos_patch_hash() {
  cat "$BATMOBILE_REPO"/patches/kokkos/*.patch | sha1sum | cut -c1-10
}

# Number of parallel build jobs: BATMOBILE_JOBS, else all cores (the CI/dev machines have 2).
build_jobs() {
  echo "${BATMOBILE_JOBS:-$(nproc)}"
}

log() { echo "[batmobile $(date +%H:%M:%S)] $*" >&2; }
# Packs a device call's output folder into DIR.tgz beside it (the device tool brings back a limited number of files;
# pass a subfolder of the call's $OUT, so that the archive lands in $OUT).
pack_outdir() { tar czf "$1.tgz" -C "$(dirname "$1")" "$(basename "$1")"; }
