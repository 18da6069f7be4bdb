#!/usr/bin/env bash
# test_stage_mpi.sh MOCK MPIEXEC SCENARIO — the pipeline stage under mpirun on one machine.
#   tokens          -np 1..4, T = m and T > m (and large hidden states): tokens equal the
#                   single-process run of the mock
#   error           rank 2's compute fails: it prints the cause, every other rank prints
#                   "stopping: rank 2 (host H) reported: ...", all end within 10 s, non-zero
#   kill            rank 2 is SIGKILLed under plain mpirun: the launcher ends the job
#                   (it names the rank), every rank gone within 10 s, non-zero
#   kill-heartbeat  the same with orte_enable_recovery (the launcher leaves the survivors
#                   alone, as srun does): the heartbeats find it, every survivor names rank 2
#   stop            rank 2 is SIGSTOPped: every other rank names it within 10 s, non-zero
#   init-stop       rank 2 is SIGSTOPped before MPI_Init_thread: every other rank says
#                   rank 2 never arrived within the peer timeout, all end, non-zero
#   init-late       the same with rank 3 starting 3 s late (a loaded machine, where a
#                   rank's start can take seconds): rank 3 is starting, not missing, so
#                   a rank names rank 2 alone
#   launcher-kill   mpirun is SIGKILLed mid-run: every rank says its launcher is gone and
#                   ends within 10 s, no vader segment of the job left in /dev/shm
#   slow            rank 2 spends 5 s in one step with a 2.5 s peer timeout (margin for a loaded machine): not lost, tokens ok
# The liveness bound is generous on purpose (10 s after the fault with a 2 s peer
# timeout); it is not a speed claim.
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/calc.sh"
set -u
MOCK=$1
MPIEXEC=$2
SCENARIO=$3
# Under AddressSanitizer (the CI's sanitizer build) leak checking is off for the
# ranks: Open MPI's plugins leak at exit and are unloaded before LeakSanitizer
# reports, so no suppression can name them. Memory errors are still caught.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
FLAGS=(--allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader,tcp
       --mca btl_tcp_if_include lo -x ASAN_OPTIONS)
export OPENBLAS_NUM_THREADS=1
work=$(mktemp -d /tmp/zz_stage_test.XXXXXX)
trap 'cleanup; rm -rf "$work"' EXIT
fail=0

cleanup() { # no rank may outlive its test; a stopped one is ended here
  for f in "$work"/pids/rank*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    if [ -d "/proc/$p" ] && [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ]; then
      kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null
    fi
  done
}

bad() { echo "FAIL: $*"; fail=1; }

# run NP ARGS...: runs the mock; sets rc, out, and end: when every rank but $EXCEPT
# had ended (mpirun itself may linger after that)
run() {
  local np=$1; shift
  rm -rf "$work/pids"; mkdir -p "$work/pids"
  timeout -k 5 60 "$MPIEXEC" "${FLAGS[@]}" "${EXTRA[@]}" -np "$np" "${PRE[@]}" "$MOCK" --piddir "$work/pids" "$@" \
    >"$work/out" 2>&1 &
  local mp=$!
  end=""
  while kill -0 "$mp" 2>/dev/null; do
    if [ -z "$end" ] && [ "$(ls "$work/pids" | wc -l)" = "$np" ] && [ -z "$(alive_ranks "$EXCEPT")" ]; then
      end=$(date +%s.%N)
    fi
    sleep 0.05
  done
  wait "$mp"
  rc=$?
  [ -n "$end" ] || end=$(date +%s.%N)
  out=$(cat "$work/out")
}

# alive_ranks [except R]: ranks whose process still runs (zombies count as gone)
alive_ranks() {
  local left="" r p st
  for f in "$work"/pids/rank*.pid; do
    [ -f "$f" ] || continue
    r=${f##*/rank}; r=${r%.pid}
    [ "$r" = "${1:-x}" ] && continue
    p=$(cat "$f")
    st=$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)
    [ -n "$st" ] && [ "$st" != Z ] && left="$left $r"
  done
  echo "$left"
}

