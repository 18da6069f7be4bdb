#!/usr/bin/env bash
# llamacpp_compare.sh — zigzag beside llama.cpp, same run, same machine: a
# LLaMA-7B-shaped model truncated to a few layers (random weights, the same shapes
# for both), prefill and decode tokens/s at batch 1, 16 and 64 and the ratios
# zigzag / llama.cpp. The work is in bench/llamacpp_compare.py (see its header).
#
#   bench/llamacpp_compare.sh [ZIGZAG] [-- options of llamacpp_compare.py]
#   LCPP_PYTHON=/work/venv-lcpp/bin/python bench/llamacpp_compare.sh build/zigzag -- --layers 2
#
# LCPP_PYTHON: a python with llama-cpp-python and gguf (pip install llama-cpp-python
# gguf into a venv; CMAKE_ARGS="-DGGML_NATIVE=ON" builds llama.cpp for this CPU).
# Without them it prints a "skip:" line and exits 0. Not a test.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
zz=${1:-build/zigzag}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
py=${LCPP_PYTHON:-python3}
if ! command -v "$py" >/dev/null 2>&1; then
  echo "skip: LCPP_PYTHON=$py is not a python (set it to one with llama-cpp-python and gguf)"
  exit 0
fi
if ! "$py" -c 'import llama_cpp, gguf' >/dev/null 2>&1; then
  echo "skip: llama-cpp-python or gguf is not installed for $py (pip install llama-cpp-python gguf, then LCPP_PYTHON=that python)"
  exit 0
fi
if [ ! -x "$zz" ]; then
  echo "llamacpp_compare.sh: zigzag binary '$zz' not found or not executable (build it first)" >&2
  exit 1
fi
exec "$py" "$here/llamacpp_compare.py" --zigzag "$zz" "$@"
