#!/usr/bin/env bash
# test_pipe.sh ZIGZAG MPIEXEC FIXTURES SCENARIO — `mpirun -np m zigzag generate|bench`
# on the golden fixtures, against the one-process run of the same command.
#   tokens   tiny-opt (3 transformer layers), tiny-opt-postln (2), tiny-llama (2, GQA;
#            token-id prompts, it has no tokenizer), tiny-mistral (a sliding window of 5),
#            tiny-qwen2 (q/k/v biases, a window on layer 1), tiny-mixtral (2, MoE),
#            tiny-qwen3-moe and tiny-qwen2-moe (3, a dense MLP layer between MoE ones):
#            -np 1, 2, 3, 4 with
#            T = m and T = m + 2 give byte-identical output files to one process, for
#            weights/cache/activations on the device, on the CPU (CPU attention) and on
#            disk (--offload-dir, one file per rank), and sampled (--temperature 100
#            --seed 5: two sequences end at EOS early; --top-k); --layers given by hand
#   lines    lines with their own settings (sampling, penalties, n, max tokens above
#            --max-new-tokens, stop strings, logprobs): -np 2 (T = 2, 4) and -np 3 give
#            one process's bytes, two policies; refill (lines ending at different
#            lengths): -np 2 and 3, with continuation blocks, one process's bytes with
#            refill on and a refilled count > 0; rank 2 killed mid-refill: all gone,
#            whole lines, --resume completes them
#   fault    rank 2 of 3 SIGKILLs itself in block 2 (ZZ_FAULT_KILL_RANK): every rank
#            gone within 10 s, non-zero, the output holds whole lines only (the first
#            blocks of the full run); --resume with -np 3, -np 2 and one process
#            completes it to the uninterrupted run's bytes
#   stop     the same with rank 2 SIGSTOPped (ZZ_FAULT_KIND=stop): ranks 0 and 1 name it
#            (lost, silent: the heartbeats), all gone within 10 s; --resume with -np 2
#   error    the same with rank 2's step failing (ZZ_FAULT_KIND=error): rank 2 prints
#            the cause once, ranks 0 and 1 `stopping: rank 2 (host H) reported: ...`;
#            --resume with -np 3
#   init-stop rank 2 of 3 SIGSTOPped as it starts, before MPI_Init_thread: a rank names
#            it (the init watchdog), all gone within 10 s, non-zero, --out untouched
#   refuse   one rank's slice does not fit (ZZ_GPU_MEM=64K on rank 1 alone, through
#            mpirun's MPMD form): every rank exits non-zero within 10 s, each naming
#            rank 1 and the tier, --out untouched; rank 0 cannot read --prompts: all
#            stop naming rank 0; --comm nccl on CPU ranks and an unknown --comm: refused;
#            a bad --layers: all refuse it (exit 2)
#   bench    bench -np 2 --json: the pipeline's throughput and one entry per rank
#   plan     --hw FILE (a hand-made CPU machine) and no policy: -np 2 generate and bench
#            print the split and each rank's policy that `zigzag plan --ranks 2 --hw
#            FILE` prints for the same shape, each rank's engine runs its own line,
#            and generate's tokens are one process's (run with that --hw file too)
#   nccl     --comm nccl on GPUs (skipped, 77, with the reason: built without NCCL, or
#            no GPU visible; with one GPU only the first check runs, then 77): two ranks
#            on one GPU (--device auto puts every rank of a machine on GPU 0) refused
#            by both before anything loads, --out untouched; with G >= 2 GPUs, -np 2 ..
#            min(G, 4) (--device cuda: one GPU per local rank), T = m and m + 2, three
#            policies: the bytes of one process on GPU 0 and of --comm mpi; rank 1 of 2
#            SIGSTOPped in block 2 under NCCL: rank 0 names it, all gone within 10 s
# Each zigzag is wrapped in timeout; ranks write their pid so the fault checks can
# see that none outlives the job.
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/calc.sh"
set -u
ZZ=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
MPIEXEC=$2
FX=$(cd "$3" && pwd)
SCENARIO=$4
# leak checking off for the ranks under AddressSanitizer: see test_stage_mpi.sh
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
FLAGS=(--allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader,tcp
       --mca btl_tcp_if_include lo -x ASAN_OPTIONS)