# after a fault on rank 2: the survivors' lines, the time from the fault to the end
check_fault() {
  local name=$1 want=$2 np=$3
  local ft since
  ft=$(grep -o 'fault [a-z-]* at step [0-9]*, time [0-9.]*' <<<"$out" | awk '{print $NF}')
  [ -n "$ft" ] || { bad "$name: the fault was never injected"; echo "$out"; return; }
  since=$(calc "$end - $ft")
  echo "$name: mpirun rc $rc, every other rank ended $since s after the fault"
  [ "$(calc "$since < 10")" = 1 ] || bad "$name: took $since s after the fault (bound 10 s)"
  local r
  for ((r = 0; r < np; r++)); do
    [ "$r" = 2 ] && continue
    local n
    n=$(grep -c "^zigzag: rank $r (host [^)]*): " <<<"$out")
    [ "$n" -le 1 ] || bad "$name: rank $r printed $n lines"
    if [ "$want" = heartbeat ]; then
      grep -q "^zigzag: rank $r (host [^)]*): .*rank 2 (host " <<<"$out" ||
        bad "$name: rank $r did not name rank 2"
    fi
  done
  grep '^zigzag: rank' <<<"$out"
  sleep 0.5
  local left
  left=$(alive_ranks 2)
  [ -z "$left" ] || bad "$name: ranks still running:$left"
  [ "$fail" = 0 ] || echo "$out"
}

EXTRA=()
PRE=() # what starts the mock (a wrapper that delays one rank)
EXCEPT=2 # the rank a fault is injected into
case "$SCENARIO" in
tokens)
  for np in 1 2 3 4; do
    for T in $np $((np + 3)); do
      run "$np" --groups "$T" --seqs 8 --blocks 2 --max-new 10 --no-bind
      [ "$rc" = 0 ] && grep -q "tokens equal the single-process run: $np ranks, $T groups" <<<"$out" ||
        { bad "np $np T $T: rc $rc"; echo "$out"; }
      grep '^mock: tokens' <<<"$out"
    done
  done
  # hidden states above the eager limit (rendezvous), bound ranks (one line each)
  run 4 --groups 5 --seqs 11 --hidden 4096
  [ "$rc" = 0 ] && grep -q "tokens equal" <<<"$out" || { bad "large hidden: rc $rc"; echo "$out"; }
  [ "$(grep -c '^zigzag: rank [0-3] (host [^)]*): bound to cores' <<<"$out")" = 4 ] ||
    { bad "expected one binding line per rank"; echo "$out"; }
  grep -E '^(mock|zigzag)' <<<"$out"
  ;;
error)
  run 4 --groups 4 --step-ms 20 --no-bind --fault error --fault-rank 2 --peer-timeout 2
  [ "$rc" != 0 ] || bad "error: mpirun returned 0"
  [ "$(grep -c '^zigzag: rank 2 (host [^)]*): compute failed at block 0 step [0-9]* group [0-9]*: mock compute failed (injected fault)$' <<<"$out")" = 1 ] ||
    bad "error: rank 2 did not print its cause once"
  for r in 0 1 3; do
    grep -q "^zigzag: rank $r (host [^)]*): stopping: rank 2 (host [^)]*) reported: compute failed" <<<"$out" ||
      bad "error: rank $r did not print the stopping line"
  done
  check_fault error lines 4
  ;;
kill)
  run 4 --groups 4 --step-ms 20 --no-bind --fault kill --fault-rank 2 --peer-timeout 2
  [ "$rc" != 0 ] || bad "kill: mpirun returned 0"
  grep -Eq 'process rank 2 |rank 2 \(host ' <<<"$out" || bad "kill: nobody named rank 2"
  check_fault kill lines 4
  ;;
kill-heartbeat)
  EXTRA=(--mca orte_enable_recovery 1)
  run 4 --groups 4 --step-ms 20 --no-bind --fault kill --fault-rank 2 --peer-timeout 2
  check_fault kill-heartbeat heartbeat 4
  ;;
stop)
  run 4 --groups 4 --step-ms 20 --no-bind --fault stop --fault-rank 2 --peer-timeout 2
  [ "$rc" != 0 ] || bad "stop: mpirun returned 0"
  check_fault stop heartbeat 4
  ;;
