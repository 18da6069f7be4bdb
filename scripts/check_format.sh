#!/usr/bin/env bash
# check_format.sh [--fix] — the C and CUDA sources against .clang-format (Debian
# 12's clang-format 14, installed when missing): lists each file that differs and
# exits 1, or with --fix rewrites them. runtime/text/unicode_tables.c is generated
# (scripts/gen_unicode_tables.py) and left as the generator writes it.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "check_format: installing clang-format"
  $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang-format
fi
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cu' | grep -v '^runtime/text/unicode_tables\.c$')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "check_format: $f differs from .clang-format (bash scripts/check_format.sh --fix)"
    bad=1
  fi
done
[ "$bad" = 0 ] && echo "check_format: ${#files[@]} files as .clang-format says"
exit "$bad"
