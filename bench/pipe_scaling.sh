#!/usr/bin/env bash
# pipe_scaling.sh — `mpirun -np m zigzag bench` for m = 1, 2, 4 ranks on this machine with
# the same per-rank CPU memory budget: with one rank the model's weights do not fit it, so
# part of them stays on the disk tier (--offload-dir) and is streamed in at every token
# step; with four ranks each slice fits in RAM. For each run: prefill, decode and total
# tokens/s, each rank's busy and bubble fractions, the wavefront's ideal prefill bubble
# (m-1)/(T+m-1), and bytes sent per generated token per rank.
#
#   bench/pipe_scaling.sh [ZIGZAG]            (default build/zigzag)
#   MODELS="opt-1.3b opt-6.7b" RANKS="1 2 4" PROMPT_LEN=32 GEN_LEN=8 GBS=4 bench/pipe_scaling.sh
#
# The budget per model (BUDGET_opt_1_3b=1G, BUDGET_opt_6_7b=4G by default) is the
# --cpu-mem of every rank. The policy follows from it: weights' CPU share is the largest
# of 100, 75, 50, 25, 0 percent whose plan fits every rank's budget (zigzag refuses a
# plan that does not fit before loading anything, so the search is cheap); the rest of
# the weights is on disk. The KV cache and activations are on the compute device (the
# CPU device's own arena here). Prints one CSV line per run, then a markdown table.
# Not a test: numbers depend on the machine and its neighbours.
set -euo pipefail
ZZ=${1:-build/zigzag}
MODELS=${MODELS:-opt-1.3b}
RANKS=${RANKS:-1 2 4}
PROMPT_LEN=${PROMPT_LEN:-32}
GEN_LEN=${GEN_LEN:-8}
GBS=${GBS:-4}
: "${BUDGET_opt_1_3b:=1G}" "${BUDGET_opt_6_7b:=4G}"
MPIRUN=${MPIRUN:-mpirun}
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
FLAGS=(--allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader,tcp
       --mca btl_tcp_if_include lo -x OPENBLAS_NUM_THREADS)
tmp=$(mktemp -d /tmp/zz_pipe_scaling.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
{
echo "model,ranks,groups,cpu_mem,w_cpu_pct,prefill_tok_s,decode_tok_s,total_tok_s,ideal_bubble,rank,layers,busy_frac,bubble_frac,bytes_per_token"
for model in $MODELS; do
  bv="BUDGET_${model//[-.]/_}"
  budget=${!bv:-1G}
  for m in $RANKS; do
    ok=""
    for w in 100 75 50 25 0; do
      t0=$(date +%s)
      if "$MPIRUN" "${FLAGS[@]}" -np "$m" "$ZZ" bench --model "$model" --dummy --prompt-len "$PROMPT_LEN" \
          --gen-len "$GEN_LEN" --gpu-batch-size "$GBS" --percent 0 "$w" 100 0 100 0 --cpu-mem "$budget" \
          --offload-dir "$tmp" --json >"$tmp/out.json" 2>"$tmp/err"; then
        ok=$w
        echo "pipe_scaling: $model, $m rank(s), --cpu-mem $budget: weights ${w}% CPU, $((100 - w))% disk ($(($(date +%s) - t0)) s)" >&2
        break
      fi
      grep -q "does not fit the cpu tier" "$tmp/err" || { echo "pipe_scaling: $model -np $m failed:" >&2; grep -v "bound to\|GPU" "$tmp/err" | head -5 >&2; break; }
    done
    [ -n "$ok" ] || { echo "pipe_scaling: $model -np $m: no policy fits --cpu-mem $budget" >&2; continue; }
    python3 - "$tmp/out.json" "$model" "$m" "$budget" "$ok" <<'EOF'
import json, sys
j = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
if "stages" not in j:  # one rank runs the one-process bench: no pipeline, no bubble, nothing sent
    j.update(ranks=1, groups=1, stages=[{"rank": 0, "layers": ["all", "all"], "busy_frac": j["busy"]["compute"],
                                         "bubble_frac": 0.0, "bytes_per_token": 0.0}])
m, T = j["ranks"], j["groups"]
ideal = (m - 1) / (T + m - 1)
for st in j["stages"]:
    print(f'{sys.argv[2]},{m},{T},{sys.argv[4]},{sys.argv[5]},{j["prefill_tok_s"]:.3f},{j["decode_tok_s"]:.3f},'
          f'{j["total_tok_s"]:.3f},{ideal:.3f},{st["rank"]},{st["layers"][0]}-{st["layers"][1]},'
          f'{st["busy_frac"]:.3f},{st["bubble_frac"]:.3f},{st["bytes_per_token"]:.0f}')
EOF
  done
done
} | tee "$tmp/all.csv"
python3 - "$tmp/all.csv" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print()
print("| model | ranks | weights CPU/disk | prefill tok/s | decode tok/s | total tok/s | total vs 1 rank | ideal bubble | per rank: busy / bubble / bytes per token |")
print("|---|---|---|---|---|---|---|---|---|")
base = {}
seen = set()
for r in rows:
    key = (r["model"], r["ranks"])
    if key in seen:
        continue
    seen.add(key)
    if r["ranks"] == "1":
        base[r["model"]] = float(r["total_tok_s"])
    per = "; ".join(f'{s["busy_frac"]} / {s["bubble_frac"]} / {s["bytes_per_token"]}'
                    for s in rows if (s["model"], s["ranks"]) == key)
    ratio = float(r["total_tok_s"]) / base[r["model"]] if r["model"] in base else float("nan")
    print(f'| {r["model"]} | {r["ranks"]} | {r["w_cpu_pct"]}/{100 - int(r["w_cpu_pct"])} % | {r["prefill_tok_s"]} | '
          f'{r["decode_tok_s"]} | {r["total_tok_s"]} | {ratio:.2f} | {r["ideal_bubble"]} | {per} |')
EOF
