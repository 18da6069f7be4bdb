#!/usr/bin/env bash
# Installs the Debian 12 packages zigzag needs (only those missing), then
# configures and builds it in ./build (Release). CUDA is used when nvcc exists
# (/usr/local/cuda/bin/nvcc or on PATH). Run as root, or with sudo available.
set -euo pipefail
cd "$(dirname "$0")/.."

pkgs=(build-essential cmake pkg-config libopenblas-dev libopenmpi-dev openmpi-bin libglpk-dev
      libhwloc-dev hwloc-nox libcunit1-dev libjansson-dev liburing-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${ZZ_CMAKE_ARGS:-}
cmake --build build -j"$(nproc)"
