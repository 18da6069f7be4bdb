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
# leak checking off for the ranks under AddressSanitizer: see test_stage_mpi.sh
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
here=$(cd "$(dirname "$0")" && pwd)
cluster="$here/netns_cluster.sh"
export ZZ_NETNS_PREFIX="zt$$"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
work=$(mktemp -d /tmp/zz_stage_netns.XXXXXX)
fail=0
mpipid=""

cleanup() {
  [ -n "$mpipid" ] && kill "$mpipid" 2>/dev/null
  "$cluster" down >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root for network namespaces"; exit 77; fi
for t in ip unshare bc; do
  command -v "$t" >/dev/null || { echo "SKIP: $t not found"; exit 77; }
done
if ! "$cluster" up 3 >"$work/up.log" 2>&1; then
  echo "SKIP: cannot make network namespaces:"; cat "$work/up.log"; exit 77
fi
bad() { echo "FAIL: $*"; fail=1; }

# mpirun on h0 for the first NP hosts; output of each rank in $work/out/1/rank.R/
launch() {
  local np=$1; shift
  local hosts="" i
  for ((i = 0; i < np; i++)); do hosts="$hosts${hosts:+,}h$i:1"; done
  rm -rf "$work/out" "$work/pids"; mkdir -p "$work/pids"
  timeout -k 5 60 "$cluster" agent h0 "$MPIEXEC" --host "$hosts" -np "$np" \
    --mca plm_rsh_agent "'$cluster agent'" --mca pml ob1 --mca btl self,tcp \
    --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
    -x ASAN_OPTIONS --output-filename "$work/out" "$MOCK" --no-bind --piddir "$work/pids" "$@"
}
rank_out() { cat "$work/out/1/rank.$1/stdout" "$work/out/1/rank.$1/stderr" 2>/dev/null; }
alive() { # ranks whose process still runs
  local left="" f p st r
  for f in "$work"/pids/rank*.pid; do
    [ -f "$f" ] || continue
    r=${f##*/rank}; r=${r%.pid}; p=$(cat "$f")
    st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)
    [ -n "$st" ] && [ "$st" != Z ] && left="$left $r"
  done
  echo "$left"
}

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
"$cluster" cut h1
t_cut=$(date +%s.%N)
for ((i = 0; i < 300; i++)); do [ -z "$(alive)" ] && break; sleep 0.05; done
t_end=$(date +%s.%N)
took=$(echo "$t_end - $t_cut" | bc)
left=$(alive)
echo "cut: every rank gone $took s after h1's link went down${left:+ (still running:$left)}"
[ -z "$left" ] && [ "$(echo "$took < 10" | bc)" = 1 ] || bad "cut: ranks still running after $took s:$left"
for r in 0 2; do
  rank_out $r | grep '^zigzag: rank' || true
  rank_out $r | grep -q "^zigzag: rank $r (host h$r): .*rank 1 (host h1)" || bad "cut: rank $r did not name rank 1 (host h1)"
done
rank_out 1 | grep '^zigzag: rank' || true
rank_out 1 | grep -Eq "^zigzag: rank 1 \(host h1\): .*rank [02] \(host h[02]\)" || bad "cut: rank 1 did not name a lost peer"
[ "$fail" = 0 ] || { cat "$work/run.log"; for r in 0 1 2; do rank_out $r; done; }
[ "$fail" = 0 ] && echo "PASS: netns"
exit "$fail"
