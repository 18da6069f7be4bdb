#!/usr/bin/env bash
# bigger_than_ram.sh — zigzag beside llama.cpp on a model larger than the memory
# it is given (issue #27 item 7): LLaMA-7B or -13B layers (--shape) in 4 bits,
# both engines under a memory cgroup of the same limit, on the same disk (its
# reads throttled to --read-rate MB/s where given), batch 64, total tokens/s and
# the ratio. The work is in bench/bigger_than_ram.py (see its header).
#
#   bench/bigger_than_ram.sh [ZIGZAG] [-- options of bigger_than_ram.py]
#   LCPP_PYTHON=/work/venv-lcpp/bin/python bench/bigger_than_ram.sh build/zigzag -- --layers 12 --limit 1G
#   LCPP_PYTHON=/work/venv-lcpp/bin/python bench/bigger_than_ram.sh build/zigzag -- \
#       --workdir /work/zz-bigram-run --shape 13b --gen-len 16 --cpu-act int8 --read-rate 550
#
# Needs root (a cgroup and drop_caches) and LCPP_PYTHON with llama-cpp-python and
# gguf (else a "skip:" line, exit 0). Minutes (7b), about half an hour (13b); not a test.
set -euo pipefail
. "$(cd "$(dirname "$0")" && pwd)/py_skip.sh"
zz_lcpp_peer bigger_than_ram.py "$@"
