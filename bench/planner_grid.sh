#!/usr/bin/env bash
# planner_grid.sh — the planner's policy against a grid of hand-written ones,
# all measured in the same run: `zigzag plan --max-block B` picks one, then
# `zigzag bench` runs it and every grid policy (block sizes up to B; weights in the
# arena or on the CPU tier; cache in the arena or on the CPU tier with CPU
# attention). Prints CSV (policy, predicted and measured total tokens/s) and a last
# line: the planner's measured throughput over the best grid policy's.
#
#   bench/planner_grid.sh ZIGZAG HW.json MODEL S N B
#   bench/planner_grid.sh build/zigzag /tmp/hw.json opt-125m 8 8 64
set -euo pipefail
zz=$1 hw=$2 m=$3 s=$4 n=$5 B=$6
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
[ -f "$hw" ] || "$zz" profile --out "$hw"
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\)\"\{0,1\}.*/\1/p" | head -n 1; }
planned=$("$zz" plan --model "$m" --hw "$hw" --prompt-len "$s" --gen-len "$n" --max-block "$B" --json |
  sed -n 's/.*"policy": "\([^"]*\)".*/\1/p')
grid=()
for g in 4 8 16 32 64; do
  for k in 1 2 4; do
    [ $((g * k)) -le "$B" ] || continue
    grid+=("gbs=$g num_gb=$k w=100,0 c=100,0 a=100,0")
  done
done
for g in 8 16 32 64; do
  [ "$g" -le "$B" ] || continue
  grid+=("gbs=$g num_gb=1 w=0,100 c=100,0 a=100,0" "gbs=$g num_gb=1 w=100,0 c=0,100 a=100,0 cpu_attn=1")
done
echo "who,policy,pred_total,meas_total"
best=0 mine=0
for p in "$planned" "${grid[@]}"; do
  who=grid
  [ "$p" = "$planned" ] && who=planner
  pred=$("$zz" plan --model "$m" --hw "$hw" --prompt-len "$s" --gen-len "$n" --policy "$p" --json | field total_tps)
  meas=$("$zz" bench --model "$m" --dummy --prompt-len "$s" --gen-len "$n" --policy "$p" --json 2>/dev/null | field total_tok_s)
  echo "$who,\"$p\",$pred,$meas"
  if [ "$who" = planner ]; then mine=$meas; else best=$(awk -v a="$best" -v b="$meas" 'BEGIN { print (b > a ? b : a) }'); fi
done
echo "planner_over_best_grid,$(awk -v a="$mine" -v b="$best" 'BEGIN { printf "%.3f", a / b }'),grid_size,${#grid[@]}"