export OPENBLAS_NUM_THREADS=1
for v in $(env | sed -n 's/^\(ZZ_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
W=$(mktemp -d /tmp/zz_pipe_test.XXXXXX)
# no rank may outlive the test: one left running (a stopped one too) is ended here
reap() {
  for f in "$W"/pids/rank*.pid; do
    [ -f "$f" ] || continue
    local p; p=$(cat "$f")
    [ -d "/proc/$p" ] && { kill -CONT "$p"; kill -KILL "$p"; } 2>/dev/null
  done
}
trap 'reap; rm -rf "$W"' EXIT
cd "$W" || exit 2
fail=0
bad() { echo "FAIL: $*"; [ -s err ] && sed -e 's/^/#   /' err | grep -v "bound to\|no usable GPU\|no GPU found\|using the CPU device" | head -n 12; fail=1; }
ok() { echo "ok - $*"; }

# 40 prompts: text and input_ids (input_ids of several lengths)
for i in $(seq 0 39); do
  if [ $((i % 3)) -eq 0 ]; then
    ids=2; for j in $(seq 1 $((1 + i % 11))); do ids="$ids, $(((i * 37 + j * 11) % 1000 + 4))"; done
    echo "{\"id\": $i, \"input_ids\": [$ids]}"
  else
    echo "{\"id\": \"p$i\", \"prompt\": \"Liberty and all men $i are created equal\"}"
  fi
done >prompts.jsonl
# the same shape as token ids only, BOS 1 (tiny-llama: vocabulary 256, no tokenizer files)
for i in $(seq 0 39); do
  ids=1; for j in $(seq 1 $((1 + i % 11))); do ids="$ids, $(((i * 37 + j * 11) % 240 + 4))"; done
  echo "{\"id\": $i, \"input_ids\": [$ids]}"
done >ids.jsonl

# one NP ARGS...: the job under mpirun with NP ranks (pids in pids/), sets rc and secs
mpi() {
  local np=$1; shift
  rm -rf pids; mkdir -p pids
  t0=$(date +%s.%N)
  timeout -k 5 60 "$MPIEXEC" "${FLAGS[@]}" -np "$np" \
    sh -c 'echo $$ >pids/rank$OMPI_COMM_WORLD_RANK.pid; exec "$@"' zz "$ZZ" "$@" </dev/null >outp 2>err
  rc=$?
  secs=$(calc "$(date +%s.%N) - $t0")
}
# every rank that wrote a pid has ended (a zombie counts once its last thread has
# ended: until then the other threads still hold its files, the --out lock among them)
none_alive() {
  for f in pids/rank*.pid; do
    [ -f "$f" ] || continue
    local p; p=$(cat "$f")
    if [ -d "/proc/$p" ] && { [ "$(awk '{print $3}' "/proc/$p/stat" 2>/dev/null)" != Z ] ||
                              [ "$(ls "/proc/$p/task" 2>/dev/null | wc -l)" -gt 1 ]; }; then return 1; fi
  done
  return 0
}
within() { [ "$(calc "$secs < $1")" = 1 ]; }
# all_gone LIMIT: true when every rank has ended by LIMIT seconds after the job started;
# sets secs to when that was seen. mpirun may return while the ranks it is killing are
# still exiting, so this waits for them instead of sampling /proc once.
all_gone() {
  while :; do
    secs=$(calc "$(date +%s.%N) - $t0")
    none_alive && return 0
    within "$1" || return 1
    sleep 0.1
  done
}

GEN=(generate --prompts prompts.jsonl --gpu-batch-size 2 --num-gpu-batches 2)

case $SCENARIO in
tokens)
  for model in tiny-opt tiny-opt-postln tiny-llama tiny-mistral tiny-qwen2 tiny-mixtral tiny-qwen3-moe tiny-qwen2-moe; do
    prompts=prompts.jsonl
    [ -f "$FX/$model/vocab.json" ] || prompts=ids.jsonl
    while IFS='|' read -r name pol; do
      [ -n "$name" ] || continue
      read -ra P <<<"$pol"
      args=("${GEN[@]/prompts.jsonl/$prompts}" --model "$FX/$model" "${P[@]}")
      timeout 60 "$ZZ" "${args[@]}" --out one.jsonl </dev/null 2>err || { bad "$model $name: one process failed"; continue; }
      mpi 1 "${args[@]}" --out m.jsonl
      { [ "$rc" = 0 ] && cmp -s one.jsonl m.jsonl; } || bad "$model $name: mpirun -np 1 differs (rc $rc)"
      for np in 2 3 4; do
        for T in "$np" $((np + 2)); do
          mpi "$np" "${args[@]}" --num-inner-iterations "$T" --out m.jsonl
          if [ "$rc" = 0 ] && cmp -s one.jsonl m.jsonl; then ok "$model $name -np $np T=$T: same bytes (${secs}s)"
          else bad "$model $name -np $np T=$T: rc $rc or the output differs"; fi
        done
      done
    done <<EOF
