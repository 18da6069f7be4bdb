#!/usr/bin/env bash
# gpu-check.sh [BUDGET_SECONDS] — every GPU check of zigzag in one command, on a
# machine that has none of zigzag's libraries and no network (the GPU machine, an
# offline cluster). Run from the repository root, with gpu-kit/ (made by
# scripts/gpu-kit.sh on a Debian 12 machine) beside it:
#
#   1. unpacks gpu-kit/ into a prefix (no root, no network) and builds zigzag
#      with CUDA (sm_75 for a T4, sm_90 for an H100/H200) against it alone;
#   2. runs, each timed, in this order: the CUDA op tests, the golden test under
#      its four policies (the dense families and the mixtures of experts: tiny-mixtral,
#      tiny-qwen3-moe, tiny-qwen2-moe(-window), experts resident and split across tiers;
#      Phi-3 longrope), 2 ranks sharing the GPU over --comm mpi against one
#      process, the pipeline over --comm nccl, the copy-lane bench against a plain
#      pinned cudaMemcpyAsync, zigzag beside FlexGen (OPT-6.7B), compute-sanitizer
#      memcheck on the op test, where one OPT-30B decode step spends its time
#      (nsys), zigzag beside FlexGen (OPT-30B); then the CPU test suite if time is
#      left;
#   3. skips a step that would overrun BUDGET_SECONDS (default 540: a device call
#      is at most 600 s), and ends with a table: step, result, seconds, reason.
#
# Logs and results go to $OUT (./gpu-out when unset). Without a GPU it unpacks,
# builds, runs the CPU tests, marks every GPU step skipped ("no GPU") and exits 0
# when those pass. Exit status: 0 when nothing failed, 1 otherwise.
#
# Environment: ZZ_KIT_DIR (gpu-kit), ZZ_KIT_PREFIX_DIR (where the kit is unpacked,
# /tmp/zz-kit-prefix), ZZ_BUILD_DIR (build-kit), ZZ_CUDA_ARCHS ("75;90"),
# ZZ_CHECK_CTEST_ARGS (extra ctest arguments of the CPU tests, e.g. "-E pipe_tokens"),
# ZZ_CHECK_ONLY="step ..." (run only those steps), ZZ_CHECK_NO_GPU=1 (behave as if there were no GPU), ZZ_CHECK_CUDA=0 (build
# without CUDA even where nvcc exists: a quicker check of the kit alone).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
. scripts/gpu-kit-lib.sh

BUDGET=${1:-540}
case $BUDGET in '' | *[!0-9]*) echo "gpu-check: BUDGET_SECONDS must be a whole number of seconds, not '$BUDGET'" >&2; exit 2 ;; esac
OUT=${OUT:-$ROOT/gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
KIT=${ZZ_KIT_DIR:-$ROOT/gpu-kit}
PREFIX=${ZZ_KIT_PREFIX_DIR:-/tmp/zz-kit-prefix}
BUILD=${ZZ_BUILD_DIR:-$ROOT/build-kit}
ARCHS=${ZZ_CUDA_ARCHS:-75;90}
T0=$(date +%s)
names=() results=() secs=() reasons=()
failed=0

left() { echo $((BUDGET - ($(date +%s) - T0))); }
record() { # NAME RESULT SECONDS REASON
  names+=("$1") results+=("$2") secs+=("$3") reasons+=("$4")
  printf 'gpu-check: %-14s %-7s %4ss  %s\n' "$1" "$2" "$3" "$4"
  [ "$2" = failed ] && failed=1
  return 0
}
skip() { record "$1" skipped 0 "$2"; }

# step NAME ESTIMATE_S CMD...: runs CMD (its output in $OUT/NAME.log) when the
# budget holds ESTIMATE_S more seconds, under a timeout of what is left or three
# times the estimate, whichever is less (a hung step must not eat the steps after
# it). ZZ_CHECK_ONLY="name ..." runs only the steps named (a rerun after a fix).
step() {
  local name=$1 est=$2 l rc t
  shift 2
  if [ -n "${ZZ_CHECK_ONLY:-}" ] && [[ " $ZZ_CHECK_ONLY " != *" $name "* ]]; then
    skip "$name" "not in ZZ_CHECK_ONLY"
    return 0
  fi
  l=$(left)
  if [ "$l" -lt "$est" ]; then
    skip "$name" "budget: needs about ${est}s, ${l}s left"
    return 0
  fi
  [ "$l" -gt $((3 * est)) ] && l=$((3 * est))
  echo "gpu-check: $name: $*" >"$OUT/$name.log"
  t=$(date +%s)
  # a step may be one of this script's functions (exported below): bash runs it
  timeout -k 10 "$l" bash -c '"$@"' "$name" "$@" >>"$OUT/$name.log" 2>&1
  rc=$?
  t=$(($(date +%s) - t))
  case $rc in
    0) record "$name" passed "$t" "" ;;
    77) record "$name" skipped "$t" "$(tail -n 1 "$OUT/$name.log" | cut -c1-60)" ;;
    124 | 137) record "$name" failed "$t" "ran out of the budget (timeout ${l}s)" ;;
    *) record "$name" failed "$t" "exit $rc, see $name.log: $(grep -m1 -i 'fail\|error' "$OUT/$name.log" | cut -c1-60)" ;;
  esac
}

