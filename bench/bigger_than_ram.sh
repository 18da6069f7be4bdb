#!/usr/bin/env bash
# bigger_than_ram.sh — zigzag beside llama.cpp on a model larger than the memory
# it is given (issue #27 item 7): LLaMA-7B-shaped layers in 4 bits, both engines
# under a memory cgroup of the same limit, on the same disk, batch 64, total
# tokens/s and the ratio. The work is in bench/bigger_than_ram.py (see its header).
#
#   bench/bigger_than_ram.sh [ZIGZAG] [-- options of bigger_than_ram.py]
#   LCPP_PYTHON=/work/venv-lcpp/bin/python bench/bigger_than_ram.sh build/zigzag -- --layers 12 --limit 1G
#
# Needs root (a cgroup and drop_caches) and LCPP_PYTHON with llama-cpp-python and
# gguf (else a "skip:" line, exit 0). Minutes; not a test.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/py_skip.sh"
zz_lcpp_peer bigger_than_ram.py "$@"
