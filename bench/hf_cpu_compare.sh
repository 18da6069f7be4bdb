#!/usr/bin/env bash
# hf_cpu_compare.sh — zigzag's CPU device beside Hugging Face transformers in one
# run, one checkpoint transformers writes (an OPT preset's shape, random weights,
# saved in bf16), same batch, lengths and threads, each row one dtype for both
# (auto: each tool's default; f32): zigzag bench --json and a transformers
# process alternately (zigzag, HF, zigzag, HF, … --rounds times), medians, and
# the ratios zigzag / transformers of each row. The work is in
# bench/hf_cpu_compare.py (see its header for the definitions).
#
#   bench/hf_cpu_compare.sh [ZIGZAG] [-- options of hf_cpu_compare.py]
#   bench/hf_cpu_compare.sh build/zigzag -- --batches 64 --rounds 1
#
# HF_PYTHON: a python with torch and transformers (default: /work/venv-tf's or
# /work/venv-hf's python where it has both, else python3). Without them it prints
# a "skip:" line and exits 0. Not a test; takes minutes (OPT-350M, prompt 128,
# batch 64, 2 threads: 20-60 s of prefill per run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
zz=${1:-build/zigzag}
[ $# -gt 0 ] && shift
[ "${1:-}" = "--" ] && shift
py=${HF_PYTHON:-}
if [ -z "$py" ]; then
  py=python3
  for v in /work/venv-tf /work/venv-hf; do
    if [ -x "$v/bin/python" ] && "$v/bin/python" -c "import torch, transformers" 2>/dev/null; then py=$v/bin/python; break; fi
  done
fi
. "$here/py_skip.sh"
zz_py_or_skip "$py" HF_PYTHON 'import torch, transformers' 'torch or transformers' 'pip install torch transformers'
zz_need_zigzag "$zz" hf_cpu_compare.sh
exec "$py" "$here/hf_cpu_compare.py" --zigzag "$zz" "$@"