table() {
  {
    echo
    printf '%-14s %-8s %7s  %s\n' step result seconds reason
    for i in "${!names[@]}"; do printf '%-14s %-8s %7s  %s\n' "${names[$i]}" "${results[$i]}" "${secs[$i]}" "${reasons[$i]}"; done
    echo "total $(($(date +%s) - T0)) s of a ${BUDGET} s budget; logs in $OUT"
  } | tee "$OUT/summary.txt"
}

# ---------------------------------------------------------------- the kit and the build
gpu=yes why_no_gpu=""
if [ -n "${ZZ_CHECK_NO_GPU:-}" ]; then
  gpu="" why_no_gpu="no GPU (ZZ_CHECK_NO_GPU)"
elif command -v nvidia-smi >/dev/null; then
  nvidia-smi -L >"$OUT/gpus.txt" 2>&1 && grep -q GPU "$OUT/gpus.txt" || { gpu="" why_no_gpu="no GPU"; }
elif ! ls /dev/nvidia[0-9]* >/dev/null 2>&1; then
  gpu="" why_no_gpu="no GPU"
fi
nvcc=$(command -v nvcc || true)
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
[ "${ZZ_CHECK_CUDA:-1}" = 0 ] && nvcc=""
{ uname -a; [ -n "$gpu" ] && cat "$OUT/gpus.txt"; [ -n "$nvcc" ] && "$nvcc" --version | tail -n 2; } >"$OUT/machine.txt" 2>&1

t=$(date +%s)
if zz_kit_unpack "$KIT" "$PREFIX" >"$OUT/unpack.log" 2>&1; then
  record unpack passed $(($(date +%s) - t)) "$(ls "$KIT"/debs/*.deb | wc -l) packages into $PREFIX"
else
  record unpack failed $(($(date +%s) - t)) "$(tail -n 1 "$OUT/unpack.log")"
  table
  exit 1
fi
zz_kit_env "$PREFIX"
# zigzag's executables find the kit's libraries through their DT_RPATH (which, unlike
# RUNPATH, also serves the libraries they load); mpirun and orted, Debian's, have
# none and get LD_LIBRARY_PATH. Debian's libmpi carries its own RUNPATH
# (/usr/lib/x86_64-linux-gnu/openmpi/lib), which overrides an executable's RPATH
# for its own dependencies (so does libopen-rte): the executables need those
# dependencies themselves (libopen-rte, libopen-pal, libevent_core), so that the
# loader has them, by soname, before libmpi and libopen-rte ask.
rpath="-Wl,--disable-new-dtags -Wl,-rpath,$ZZ_KIT_LIBPATH -Wl,--no-as-needed"
evcore=$(cd "$ZZ_KIT_PREFIX/usr/lib/$ZZ_KIT_MULTIARCH" && ls libevent_core-*.so.[0-9] 2>/dev/null | head -n 1)
rpath+=" -L$ZZ_KIT_PREFIX/usr/lib/$ZZ_KIT_MULTIARCH -lopen-rte -lopen-pal${evcore:+ -l:$evcore}"
cuda_args=(-DZZ_CUDA=OFF)
if [ -n "$nvcc" ]; then
  cuda_args=(-DZZ_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=$ARCHS")
  # NCCL: the CUDA toolkit's, else PyTorch's wheel (nvidia-nccl), for --comm nccl
  if ! ls "$(dirname "$nvcc")"/../include/nccl.h >/dev/null 2>&1; then
    nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.dirname(nvidia.nccl.__file__) if nvidia.nccl.__file__ else list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)
    if [ -n "$nccl" ] && [ -f "$nccl/include/nccl.h" ]; then
      lib=$(ls "$nccl"/lib/libnccl.so* 2>/dev/null | head -n 1)
      [ -n "$lib" ] && cuda_args+=(-DNCCL_INCLUDE_DIR="$nccl/include" -DNCCL_LIBRARY="$lib")
    fi
  fi