init-stop | init-late)
  # rank 2 stops before MPI_Init_thread: the others' init watchdogs name it within the
  # peer timeout and exit non-zero, which ends the job. init-late: rank 3 sleeps 3 s
  # before its exec (the same process, running, its rank in its environment), longer
  # than the peer timeout: it must not be named with rank 2 ("ranks 2, 3 never arrived")
  [ "$SCENARIO" = init-late ] && PRE=(sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 3 ]; then sleep 3; fi; exec "$0" "$@"')
  run 4 --groups 4 --no-bind --fault init-stop --fault-rank 2 --peer-timeout 2
  [ "$rc" != 0 ] || bad "$SCENARIO: mpirun returned 0"
  # the first watchdog to fire ends the job: the launcher may cut the others off
  grep -q "^zigzag: rank [013] (host [^)]*): MPI_Init_thread did not complete within 2.0 s: rank 2 never arrived" <<<"$out" ||
    bad "$SCENARIO: no rank named rank 2"
  check_fault "$SCENARIO" lines 4
  # nothing left of the arrival directory of this job (Open MPI's job id is family <<
  # 16 | 1, as mpirun's "Process name: [[family,1],rank]" shows it): not in the job
  # family's session directory under Open MPI's tmpdir, which mpirun removes with
  # the job, nor in /dev/shm, where other launchers keep it
  fam=$(grep -o 'Process name: \[\[[0-9]*,1\]' <<<"$out" | head -1 | grep -o '[0-9]*,' | tr -d ,)
  if [ -n "$fam" ]; then
    job=$((fam * 65536 + 1))
    ls -d "/dev/shm/zigzag-init.$(id -u).$job" "${TMPDIR:-/tmp}"/ompi.*/pid.*/zigzag-init."$job" 2>/dev/null &&
      bad "$SCENARIO: its arrival directory is left behind"
  else
    bad "$SCENARIO: no Open MPI process name in the output, so the arrival directory could not be checked"
  fi
  ;;
launcher-kill)
  # mpirun is SIGKILLed mid-run: every rank notices its launcher is gone, says so (on
  # stderr if it still can, and in $TMPDIR/zigzag-job<id>-rank<R>.log) and ends; the
  # job's shared-memory segments in /dev/shm go with them
  rm -rf "$work/pids"; mkdir -p "$work/pids"
  export TMPDIR="$work"
  timeout -k 5 60 "$MPIEXEC" "${FLAGS[@]}" -np 3 "$MOCK" --piddir "$work/pids" --no-bind --groups 3 --seqs 6 \
    --blocks 4 --max-new 40 --step-ms 20 --peer-timeout 2 --mark "$work/mark" >"$work/out" 2>&1 &
  tp=$!
  for ((i = 0; i < 400; i++)); do [ -f "$work/mark" ] && break; sleep 0.05; done
  [ -f "$work/mark" ] || bad "launcher-kill: the run never reached step 2"
  job=$(tr '\0' '\n' <"/proc/$(cat "$work/pids/rank0.pid")/environ" | sed -n 's/^OMPI_MCA_ess_base_jobid=//p')
  kill -KILL "$(pgrep -P "$tp")"
  t_kill=$(date +%s.%N)
  for ((i = 0; i < 200; i++)); do [ -z "$(alive_ranks)" ] && break; sleep 0.05; done
  took=$(calc "$(date +%s.%N) - $t_kill")
  wait "$tp"
  left=$(alive_ranks)
  echo "launcher-kill: every rank gone $took s after mpirun was killed${left:+ (still running:$left)}"
  [ -z "$left" ] || bad "launcher-kill: ranks still running:$left"
  for r in 0 1 2; do
    line=$(cat "$work/out" "$work/zigzag-job$job-rank$r.log" 2>/dev/null | grep "^zigzag: rank $r (host [^)]*): .*launcher is gone")
    [ -n "$line" ] && echo "$line" || bad "launcher-kill: rank $r did not say why it stopped"
  done
  seg=$(ls /dev/shm | grep "^vader_segment\..*\.$(id -u)\.$(printf %x "${job:-0}")\.")
  [ -z "$seg" ] || bad "launcher-kill: left in /dev/shm: $seg"
  [ -n "$job" ] || bad "launcher-kill: no job id"
  [ "$fail" = 0 ] || { cat "$work/out"; cat "$work"/zigzag-job*.log; }
  ;;
slow)
  run 4 --groups 4 --step-ms 5 --no-bind --fault slow --slow-s 5 --fault-rank 2 --peer-timeout 2.5
  [ "$rc" = 0 ] && grep -q "tokens equal" <<<"$out" || bad "slow: rc $rc"
  grep -q 'lost rank' <<<"$out" && bad "slow: a busy rank was taken for lost"
  grep -E '^mock: (tokens|rank 2)' <<<"$out"
  [ "$fail" = 0 ] || echo "$out"
  ;;
*) echo "unknown scenario $SCENARIO"; exit 2 ;;
esac
[ "$fail" = 0 ] && echo "PASS: $SCENARIO"
exit "$fail"
