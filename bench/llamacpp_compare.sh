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
. "$(cd "$(dirname "$0")" && pwd)/py_skip.sh"
zz_lcpp_peer llamacpp_compare.py "$@"
