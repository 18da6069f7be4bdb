#!/usr/bin/env bash
# cluster_scaling.sh — the scaling benchmark of issue #24 on the emulated cluster
# (bench/cluster.sh): the same model and prompts on 1, 2, 4 machines of identical
# size, each case's policy chosen by `zigzag plan` from a hardware file that
# `zigzag profile` measured inside one machine (the file's machines and link set
# for the case), beside what the planner predicted. Writes OUT.csv and OUT.svg
# (measured and predicted decode and total tokens/s against machines, with the
# linear line from one measured machine). Root only (cluster.sh). Not a test.
#
#   bench/cluster_scaling.sh [ZIGZAG]      (default build/zigzag)
#   MODEL=opt-125m MACHINES="1 2 4" PROMPTS=16 PROMPT_LEN=32 GEN_LEN=8 CPUS=0.4 MEM=700M \
#   CPU_MEM=560M DISK_READ=300M DISK_WRITE=200M LINK=1gbit EXTRA=--no-compression OUT=docs/scaling_cluster \
#   bench/cluster_scaling.sh
#
# EXTRA: more flags for plan and bench alike (--no-compression: FlexGen's Table 3 is
# without compression; with it the planner may fit the model in one machine in 4 bits,
# and there is no offloading left for more machines to remove). OUT.hw.json keeps the
# profile the plans came from.
# CPU_MEM is the --cpu-mem every case plans and runs with: the machine's MEM less room
# for what the plan does not count (code, MPI's buffers, the allocator's slack).
# DISK_BUSY=0 plans from the profile without its disk rates beside compute
# (disk_read_busy_bytes_per_s): the prediction before issue #24's fix, to compare.
set -euo pipefail
ZZ=$(readlink -f "${1:-build/zigzag}")
CL=$(cd "$(dirname "$0")" && pwd)/cluster.sh
MODEL=${MODEL:-opt-125m} MACHINES=${MACHINES:-1 2 4} PROMPTS=${PROMPTS:-16}
PROMPT_LEN=${PROMPT_LEN:-32} GEN_LEN=${GEN_LEN:-8} CPU_MEM=${CPU_MEM:-560M} PROFILE_S=${PROFILE_S:-6}
OUT=${OUT:-docs/scaling_cluster}
export CPUS=${CPUS:-0.4} MEM=${MEM:-700M} DISK_READ=${DISK_READ:-300M} DISK_WRITE=${DISK_WRITE:-200M} LINK=${LINK:-1gbit}
export OPENBLAS_NUM_THREADS=1
max=0
for n in $MACHINES; do [ "$n" -gt "$max" ] && max=$n; done
W=$(mktemp -d /tmp/zz_cluster_scaling.XXXXXX)
export OFFLOAD_DIR=$W
# this run's own cluster: every call below names it, and the trap tears down it alone
export ZZ_CLUSTER_ID=${ZZ_CLUSTER_ID:-s$$}
trap '"$CL" down; rm -rf "$W"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$CL" up "$max" >&2

# each machine its own offload directory (the agent joins words into one line: a script)
cat >"$W/rank.sh" <<EOF
#!/bin/sh
mkdir -p "$W/off/\$(hostname)"
exec "$ZZ" "\$@" --offload-dir "$W/off/\$(hostname)"
EOF
chmod +x "$W/rank.sh"

echo "cluster_scaling: profiling machine m0 ($CPUS CPU, $MEM)" >&2
"$CL" exec 0 "$W/rank.sh" profile --profile-seconds "$PROFILE_S" --out "$W/hw.json" 2>"$W/profile.log" ||
  { cat "$W/profile.log" >&2; exit 1; }
grep -E '"name"|cpu_cores|cpu_mem' "$W/hw.json" >&2
# the link between machines, for the file of an N-machine cluster (tc's rate in bytes/s)
net=$(python3 -c "import re,sys; r=sys.argv[1]; m=re.match(r'([0-9.]+)([kmg]?)bit', r.lower()); print(float(m.group(1))*{'':1,'k':1e3,'m':1e6,'g':1e9}[m.group(2)]/8)" "$LINK")
for n in $MACHINES; do
  DISK_BUSY=${DISK_BUSY:-1} python3 - "$W/hw.json" "$W/hw$n.json" "$n" "$net" <<'EOF'
import json, os, sys
h = json.load(open(sys.argv[1]))
n = int(sys.argv[3])
if os.environ["DISK_BUSY"] == "0": h.pop("disk_read_busy_bytes_per_s", None)
h["machines"] = n
if n > 1: h["net_bytes_per_s"], h["net_latency_s"] = float(sys.argv[4]), 1e-4
json.dump(h, open(sys.argv[2], "w"), indent=1)
EOF
done