fi
t=$(date +%s)
if {
  LD_LIBRARY_PATH=$ZZ_KIT_LIBPATH cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PREFIX/usr" -DMPI_C_COMPILER="$PREFIX/usr/bin/mpicc" \
    -DMPIEXEC_EXECUTABLE="$PREFIX/usr/bin/mpirun" \
    -DCMAKE_EXE_LINKER_FLAGS="$rpath" -DCMAKE_SHARED_LINKER_FLAGS="$rpath" "${cuda_args[@]}" &&
    LD_LIBRARY_PATH=$ZZ_KIT_LIBPATH cmake --build "$BUILD" -j"$(nproc)"
} >"$OUT/build.log" 2>&1; then
  record build passed $(($(date +%s) - t)) "$(grep -o 'CUDA backend [A-Z]*' "$OUT/build.log" | head -n 1)${nvcc:+, sm ${ARCHS//;/,}}"
else
  record build failed $(($(date +%s) - t)) "see build.log: $(grep -m1 -i 'error' "$OUT/build.log" | cut -c1-70)"
  table
  exit 1
fi
ZZ=$BUILD/zigzag
[ -x "$ZZ" ] || ZZ=$(find "$BUILD" -name zigzag -type f -perm -u+x | head -n 1)
ldd "$ZZ" >"$OUT/ldd.txt" 2>&1

