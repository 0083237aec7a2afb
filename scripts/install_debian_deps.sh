#!/usr/bin/env bash
# Installs everything Batmobile needs on Debian 12 (bookworm) from Debian's own archive.
# Idempotent: packages already present are skipped by apt. Needs root (or sudo).
set -euo pipefail
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
PKGS=(build-essential cmake ninja-build ccache git xz-utils ca-certificates dpkg-dev
      libgtest-dev libgmock-dev libyaml-dev libopenmpi-dev openmpi-bin libtorch-dev
      python3 python3-venv python3-numpy python3-torch python3-matplotlib python3-pytest
      python3-ase python3-yaml python3-tqdm curl)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  echo "[deps] installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "[deps] ok"