device|--max-new-tokens 8
cpu|--max-new-tokens 8 --percent 0 100 0 100 0 100 --cpu-cache-compute
disk|--max-new-tokens 8 --percent 0 0 0 0 0 0 --offload-dir $W
partial|--max-new-tokens 8 --percent 40 30 30 50 0 50 --offload-dir $W
sampled|--max-new-tokens 30 --temperature 100 --seed 5
topk|--max-new-tokens 12 --temperature 0.8 --top-k 20 --top-p 0.9 --seed 11
EOF
  done
  # 4-bit weights on the CPU tier, a 4-bit cache half on disk, top-k attention: hidden
  # states cross uncompressed, each rank quantizes its own slice; same bytes as one process
  args=("${GEN[@]}" --model "$FX/tiny-opt" --max-new-tokens 8 --percent 0 100 0 50 100 0 --compress-weight
        --compress-cache --attn-sparsity 0.5 --offload-dir "$W")
  if timeout 60 "$ZZ" "${args[@]}" --out one.jsonl </dev/null 2>err; then
    for np in 2 3; do
      mpi "$np" "${args[@]}" --num-inner-iterations "$np" --out m.jsonl
      if [ "$rc" = 0 ] && cmp -s one.jsonl m.jsonl; then ok "tiny-opt compressed -np $np: same bytes (${secs}s)"
      else bad "tiny-opt compressed -np $np: rc $rc or the output differs"; fi
    done
  else
    bad "tiny-opt compressed: one process failed"
  fi
  # the sampled run does cover EOS: some sequence stops before 30 tokens
  timeout 60 "$ZZ" "${GEN[@]}" --model "$FX/tiny-opt" --max-new-tokens 30 --temperature 100 --seed 5 --out one.jsonl </dev/null 2>err
  grep -o '"output_ids":\[[^]]*\]' one.jsonl | awk -F, 'NF < 30 {s++} END {exit !s}' ||
    bad "the sampled check has no sequence ending at EOS"
  # cut points by hand: 3 ranks over the layer list of tiny-opt (8 entries)
  timeout 60 "$ZZ" "${GEN[@]}" --model "$FX/tiny-opt" --out one.jsonl </dev/null 2>err
  mpi 3 "${GEN[@]}" --model "$FX/tiny-opt" --layers 1,6 --out m.jsonl
  { [ "$rc" = 0 ] && cmp -s one.jsonl m.jsonl && grep -q "rank 1: layers \[1, 6)" err; } ||
    bad "--layers 1,6: rc $rc, or the output or the slices differ"
  # the last rank holding the LM head alone (the split weighing each phase gives
  # a head heavy in decode a rank of its own)
  mpi 3 "${GEN[@]}" --model "$FX/tiny-opt" --layers 1,7 --num-inner-iterations 6 --out m.jsonl
  { [ "$rc" = 0 ] && cmp -s one.jsonl m.jsonl && grep -q "rank 2: layers \[7, 8)" err; } ||
    bad "--layers 1,7 (the LM head alone on the last rank): rc $rc, or the output or the slices differ"
  ;;
