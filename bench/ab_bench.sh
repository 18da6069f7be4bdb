#!/usr/bin/env bash
# ab_bench.sh — one zigzag build against another on the same machine in the same
# run: `zigzag bench ARGS --json` alternately with binary A and binary B, ROUNDS
# times each (A B A B …, so drift and neighbours hit both alike), then the median
# prefill, decode and total tokens/s of each and the ratios B / A.
#
#   bench/ab_bench.sh OLD_ZIGZAG NEW_ZIGZAG ROUNDS -- bench args…
#   bench/ab_bench.sh /tmp/old/zigzag build/zigzag 5 -- --model opt-125m --dummy --prompt-len 128 --gen-len 16
#
# Prints CSV: metric,a,b,ratio_b_over_a
set -euo pipefail
a=$1 b=$2 rounds=$3
shift 3
[ "${1:-}" = "--" ] && shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq 1 "$rounds"); do
  for side in a b; do
    bin=$a
    [ "$side" = b ] && bin=$b
    OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1} "$bin" bench "$@" --json 2>/dev/null >>"$tmp/$side.jsonl"
  done
  echo "ab_bench: round $r of $rounds done" >&2
done
python3 - "$tmp/a.jsonl" "$tmp/b.jsonl" <<'EOF'
import json, statistics, sys
rows = [[json.loads(l) for l in open(p) if l.strip()] for p in sys.argv[1:3]]
print("metric,a,b,ratio_b_over_a")
for m in ("prefill_tok_s", "decode_tok_s", "total_tok_s"):
    a = statistics.median(r[m] for r in rows[0])
    b = statistics.median(r[m] for r in rows[1])
    print(f"{m},{a:.3f},{b:.3f},{b / a:.3f}")
EOF
