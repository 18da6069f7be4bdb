#!/usr/bin/env bash
# planner_validate.sh — the cost model against measurement on this machine: for
# each policy, `zigzag plan --policy P --json` predicts tokens/s from a hardware
# file and `zigzag bench --policy P --json` measures them on dummy weights; the
# planner's own choice (`zigzag plan --json`) is among the policies. Prints CSV:
#   model,policy,pred_prefill,meas_prefill,pred_decode,meas_decode,pred_total,meas_total,meas_over_pred,disk_read_bw
# (disk_read_bw: what the run's own disk reads got, bytes/s, 0 without any; the
# profile's figure is disk_read_bytes_per_s in HW.json: a virtual disk's rate
# moves by tens of percent from minute to minute, so a disk-bound row is read
# beside both)
#
#   bench/planner_validate.sh ZIGZAG HW.json [MODEL S N "EXTRA ARGS" POLICY]...
#   bench/planner_validate.sh build/zigzag /tmp/hw.json          # the default set below
#   bench/planner_validate.sh build/zigzag /tmp/hw.json --repredict old.csv   # new model, same measurements
#   bench/planner_validate.sh build/zigzag /tmp/hw.json --short   # 5 OPT-350M rows, a few minutes: CPU-, copy-,
#                                                                 # disk-bound, 4-bit weights, and the planner's
#
# HW.json: `zigzag profile --out HW.json` on this machine (made first when missing).
# Each run is one bench (warm-up excluded); runs are short (small lengths) and the
# machine may be shared, so treat single figures as noisy. Not part of ctest.
set -euo pipefail
zz=$1 hw=$2
shift 2
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
[ -f "$hw" ] || "$zz" profile --out "$hw"
field() { sed -n "s/.*\"$1\": *\"\{0,1\}\([^,\"}]*\)\"\{0,1\}.*/\1/p" | head -n 1; }
policy_of() { sed -n 's/.*"policy": "\([^"]*\)".*/\1/p'; }

# --repredict CSV: the same rows' predictions again with this binary's cost model
# (measurements kept), after a change of the model
if [ "${1:-}" = --repredict ]; then
  echo "model,policy,pred_prefill,meas_prefill,pred_decode,meas_decode,pred_total,meas_total,meas_over_pred,disk_read_bw"
  tail -n +2 "$2" | while IFS= read -r line; do
    m=${line%%,*} rest=${line#*,\"} pol=${rest%%\"*} nums=${rest#*\",}
    IFS=, read -r _ mp _ md _ mt _ dbw <<<"$nums"
    case $m in opt-6.7b) s=8 n=4 extra="--gpu-mem 4G --cpu-mem 6G" ;; *) s=8 n=8 extra="" ;; esac
    pred=$("$zz" plan --model "$m" --hw "$hw" --prompt-len "$s" --gen-len "$n" $extra --policy "$pol" --json)
    pp=$(echo "$pred" | field prefill_tps) pd=$(echo "$pred" | field decode_tps) pt=$(echo "$pred" | field total_tps)
    echo "$m,\"$pol\",$pp,$mp,$pd,$md,$pt,$mt,$(awk -v a="$mt" -v b="$pt" 'BEGIN { printf "%.3f", a / b }'),${dbw:-}"
  done
  exit 0
fi
runs=("$@")
if [ "${1:-}" = --short ]; then
  P3=(opt-350m 8 8 "")
  runs=(
    "${P3[@]}" "gbs=16 num_gb=1 w=100,0 c=100,0 a=100,0 overlap=1"
    "${P3[@]}" "gbs=8 num_gb=2 w=0,100 c=100,0 a=100,0 overlap=1"
    "${P3[@]}" "gbs=8 num_gb=1 w=0,0 c=100,0 a=100,0 overlap=1"
    "${P3[@]}" "gbs=16 num_gb=1 w=0,100 c=100,0 a=100,0 overlap=1 cw=1"
    "${P3[@]}" PLANNER
  )
elif [ ${#runs[@]} -eq 0 ]; then
  # OPT-1.3B: weights in the device arena (CPU-bound), and offloaded to the CPU
  # tier and to disk (transfer-bound), small and large blocks; OPT-6.7B (too big
  # for this machine's RAM as f32): weights on the CPU tier and on disk.
  # (6.7B: the CPU device's arena and the CPU tier capped at 4 + 6 GiB, so the run
  # leaves RAM to the machine's other users and its weights go to disk)
  P13=(opt-1.3b 8 8 "")
  P67=(opt-6.7b 8 4 "--gpu-mem 4G --cpu-mem 6G")
  runs=(
    "${P13[@]}" "gbs=16 num_gb=1 w=100,0 c=100,0 a=100,0 overlap=1"
    "${P13[@]}" "gbs=4 num_gb=4 w=100,0 c=100,0 a=100,0 overlap=1"
    "${P13[@]}" "gbs=2 num_gb=1 w=100,0 c=100,0 a=100,0 overlap=1"
    "${P13[@]}" "gbs=8 num_gb=2 w=0,100 c=100,0 a=100,0 overlap=1"
    "${P13[@]}" "gbs=16 num_gb=1 w=0,100 c=0,100 a=0,100 overlap=1 cpu_attn=1"
    "${P13[@]}" "gbs=8 num_gb=1 w=0,0 c=100,0 a=100,0 overlap=1"
    "${P13[@]}" "gbs=8 num_gb=2 w=50,0 c=100,0 a=100,0 overlap=1"
    "${P13[@]}" "gbs=8 num_gb=1 w=0,100 c=100,0 a=100,0 overlap=0"
    "${P13[@]}" PLANNER
    "${P67[@]}" "gbs=8 num_gb=1 w=0,0 c=100,0 a=100,0 overlap=1"
    "${P67[@]}" "gbs=8 num_gb=1 w=0,30 c=100,0 a=100,0 overlap=1"
    "${P67[@]}" PLANNER
  )
fi
echo "model,policy,pred_prefill,meas_prefill,pred_decode,meas_decode,pred_total,meas_total,meas_over_pred,disk_read_bw"
i=0
while [ $i -lt ${#runs[@]} ]; do
  m=${runs[$i]} s=${runs[$((i + 1))]} n=${runs[$((i + 2))]} extra=${runs[$((i + 3))]} pol=${runs[$((i + 4))]}
  i=$((i + 5))
  if [ "$pol" = PLANNER ]; then
    pol=$("$zz" plan --model "$m" --hw "$hw" --prompt-len "$s" --gen-len "$n" $extra --max-block "${MAX_BLOCK:-16}" --json | policy_of)
  fi
  pred=$("$zz" plan --model "$m" --hw "$hw" --prompt-len "$s" --gen-len "$n" $extra --policy "$pol" --json)
  meas=$("$zz" bench --model "$m" --dummy --prompt-len "$s" --gen-len "$n" $extra --policy "$pol" --json 2>/dev/null) || {
    echo "$m,\"$pol\",bench failed" >&2
    continue
  }
  pp=$(echo "$pred" | field prefill_tps) pd=$(echo "$pred" | field decode_tps) pt=$(echo "$pred" | field total_tps)
  mp=$(echo "$meas" | field prefill_tok_s) md=$(echo "$meas" | field decode_tok_s) mt=$(echo "$meas" | field total_tok_s)
  dbw=$(echo "$meas" | field disk_read_bw)
  r=$(awk -v a="$mt" -v b="$pt" 'BEGIN { printf "%.3f", a / b }')
  echo "$m,\"$pol\",$pp,$mp,$pd,$md,$pt,$mt,$r,$dbw"
done