read -ra extra <<<"${EXTRA:-}"
COMMON=(--model "$MODEL" --prompt-len "$PROMPT_LEN" --gen-len "$GEN_LEN" --max-block "$PROMPTS" --cpu-mem "$CPU_MEM"
        "${extra[@]}")
cp "$W/hw.json" "$OUT.hw.json"
for n in $MACHINES; do
  ranks=(); [ "$n" -gt 1 ] && ranks=(--ranks "$n")
  "$ZZ" plan "${COMMON[@]}" --hw "$W/hw$n.json" "${ranks[@]}" --json >"$W/plan$n.json" 2>"$W/plan$n.err" ||
    { cat "$W/plan$n.err" >&2; exit 1; }
  echo "cluster_scaling: $n machine(s): planned; running" >&2
  t0=$(date +%s)
  if [ "$n" = 1 ]; then
    "$CL" exec 0 "$W/rank.sh" bench "${COMMON[@]}" --dummy --hw "$W/hw1.json" --json >"$W/bench$n.json" 2>"$W/bench$n.err" || true
  else
    timeout 1200 "$CL" mpirun "$n" "$W/rank.sh" bench "${COMMON[@]}" --dummy --hw "$W/hw$n.json" --json \
      >"$W/bench$n.json" 2>"$W/bench$n.err" || true
  fi
  grep -q '"decode_tok_s"' "$W/bench$n.json" || { echo "cluster_scaling: $n machine(s) failed:" >&2; tail -20 "$W/bench$n.err" >&2; exit 1; }
  echo "cluster_scaling: $n machine(s): $(($(date +%s) - t0)) s" >&2
  grep -h "bound to\|threads from" "$W/bench$n.err" | head -n 4 >&2 || true
done

python3 - "$W" "$OUT" "$MACHINES" "$MODEL" "$PROMPTS" "$PROMPT_LEN" "$GEN_LEN" "$CPUS" "$MEM" "$CPU_MEM" "$LINK" "${EXTRA:-}" <<'EOF'
import json, sys
W, out, machines = sys.argv[1], sys.argv[2], [int(x) for x in sys.argv[3].split()]
model, prompts, s, n, cpus, mem, cpu_mem, link, extra = sys.argv[4:13]
def last_json(path):
    return json.loads([l for l in open(path) if l.startswith("{")][-1])
rows = []
for m in machines:
    p, b = last_json(f"{W}/plan{m}.json"), last_json(f"{W}/bench{m}.json")
    if m == 1:
        pol, block = p["policy"], b["batch"]
        stages = [{"busy_frac": b["busy"]["compute"], "bubble_frac": 0.0, "bytes_per_token": 0.0}]
        disk, lanes, pbub, hop = b["disk_read_bw"], [p["decode_lanes_s"]], 0.0, 0.0
    else:
        pol, block = " | ".join(r["policy"] for r in p["rank"]), p["block"]
        stages, disk, lanes, pbub, hop = b["stages"], 0, [r["decode_lanes_s"] for r in p["rank"]], p["bubble"], p["net_s"]
    # the slowest rank's predicted decode seconds by term, and the link: what sets the pace
    slow = max(lanes, key=lambda l: max(l.values()))
    rows.append(dict(machines=m, block=block, policy=pol, pred_bubble=pbub, pred_compute_s=slow["compute"],
                     pred_disk_s=slow["disk"], pred_hop_ms=1e3 * hop,
                     link_bytes_per_token=max(st.get("bytes_per_token", 0.0) for st in stages),
                     pred_prefill=p["prefill_tps"], pred_decode=p["decode_tps"], pred_total=p["total_tps"],
                     meas_prefill=b["prefill_tok_s"], meas_decode=b["decode_tok_s"], meas_total=b["total_tok_s"],
                     busy=max(st["busy_frac"] for st in stages), bubble=max(st["bubble_frac"] for st in stages),
                     disk_read_bw=disk))
one = rows[0]
cols = ["machines", "block", "meas_prefill", "meas_decode", "meas_total", "pred_prefill", "pred_decode", "pred_total",
        "decode_meas_over_pred", "total_meas_over_pred", "decode_x1_meas", "decode_x1_pred", "total_x1_meas",
        "total_x1_pred", "max_rank_busy", "max_rank_bubble", "pred_bubble", "pred_decode_compute_s",
        "pred_decode_disk_s", "pred_hop_ms", "disk_read_bw", "link_bytes_per_token", "policy"]
