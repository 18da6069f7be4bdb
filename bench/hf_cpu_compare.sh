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
if ! command -v "$py" >/dev/null 2>&1; then
  echo "skip: HF_PYTHON=$py is not a python (set it to one with torch and transformers)"
  exit 0
fi
if ! "$py" -c 'import torch, transformers' >/dev/null 2>&1; then
  echo "skip: torch or transformers is not installed for $py (pip install torch transformers into a venv, then HF_PYTHON=that python)"
  exit 0
fi
if [ ! -x "$zz" ]; then
  echo "hf_cpu_compare.sh: zigzag binary '$zz' not found or not executable (build it first)" >&2
  exit 1
fi
exec "$py" "$here/hf_cpu_compare.py" --zigzag "$zz" "$@"
