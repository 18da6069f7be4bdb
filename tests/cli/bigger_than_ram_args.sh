#!/usr/bin/env bash
# bigger_than_ram_args.sh ZIGZAG — the refusals of bench/bigger_than_ram.py (the
# benchmark itself takes minutes and root, so it is no test): bad sizes and
# lengths, shapes and read rates, a missing binary, no memory cgroup, no blkio
# controller or no disk under --workdir for --read-rate, no room for the GGUF
# files, and not root. Each is refused before anything is written, with a
# message naming the option or the path, and a non-zero exit. python3 only
# (llama-cpp-python is not needed to refuse).
set -u
if [ $# -ne 1 ]; then
  echo "usage: $0 ZIGZAG" >&2
  exit 2
fi
ZZ=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
PY=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../bench" && pwd)/bigger_than_ram.py
command -v python3 >/dev/null || { echo "skip: no python3"; exit 0; }
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" zz_bigram
# refused PATTERN DESCRIPTION ARGS...: ok when the script exits non-zero and says PATTERN
refused() {
  local pat=$1 d=$2
  shift 2
  timeout 60 python3 "$PY" "$@" >"$W/outp" 2>"$W/err"
  RC=$?
  if [ $RC -ne 0 ] && [ $RC -ne 124 ] && grep -qF -- "$pat" "$W/err"; then ok "$d"; else not_ok "$d (rc $RC)"; fi
}
refused "below 64 MiB" "a limit below 64 MiB" --zigzag "$ZZ" --limit 12
refused "'lots' is not a size" "a limit that is no size" --zigzag "$ZZ" --limit lots
refused "--gen-len must be at least 2" "one new token (no decode step)" --zigzag "$ZZ" --gen-len 1
refused "must be at least 1" "zero layers" --zigzag "$ZZ" --layers 0
refused "invalid choice: 'int4'" "an activation type zigzag has not" --zigzag "$ZZ" --cpu-act int4
refused "invalid choice: '30b'" "a shape with no row in SHAPES" --zigzag "$ZZ" --shape 30b
refused "--layers 41: LLaMA-13B has 40 layers" "more layers than the shape's model" --zigzag "$ZZ" --shape 13b --layers 41
refused "--layers 49: Qwen3-30B-A3B has 48 layers" "more layers than a MoE shape's model" --zigzag "$ZZ" \
  --shape qwen3-30b-a3b --layers 49
refused "'0' must be a rate above 0 MB/s" "a read rate of 0" --zigzag "$ZZ" --read-rate 0
refused "'-550' must be a rate above 0 MB/s" "a negative read rate" --zigzag "$ZZ" --read-rate=-550
refused "'fast' is not a rate in MB/s" "a read rate that is no number" --zigzag "$ZZ" --read-rate fast
if [ "$(id -u)" = 0 ]; then
  refused "zigzag binary '$W/none' not found" "a missing zigzag binary" --zigzag "$W/none"
  mkdir -p "$W/nocg"
  ZZ_CGROUP_ROOT=$W/nocg refused "no memory cgroup" "no memory cgroup (v1 or v2) under the root given" --zigzag "$ZZ"
  # a v1 memory hierarchy with no blkio beside it: --read-rate has no throttle
  mkdir -p "$W/memonly/memory" && : >"$W/memonly/memory/memory.limit_in_bytes"
  ZZ_CGROUP_ROOT=$W/memonly refused "no blkio controller with a read throttle" "--read-rate with no blkio controller" \
    --zigzag "$ZZ" --read-rate 550 --workdir "$W/wd"
  # proc is on no disk (tmpfs and overlay neither): nothing to throttle, refused before any cgroup is made
  refused "is on no block device" "--read-rate with --workdir on no disk" --zigzag "$ZZ" --read-rate 550 \
    --workdir /proc/zz-bigram-none
  # 13B's GGUF files (38 GB with the f16 one) on a file system with less room (tmpfs: half the RAM)
  if [ -d /dev/shm ] && [ "$(df -B1 --output=avail /dev/shm | tail -n 1)" -lt 38000000000 ]; then
    refused "needs about" "a --workdir with no room for the GGUF files" --zigzag "$ZZ" --shape 13b \
      --workdir /dev/shm/zz-bigram-none
  else
    echo "# no-room check skipped: no /dev/shm smaller than 13B's files"
  fi
  # as nobody, where a python and the script are reachable for it (root's pyenv is not)
  NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
  if command -v setpriv >/dev/null && "${NOBODY[@]}" /usr/bin/python3 -c 1 2>/dev/null &&
    "${NOBODY[@]}" test -r "$PY"; then
    "${NOBODY[@]}" timeout 60 /usr/bin/python3 "$PY" --zigzag "$ZZ" >"$W/outp" 2>"$W/err"
    RC=$?
    if [ $RC -eq 2 ] && grep -qF "must run as root" "$W/err"; then ok "not root"; else not_ok "not root (rc $RC)"; fi
  else
    echo "# not-root check skipped: no python3 that uid 65534 can run the script with"
  fi
else
  refused "must run as root" "not root" --zigzag "$ZZ"
fi
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