with open(out + ".csv", "w") as f:
    f.write(f"# {model} --dummy, {prompts} prompts x {s} tokens, {n} new; machines of {cpus} CPU, {mem}, "
            f"--cpu-mem {cpu_mem} {extra}, link {link}; bench/cluster_scaling.sh\n")
    f.write(",".join(cols) + "\n")
    for r in rows:
        v = [r["machines"], r["block"], r["meas_prefill"], r["meas_decode"], r["meas_total"], r["pred_prefill"],
             r["pred_decode"], r["pred_total"], r["meas_decode"] / r["pred_decode"], r["meas_total"] / r["pred_total"],
             r["meas_decode"] / one["meas_decode"], r["pred_decode"] / one["pred_decode"],
             r["meas_total"] / one["meas_total"], r["pred_total"] / one["pred_total"], r["busy"], r["bubble"],
             r["pred_bubble"], r["pred_compute_s"], r["pred_disk_s"], r["pred_hop_ms"], float(r["disk_read_bw"]),
             r["link_bytes_per_token"]]
        f.write(",".join(f"{x:.4g}" if isinstance(x, float) else str(x) for x in v) + ',"' + r["policy"] + '"\n')
# the chart: tokens/s against machines, log-free, measured solid, predicted dashed, linear dotted
Wd, Hd, L, R, T, B = 640, 420, 70, 160, 40, 50
xs = machines
ymax = max(max(r[k] for k in ("meas_decode", "meas_total", "pred_decode", "pred_total")) for r in rows)
ymax = max(ymax, one["meas_decode"] * max(xs)) * 1.1
def X(m): return L + (m - min(xs)) / max(1, max(xs) - min(xs)) * (Wd - L - R)
def Y(v): return Hd - B - v / ymax * (Hd - T - B)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{Wd}" height="{Hd}" font-family="sans-serif" font-size="12">',
       f'<rect width="{Wd}" height="{Hd}" fill="white"/>',
       f'<text x="{L}" y="20" font-size="14">{model}: tokens/s on the emulated cluster ({cpus} CPU, {mem} per machine)</text>',
       f'<line x1="{L}" y1="{Hd-B}" x2="{Wd-R}" y2="{Hd-B}" stroke="black"/>',
       f'<line x1="{L}" y1="{T}" x2="{L}" y2="{Hd-B}" stroke="black"/>',
       f'<text x="{(L+Wd-R)/2}" y="{Hd-12}" text-anchor="middle">machines</text>']
for m in xs:
    svg.append(f'<text x="{X(m)}" y="{Hd-B+16}" text-anchor="middle">{m}</text>')
for i in range(6):
    v = ymax * i / 5
    svg.append(f'<text x="{L-6}" y="{Y(v)+4}" text-anchor="end">{v:.3g}</text>')
    svg.append(f'<line x1="{L}" y1="{Y(v)}" x2="{Wd-R}" y2="{Y(v)}" stroke="#ddd"/>')
series = [("meas_decode", "measured decode", "#c00", ""), ("pred_decode", "predicted decode", "#c00", "6,4"),
          ("meas_total", "measured total", "#00c", ""), ("pred_total", "predicted total", "#00c", "6,4")]
for k, (key, name, col, dash) in enumerate(series):
    pts = " ".join(f"{X(r['machines'])},{Y(r[key])}" for r in rows)
    svg.append(f'<polyline points="{pts}" fill="none" stroke="{col}" stroke-width="2" stroke-dasharray="{dash}"/>')
    for r in rows: svg.append(f'<circle cx="{X(r["machines"])}" cy="{Y(r[key])}" r="3" fill="{col}"/>')
    svg.append(f'<line x1="{Wd-R+10}" y1="{T+20*k}" x2="{Wd-R+35}" y2="{T+20*k}" stroke="{col}" stroke-width="2" stroke-dasharray="{dash}"/>')
    svg.append(f'<text x="{Wd-R+40}" y="{T+20*k+4}">{name}</text>')
lin = " ".join(f"{X(m)},{Y(one['meas_decode'] * m)}" for m in xs)
svg.append(f'<polyline points="{lin}" fill="none" stroke="#888" stroke-width="1" stroke-dasharray="2,3"/>')
svg.append(f'<line x1="{Wd-R+10}" y1="{T+80}" x2="{Wd-R+35}" y2="{T+80}" stroke="#888" stroke-dasharray="2,3"/>')
svg.append(f'<text x="{Wd-R+40}" y="{T+84}">linear (decode)</text>')
svg.append("</svg>")
open(out + ".svg", "w").write("\n".join(svg) + "\n")
print(open(out + ".csv").read())
EOF
