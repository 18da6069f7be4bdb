#!/usr/bin/env bash
# test_pipe_netns.sh ZIGZAG MPIEXEC FIXTURES — the real zigzag over real (namespaced) hosts.
# Each rank runs as its own host (network + UTS namespace, netns_cluster.sh), with its own
# --offload-dir (weights, cache and activations on that host's disk tier), and talks TCP
# over a bridge:
#   tokens  2 and 3 hosts give byte for byte the one-process output on tiny-opt, with
#           everything on disk and with a mix of device, CPU and disk
#   cut     3 hosts, a job of many blocks; once rank 0 has committed a block, h1's link
#           goes down: every rank gone within 10 s of the cut, ranks on h0 and h2 naming
#           rank 1 (host h1), rank 1 naming the peer it lost (each line is the error
#           trail, which exits non-zero; mpirun's own status means nothing here: its
#           daemon on h1 is cut off too, so it is ended by the test); the output holds
#           whole lines of the full run only, and --resume (one process) completes it to
#           the uninterrupted bytes
# The launcher cannot help with the cut (its daemon on h1 is unreachable too): only the
# heartbeats see it. Exits 77 (skipped) when not root or namespaces cannot be made. The
# namespaces and every process left in them are removed on any exit.
set -u
ZZ=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
MPIEXEC=$2
FX=$(cd "$3" && pwd)
source "$(cd "$(dirname "$0")" && pwd)/netns_lib.sh"
for v in $(env | sed -n 's/^\(ZZ_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
netns_setup "zp$$"
ok() { echo "ok - $*"; }

# the agent joins its arguments into one shell line, so the rank's own set-up (pid
# file, its host's offload directory) lives in a script rather than in quoted words
cat >"$work/rank.sh" <<EOF
#!/bin/sh
echo \$\$ >"$work/pids/rank\$OMPI_COMM_WORLD_RANK.pid"
mkdir -p "$work/off/\$(hostname)"
exec "$ZZ" "\$@" --offload-dir "$work/off/\$(hostname)"
EOF
chmod +x "$work/rank.sh"

# prompts: text and input_ids of several lengths
for i in $(seq 0 ${NPROMPTS:-199}); do
  if [ $((i % 3)) -eq 0 ]; then
    ids=2; for j in $(seq 1 $((1 + i % 11))); do ids="$ids, $(((i * 37 + j * 11) % 1000 + 4))"; done
    echo "{\"id\": $i, \"input_ids\": [$ids]}"
  else
    echo "{\"id\": \"p$i\", \"prompt\": \"Liberty and all men $i are created equal\"}"
  fi
done >"$work/prompts.jsonl"
head -n 24 "$work/prompts.jsonl" >"$work/few.jsonl"

launch() { local np=$1; shift; netns_launch "$np" "$work/rank.sh" "$@"; }

GEN=(generate --model "$FX/tiny-opt" --gpu-batch-size 2 --num-gpu-batches 2 --max-new-tokens 8)
for pol in "0 0 0 0 0 0" "40 30 30 50 0 50"; do
  read -ra P <<<"$pol"
  timeout 60 "$ZZ" "${GEN[@]}" --percent "${P[@]}" --offload-dir "$work" --prompts "$work/few.jsonl" \
    --out "$work/one.jsonl" </dev/null 2>"$work/err" || { bad "one process failed"; cat "$work/err"; continue; }
  for np in 2 3; do
    launch "$np" "${GEN[@]}" --percent "${P[@]}" --prompts "$work/few.jsonl" --out "$work/m.jsonl" \
      --num-inner-iterations $((np + 1)) >"$work/run.log" 2>&1
    rc=$?
    used=$(ls "$work/off" 2>/dev/null | tr '\n' ' ')
    if [ "$rc" = 0 ] && cmp -s "$work/one.jsonl" "$work/m.jsonl"; then
      ok "$np hosts, --percent $pol: the one-process bytes (offload dirs of: $used)"
    else
      bad "$np hosts, --percent $pol: rc $rc or the output differs"; cat "$work/run.log"; rank_out 0
    fi
    [ "$(echo "$used" | wc -w)" -ge "$np" ] || bad "$np hosts: not every host used its own offload directory ($used)"
    for ((r = 0; r < np; r++)); do
      rank_out "$r" | grep -q "^zigzag: rank $r (host h$r): bound to" || bad "$np hosts: rank $r is not on host h$r"
    done
    rm -rf "$work/off"
  done
done

# the cut: a job of many blocks (T = 3 groups of gbs x num_gb = 4 prompts); h1 goes
# away once the first block is committed
CUT=("${GEN[@]}" --percent 0 0 0 0 0 0 --max-new-tokens 16 --prompts "$work/prompts.jsonl" --out "$work/c.jsonl")
timeout 120 "$ZZ" "${CUT[@]}" --offload-dir "$work" --out "$work/full.jsonl" </dev/null 2>"$work/err" ||
  { bad "the uninterrupted run failed"; cat "$work/err"; }
rm -f "$work/c.jsonl"
launch 3 "${CUT[@]}" --peer-timeout 2 >"$work/run.log" 2>&1 &
mpipid=$!
for ((i = 0; i < 600; i++)); do [ -s "$work/c.jsonl" ] && break; sleep 0.05; done
[ -s "$work/c.jsonl" ] || bad "cut: no block was committed within 30 s"
netns_cut_h1
lines=$(wc -l <"$work/c.jsonl")
total=$(wc -l <"$work/full.jsonl")
if [ "$lines" -ge 1 ] && [ "$lines" -lt "$total" ] && [ -z "$(tail -c 1 "$work/c.jsonl")" ] &&
   cmp -s "$work/c.jsonl" <(head -n "$lines" "$work/full.jsonl"); then
  ok "cut: $lines of $total lines written, whole and the full run's first"
else bad "cut: $lines of $total lines, not whole lines of the full run"; fi
timeout 120 "$ZZ" "${CUT[@]}" --offload-dir "$work" --resume </dev/null 2>"$work/err"
rc=$?
{ [ "$rc" = 0 ] && cmp -s "$work/c.jsonl" "$work/full.jsonl"; } && ok "cut: --resume completes it to the uninterrupted bytes" ||
  { bad "cut: --resume rc $rc or the output differs"; cat "$work/err"; }
[ "$fail" = 0 ] || { cat "$work/run.log"; for r in 0 1 2; do rank_out $r; done; }
[ "$fail" = 0 ] && echo "PASS: pipe netns"
exit "$fail"