lines)
  # each line its own settings (seeded sampling, top-k/p, penalties, n = 2, its own
  # max tokens, above --max-new-tokens too), stop strings (checked on rank 0, which
  # holds the tokenizer: the sequence's group stops there once all have ended) and
  # log-probabilities (back from the last rank with each token): the block message
  # carries the settings to the last rank, the bytes of one process, for two policies
  for i in $(seq 0 13); do
    case $((i % 7)) in
    0) set="\"temperature\": 0.9, \"top_k\": 30, \"seed\": $((i + 3)), \"max_new_tokens\": $((3 + i % 5)), \"stop\": [\"e\"]" ;;
    1) set="\"repetition_penalty\": 1.3, \"presence_penalty\": 0.5, \"max_new_tokens\": 12, \"logprobs\": 3" ;;
    2) set="\"temperature\": 50, \"top_p\": 0.8, \"frequency_penalty\": 0.7, \"n\": 2, \"seed\": $i, \"logprobs\": 0, \"stop\": [\"a\", \"o\"]" ;;
    3) set="\"max_new_tokens\": 2, \"logprobs\": 5" ;;
    4) set="\"stop\": [\" \"], \"max_new_tokens\": 10" ;;
    5) set="\"temperature\": 100, \"seed\": $i, \"max_new_tokens\": 11, \"n\": 2" ;;
    *) set="\"stop\": [\"t\"]" ;;
    esac
    echo "{\"id\": \"s$i\", \"prompt\": \"Liberty and all men $i are\", $set}"
  done >own.jsonl
  OWN=(generate --prompts own.jsonl --gpu-batch-size 2 --num-gpu-batches 2 --model "$FX/tiny-opt" --max-new-tokens 8)
  for pol in "" "--percent 0 100 0 100 0 100 --cpu-cache-compute"; do
    read -ra P <<<"$pol"
    if timeout 60 "$ZZ" "${OWN[@]}" "${P[@]}" --refill-blocks 1 --out one.jsonl </dev/null 2>err &&
       ! grep -q '"error"' one.jsonl &&
       [ "$(grep -c . one.jsonl)" = 14 ] && grep -q '"finish_reason":"stop"' one.jsonl &&
       grep -q '"top_logprobs"' one.jsonl && grep -q '"output_ids":\[[0-9]*\(,[0-9]*\)\{10\}\]' one.jsonl; then
      for run in "2 2" "2 4" "3 3"; do
        read -r np T <<<"$run"
        # blocks, both sides (no refill): the last digits of a log-probability
        # follow the GPU batch its prompt step ran in (refill: below)
        mpi "$np" "${OWN[@]}" "${P[@]}" --num-inner-iterations "$T" --refill-blocks 1 --out m.jsonl
        if [ "$rc" = 0 ] && cmp -s one.jsonl m.jsonl; then ok "lines with their own settings ${pol:-device} -np $np T=$T: same bytes"
        else bad "lines with their own settings ${pol:-device} -np $np T=$T: rc $rc or the output differs"; fi
      done
    else
      bad "lines with their own settings ${pol:-device}: one process failed, refused a line or lacks a case"
    fi
  done
  # the positions one process computes block by block (ended GPU batches skipped,
  # stop strings included; --refill-blocks 1: no slot refilled): rank 0 counts the same.
  # Without n > 1, whose completions stay in one block and so pack a pipeline's
  # wider block otherwise than one process's blocks
  grep -v '"n"' own.jsonl >own1.jsonl
  OWN1=("${OWN[@]/own.jsonl/own1.jsonl}")
  timeout 60 "$ZZ" "${OWN1[@]}" --refill-blocks 1 --out one.jsonl </dev/null 2>err
  pos=$(grep "^zigzag: positions: " err)
  mpi 3 "${OWN1[@]}" --num-inner-iterations 3 --refill-blocks 1 --out m.jsonl
  if [ "$rc" = 0 ] && cmp -s one.jsonl m.jsonl && [ -n "$pos" ] && grep -qxF "$pos" err; then
    ok "-np 3: rank 0 counts one process's positions ($pos)"
  else
    bad "-np 3: rc $rc, the output or rank 0's positions differ from one process's ($pos)"
  fi
  # refill: the lines above twice over (28: their own max tokens, EOS when sampled
  # hot, stop strings, n = 2; file order), without logprobs (their last digits follow
  # the GPU batch a prompt step ran in, in one process too), in requests of several
  # blocks' prompts: a slot whose sequence ends takes the next waiting prompt on every
  # rank; one process's bytes with refill on. --refill-blocks 2 makes requests whose
  # prompts do not all find a slot (a continuation block)
  { sed 's/, "logprobs": [0-9]*//' own.jsonl; sed 's/, "logprobs": [0-9]*//; s/"id": "s/"id": "t/; s/men /women /' own.jsonl; } >ref.jsonl
  REF=(generate --prompts ref.jsonl --gpu-batch-size 2 --num-gpu-batches 1 --model "$FX/tiny-opt" --max-new-tokens 8 --keep-order)
  if timeout 60 "$ZZ" "${REF[@]}" --out one.jsonl </dev/null 2>err && [ "$(grep -c . one.jsonl)" = 28 ] &&
     ! grep -q '"error"' one.jsonl && grep -q '"finish_reason":"stop"' one.jsonl; then
    for run in "2 2 8" "3 3 8" "2 4 2" "3 3 2"; do
      read -r np T rb <<<"$run"
      mpi "$np" "${REF[@]}" --num-inner-iterations "$T" --refill-blocks "$rb" --out m.jsonl
      n=$(sed -n 's/^zigzag: refilled: \([0-9]*\) sequences.*/\1/p' err)
      if [ "$rc" = 0 ] && cmp -s one.jsonl m.jsonl && [ "${n:-0}" -gt 0 ]; then
        ok "refill -np $np T=$T --refill-blocks $rb: one process's bytes, $n sequences took an ended one's slot"
      else
        bad "refill -np $np T=$T --refill-blocks $rb: rc $rc, the output differs or nothing was refilled (${n:-none})"
      fi
    done
    # a rank killed while slots are refilled: every rank gone, the requests committed
    # before block 2 kept as whole lines, the full run's first ones (how many follows
    # the slot schedule: some, not all), and --resume finishes the file with one
    # process's bytes
    rm -f k.jsonl
    export ZZ_FAULT_KILL_RANK=2 ZZ_FAULT_KILL_AFTER_BLOCKS=2 ZZ_FAULT_KIND=kill
    mpi 3 "${REF[@]}" --num-inner-iterations 3 --refill-blocks 2 --peer-timeout 2 --out k.jsonl
    unset ZZ_FAULT_KILL_RANK ZZ_FAULT_KILL_AFTER_BLOCKS ZZ_FAULT_KIND
    lines=$(wc -l <k.jsonl)
    { [ "$rc" != 0 ] && all_gone 10 && grep -q "myself in block 2" err && [ "$lines" -gt 0 ] &&
      [ "$lines" -lt "$(wc -l <one.jsonl)" ] && [ -z "$(tail -c 1 k.jsonl)" ] &&
      cmp -s k.jsonl <(head -n "$lines" one.jsonl); } ||
      bad "refill, rank 2 killed in block 2: rc $rc, a rank left, or not the first whole lines of the full run ($lines)"
    mpi 3 "${REF[@]}" --num-inner-iterations 3 --refill-blocks 2 --out k.jsonl --resume
    if [ "$rc" = 0 ] && cmp -s k.jsonl one.jsonl; then ok "refill, rank 2 killed in block 2 (all gone, $lines lines kept): --resume gives the bytes"
    else bad "refill: --resume after the kill: rc $rc or the output differs"; fi
  else
    bad "refill: one process failed, refused a line or lacks a stop"
  fi
  ;;
