#!/usr/bin/env bash
# Fetches, checks and unpacks the third-party sources of the builds into $BATMOBILE_CACHE/src (idempotent):
#   kokkos-4.5.01/     Kokkos 4.5.01, the version LAMMPS 4 Feb 2025 requires
#   kokkos-4.6.01/     Kokkos 4.6.01 (only for the Kokkos 5 readiness check: C++20, deprecated code off)
#   lammps-20250204-*/ LAMMPS 4 Feb 2025 (Debian trixie), trimmed to LAMMPS2025_PARTS (common.sh)
#   lammps-20260704-*/ LAMMPS stable 4 Jul 2026 (Debian sid), trimmed to LAMMPS2026_PARTS
#   scripts/fetch_sources.sh [kokkos-4.5.01] [kokkos-4.6.01] [lammps-2025] [lammps-2026]   (default: all)
# Kokkos comes from ../shared/vendor/ beside the checkout (or $BATMOBILE_VENDOR) when that holds it, else from the
# upstream archive of the same tag; either is checked against a pinned checksum. The LAMMPS sources are Debian's
# orig tarballs (`apt-get source`), checked against the sha256 of the suite's Sources index, because their .dsc
# files are no longer in the archive and apt cannot verify them. Only deb-src entries are added to apt.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/common.sh"
SRC=$BATMOBILE_CACHE/src
DL=$BATMOBILE_CACHE/dl
mkdir -p "$SRC" "$DL"
ITEMS=("$@"); [ ${#ITEMS[@]} -gt 0 ] || ITEMS=(kokkos-$KOKKOS_TAG kokkos-$KOKKOS_NEXT_TAG lammps-2025 lammps-2026)
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
VENDOR=${BATMOBILE_VENDOR:-$(cd "$BATMOBILE_REPO/.." && pwd)/shared/vendor}

# A deb-src entry for SUITE on the same archive host as the deb entries, unless one exists.
ensure_deb_src() {
  local suite=$1 host list=/etc/apt/sources.list.d/batmobile-src-$1.list
  if grep -rqsE "^deb-src .* $suite( |$)" /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null; then return; fi
  # first active archive URI (deb822 "URIs:" or one-line "deb URI"), comments ignored
  host=$( (grep -rhE "^(URIs:|deb )" /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null || true) \
          | grep -oE "https?://[^ ]+/debian/?( |$)" | grep -v security | head -n1 | tr -d ' ' || true)
  host=${host:-http://deb.debian.org/debian}
  log "adding deb-src for $suite from $host"
  echo "deb-src $host $suite main" | $SUDO tee "$list" >/dev/null
  $SUDO apt-get update -qq
}

# Debian orig tarball FILE of source package PKG=VERSION from SUITE, checked against SHA256.
fetch_orig() {
  local suite=$1 pkgver=$2 file=$3 sha=$4
  if echo "$sha  $file" | (cd "$DL" && sha256sum -c --status) 2>/dev/null; then return; fi
  ensure_deb_src "$suite"
  rm -f "$DL/$file"
  # apt-get fails on the missing .dsc after fetching the tarballs; the checksum below decides
  (cd "$DL" && apt-get source --download-only "$pkgver" >&2) || true
  echo "$sha  $file" | (cd "$DL" && sha256sum -c --quiet) || { log "$file missing or corrupt"; exit 1; }
}

# Kokkos TAG: the vendored xz archive (sha256 from the vendor folder's SHA256SUMS) or the upstream archive.
fetch_kokkos() {
  local tag=$1 dest=$SRC/kokkos-$1 archive
  [ -f "$dest/.complete" ] && return
  if [ -f "$VENDOR/kokkos-$tag.tar.xz" ]; then
    archive=$VENDOR/kokkos-$tag.tar.xz
    (cd "$VENDOR" && grep " kokkos-$tag.tar.xz\$" SHA256SUMS | sha256sum -c --quiet) \
      || { log "$archive does not match $VENDOR/SHA256SUMS"; exit 1; }
  else
    local md5_var=KOKKOS_MD5_${tag//./_}
    [ -n "${!md5_var:-}" ] || { log "Kokkos $tag: not in $VENDOR and no pinned checksum to download it with"; exit 1; }
    archive=$DL/kokkos-$tag.tar.gz
    if ! echo "${!md5_var}  $archive" | md5sum -c --status 2>/dev/null; then
      log "downloading Kokkos $tag"
      curl -fsSL -o "$archive" "https://github.com/kokkos/kokkos/archive/refs/tags/$tag.tar.gz" \
        || { log "could not download Kokkos $tag"; exit 1; }
      echo "${!md5_var}  $archive" | md5sum -c --quiet || { log "downloaded Kokkos $tag is corrupt"; exit 1; }
    fi
  fi
  log "unpacking Kokkos $tag from $archive"
  rm -rf "$dest" "$SRC/tmp-kokkos"; mkdir -p "$SRC/tmp-kokkos"
  tar xf "$archive" -C "$SRC/tmp-kokkos"
  mv "$SRC/tmp-kokkos/kokkos-$tag" "$dest"; rm -rf "$SRC/tmp-kokkos"
  touch "$dest/.complete"
}

# Unpacks the parts PARTS... of the LAMMPS orig tarball FILE into $SRC/DIR.
unpack_lammps() {
  local file=$1 dir=$2; shift 2
  [ -f "$SRC/$dir/.complete" ] && return
  log "unpacking trimmed LAMMPS into $SRC/$dir"
  rm -rf "$SRC/$dir" "$SRC/tmp-$dir"; mkdir -p "$SRC/tmp-$dir"
  local top parts=()
  # the top-level folder (lammps-4Feb2025/), or "." where the tarball has none (the 2026 orig tarball)
  top=$(dirname "$(tar tf "$DL/$file" | grep -m1 -E '^([^/]+/)?LICENSE$' || true)")
  for p in "$@"; do if [ "$top" = . ]; then parts+=("$p"); else parts+=("$top/$p"); fi; done
  tar xf "$DL/$file" -C "$SRC/tmp-$dir" --wildcards --no-wildcards-match-slash "${parts[@]}"
  if [ "$top" = . ]; then mv "$SRC/tmp-$dir" "$SRC/$dir"; else mv "$SRC/tmp-$dir/$top" "$SRC/$dir"; rm -rf "$SRC/tmp-$dir"; fi
  touch "$SRC/$dir/.complete"
}
drop_kokkos_styles() {  # drop_kokkos_styles TREE NAME...: src/KOKKOS/NAME_kokkos.{cpp,h} leave TREE
  local tree=$1 n; shift
  for n in "$@"; do rm -f "$tree/src/KOKKOS/${n}_kokkos.cpp" "$tree/src/KOKKOS/${n}_kokkos.h"; done
}
for item in "${ITEMS[@]}"; do
  case "$item" in
    kokkos-*) fetch_kokkos "${item#kokkos-}";;
    lammps-2025)
      fetch_orig trixie "lammps=$LAMMPS2025_DEB_VERSION" "$LAMMPS2025_ORIG" "$LAMMPS2025_SHA256"
      unpack_lammps "$LAMMPS2025_ORIG" "$(basename "$(lammps_src 2025)")" "${LAMMPS2025_PARTS[@]}"
      drop_kokkos_styles "$(lammps_src 2025)" "${LAMMPS2025_KOKKOS_DROP[@]}";;
    lammps-2026)
      fetch_orig sid "lammps=$LAMMPS2026_DEB_VERSION" "$LAMMPS2026_ORIG" "$LAMMPS2026_SHA256"
      unpack_lammps "$LAMMPS2026_ORIG" "$(basename "$(lammps_src 2026)")" "${LAMMPS2026_PARTS[@]}";;
    *) log "fetch_sources.sh: unknown item $item"; exit 2;;
  esac
done
log "sources ready in $SRC: ${ITEMS[*]}"