# mpirun as root (the GPU machine runs commands as root); one machine, loopback
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
export LD_LIBRARY_PATH=$ZZ_KIT_LIBPATH${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

cpu_tests() {
  # shellcheck disable=SC2086 # ZZ_CHECK_CTEST_ARGS is a list of words
  ctest --test-dir "$BUILD" --output-on-failure -j2 ${ZZ_CHECK_CTEST_ARGS:-}
}

# ---------------------------------------------------------------- the GPU steps
# 2 ranks on one GPU over --comm mpi: the same bytes as one process
mpi2() {
  local w
  w=$(mktemp -d)
  for i in $(seq 0 7); do echo "{\"id\": $i, \"prompt\": \"Liberty and all men $i are created equal\"}"; done >"$w/p.jsonl"
  local args=(generate --model "$ROOT/tests/fixtures/tiny-opt" --device cuda --prompts "$w/p.jsonl"
    --gpu-batch-size 2 --num-gpu-batches 2 --max-new-tokens 8)
  "$ZZ" "${args[@]}" --out "$w/one.jsonl" || return 1
  mpirun --oversubscribe --mca pml ob1 --mca btl self,vader,tcp -np 2 \
    "$ZZ" "${args[@]}" --comm mpi --out "$w/two.jsonl" </dev/null || return 1
  cmp "$w/one.jsonl" "$w/two.jsonl" && echo "2 ranks on one GPU over --comm mpi: the bytes of one process"
  local rc=$?
  cp "$w"/*.jsonl "$OUT/" 2>/dev/null
  rm -rf "$w"
  return $rc
}

copy_bench() { "$BUILD/bench/cuda_copy_bench" 256 10 | tee "$OUT/copy_bench.csv"; }

flexgen_env() {
  # FlexGen's wheel into a private site; everything else it imports is the image's
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/zz-site \
    "$KIT"/wheels/*.whl || return 1
  export PYTHONPATH=/tmp/zz-site${PYTHONPATH:+:$PYTHONPATH}
}
# the paper's policies (FlexGen's own benchmark suite, prompt 512, 32 new tokens):
# OPT-6.7B all on the GPU; OPT-30B weights 20% GPU 80% CPU, cache on the CPU with
# CPU attention, activations on the GPU
flexgen() {
  local model=$1
  shift
  flexgen_env || return 1
  # python and torch with the image's own libraries: zigzag has its RPATH
  env -u LD_LIBRARY_PATH PYTHONUNBUFFERED=1 python3 "$ROOT/bench/flexgen_compare.py" --zigzag "$ZZ" --model "$model" \
    --prompt-len 512 --gen-len 32 --gpu-mem 16G --offload-dir "${TMPDIR:-/tmp}" "$@" | tee "$OUT/flexgen_$model.csv"
}

# where one decode step of OPT-30B (the paper's policy) spends its time: the
# engine's lane busy fractions (bench --json), and per CUDA kernel and API call
# under nsys where it is installed
decode_profile() {
  local args=(bench --model opt-30b --dummy --device cuda --gpu-mem 16G --percent 20 80 0 100 100 0
    --cpu-cache-compute --gpu-batch-size 8 --num-gpu-batches 4 --prompt-len 512 --gen-len 4
    --offload-dir "${TMPDIR:-/tmp}")
  local nsys
  nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -n 1 || true)
  if [ -n "$nsys" ]; then
    "$nsys" profile -t cuda,osrt --stats=false -o "$OUT/decode_30b" --force-overwrite true "$ZZ" "${args[@]}" --json || return 1
    "$nsys" stats -r cuda_gpu_kern_sum,cuda_api_sum,cuda_gpu_mem_time_sum,osrt_sum -f csv -o "$OUT/decode_30b" \
      "$OUT/decode_30b.nsys-rep" >/dev/null 2>&1
    rm -f "$OUT/decode_30b.nsys-rep" "$OUT/decode_30b.sqlite"
    ls "$OUT"/decode_30b*
  else
    echo "nsys not found: the engine's lane busy fractions only"
    "$ZZ" "${args[@]}" --json
  fi
}

# compute-sanitizer memcheck over both CUDA test programs: the op table (every op,
# every shape, the refusals and copies) and the conversion and argmax tests
memcheck() {
  "$1" --tool memcheck --error-exitcode 1 "$BUILD/tests/test_cuda_ops" &&
    "$1" --tool memcheck --error-exitcode 1 "$BUILD/tests/test_backend_ops"
}

export ROOT OUT KIT BUILD ZZ
export -f cpu_tests mpi2 copy_bench flexgen_env flexgen decode_profile memcheck
if [ -z "$gpu" ]; then
  step cpu_tests 60 cpu_tests
  for s in cuda_ops golden mpi_2ranks nccl copy_bench flexgen_6.7b memcheck decode_30b flexgen_30b; do skip $s "$why_no_gpu"; done
else
  step cuda_ops 40 ctest --test-dir "$BUILD" -R '^(cuda_ops|backend_ops)$' --output-on-failure
  step golden 60 "$BUILD/tests/test_cuda_golden"
  step mpi_2ranks 30 mpi2
  step nccl 40 ctest --test-dir "$BUILD" -R '^pipe_nccl$' -V
  step copy_bench 20 copy_bench
  step flexgen_6.7b 120 flexgen opt-6.7b --percent 100 0 100 0 100 0 --gpu-batch-size 4 --num-gpu-batches 1
  san=$(command -v compute-sanitizer || ls "$(dirname "${nvcc:-/usr/local/cuda/bin/nvcc}")/compute-sanitizer" 2>/dev/null || true)
  if [ -n "$san" ]; then
    step memcheck 90 memcheck "$san"
  else
    skip memcheck "compute-sanitizer not on PATH"
  fi
  step decode_30b 90 decode_profile
  step flexgen_30b 300 flexgen opt-30b --percent 20 80 0 100 100 0 --cpu-cache-compute --gpu-batch-size 8 \
    --num-gpu-batches 4
  step cpu_tests 120 cpu_tests
fi
table
exit $failed