fault | stop | error)
  # rank 2 of 3 fails in block 2 (ZZ_FAULT_KIND): SIGKILL, SIGSTOP or an error
  kind=$SCENARIO; [ "$kind" = fault ] && kind=kill
  case $kind in kill) resumes="3 2 1" ;; stop) resumes="2" ;; error) resumes="3" ;; esac
  # requests of one block each (no refill): block 2 is the third block of T x gbs prompts
  args=("${GEN[@]}" --model "$FX/tiny-opt" --gpu-batch-size 2 --num-gpu-batches 1 --max-new-tokens 8 --refill-blocks 1)
  timeout 60 "$ZZ" "${args[@]}" --out full.jsonl 2>err || bad "the uninterrupted run failed"
  for resume_np in $resumes; do
    export ZZ_FAULT_KILL_RANK=2 ZZ_FAULT_KILL_AFTER_BLOCKS=2 ZZ_FAULT_KIND=$kind
    mpi 3 "${args[@]}" --peer-timeout 2 --out k.jsonl
    unset ZZ_FAULT_KILL_RANK ZZ_FAULT_KILL_AFTER_BLOCKS ZZ_FAULT_KIND
    [ "$rc" != 0 ] || bad "rank 2 $kind: mpirun returned 0"
    all_gone 10 || bad "rank 2 $kind: some rank still running after ${secs}s"
    gone=$secs # from the job's start: the fault comes in block 2, well under a second in
    grep "^zigzag: rank [0-9] (host [^)]*): [^b]" err | grep -v "bound to" | sed 's/^/#   /'
    grep -q "ZZ_FAULT_KILL_AFTER_BLOCKS: .* myself in block 2\|ZZ_FAULT_KIND=error: injected failure in block 2" err ||
      bad "rank 2 $kind: the fault was never injected"
    # who names rank 2, its host and the cause
    case $kind in
    kill) grep -Eq 'process rank 2 |rank 2 \(host ' err || bad "kill: nobody named rank 2" ;;
    stop)
      for r in 0 1; do
        grep -q "^zigzag: rank $r (host [^)]*): .*lost rank 2 (host [^)]*): silent for" err ||
          bad "stop: rank $r did not name rank 2, its host and the silence"
      done ;;
    error)
      [ "$(grep -c "^zigzag: rank 2 (host [^)]*): compute failed at block 2 step 1 group 0: ZZ_FAULT_KIND=error" err)" = 1 ] ||
        bad "error: rank 2 did not print its cause once"
      for r in 0 1; do
        grep -q "^zigzag: rank $r (host [^)]*): stopping: rank 2 (host [^)]*) reported: compute failed" err ||
          bad "error: rank $r did not print the stopping line naming rank 2"
      done ;;
    esac
    lines=$(wc -l <k.jsonl)
    # 2 blocks of T x gbs = 3 x 2 prompts committed: whole lines, the full run's first
    { [ "$lines" -eq 12 ] && [ -z "$(tail -c 1 k.jsonl)" ] && cmp -s k.jsonl <(head -n "$lines" full.jsonl); } ||
      bad "after the $kind: $lines lines, not the first 12 whole lines of the full run"
    if [ "$resume_np" = 1 ]; then timeout 60 "$ZZ" "${args[@]}" --out k.jsonl --resume 2>err; rc=$?
    else mpi "$resume_np" "${args[@]}" --out k.jsonl --resume; fi
    if [ "$rc" = 0 ] && cmp -s k.jsonl full.jsonl; then ok "rank 2 of 3 $kind (all gone ${gone}s after the start), --resume with $resume_np rank(s): same bytes"
    else bad "--resume with $resume_np rank(s) after the $kind: rc $rc or the output differs"; fi
  done
  ;;
init-stop)
  # rank 2 of 3 SIGSTOPped as soon as it starts (a few ms after mpirun spawned it, well
  # before MPI_Init_thread completes): a rank names it within the peer timeout, every
  # rank is gone within 10 s of the start, non-zero, --out untouched
  rm -rf pids; mkdir -p pids; echo untouched >s.jsonl
  t0=$(date +%s.%N)
  timeout -k 5 60 "$MPIEXEC" "${FLAGS[@]}" -np 3 \
    sh -c 'echo $$ >pids/rank$OMPI_COMM_WORLD_RANK.pid; exec "$@"' zz "$ZZ" "${GEN[@]}" --model "$FX/tiny-opt" \
    --peer-timeout 2 --out s.jsonl </dev/null >outp 2>err &
  tp=$!
  while [ ! -s pids/rank2.pid ] && kill -0 "$tp" 2>/dev/null; do sleep 0.005; done
  kill -STOP "$(cat pids/rank2.pid)"
  stopped=$(calc "$(date +%s.%N) - $t0")
  wait "$tp"; rc=$?
  all_gone 10 || bad "init-stop: some rank still running after ${secs}s"
  grep "^zigzag: rank [0-9] (host [^)]*): [^b]" err | sed 's/^/#   /'
  [ "$rc" != 0 ] || bad "init-stop: mpirun returned 0"
  grep -Eq "^zigzag: rank [01] \(host [^)]*\): MPI_Init_thread did not complete within 2.0 s: rank 2 (never arrived|\(pid [0-9]*\) stopped)" err ||
    bad "init-stop: no rank named rank 2"
  [ "$(cat s.jsonl)" = untouched ] || bad "init-stop: --out was touched"
  [ "$fail" = 0 ] && ok "rank 2 of 3 SIGSTOPped ${stopped}s after mpirun's start: named, every rank gone ${secs}s after the start"
  ;;
