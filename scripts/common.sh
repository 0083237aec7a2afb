# Shared settings for the Batmobile build scripts (sourced, not executed).
# Versions, source checksums and the build-cache location live here so every script keys its cache the same way.
BATMOBILE_REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BATMOBILE_CACHE=${BATMOBILE_CACHE:-$HOME/.cache/batmobile}
export BATMOBILE_CACHE

KOKKOS_TAG=4.5.01               # what LAMMPS 4 Feb 2025 requires (find_package(Kokkos 4.5.01))
KOKKOS_NEXT_TAG=4.6.01          # the last Kokkos 4: the Kokkos 5 readiness check (C++20, deprecated code off)
# md5 of the upstream archive github.com/kokkos/kokkos/archive/refs/tags/4.5.01.tar.gz, as LAMMPS 4 Feb 2025's
# cmake/Modules/Packages/KOKKOS.cmake pins it (a download is used only where ../shared/vendor is missing)
KOKKOS_MD5_4_5_01=4d832aa0284169d9e3fbae3165286bc6

LAMMPS2025_TAG=20250204         # LAMMPS stable 4 Feb 2025 (Debian trixie lammps 20250204+dfsg.1-2)
LAMMPS2025_DEB_VERSION=20250204+dfsg.1-2
LAMMPS2025_ORIG=lammps_20250204+dfsg.1.orig.tar.xz
LAMMPS2025_SHA256=3671165bd52fad36734e0a9136c5bc5ecb225e03988f8c89aa13366a8b53b1c7
LAMMPS2026_TAG=20260704         # LAMMPS stable 4 Jul 2026 (Debian sid lammps 20260704+dfsg-2)
LAMMPS2026_DEB_VERSION=20260704+dfsg-2
LAMMPS2026_ORIG=lammps_20260704+dfsg.orig.tar.gz
LAMMPS2026_SHA256=cddbc45a047416bd48a4a0b87f24a5b61b3446982b74d18cafe619c22b17eb62
# the parts of each LAMMPS tree that the builds and tests use
LAMMPS2025_PARTS=(cmake "src/*.cpp" "src/*.h" src/fmt src/STUBS src/PLUGIN src/MANYBODY src/KOKKOS
                  unittest/force-styles unittest/testing examples/plugins LICENSE README)
# KOKKOS styles that no test, example or benchmark uses, left out of the 2025 tree: they are a third of the CUDA
# build's time on the GPU machine and of a cold CI build (a user's own LAMMPS keeps them; nothing here needs them)
LAMMPS2025_KOKKOS_DROP=(pair_adp pair_buck pair_buck_coul_cut pair_coul_cut pair_coul_debye pair_coul_dsf pair_coul_wolf
                        pair_eam_fs pair_lj_cut_coul_cut pair_lj_expand pair_morse pair_soft pair_sw pair_table
                        pair_tersoff pair_tersoff_mod pair_tersoff_zbl pair_vashishta pair_yukawa pair_zbl
                        fix_deform fix_dt_reset fix_efield fix_enforce2d fix_gravity fix_langevin fix_nve_limit
                        fix_nve_sphere fix_nvt_sllod fix_recenter fix_setforce fix_spring_self fix_temp_berendsen
                        fix_temp_rescale fix_viscous fix_wall_lj93 fix_wall_reflect fix_wall_region
                        compute_coord_atom compute_erotate_sphere compute_orientorder_atom compute_temp_deform
                        region_block region_sphere)
LAMMPS2026_PARTS=(cmake "src/*.cpp" "src/*.h" src/fmt src/nlohmann src/STUBS src/PLUGIN src/MANYBODY examples/plugins
                  LICENSE README)

# The unpacked tree of LAMMPS VERSION (2025 or 2026); the name changes with the list of parts.
lammps_src() {
  local tag parts
  case "$1" in
    2025) tag=$LAMMPS2025_TAG; parts="${LAMMPS2025_PARTS[*]} -${LAMMPS2025_KOKKOS_DROP[*]}";;
    2026) tag=$LAMMPS2026_TAG; parts="${LAMMPS2026_PARTS[*]}";;
    *) echo "unknown LAMMPS version $1 (2025 or 2026)" >&2; return 2;;
  esac
  echo "$BATMOBILE_CACHE/src/lammps-$tag-$(echo "$parts" | sha1sum | cut -c1-8)"
}

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
