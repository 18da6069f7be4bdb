#!/usr/bin/env bash
# test_stage_netns_slow.sh MOCK MPIEXEC — a slow live link is not a lost peer (issue #21
# item 14). Two namespaced hosts; h1's link both ways through tc tbf at 256 kbit/s (32 kB/s),
# so a hidden state (rows of 32 kB) takes seconds on the wire while the peer timeout is 1 s. Every
# rank is alive: the run must end with the single-process tokens and nobody taken for
# lost. Heartbeats sent over MPI queue behind the hidden states on the same TCP
# connection; they must get through on their own channel (stage/faults.c). The shaped
# traffic lasts a few seconds. Exits 77 (skipped) without root, namespaces or tc.
set -u
MOCK=$1
MPIEXEC=$2
source "$(cd "$(dirname "$0")" && pwd)/netns_lib.sh"
command -v tc >/dev/null || { echo "SKIP: tc not found"; exit 77; }
netns_setup "zs$$"
if ! "$cluster" shape h1 256kbit >"$work/shape.log" 2>&1; then
  echo "SKIP: cannot shape a link with tc tbf:"; cat "$work/shape.log"; exit 77
fi
t0=$(date +%s.%N)
# 2 groups of 1 sequence, 2 new tokens: rows of 8192 uint32 (32 kB, 1 s on the link)
netns_launch 2 "$MOCK" --no-bind --piddir "$work/pids" --groups 2 --seqs 2 --blocks 1 \
  --max-new 2 --hidden 8192 --peer-timeout 1 >"$work/run.log" 2>&1
rc=$?
took=$(calc "$(date +%s.%N) - $t0")
echo "slow link: 2 ranks over 256 kbit/s, peer timeout 1 s: rc $rc after $took s"
rank_out 0 | grep '^mock: tokens' || bad "slow link: tokens not equal (rc $rc)"
if rank_out 0 | grep -q '^zigzag: ' || rank_out 1 | grep -q '^zigzag: '; then
  bad "slow link: a live peer was taken for lost"
  rank_out 0 | grep '^zigzag: '; rank_out 1 | grep '^zigzag: '
fi
# the link must really have been slower than the peer timeout, or this proves nothing
[ "$(calc "$took > 3")" = 1 ] || bad "slow link: the run took only $took s: the shaping did not bite"
[ "$fail" = 0 ] || { cat "$work/run.log"; rank_out 0; rank_out 1; }
[ "$fail" = 0 ] && echo "PASS: slow link"
exit "$fail"