refuse)
  args=("${GEN[@]}" --model "$FX/tiny-opt" --out keep.jsonl)
  echo '{"keep": 1}' >keep.jsonl
  cp keep.jsonl keep.orig
  rm -rf pids; mkdir -p pids
  t0=$(date +%s.%N)
  run_rank='echo $$ >pids/rank$OMPI_COMM_WORLD_RANK.pid; exec "$@"'
  timeout -k 5 60 "$MPIEXEC" "${FLAGS[@]}" -np 1 sh -c "$run_rank" zz "$ZZ" "${args[@]}" \
    : -np 1 env ZZ_GPU_MEM=64K sh -c "$run_rank" zz "$ZZ" "${args[@]}" \
    : -np 1 sh -c "$run_rank" zz "$ZZ" "${args[@]}" </dev/null >outp 2>err
  rc=$?
  secs=$(calc "$(date +%s.%N) - $t0")
  named=$(grep -c "reported: layers .* does not fit the gpu tier" err)
  if [ "$rc" != 0 ] && all_gone 10 && grep -q "^zigzag: rank 1 (host [^)]*): layers .* does not fit" err &&
     [ "$named" = 2 ] && grep -q "rank 0 (host [^)]*): stopping: rank 1" err && cmp -s keep.jsonl keep.orig; then
    ok "rank 1's slice does not fit: every rank stops in ${secs}s naming rank 1, --out untouched"
  else bad "rank 1's slice does not fit: rc $rc, ${secs}s, $named ranks named it, or --out changed"; fi
  mpi 3 generate --model "$FX/tiny-opt" --prompts no-such.jsonl --out o.jsonl
  if [ "$rc" != 0 ] && all_gone 10 && [ "$(grep -c "rank 0 (host [^)]*).*no-such.jsonl" err)" = 3 ]; then
    ok "rank 0 cannot open --prompts: all 3 ranks stop naming rank 0"
  else bad "rank 0 cannot open --prompts: rc $rc, or not every rank named rank 0"; fi
  # --comm nccl on CPU ranks: refused by every rank before anything is loaded
  mpi 2 "${args[@]}" --comm nccl
  if [ "$rc" != 0 ] && all_gone 10 && grep -q "^zigzag: rank 0 (host [^)]*): --comm nccl: this \(zigzag was built without NCCL\|rank computes on the cpu device\)" err &&
     grep -q "rank 1 (host [^)]*): stopping: rank 0 (host [^)]*) reported: --comm nccl" err && cmp -s keep.jsonl keep.orig; then
    ok "--comm nccl on the CPU device refused by both ranks"
  else bad "--comm nccl: rc $rc, or not refused with its reason"; fi
  mpi 2 "${args[@]}" --comm carrier-pigeon
  if [ "$rc" != 0 ] && grep -q "comm carrier-pigeon: want mpi or nccl" err; then ok "--comm carrier-pigeon refused"
  else bad "--comm carrier-pigeon: rc $rc"; fi
  mpi 3 "${args[@]}" --layers 5,4
  if [ "$rc" != 0 ] && [ "$(grep -c "increasing cut points" err)" -ge 1 ] && all_gone 10; then ok "--layers 5,4 refused"
  else bad "--layers 5,4: rc $rc"; fi
  # --layers '5;' over 3 ranks was read one byte past its end and taken; over 2 the message
  # blamed the count (issue #21 item 9)
  mpi 3 "${args[@]}" --layers '5;'
  if [ "$rc" = 2 ] && grep -q "layers 5;: want 2 cut points for 3 ranks, separated by commas; found 1" err && all_gone 10 &&
     cmp -s keep.jsonl keep.orig; then ok "--layers '5;' over 3 ranks refused, naming the missing comma"
  else bad "--layers '5;' over 3 ranks: rc $rc, or not refused naming the missing comma"; fi
  mpi 2 "${args[@]}" --layers '5;'
  if [ "$rc" = 2 ] && grep -q "layers 5;: want exactly 1 cut point for 2 ranks; ';' is left over" err && all_gone 10; then
    ok "--layers '5;' over 2 ranks refused, naming the ';'"
  else bad "--layers '5;' over 2 ranks: rc $rc, or not refused naming the ';'"; fi
  ;;
bench)
  mpi 2 bench --model "$FX/tiny-opt" --prompt-len 8 --gen-len 4 --gpu-batch-size 2 --json
  if [ "$rc" = 0 ] && grep -q '"ranks": 2, "groups": 2' outp && grep -q '"total_tok_s": [0-9]' outp &&
     [ "$(grep -o '"rank": [0-9]' outp | wc -l)" = 2 ] && grep -q '"bytes_per_token"' outp; then
    ok "bench -np 2 --json: throughput and two stages"
  else bad "bench -np 2: rc $rc"; cat outp; fi
  ;;
plan)
  cat >hw.json <<'EOF'
{"name": "hand-made 2-core CPU box", "device": "cpu", "gpu_mem_bytes": 2e9, "cpu_mem_bytes": 4e9,
 "disk_mem_bytes": 1e10, "cpu_cores": 2, "ctog_bytes_per_s": 3e9, "gtoc_bytes_per_s": 5e9,
 "disk_read_bytes_per_s": 1e9, "disk_write_bytes_per_s": 7e8,
 "gemm_flops": [[1, 3e9], [4, 1e10], [16, 3e10], [64, 6e10], [1024, 5e10]],
 "bmm_prefill_flops": 6e9, "bmm_decode_flops": 2e9, "cpu_attention_flops": [[1, 2e9], [2, 3e9]],
 "cpu_flops": 6e10, "machines": 2, "net_bytes_per_s": 1e9, "net_latency_s": 1e-5}
