#!/usr/bin/env bash
# test_stage_netns.sh MOCK MPIEXEC — the pipeline over real (namespaced) hosts.
# Each rank runs as its own host (network + UTS namespace, netns_cluster.sh) and talks
# TCP over a bridge: 2 and 3 hosts must give the single-process tokens; then, with 3
# hosts mid-run, h1's link is cut: every rank must exit within 10 s of the cut, the
# ranks on h0 and h2 naming rank 1 (host h1), rank 1 naming a peer it lost. The
# launcher cannot help here (its daemon on h1 is unreachable too): only the heartbeats
# can see it. Exits 77 (skipped) when not root or namespaces cannot be made. The
# namespaces and every process left in them are removed on any exit.
set -u
MOCK=$1
MPIEXEC=$2
source "$(cd "$(dirname "$0")" && pwd)/netns_lib.sh"
netns_setup "zt$$"
launch() { local np=$1; shift; netns_launch "$np" "$MOCK" --no-bind --piddir "$work/pids" "$@"; }

for np in 2 3; do
  launch "$np" --groups $((np + 1)) --seqs 8 >"$work/run.log" 2>&1
  rc=$?
  if [ "$rc" = 0 ] && rank_out 0 | grep -q "tokens equal the single-process run: $np ranks"; then
    rank_out 0 | grep '^mock: tokens'
  else
    bad "$np hosts: rc $rc"; cat "$work/run.log"; rank_out 0
  fi
done

# the cut: long enough a run that h1 goes away in the middle of it
launch 3 --groups 3 --seqs 6 --blocks 4 --max-new 40 --step-ms 20 --peer-timeout 2 \
  --mark "$work/mark" >"$work/run.log" 2>&1 &
mpipid=$!
for ((i = 0; i < 300; i++)); do [ -f "$work/mark" ] && break; sleep 0.05; done
[ -f "$work/mark" ] || bad "cut: the run never reached step 2"
netns_cut_h1
[ "$fail" = 0 ] || { cat "$work/run.log"; for r in 0 1 2; do rank_out $r; done; }
[ "$fail" = 0 ] && echo "PASS: netns"
exit "$fail"
