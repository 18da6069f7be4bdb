# py_skip.sh — sourced by the bench scripts that drive a python peer: the checks
# they share, each ending the script with a "skip:" line (exit 0) or an error.
#
#   . "$here/py_skip.sh"
#   zz_py_or_skip "$py" VAR 'import torch, transformers' 'torch or transformers' 'pip install torch transformers'
#   zz_need_zigzag "$zz" NAME
#   zz_lcpp_peer SCRIPT.py "$@"     (the whole of a llama.cpp bench wrapper)

# zz_py_or_skip PY VAR IMPORTS WHAT HOW: exit 0 with a skip line unless PY is a
# python (VAR names the variable that set it) that can run IMPORTS.
zz_py_or_skip() {
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "skip: $2=$1 is not a python (set it to one with $4)"
    exit 0
  fi
  if ! "$1" -c "$3" >/dev/null 2>&1; then
    echo "skip: $4 is not installed for $1 ($5 into a venv, then $2=that python)"
    exit 0
  fi
}

# zz_need_zigzag BIN NAME: exit 1 naming BIN unless it is an executable.
zz_need_zigzag() {
  if [ ! -x "$1" ]; then
    echo "$2: zigzag binary '$1' not found or not executable (build it first)" >&2
    exit 1
  fi
}

# zz_lcpp_peer SCRIPT.py [ZIGZAG] [-- options]: the llama.cpp benches' wrapper —
# LCPP_PYTHON (default python3) with llama-cpp-python and gguf, else a skip line;
# ZIGZAG (default build/zigzag) an executable; then SCRIPT.py, beside this file,
# runs with --zigzag ZIGZAG and the options.
zz_lcpp_peer() {
  local script=$1 zz=${2:-build/zigzag} py=${LCPP_PYTHON:-python3}
  shift
  [ $# -gt 0 ] && shift
  [ "${1:-}" = "--" ] && shift
  zz_py_or_skip "$py" LCPP_PYTHON 'import llama_cpp, gguf' 'llama-cpp-python or gguf' 'pip install llama-cpp-python gguf'
  zz_need_zigzag "$zz" "${script%.py}.sh"
  exec "$py" "$(dirname "${BASH_SOURCE[0]}")/$script" --zigzag "$zz" "$@"
}