EOF
  # want: the split and per-rank policies of plan's output, as pipe.c prints them
  expect() {
    sed -n 's/^layers:\(.*\)  (--layers.*/zigzag: layers:\1/p; s/^\(rank [0-9]*: policy .*\)/zigzag: \1/p' "$1"
  }
  printed() { grep "^zigzag: layers:\|^zigzag: rank [0-9]*: policy " err; }
  check_plan() { # WHAT: err against want, and each rank's engine on its planned policy
    local what=$1 r pol lay
    if ! printed | cmp -s - want; then
      bad "$what: the printed split or policies are not plan's"; diff want <(printed) | head; return
    fi
    for r in 0 1; do
      pol=$(sed -n "s/^zigzag: rank $r: policy //p" want)
      lay=$(grep -o "rank $r \[[0-9]*, [0-9]*)" want | sed 's/rank [0-9]* //')
      grep -F "zigzag: rank $r: layers $lay of" err | grep -qF "; policy $pol;" ||
        { bad "$what: rank $r did not run layers $lay with $pol"; return; }
    done
    ok "$what: split $(sed -n 's/^zigzag: layers: //p' want) and both ranks' policies are plan's"
    # thread control per rank: the file's CPU device, so the GEMM pool takes every core the rank was bound to
    for r in 0 1; do
      grep -qE "^zigzag: rank $r: threads from the plan for its ([0-9]+) cores: GEMM \1, " err ||
        { bad "$what: rank $r printed no thread split over its own cores"; grep "threads from" err; return; }
    done
    ok "$what: each rank's threads split over its own cores"
  }
  M=(--model "$FX/tiny-opt" --hw hw.json --max-block 8)
  timeout 60 "$ZZ" plan "${M[@]}" --ranks 2 --prompt-len 24 --gen-len 8 >plan.out 2>err || bad "plan --ranks 2 failed"
  expect plan.out >want
  [ "$(wc -l <want)" = 3 ] || bad "plan --ranks 2 printed no split and two policies: $(cat plan.out)"
  timeout 60 "$ZZ" generate "${M[@]}" --prompts prompts.jsonl --max-prompt-len 24 --max-new-tokens 8 \
    --out one.jsonl </dev/null 2>err || bad "generate --hw: one process failed"
  mpi 2 generate "${M[@]}" --prompts prompts.jsonl --max-prompt-len 24 --max-new-tokens 8 --out m.jsonl
  [ "$rc" = 0 ] || bad "generate -np 2 --hw: rc $rc"
  check_plan "generate -np 2 --hw"
  if cmp -s one.jsonl m.jsonl; then ok "generate -np 2 --hw: the tokens of one process"
  else bad "generate -np 2 --hw: output differs from one process's"; fi
  timeout 60 "$ZZ" plan "${M[@]}" --ranks 2 --prompt-len 8 --gen-len 4 >plan.out 2>err || bad "plan --ranks 2 (bench) failed"
  expect plan.out >want
  mpi 2 bench "${M[@]}" --prompt-len 8 --gen-len 4
  [ "$rc" = 0 ] || bad "bench -np 2 --hw: rc $rc"
  check_plan "bench -np 2 --hw"
  if grep -q "^  predicted  *[0-9.]* tok/s total" outp; then ok "bench -np 2 --hw: predicted beside measured"
  else bad "bench -np 2 --hw: no prediction beside the measurement"; cat outp; fi
  # the plan is made once, on rank 0, and broadcast: -np 4 runs the policy search
  # once (ZZ_PLAN_TRACE: each rank's count of searches), and every rank still runs
  # the split and the policy `plan --ranks 4` prints
  timeout 60 "$ZZ" plan "${M[@]}" --ranks 4 --prompt-len 8 --gen-len 4 >plan.out 2>err || bad "plan --ranks 4 failed"
  expect plan.out >want
  ZZ_PLAN_TRACE=1 mpi 4 bench "${M[@]}" --prompt-len 8 --gen-len 4
  [ "$rc" = 0 ] || bad "bench -np 4 --hw: rc $rc"
  ran=$(sed -n 's/^zigzag: rank [0-9]*: planner searches run here: \([0-9]*\)$/\1/p' err | sort | tr '\n' ' ')
  if [ "$ran" = "0 0 0 1 " ] && grep -q "^zigzag: rank 0: planner searches run here: 1$" err; then
    ok "bench -np 4 --hw: one policy search, on rank 0"
  else bad "bench -np 4 --hw: searches per rank '$ran', want rank 0 alone once"; fi
  if printed | cmp -s - want; then ok "bench -np 4 --hw: every rank runs plan's split and its policy"
  else bad "bench -np 4 --hw: the printed split or policies are not plan's"; diff want <(printed) | head; fi
  # the groups T are the plan's: on a machine whose GEMM rate is flat in the batch, more groups than ranks
  # only shrink the prefill bubble, so plan chooses T > 2; the run takes that T (the stage and every
  # rank's engine) and its tokens are one process's
  sed 's/"gemm_flops": \[\[1, 3e9\], \[4, 1e10\], \[16, 3e10\], \[64, 6e10\], \[1024, 5e10\]\]/"gemm_flops": [[1, 3e10], [1024, 3e10]]/' \
    hw.json >flat.json
  F=(--model "$FX/tiny-opt" --hw flat.json --max-block 8)
  timeout 60 "$ZZ" plan "${F[@]}" --ranks 2 --prompt-len 24 --gen-len 8 >plan.out 2>err || bad "plan --ranks 2 (flat) failed"
  T=$(sed -n 's/^plan: .*, 2 ranks, \([0-9]*\) micro-batch groups (searched)$/\1/p' plan.out)
  timeout 60 "$ZZ" generate "${F[@]}" --prompts prompts.jsonl --max-prompt-len 24 --max-new-tokens 8 \
    --out one.jsonl </dev/null 2>err || bad "generate --hw flat.json: one process failed"
  mpi 2 generate "${F[@]}" --prompts prompts.jsonl --max-prompt-len 24 --max-new-tokens 8 --out m.jsonl
  if [ "$rc" = 0 ] && [ "${T:-0}" -gt 2 ] &&
     grep -q "^zigzag: no policy given: the planner's pipeline for .* on 2 ranks, $T groups" err &&
     grep -q "^zigzag: rank 1: layers \[[0-9]*, [0-9]*) of [0-9]*, $T groups" err && cmp -s one.jsonl m.jsonl; then
    ok "generate -np 2 --hw: the plan's $T groups (more than the ranks) run, with the tokens of one process"
  else bad "generate -np 2 --hw flat.json: rc $rc, plan's T '${T}', the run's: $(grep -o "on 2 ranks, [0-9]* groups" err)"; fi
  ;;
