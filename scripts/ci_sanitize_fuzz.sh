#!/usr/bin/env bash
# After the main build and tests (.ci/run): the same suite under AddressSanitizer
# + UndefinedBehaviorSanitizer, and a short libFuzzer run of each parser
# (tests/fuzz, docs/fuzzing.md). One extra build, without CUDA:
#   build-fuzz with clang (sanitizers + fuzz targets), or
#   build-san with gcc when clang is missing (sanitizers only).
# clang is installed when missing (a minute on a fresh Debian 12);
# ZZ_CI_NO_CLANG=1 skips that.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang >/dev/null && [ -z "${ZZ_CI_NO_CLANG:-}" ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "ci: installing clang for the fuzz targets"
  { $sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang libclang-rt-dev; } ||
    echo "ci: clang could not be installed; fuzz targets skipped"
fi
if command -v clang >/dev/null; then
  CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZZ_CUDA=OFF -DZZ_FUZZ=ON
  cmake --build build-fuzz -j"$(nproc)"
  # every test of the suite under the sanitizers, then each fuzz target for 20 s
  ctest --test-dir build-fuzz --output-on-failure -LE fuzz
  ctest --test-dir build-fuzz --output-on-failure -L fuzz
else
  cmake -S . -B build-san -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZZ_CUDA=OFF -DZZ_SANITIZE=ON
  cmake --build build-san -j"$(nproc)"
  ctest --test-dir build-san --output-on-failure
fi
