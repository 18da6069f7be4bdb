# netns_lib.sh — sourced by test_stage_netns.sh and test_pipe_netns.sh: ranks as separate
# hosts (network + UTS namespaces made by netns_cluster.sh), their launch and their fate.
#   netns_setup PREFIX   root check, the cluster of 3 hosts up (exit 77, skipped, when it
#                        cannot be made), $work a scratch directory, everything removed
#                        on exit (namespaces, processes left in them, $work)
#   netns_launch NP PROGRAM ARGS...   mpirun on h0 for hosts h0..h{NP-1} over TCP; rank
#                        R's output in $work/out/1/rank.R/ (rank_out R); PROGRAM must
#                        write its pid to $work/pids/rankR.pid (alive lists those running)
# Expects MPIEXEC; sets cluster, work, fail, mpipid (a background launch the exit trap
# ends); defines bad.
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/calc.sh"
cluster="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/netns_cluster.sh"
# leak checking off for the ranks under AddressSanitizer: see test_stage_mpi.sh
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
fail=0
mpipid=""
work=""

netns_cleanup() {
  [ -n "$mpipid" ] && kill "$mpipid" 2>/dev/null
  "$cluster" down >/dev/null 2>&1
  [ -n "$work" ] && rm -rf "$work"
}

netns_setup() {
  export ZZ_NETNS_PREFIX="$1"
  work=$(mktemp -d /tmp/zz_netns.XXXXXX)
  trap netns_cleanup EXIT
  trap 'exit 1' INT TERM
  if [ "$(id -u)" != 0 ]; then echo "SKIP: needs root for network namespaces"; exit 77; fi
  for t in ip unshare; do
    command -v "$t" >/dev/null || { echo "SKIP: $t not found"; exit 77; }
  done
  if ! "$cluster" up 3 >"$work/up.log" 2>&1; then
    echo "SKIP: cannot make network namespaces:"; cat "$work/up.log"; exit 77
  fi
}

bad() { echo "FAIL: $*"; fail=1; }

netns_launch() {
  local np=$1; shift
  local hosts="" i
  for ((i = 0; i < np; i++)); do hosts="$hosts${hosts:+,}h$i:1"; done
  rm -rf "$work/out" "$work/pids"; mkdir -p "$work/pids"
  timeout -k 5 120 "$cluster" agent h0 "$MPIEXEC" --host "$hosts" -np "$np" \
    --mca plm_rsh_agent "'$cluster agent'" --mca pml ob1 --mca btl self,tcp \
    --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
    -x ASAN_OPTIONS -x OPENBLAS_NUM_THREADS --output-filename "$work/out" "$@"
}
rank_out() { cat "$work/out/1/rank.$1/stdout" "$work/out/1/rank.$1/stderr" 2>/dev/null; }
# ranks whose process still runs. A zombie counts as gone once its last thread has
# ended: the leader turns Z first while other threads (one in an O_DIRECT read, say)
# still hold its files, the --out lock among them.
alive() {
  local left="" f p st r
  for f in "$work"/pids/rank*.pid; do
    [ -f "$f" ] || continue
    r=${f##*/rank}; r=${r%.pid}; p=$(cat "$f")
    st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)
    if [ -n "$st" ] && { [ "$st" != Z ] || [ "$(ls "/proc/$p/task" 2>/dev/null | wc -l)" -gt 1 ]; }; then left="$left $r"; fi
  done
  echo "$left"
}

# processes still running in the hosts' namespaces (zombies count as gone): "pid:name ..."
netns_left() {
  local i p st out=""
  for ((i = 0; i < 3; i++)); do
    for p in $(ip netns pids "$ZZ_NETNS_PREFIX$i" 2>/dev/null); do
      st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)
      [ -n "$st" ] && [ "$st" != Z ] && out="$out $p:$(cat "/proc/$p/comm" 2>/dev/null)"
    done
  done
  echo "$out"
}

# netns_cut_h1: with a 3-host launch running in the background ($mpipid), takes h1's
# link down; every rank must be gone within 10 s, ranks 0 and 2 naming rank 1 (host h1)
# and rank 1 naming a peer it lost; then mpirun and every daemon gone within 10 s of the
# cut too (mpirun's status means nothing: it was ended by rank 0).
netns_cut_h1() {
  local i t_cut t_end took left r
  "$cluster" cut h1
  t_cut=$(date +%s.%N)
  for ((i = 0; i < 300; i++)); do [ -z "$(alive)" ] && break; sleep 0.05; done
  t_end=$(date +%s.%N)
  took=$(calc "$t_end - $t_cut")
  left=$(alive)
  echo "cut: every rank gone $took s after h1's link went down${left:+ (still running:$left)}"
  { [ -z "$left" ] && [ "$(calc "$took < 10")" = 1 ]; } || bad "cut: ranks still running after $took s:$left"
  # nothing of the job may stay: mpirun (ended by rank 0, which lost a host; it would
  # wait for h1's unreachable daemon until TCP gives up) and every orted (h1's ended by
  # rank 1, cut off from every peer; the others by mpirun)
  local stay=""
  while :; do
    stay=$(netns_left)
    [ -z "$stay" ] && ! kill -0 "$mpipid" 2>/dev/null && break
    [ "$(calc "$(date +%s.%N) - $t_cut > 10")" = 1 ] && break
    sleep 0.05
  done
  took=$(calc "$(date +%s.%N) - $t_cut")
  if kill -0 "$mpipid" 2>/dev/null; then
    bad "cut: mpirun still up $took s after the cut"
    kill -TERM "$mpipid" 2>/dev/null
  else
    echo "cut: mpirun and every daemon gone $took s after the cut"
  fi
  [ -z "$stay" ] || bad "cut: left running after $took s:$stay"
  wait "$mpipid"
  mpipid=""
  for r in 0 2; do
    rank_out $r | grep '^zigzag: rank [0-9] (host h[0-9]): [^b]' || true
    rank_out $r | grep -q "^zigzag: rank $r (host h$r): .*rank 1 (host h1)" || bad "cut: rank $r did not name rank 1 (host h1)"
  done
  rank_out 1 | grep '^zigzag: rank [0-9] (host h[0-9]): [^b]' || true
  rank_out 1 | grep -Eq "^zigzag: rank 1 \(host h1\): .*rank [02] \(host h[02]\)" || bad "cut: rank 1 did not name a lost peer"
}