nccl)
  args=("${GEN[@]}" --model "$FX/tiny-opt" --max-new-tokens 8)
  echo '{"id": "kept", "output_ids": [1]}' >keep.jsonl
  cp keep.jsonl keep.orig
  mpi 2 "${args[@]}" --device auto --comm nccl --out keep.jsonl
  if grep -q "this zigzag was built without NCCL" err; then echo "SKIP: this zigzag was built without NCCL"; exit 77; fi
  if grep -q "computes on the cpu device" err; then echo "SKIP: no GPU visible (--comm nccl needs one GPU per rank)"; exit 77; fi
  # both ranks on GPU 0: refused by both, naming the GPU, before anything is loaded
  if [ "$rc" != 0 ] && all_gone 10 &&
     grep -q "^zigzag: rank 0 (host [^)]*): --comm nccl: rank 0 (host [^)]*) and rank 1 (host [^)]*) both compute on GPU-" err &&
     grep -q "rank 1 (host [^)]*): stopping: rank 0 (host [^)]*) reported: --comm nccl: .*NCCL cannot put two ranks on one GPU" err &&
     cmp -s keep.jsonl keep.orig; then
    ok "two ranks on one GPU refused by both, --out untouched"
  else bad "two ranks on one GPU: rc $rc, or not refused with its reason"; fi
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  if [ "${ngpu:-0}" -lt 2 ]; then
    [ "$fail" = 0 ] || exit 1
    echo "SKIP: the NCCL data path needs 2 or more GPUs (${ngpu:-0} visible, or no nvidia-smi)"; exit 77
  fi
  maxnp=$((ngpu < 4 ? ngpu : 4))
  while IFS='|' read -r name pol; do
    [ -n "$name" ] || continue
    read -ra P <<<"$pol"
    timeout 120 "$ZZ" "${args[@]}" --device cuda "${P[@]}" --out one.jsonl </dev/null 2>err ||
      { bad "$name: one process on GPU 0 failed"; continue; }
    for np in $(seq 2 "$maxnp"); do
      for T in "$np" $((np + 2)); do
        mpi "$np" "${args[@]}" --device cuda "${P[@]}" --num-inner-iterations "$T" --comm nccl --out n.jsonl
        nrc=$rc
        mpi "$np" "${args[@]}" --device cuda "${P[@]}" --num-inner-iterations "$T" --comm mpi --out m.jsonl
        if [ "$nrc" = 0 ] && [ "$rc" = 0 ] && cmp -s one.jsonl n.jsonl && cmp -s m.jsonl n.jsonl; then
          ok "$name -np $np T=$T --comm nccl: the bytes of one process and of --comm mpi"
        else bad "$name -np $np T=$T: rc nccl $nrc, mpi $rc, or the outputs differ"; fi
      done
    done
  done <<EOF
device|
cpu|--percent 0 100 0 100 0 100 --cpu-cache-compute
partial|--percent 40 30 30 50 0 50 --offload-dir $W
EOF
  # a stopped rank under NCCL: the survivor's waits (CUDA events, headers) end and it
  # names the rank; its communicator is aborted
  export ZZ_FAULT_KILL_RANK=1 ZZ_FAULT_KILL_AFTER_BLOCKS=2 ZZ_FAULT_KIND=stop
  mpi 2 "${args[@]}" --device cuda --comm nccl --num-gpu-batches 1 --peer-timeout 2 --out f.jsonl
  unset ZZ_FAULT_KILL_RANK ZZ_FAULT_KILL_AFTER_BLOCKS ZZ_FAULT_KIND
  if [ "$rc" != 0 ] && all_gone 10 && grep -q "rank 0 (host [^)]*): lost rank 1" err; then
    ok "rank 1 stopped under --comm nccl: rank 0 names it, all gone in ${secs}s"
  else bad "rank 1 stopped under --comm nccl: rc $rc, ${secs}s, or rank 0 did not name it"; fi
  ;;
*) echo "unknown scenario $SCENARIO"; exit 2 ;;
esac
[ "$fail" = 0 ] && echo "all ok" || echo "some checks failed"
exit "$fail"
