#!/usr/bin/env bash
# hf_cpu_compare.sh — zigzag's CPU device beside Hugging Face transformers in one
# run, same OPT preset shape, random weights, same batch, lengths and threads:
# zigzag bench --json and a transformers process alternately (zigzag, HF, zigzag,
# HF, … --rounds times), medians, and the ratios zigzag / transformers f32. The
# work is in bench/hf_cpu_compare.py (see its header for the definitions).
#
#   bench/hf_cpu_compare.sh [ZIGZAG] [-- options of hf_cpu_compare.py]
#   bench/hf_cpu_compare.sh build/zigzag -- --batches 64 --rounds 1
#
# HF_PYTHON: a python with torch and transformers (default /work/venv-hf/bin/python
# when it exists, else python3). Without them it prints a "skip:" line and exits 0.
# Not a test; takes minutes (OPT-1.3B, prompt 128, batch 64: ~100 s of prefill per run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
zz=${1:-build/zigzag}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
py=${HF_PYTHON:-}
if [ -z "$py" ]; then
  py=python3
  [ -x /work/venv-hf/bin/python ] && py=/work/venv-hf/bin/python
fi
. "$here/py_skip.sh"
zz_py_or_skip "$py" HF_PYTHON 'import torch, transformers' 'torch or transformers' 'pip install torch transformers'
zz_need_zigzag "$zz" hf_cpu_compare.sh
exec "$py" "$here/hf_cpu_compare.py" --zigzag "$zz" "$@"
