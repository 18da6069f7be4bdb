#!/usr/bin/env bash
# test_cli.sh ZIGZAG FIXTURES — end-to-end checks of the zigzag command line on
# the tiny-opt fixture: golden greedy tokens, kill/resume of a job file (with the
# ZZ_FAULT_KILL_AFTER_BLOCKS fault injection), deterministic sampling, refusal of
# bad inputs, --help, the progress line, tokenize and bench --json; at the end the
# command line of issue #21 (the sparsity policy line fed back, options refused for
# commands they do not apply to, bad ZZ_* values, the no-GPU message).
#
# Prints "ok - ..." / "not ok - ..." per check and "N passed, N failed" at the
# end; exits non-zero when any check failed. Needs only bash and coreutils (no
# jq, no python). Every zigzag run is wrapped in `timeout 60` (the two
# background jobs of the signal checks in a watchdog; CLI_HANG=S before zz gives
# one long search S seconds) so a hang fails the check instead of the suite. The device is whatever ZZ_DEVICE says (auto
# when unset); the other ZZ_* tunables are cleared so the checks see defaults.
set -u

if [ $# -ne 2 ]; then
  echo "usage: $0 ZIGZAG FIXTURES_DIR" >&2
  exit 2
fi
ZZ=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
FX=$(cd "$2" && pwd)
TINY=$FX/tiny-opt
# the shared harness: $W, ok / not_ok / check, zz, has
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" zz_cli
# id and output_ids of every line, spaces dropped: "id":0,"output_ids":[...]
ids_of() { grep -o '"id": *[^,]*, *"output_ids": *\[[^]]*\]' "$1" | tr -d ' '; }

GEN=(generate --model "$TINY" --max-new-tokens 8)

# ------------------------------------------------------------ a. golden tokens

# the four prompts of golden.json, as text and as its input_ids
cat >golden_text.jsonl <<'EOF'
{"id": 0, "prompt": "Liberty"}
{"id": 1, "prompt": "All men are created equal."}
{"id": 2, "prompt": "We hold these truths to be self-evident. All men are created equal."}
{"id": 3, "prompt": "Four score and seven years ago our fathers brought forth on this continent, a new nation, conceived in Liberty"}
EOF
cat >golden_ids.jsonl <<'EOF'
{"id": 0, "input_ids": [2, 47, 915]}
{"id": 1, "input_ids": [2, 36, 291, 638, 407, 284, 266, 391, 919, 17]}
{"id": 2, "input_ids": [2, 931, 849, 408, 988, 306, 75, 86, 274, 300, 393, 79, 73, 16, 72, 682, 293, 17, 712, 638, 407, 284, 266, 391, 919, 17]}
{"id": 3, "input_ids": [2, 41, 462, 277, 70, 461, 285, 393, 89, 273, 623, 877, 332, 283, 626, 86, 278, 310, 565, 303, 444, 378, 420, 904, 293, 15, 262, 596, 474, 15, 338, 319, 368, 272, 290, 369, 915]}
EOF
# golden.json "greedy_tokens"
cat >golden_expect.txt <<'EOF'
"id":0,"output_ids":[495,11,1003,861,70,692,52,492]
"id":1,"output_ids":[980,966,958,476,197,718,818,1005]
"id":2,"output_ids":[527,635,127,1005,110,428,110,476]
"id":3,"output_ids":[607,194,884,853,990,120,607,966]
EOF

golden_ok() { [ "$RC" -eq 0 ] && [ "$(ids_of "$1")" = "$(cat golden_expect.txt)" ]; }
zz "${GEN[@]}" --prompts golden_text.jsonl --out g1.jsonl --gpu-batch-size 4
check "golden greedy tokens, text prompts, --gpu-batch-size 4 (one block)" golden_ok g1.jsonl
zz "${GEN[@]}" --prompts golden_text.jsonl --out g2.jsonl --gpu-batch-size 1 --num-gpu-batches 2
check "golden greedy tokens, text prompts, --gpu-batch-size 1 --num-gpu-batches 2 (two blocks)" golden_ok g2.jsonl
zz "${GEN[@]}" --prompts golden_ids.jsonl --out g3.jsonl --gpu-batch-size 3
check "golden greedy tokens, input_ids prompts, --gpu-batch-size 3 (uneven blocks)" golden_ok g3.jsonl
zz "${GEN[@]}" --prompts golden_text.jsonl --out g4.jsonl \
  --policy "gbs=2 num_gb=2 w=0,0 c=0,0 a=0,0 overlap=1 cpu_attn=0 cw=0 cc=0 sparsity=1"
check "golden greedy tokens with weights, cache and activations all on disk (--policy w=0,0 c=0,0 a=0,0)" golden_ok g4.jsonl
check "every output line has a text field (split UTF-8 characters become U+FFFD)" \
  test "$(grep -c '"text":' g1.jsonl)" -eq 4

# ------------------------------------------------------------ b. kill and resume

# 40 prompts: text and input_ids, integer and string ids, one without an id (its
# id is its line number), a non-ASCII string id, a blank line
WORDS=(Liberty equal nation fathers "Four score and seven" "We hold these truths" continent conceived
  "All men are created equal." "self-evident" "brought forth" "years ago")
{
  for i in $(seq 0 39); do
    w=${WORDS[$((i % ${#WORDS[@]}))]}
    n=$((1 + (i * 7) % 23))
    ids="2"
    for j in $(seq 1 "$n"); do ids="$ids, $(((i * 131 + j * 17) % 1003))"; done
    case $((i % 4)) in
      0) printf '{"id": %d, "prompt": "%s %d"}\n' "$i" "$w" "$i" ;;
      1) printf '{"id": "s%d", "input_ids": [%s]}\n' "$i" "$ids" ;;
      2) printf '{"prompt": "%s, %s", "id": "p-%d"}\n' "$w" "$w" "$i" ;;
      3) printf '{"input_ids": [%s], "id": %d}\n' "$ids" "$((1000 + i))" ;;
    esac
    [ "$i" -eq 17 ] && echo
  done
  echo '{"prompt": "no id here"}'
  echo '{"id": "caf\u00e9", "prompt": "na\u00efve caf\u00e9 \u2014 ok"}'
} >job.jsonl
NJOB=42

zz "${GEN[@]}" --prompts job.jsonl --out full.jsonl
check "uninterrupted job: exit 0, $NJOB lines" test "$RC" -eq 0 -a "$(wc -l <full.jsonl)" -eq "$NJOB"

# blocks of 4, gathered 2 at a time (8 lines a commit; a slot whose sequence ends takes the next prompt)
SMALL=(--gpu-batch-size 2 --num-gpu-batches 2 --refill-blocks 2)
# (the braces keep bash's "Killed" notice out of the test log)
{ ZZ_FAULT_KILL_AFTER_BLOCKS=2 zz "${GEN[@]}" "${SMALL[@]}" --prompts job.jsonl --out killed.jsonl; } 2>/dev/null
check "ZZ_FAULT_KILL_AFTER_BLOCKS=2: killed by SIGKILL (status 137)" test "$RC" -eq 137
torn_ok() {
  [ "$(wc -l <killed.jsonl)" -eq 16 ] && [ -n "$(tail -c 1 killed.jsonl)" ] &&
    cmp -s <(head -n 16 killed.jsonl) <(head -n 16 full.jsonl) &&
    [ "$(tail -n 1 killed.jsonl)" != "$(sed -n 17p full.jsonl)" ] &&
    [ "$(sed -n 17p full.jsonl | head -c "$(tail -n 1 killed.jsonl | wc -c)")" = "$(tail -n 1 killed.jsonl)" ]
}
check "killed output: 2 gatherings of 8 committed, then half of the next line, torn (no newline)" torn_ok

zz "${GEN[@]}" "${SMALL[@]}" --prompts job.jsonl --out killed.jsonl --resume
check "--resume after the kill: exit 0, says how many prompts it skips" \
  eval '[ "$RC" -eq 0 ] && has "resuming: 16 prompts already" err'
check "--resume after the kill: output byte-identical to the uninterrupted run (no sorting needed)" \
  cmp -s killed.jsonl full.jsonl

cp full.jsonl again.jsonl && cp full.jsonl.job.json again.jsonl.job.json # the job record goes with it
zz "${GEN[@]}" --prompts job.jsonl --out again.jsonl --resume --progress
check "--resume on a complete output: exit 0, no sequence generated, file unchanged" \
  eval '[ "$RC" -eq 0 ] && has "0/0 lines, 0 new tokens" err && cmp -s again.jsonl full.jsonl'

printf 'hello, this is not zigzag output\n' >notours.txt
cp notours.txt notours.orig
zz "${GEN[@]}" --prompts job.jsonl --out notours.txt --resume
check "--resume into a file that is not zigzag output: refused with a message, file untouched" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "not a zigzag output line" err && cmp -s notours.txt notours.orig'
cp golden_text.jsonl other_job.jsonl
zz "${GEN[@]}" --prompts job.jsonl --out other_job.jsonl --resume
check "--resume into a prompts file (ids but no output_ids): refused, file untouched" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "not a zigzag output line" err && cmp -s other_job.jsonl golden_text.jsonl'
cp job.jsonl job.orig
zz "${GEN[@]}" --prompts job.jsonl --out job.jsonl --resume
check "--resume with --out naming the --prompts file: refused, file untouched" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && cmp -s job.jsonl job.orig'
zz "${GEN[@]}" --prompts job.jsonl --out job.jsonl
check "--out naming the --prompts file: refused before truncating it" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "same file" err && cmp -s job.jsonl job.orig'
cp job.orig job.jsonl # whatever happened, the checks below get the job back

# ------------------------------------------------------------ c. sampling

SAMPLE=(--temperature 0.8 --top-k 20)
zz "${GEN[@]}" "${SAMPLE[@]}" --seed 5 --prompts job.jsonl --out s5a.jsonl
RC1=$RC
zz "${GEN[@]}" "${SAMPLE[@]}" --seed 5 --prompts job.jsonl --out s5b.jsonl
check "sampling --seed 5: two runs give the same output" eval '[ "$RC1" -eq 0 ] && [ "$RC" -eq 0 ] && cmp -s s5a.jsonl s5b.jsonl'
zz "${GEN[@]}" "${SAMPLE[@]}" --seed 5 --gpu-batch-size 3 --num-gpu-batches 2 --prompts job.jsonl --out s5c.jsonl
check "sampling --seed 5: same output with --gpu-batch-size 3 --num-gpu-batches 2" \
  eval '[ "$RC" -eq 0 ] && cmp -s s5a.jsonl s5c.jsonl'
zz "${GEN[@]}" "${SAMPLE[@]}" --seed 6 --prompts job.jsonl --out s6.jsonl
check "sampling --seed 6 differs from --seed 5" eval '[ "$RC" -eq 0 ] && ! cmp -s s5a.jsonl s6.jsonl'
check "sampling differs from greedy" eval '! cmp -s s5a.jsonl full.jsonl'

# ------------------------------------------------------------ d. bad inputs

# refused DESCRIPTION WORD ARGS...: zigzag ARGS exits non-zero, without a crash
# (status < 128) or a hang (timeout: 124), and stderr names WORD
refused() {
  local d=$1 word=$2
  shift 2
  zz "$@"
  if [ "$RC" -ne 0 ] && [ "$RC" -ne 124 ] && [ "$RC" -lt 128 ] && has "$word" err; then
    ok "$d (exit $RC)"
  else
    not_ok "$d (exit $RC, want a message naming '$word')"
  fi
}

refused "missing --prompts file" "nope.jsonl" "${GEN[@]}" --prompts nope.jsonl --out o.jsonl
refused "disk tier under a missing --offload-dir" "not a writable directory" \
  "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl --percent 0 0 100 0 100 0 --offload-dir "$W/missing"
refused "--percent with fewer than six numbers" "six percentages" "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl --percent 50 50
refused "--percent over 100 for one kind" "sum to at most 100" \
  "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl --percent 50 60 100 0 100 0
printf '{"id": 7, "prompt": "one"}\n{"id": "x", "prompt": "two"}\n{"id": 7, "prompt": "three"}\n' >dupid.jsonl
refused "duplicate prompt id, named file:line" "dupid.jsonl:3" "${GEN[@]}" --prompts dupid.jsonl --out o.jsonl
printf '{"id": 1, "prompt": "fine"}\n{"id": 2, "prompt": \n' >badjson.jsonl
refused "bad JSON line, named file:line" "badjson.jsonl:2" "${GEN[@]}" --prompts badjson.jsonl --out o.jsonl
printf '{"id": 1, "input_ids": [2, 5, 1008]}\n' >bigid.jsonl
refused "input_ids with an id >= vocab size" "outside the vocabulary" "${GEN[@]}" --prompts bigid.jsonl --out o.jsonl
printf '{"id": 1, "input_ids": [2, -5]}\n' >negid.jsonl
refused "input_ids with a negative id" "negid.jsonl:1" "${GEN[@]}" --prompts negid.jsonl --out o.jsonl
cp -r "$TINY" trunc && chmod -R u+w trunc && truncate -s -100 trunc/model.safetensors
refused "truncated model.safetensors" "model.safetensors" generate --model trunc --prompts golden_text.jsonl --out o.jsonl
cp -r "$TINY" badcfg && chmod -R u+w badcfg && echo 'this is { not json' >badcfg/config.json
refused "config.json that is not JSON" "config.json" generate --model badcfg --prompts golden_text.jsonl --out o.jsonl
refused "unknown option" "--no-such-option" "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl --no-such-option
refused "--max-new-tokens 0" "max-new-tokens" generate --model "$TINY" --prompts golden_text.jsonl --out o.jsonl --max-new-tokens 0
refused "a preset without --dummy" "--dummy" generate --model opt-125m --prompts golden_text.jsonl --out o.jsonl
mkdir novocab && cp "$TINY/config.json" "$TINY/model.safetensors" novocab/
refused "a text prompt for a model without vocab.json" "tokenizer" generate --model novocab --prompts golden_text.jsonl --out o.jsonl
refused "--gpu-mem 1K is too small" "capacity" "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl --gpu-mem 1K
refused "a prompt longer than the model's positions" "max-prompt-len" "${GEN[@]}" --prompts golden_ids.jsonl --out o.jsonl --max-prompt-len 20
ZZ_FAULT_KILL_AFTER_BLOCKS=soon refused "bad ZZ_FAULT_KILL_AFTER_BLOCKS" "ZZ_FAULT_KILL_AFTER_BLOCKS" "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl
refused "tokenize with no text" "text" tokenize --model "$TINY"
refused "bench --gen-len 1" "gen-len" bench --model opt-125m --dummy --gen-len 1

# ------------------------------------------------------------ d2. hardening (issue #8)

# 1. no argument may crash the program
LONG260=$(printf 'a%.0s' $(seq 1 260))
LONG2000=$(printf '1%.0s' $(seq 1 2000))
refused "--percent with six overlong arguments (260 and 2000 characters): refused, no crash" "six percentages" \
  bench --percent "$LONG260" "$LONG2000" 3 4 5 6

# 4. every number has a range, checked at parse time, named in the message
refused "--num-gpu-batches 178956971 (n_layers * num_gb overflowed int)" "[1, 4096]" bench --num-gpu-batches 178956971
refused "--policy gbs=4294967297 (was silently 1)" "[1, 65536]" bench --dummy --policy "gbs=4294967297"
refused "--percent nan ... (NaN passed every check)" "six percentages" bench --dummy --percent nan 0 100 0 100 0
refused "--policy w=nan,0" "percentages" bench --dummy --policy "w=nan,0"
refused "--threads 100000" "[0, 1024]" bench --dummy --threads 100000
refused "--top-p 0" "(0, 1]" bench --dummy --top-p 0
refused "--gpu-mem that is not a size" "gpu-mem" bench --dummy --gpu-mem lots
t0=$(date +%s)
refused "--policy 'gbs=2 num_gb=110737418' refused at once" "num_gb" bench --model opt-125m --dummy --policy "gbs=2 num_gb=110737418"
check "... within 5 s (it took 9 s and 5.8 GB)" test $(($(date +%s) - t0)) -lt 5
zz --help
check "--help prints each number option's range" eval 'has "an integer in [1, 4096]" outp && has "six numbers in [0, 100]" outp'

# 2. the cpu device's arena and the cpu tier are the same RAM: a plan whose two
# parts each fit but together do not is refused at once. The percentages put
# about 0.6 of RAM on each side (OPT-66B, or OPT-175B on a big machine).
RAM=$(awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo)
shared_pct() { # PARAMS_BILLIONS: prints "WG WC" or nothing when RAM is too large
  awk -v r="$RAM" -v p="$1" 'BEGIN { wg = int(100 * 0.6 * r / (4 * p * 1e9)) + 1; wc = int(100 * 0.6 * r / (2 * p * 1e9)) + 1;
    if (wg + wc <= 100) print wg, wc }'
}
PCT=$(shared_pct 66) MODEL=opt-66b
[ -n "$PCT" ] || { PCT=$(shared_pct 175); MODEL=opt-175b; }
if [ -n "$PCT" ]; then
  set -- $PCT
  t0=$(date +%s)
  refused "cpu device: $MODEL --percent $1 $2 100 0 100 0 fits RAM per tier, not together" "together" \
    bench --model $MODEL --dummy --device cpu --prompt-len 16 --gen-len 2 --gpu-batch-size 1 --disk-mem 1000T --percent "$1" "$2" 100 0 100 0
  check "... refused within 5 s, before any weight is loaded" test $(($(date +%s) - t0)) -lt 5
  set --
else
  ok "cpu device shared RAM check skipped: $RAM bytes of RAM is more than OPT-175B needs"
fi

# 5. paths are checked before the weights load (the plan line comes after the engine)
zz generate --model opt-1.3b --dummy --device cpu --prompts nope.jsonl --out o5.jsonl
check "missing --prompts refused before the engine is built (no plan line)" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has nope.jsonl err && ! has "plan:" err'
zz generate --model opt-1.3b --dummy --device cpu --prompts golden_ids.jsonl --out "$W/no/such/dir/o.jsonl"
check "--out in a missing directory refused before the engine is built" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "no/such/dir" err && ! has "plan:" err'
echo keep >o5.jsonl
zz "${GEN[@]}" --prompts golden_text.jsonl --out o5.jsonl --gpu-mem 1K
check "a plan that does not fit leaves an existing --out as it was" eval '[ "$RC" -ne 0 ] && [ "$(cat o5.jsonl)" = keep ]'

# 3 and 6. a long job (one prompt per block): a second job on its --out is
# refused; SIGINT stops it with one line, status 130, whole lines only, and
# --resume finishes it with the tokens of an uninterrupted run; SIGTERM: 143
for i in $(seq 0 1999); do
  printf '{"id": %d, "input_ids": [2, %d, 17, %d]}\n' "$i" $((i % 900 + 4)) $((i * 7 % 900 + 4))
done >long.jsonl
LONG=(generate --model "$TINY" --max-new-tokens 8 --gpu-batch-size 1 --no-progress --prompts long.jsonl)
zz "${LONG[@]}" --out long_full.jsonl
check "long job, uninterrupted: 2000 lines" test "$RC" -eq 0 -a "$(wc -l <long_full.jsonl)" -eq 2000
# start_long OUT: runs the long job in the background (pid in BG) until OUT has a line
start_long() {
  rm -f "$1"
  # not under timeout(1): it would pass the signal on to the whole process
  # group, so zigzag would get it twice; a watchdog ends a hung job instead
  "$ZZ" "${LONG[@]}" --out "$1" >/dev/null 2>"$W/bg_err" &
  BG=$!
  (sleep 120 && kill -KILL "$BG" 2>/dev/null) >/dev/null 2>&1 &
  WD=$!
  for _ in $(seq 1 600); do
    [ -s "$1" ] && return 0
    sleep 0.05
  done
  return 1
}
# prefix_ok OUT: whole lines, each one the same as the uninterrupted run's
prefix_ok() {
  local n
  n=$(wc -l <"$1")
  [ -z "$(tail -c 1 "$1")" ] && cmp -s "$1" <(head -n "$n" long_full.jsonl) && [ "$n" -lt 2000 ]
}
start_long long_int.jsonl
zz "${LONG[@]}" --out long_int.jsonl
check "a second job with the same --out is refused at start, naming the file and the other job" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "another zigzag job" err && has long_int.jsonl err'
kill -INT "$BG"
wait "$BG"
RC=$?
kill "$WD" 2>/dev/null
cp "$W/bg_err" "$W/err"
check "SIGINT: exit status 130" test "$RC" -eq 130
check "SIGINT: one line saying how many prompts were committed and to use --resume" \
  eval '[ "$(grep -c "stopped by SIGINT" err)" -eq 1 ] && grep -q "prompts are committed to long_int.jsonl" err && has --resume err'
check "SIGINT: the output holds whole lines, each equal to the uninterrupted run's" prefix_ok long_int.jsonl
zz "${LONG[@]}" --out long_int.jsonl --resume
check "SIGINT then --resume: the output equals the uninterrupted run" eval '[ "$RC" -eq 0 ] && cmp -s long_int.jsonl long_full.jsonl'
start_long long_term.jsonl
kill -TERM "$BG"
wait "$BG"
RC=$?
kill "$WD" 2>/dev/null
cp "$W/bg_err" "$W/err"
check "SIGTERM: exit status 143, the line, whole lines" \
  eval '[ "$RC" -eq 143 ] && has "stopped by SIGTERM" err && prefix_ok long_term.jsonl'

# issue #9: a tokenizer error is reported once, with its byte offset
zz tokenize --model "$TINY" "$(printf 'ok \377 bad')"
check "invalid UTF-8: one message naming the byte offset, no doubled prefix" \
  eval '[ "$RC" -ne 0 ] && [ "$(grep -o "invalid UTF-8" err | wc -l)" -eq 1 ] && has "byte offset 3" err'

# ------------------------------------------------------------ e. help

zz --help
check "--help exits 0 and lists --max-new-tokens, --resume, --gpu-batch-size, ZZ_FAULT_KILL_AFTER_BLOCKS" \
  eval '[ "$RC" -eq 0 ] && has --max-new-tokens outp && has --resume outp && has --gpu-batch-size outp && has ZZ_FAULT_KILL_AFTER_BLOCKS outp'

# ------------------------------------------------------------ f. progress

zz "${GEN[@]}" --prompts job.jsonl --out p.jsonl --gpu-batch-size 4 --progress
check "--progress prints lines and tok/s on stderr" eval '[ "$RC" -eq 0 ] && has lines err && has tok/s err'
zz "${GEN[@]}" --prompts job.jsonl --out p.jsonl --no-progress
check "--no-progress prints no progress line" eval '[ "$RC" -eq 0 ] && ! has tok/s err'

# ------------------------------------------------------------ g. tokenize

zz tokenize --model "$TINY" "Four score and seven years ago"
check "tokenize prints space-separated integers (golden.json's ids of the words)" \
  eval '[ "$RC" -eq 0 ] && grep -qxE "[0-9]+( [0-9]+)*" outp && [ "$(cat outp)" = "41 462 277 70 461 285 393 89 273 623 877" ]'

# tokenizer.json (issue #13): ids as the tokenizers library gives them
# (tests/fixtures/make_tokenizer_json_fixtures.py), added tokens found in the text
TJ_TEXT="Hello world, it's 12345 中文 <s>x<|eot_id|>"
zz tokenize --model "$FX/tok-llama3" "$TJ_TEXT"
check "tokenize with a LLaMA-3 style tokenizer.json (byte-level, <|eot_id|> found in the text)" \
  eval '[ "$RC" -eq 0 ] && [ "$(cat outp)" = "359 287 78 654 11 344 599 220 16 17 18 19 20 220 160 116 255 162 244 229 220 27 82 29 87 705" ]'
zz tokenize --model "$FX/tok-llama2" "$TJ_TEXT"
check "tokenize with a LLaMA-2 style tokenizer.json (Prepend/Replace, byte_fallback, <s> found in the text)" \
  eval '[ "$RC" -eq 0 ] && [ "$(cat outp)" = "427 306 358 316 372 344 699 342 343 262 345 266 53 267 268 269 328 231 187 176 233 153 138 328 1 328 325 63 127 306 316 321 98 504 127 65" ]'
# Qwen2's NFC + Split regex, Phi-3's rstrip (make_tokenizer_family_fixtures.py)
zz tokenize --model "$FX/tok-qwen2" "$(printf '<|im_start|>user\nCafe\314\201 12345<|im_end|>')"
check "tokenize with a Qwen2 tokenizer.json (NFC: e + U+0301 is one é; one digit a word)" \
  eval '[ "$RC" -eq 0 ] && [ "$(cat outp)" = "701 292 276 198 34 64 69 127 102 220 16 17 18 19 20 702" ]'
zz tokenize --model "$FX/tok-phi3" "$(printf '<|user|>\nHello world<|end|>\n<|assistant|>')"
check "tokenize with a Phi-3 tokenizer.json (the newline after <|user|> and <|end|> is theirs)" \
  eval '[ "$RC" -eq 0 ] && [ "$(cat outp)" = "910 427 306 358 316 372 344 699 907 901" ]'
mkdir badtok && echo '{"model": {"type": "WordPiece"}}' >badtok/tokenizer.json
refused "tokenize with an unsupported tokenizer.json" 'model.type "WordPiece"' tokenize --model badtok "hi"
# a LLaMA model with tokenizer.json: text prompts get the tokenizer's BOS
mkdir lltok && cp "$FX/tiny-llama3/config.json" "$FX/tiny-llama3/model.safetensors" "$FX/tok-llama2-meta/tokenizer.json" lltok/
printf '{"id": 0, "prompt": "<s>中文"}\n' >lltext.jsonl
printf '{"id": 0, "input_ids": [1, 1, 231, 187, 176, 233, 153, 138]}\n' >llids.jsonl
zz generate --model lltok --prompts lltext.jsonl --out llt.jsonl --max-new-tokens 4
zz generate --model lltok --prompts llids.jsonl --out lli.jsonl --max-new-tokens 4
check "generate: a text prompt through tokenizer.json (BOS from its template) = its input_ids" \
  eval '[ "$RC" -eq 0 ] && [ -n "$(ids_of llt.jsonl)" ] && [ "$(ids_of llt.jsonl)" = "$(ids_of lli.jsonl)" ] && has "\"text\"" llt.jsonl'
mkdir lltok3 && cp "$FX/tiny-llama3/config.json" "$FX/tiny-llama3/model.safetensors" "$FX/tok-llama3/tokenizer.json" lltok3/
refused "generate: tokenizer.json ids beyond the model's vocabulary (BOS 700 of 264)" "token id 700" \
  generate --model lltok3 --prompts lltext.jsonl --out o.jsonl --max-new-tokens 4

# ------------------------------------------------------------ h. bench --json

zz bench --model "$TINY" --prompt-len 16 --gen-len 4 --json
bench_ok() {
  [ "$RC" -eq 0 ] && [ "$(grep -c . outp)" -eq 1 ] && grep -qxE '\{.*\}' outp || return 1
  for k in prefill_tok_s decode_tok_s total_tok_s peak_bytes; do has "\"$k\"" outp || return 1; done
}
check "bench --json prints one JSON object with prefill_tok_s, decode_tok_s, total_tok_s, peak_bytes" bench_ok
check "bench --json on the CPU device reports no per-token bus transfer (its copies stay in RAM), keeps bytes_to_device" \
  eval '! has "\"transfer_bytes_per_token\"" outp && has "\"bytes_to_device\"" outp'

# ------------------------------------------------------------ i. plan

HW=$(cd "$FX/../../planner/hw" && pwd)
# a small CPU machine for the tiny fixture: the planned policy must run
cat >tiny-hw.json <<'EOF'
{"name": "tiny", "device": "cpu", "gpu_mem_bytes": 1e9, "cpu_mem_bytes": 2e9, "disk_mem_bytes": 1e10, "cpu_cores": 2,
 "ctog_bytes_per_s": 5e9, "gtoc_bytes_per_s": 5e9, "disk_read_bytes_per_s": 1e9, "disk_write_bytes_per_s": 5e8,
 "gemm_flops": [[1, 2e9], [64, 3e10]], "bmm_prefill_flops": 1e10, "bmm_decode_flops": 3e9,
 "cpu_attention_flops": [[1, 2e9], [2, 3e9]], "cpu_flops": 3e10}
EOF
zz plan --model "$TINY" --hw tiny-hw.json --prompt-len 16 --gen-len 8
POL=$(sed -n 's/^policy //p' outp)
check "plan prints the policy line, predicted tokens/s, lanes, peak memory and the thread split" \
  eval '[ "$RC" -eq 0 ] && [ -n "$POL" ] && has "predicted: prefill" outp && has "decode lanes" outp && has "peak memory: gpu" outp && has "threads: GEMM 2" outp'
zz "${GEN[@]}" --prompts golden_text.jsonl --out planned.jsonl --no-progress --policy "$POL"
check "generate runs the planned policy with the golden tokens" golden_ok planned.jsonl
zz plan --model "$TINY" --hw tiny-hw.json --prompts golden_text.jsonl --max-new-tokens 8 --gpu-batch-size 2
check "plan --prompts predicts the whole file as generate runs it (its shape, refill, the block-by-block baseline)" \
  eval '[ "$RC" -eq 0 ] && has "most max tokens of --prompts" outp && has "sequences, with refill (--refill-blocks):" outp && has "block by block (--refill-blocks 1)" outp'
zz plan --model "$TINY" --hw tiny-hw.json --prompts golden_text.jsonl --max-new-tokens 8 --gpu-batch-size 2 --refill-blocks 1
check "plan --prompts --refill-blocks 1 predicts the file block by block (its blocks, their positions)" \
  eval '[ "$RC" -eq 0 ] && has "sequences, block by block: 2 blocks; predicted prefill" outp'
zz plan --model "$TINY" --hw tiny-hw.json --prompts no-such-file.jsonl
check "plan --prompts with a missing file: non-zero exit naming it" eval '[ "$RC" -ne 0 ] && has no-such-file.jsonl err'

zz bench --model "$TINY" --prompt-len 16 --gen-len 4 --hw tiny-hw.json --max-block 8
check "bench --hw without a policy plans, says so, and prints the prediction beside the measurement" \
  eval '[ "$RC" -eq 0 ] && has "no policy given: the planner" err && has "policy     gbs=" outp && has "predicted  prefill" outp'
check "bench --hw without --threads takes the plan's threads (GEMM on both cores of tiny-hw) and binds with hwloc, saying so" \
  eval 'has "threads from the plan: GEMM 2, CPU attention 2, I/O lanes 3 x 1" err && has "bound to cores" err'
zz bench --model "$TINY" --prompt-len 16 --gen-len 4 --hw tiny-hw.json --gpu-batch-size 2 --json
check "bench --hw with a policy keeps it and adds the predicted throughputs to --json" \
  eval '[ "$RC" -eq 0 ] && has "\"predicted\": {\"prefill_tok_s\"" outp && has "gbs=2 num_gb=1" outp && ! has "no policy given" err'

zz "${GEN[@]}" --prompts golden_text.jsonl --out hwplanned.jsonl --no-progress --hw tiny-hw.json
check "generate --hw without a policy plans for its shape, says so, and gives the golden tokens" \
  eval 'golden_ok hwplanned.jsonl && has "no policy given: the planner" err && has "predicted for full blocks" err'

zz plan --model opt-6.7b --hw "$HW/t4-gcp.json" --prompt-len 512 --gen-len 32 --json
plan_json_ok() {
  [ "$RC" -eq 0 ] && [ "$(grep -c . outp)" -eq 1 ] && grep -qxE '\{.*\}' outp || return 1
  for k in policy prefill_tps decode_tps total_tps peak_bytes decode_lanes_s; do has "\"$k\"" outp || return 1; done
}
check "plan --json prints one object with the policy, throughputs, lanes and peaks" plan_json_ok

zz plan --model opt-175b --hw "$HW/t4-gcp.json" --prompt-len 512 --gen-len 32 --gpu-mem 64M
check "plan on an impossible budget names the short tier and by how much (non-zero exit)" \
  eval '[ "$RC" -ne 0 ] && has "gpu tier is short by" err'
zz plan --model opt-30b --hw "$HW/t4-gcp.json" --prompt-len 512 --gen-len 32 --cpu-mem 8G --disk-mem 10G --no-compression
check "plan with too little CPU and disk says which tier is short" eval '[ "$RC" -ne 0 ] && has "short by" err'
zz plan --model opt-30b --hw "$HW/t4-gcp.json" --prompt-len 512 --gen-len 32 --cpu-mem 8G --disk-mem 10G
check "plan: where only 4-bit weights fit, the policy line says cw=1" eval '[ "$RC" -eq 0 ] && has "cw=1" outp'

# 4 ranks and the comparisons with 1, 3 and 5, each searching the groups T: ~6 s of
# CPU in a Release build with --max-block 256 (~48 s without it, too long under
# ASan), more on a loaded machine; the bound is for a hang, not a time
CLI_HANG=300 zz plan --model opt-30b --hw "$HW/t4-gcp-x4.json" --prompt-len 512 --gen-len 32 --ranks 4 --max-block 256
check "plan --ranks 4 prints the split, each rank's policy, the pipeline throughput and bubble" \
  eval '[ "$RC" -eq 0 ] && has "layers: rank 0 [0," outp && has "rank 3: policy gbs=" outp && has "bubble" outp'

zz profile --profile-seconds 1 --out measured.json
check "profile --out writes a hardware file of this machine (4-bit rates too: the CPU device has 4-bit ops) that plan reads" \
  eval '[ "$RC" -eq 0 ] && has "\"gemm_flops\"" measured.json && has "\"gemm_q4_flops\"" measured.json && has "\"disk_read_busy_bytes_per_s\"" measured.json && has "profile: disk" err'
zz plan --model "$TINY" --hw measured.json --prompt-len 16 --gen-len 8 --max-block 8
block_ok() {
  local g n
  g=$(sed -n 's/^policy gbs=\([0-9]*\) .*/\1/p' outp) n=$(sed -n 's/^policy .*num_gb=\([0-9]*\) .*/\1/p' outp)
  [ "$RC" -eq 0 ] && [ -n "$g" ] && [ -n "$n" ] && [ $((g * n)) -le 8 ]
}
check "plan --max-block bounds the block (gbs x num_gb) on the measured machine" block_ok

zz plan --model opt-125m --hw no-such-hw.json
check "plan with a missing hardware file names it" eval '[ "$RC" -ne 0 ] && has "no-such-hw.json" err'
echo '{"name": "x", "device": "cpu"}' >bad-hw.json
zz plan --model opt-125m --hw bad-hw.json
check "plan with an incomplete hardware file names the missing field" eval '[ "$RC" -ne 0 ] && has "is missing" err'

# ------------------------------------------------------------ j. perplexity and compression

TRAINED="$FX/trained-opt"
# on the CPU device, the f32 reference: a GPU computes in f16 and lands near it, not on it
zz perplexity --model "$TRAINED" --text "$TRAINED/heldout.txt" --window 95 --device cpu
check "perplexity of the trained model's held-out text is Hugging Face's (276.4130, training.json)" \
  eval '[ "$RC" -eq 0 ] && has "perplexity 276.4130 over 665 tokens" outp'
zz perplexity --model "$TRAINED" --text "$TRAINED/heldout.txt" --compress-weight --compress-cache --attn-sparsity 0.5 \
  --percent 0 100 0 0 100 0 --gpu-batch-size 4
check "perplexity with 4-bit weights on the CPU tier and a 4-bit cache on disk, top-k attention: runs, says the policy" \
  eval '[ "$RC" -eq 0 ] && has "cw=1 cc=1 sparsity=0.5" outp'
zz perplexity --model "$TRAINED" --text "$TRAINED/heldout.txt" --policy "gbs=4 cw=3/64"
check "a compression format that does not exist is refused, naming it" \
  eval '[ "$RC" -ne 0 ] && has "weight compression format 3 bits" err'
zz perplexity --model "$TRAINED"
check "perplexity without --text: refused with a message" eval '[ "$RC" -eq 2 ] && has "--text FILE is required" err'

# --cpu-act int8 (issue #27): x of the 4/8-bit linears in int8 (zz_cpu_act_int8_applies); teacher-forced perplexity
# runs one token a step (decoding), so int8 moves it a little off the exact 4-bit run's
zz perplexity --model "$TRAINED" --text "$TRAINED/heldout.txt" --window 95 --device cpu --compress-weight --cpu-act exact
PPL_EXACT=$(sed -n 's/.*perplexity \([0-9.]*\) over.*/\1/p' outp)
zz perplexity --model "$TRAINED" --text "$TRAINED/heldout.txt" --window 95 --device cpu --compress-weight
PPL_AUTO=$(sed -n 's/.*perplexity \([0-9.]*\) over.*/\1/p' outp)
zz perplexity --model "$TRAINED" --text "$TRAINED/heldout.txt" --window 95 --device cpu --compress-weight --cpu-act int8
PPL_INT8=$(sed -n 's/.*perplexity \([0-9.]*\) over.*/\1/p' outp)
check "--cpu-act int8: perplexity $PPL_INT8, other than the exact 4-bit run's $PPL_EXACT and within 1% of it" \
  eval '[ "$RC" -eq 0 ] && [ -n "$PPL_INT8" ] && [ -n "$PPL_EXACT" ] &&
    awk -v a="$PPL_INT8" -v b="$PPL_EXACT" "BEGIN { d = (a - b) / b; exit !(a != b && d < 0.01 && d > -0.01) }"'
zz generate --model "$TRAINED" --device cpu --compress-weight --cpu-act int8 --prompts golden_ids.jsonl --out i8.jsonl \
  --max-new-tokens 16
check "--cpu-act int8: generate runs end to end (4 outputs of 16 tokens)" \
  eval '[ "$RC" -eq 0 ] && [ "$(grep -o "\"output_ids\":\[[0-9,]*\]" i8.jsonl | tr -cd , | wc -c)" -eq 60 ]'
zz perplexity --model "$TRAINED" --text "$TRAINED/heldout.txt" --device cpu --cpu-act int8
check "--cpu-act int8 without compressed weights is refused, naming --compress-weight" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "--cpu-act int8: int8 activations apply only to 4- or 8-bit group weights (--compress-weight)" err'
# the defaults (issue #48): --cpu-act auto is int8 beside 4-bit weights, exact beside f32 ones (no refusal);
# --cpu-dtype auto keeps an f32 checkpoint f32 and runs --dummy weights in bf16
check "--cpu-act auto (the default) beside 4-bit weights is int8: perplexity $PPL_AUTO = $PPL_INT8" \
  eval '[ -n "$PPL_AUTO" ] && [ "$PPL_AUTO" = "$PPL_INT8" ]'
zz perplexity --model "$TRAINED" --text "$TRAINED/heldout.txt" --window 95 --device cpu
PPL_DEF=$(sed -n 's/.*perplexity \([0-9.]*\) over.*/\1/p' outp)
zz perplexity --model "$TRAINED" --text "$TRAINED/heldout.txt" --window 95 --device cpu --cpu-dtype f32 --cpu-act exact
PPL_F32=$(sed -n 's/.*perplexity \([0-9.]*\) over.*/\1/p' outp)
zz perplexity --model "$TRAINED" --text "$TRAINED/heldout.txt" --window 95 --device cpu --cpu-dtype bf16
PPL_BF16=$(sed -n 's/.*perplexity \([0-9.]*\) over.*/\1/p' outp)
check "the defaults on an f32 checkpoint run the f32 reference: perplexity $PPL_DEF = $PPL_F32 (bf16: $PPL_BF16)" \
  eval '[ -n "$PPL_DEF" ] && [ "$PPL_DEF" = "$PPL_F32" ] && [ "$PPL_BF16" != "$PPL_F32" ]'
zz generate --model "$FX/tiny-opt" --dummy --device cpu --prompts golden_ids.jsonl --out dd.jsonl --max-new-tokens 8
zz generate --model "$FX/tiny-opt" --dummy --device cpu --prompts golden_ids.jsonl --out db.jsonl --max-new-tokens 8 \
  --cpu-dtype bf16
check "--dummy weights run in bf16 by default (the same tokens as --cpu-dtype bf16)" \
  eval '[ "$RC" -eq 0 ] && [ -s dd.jsonl ] && cmp -s dd.jsonl db.jsonl'
zz perplexity --model "$TRAINED" --text "$TRAINED/heldout.txt" --compress-weight --cpu-act bogus
check "--cpu-act bogus is refused with the choices" eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "cpu-act" err && has "int8" err'
ZZ_CPU_ACT=bogus zz perplexity --model "$TRAINED" --text "$TRAINED/heldout.txt" --compress-weight
check "ZZ_CPU_ACT=bogus is refused" eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "ZZ_CPU_ACT" err'

# ------------------------------------------------------------ k. the hardware file and this machine (issue #21)

# one good cpu-device file; hw_with KEY VALUE writes it with that one field replaced into hwx.json
HWX='"name": "x", "device": "cpu", "gpu_mem_bytes": 1e9, "cpu_mem_bytes": 1e9, "disk_mem_bytes": 1e10, "cpu_cores": 2,
 "ctog_bytes_per_s": 5e9, "gtoc_bytes_per_s": 5e9, "disk_read_bytes_per_s": 1e9, "disk_write_bytes_per_s": 5e8,
 "gemm_flops": [[1, 2e9], [64, 3e10]], "bmm_prefill_flops": 1e10, "bmm_decode_flops": 3e9,
 "cpu_attention_flops": [[1, 2e9], [2, 3e9]], "cpu_flops": 3e10'
hw_with() { echo "{$HWX}" | sed "s/\"$1\": \(\[\[[^]]*\]\(, \[[^]]*\]\)*\]\|[^,}]*\)/\"$1\": $2/" >hwx.json; }
hw_with ctog_bytes_per_s 1e-300
zz plan --model opt-6.7b --hw hwx.json --prompt-len 512 --gen-len 32
check "a rate of 1e-300 is refused naming the field, the value and the range (GLPK aborted on it)" \
  eval '[ "$RC" -eq 1 ] && has "ctog_bytes_per_s = 1e-300: want a number from 1e+06 to 1e+13 B/s" err'
hw_with cpu_attention_flops '[[1e10, 1e9]]'
zz plan --model opt-6.7b --hw hwx.json --prompt-len 512 --gen-len 32
check "a thread count of 1e10 is refused naming the field and the range (it was converted past int)" \
  eval '[ "$RC" -eq 1 ] && has "cpu_attention_flops[0][0] (threads) = 1e+10: want a whole number from 1 to 4096" err'

zz "${GEN[@]}" --prompts golden_text.jsonl --out t4run.jsonl --device cpu --hw "$HW/t4-gcp.json"
check "generate --device cpu with a T4 hardware file is refused naming both devices" \
  eval '[ "$RC" -ne 0 ] && has "describes a cuda machine" err && has "computes on cpu" err'
hw_with cpu_mem_bytes 9e14
zz bench --model "$TINY" --prompt-len 8 --gen-len 2 --hw hwx.json
check "bench --hw with more RAM than this machine has is refused naming cpu_mem_bytes and MemTotal" \
  eval '[ "$RC" -ne 0 ] && has "cpu_mem_bytes" err && has "MemTotal" err'
zz bench --model "$TINY" --prompt-len 8 --gen-len 2 --gpu-batch-size 1 --cpu-mem 900T
check "--cpu-mem above physical RAM is refused (any device)" \
  eval '[ "$RC" -ne 0 ] && has "--cpu-mem 900.00 TiB is more than this machine" err'

# the numbers of a 23.5 GiB, 2-core cpu box with a 79 GiB disk (where issue #21 saw it)
cat >box.json <<'EOF'
{"name": "box", "device": "cpu", "gpu_mem_bytes": 25276063744, "cpu_mem_bytes": 25276063744,
 "disk_mem_bytes": 85247959040, "cpu_cores": 2, "ctog_bytes_per_s": 1.07e9, "gtoc_bytes_per_s": 2.9e9,
 "disk_read_bytes_per_s": 4.2e8, "disk_write_bytes_per_s": 2.4e8, "gemm_flops": [[1, 7e8], [16, 1.1e10], [256, 4e10]],
 "bmm_prefill_flops": 2e9, "bmm_decode_flops": 1e9, "cpu_attention_flops": [[1, 1e9], [2, 1.8e9]], "cpu_flops": 4e10,
 "gemm_q4_flops": [[1, 5e8], [256, 2e10]], "bmm_prefill_q4_flops": 1.2e9, "bmm_decode_q4_flops": 6e8,
 "cpu_attention_q4_flops": [[1, 3e8], [2, 5e8]], "quant_bytes_per_s": 3.6e7}
EOF
zz plan --model llama-2-70b --hw box.json --prompt-len 512 --gen-len 32
check "plan llama-2-70b on a 23.5 GiB cpu box finds a plan (the shared RAM was never cut; it said 'short by about 0 B')" \
  eval '[ "$RC" -eq 0 ] && has "policy gbs=" outp'
zz plan --model llama-2-70b --hw box.json --prompt-len 512 --gen-len 32 --disk-mem 10G
check "no plan: the message names the short tier, by how much and what would fit" \
  eval '[ "$RC" -eq 1 ] && has "the disk tier is short by about" err && has "would fit" err && ! has "short by about 0 B" err'

start=$(date +%s)
zz plan --model opt-125m --prompt-len 8 --gen-len 2 --cpu-mem 900T
check "plan without --hw (this machine) refuses --cpu-mem above its RAM before measuring" \
  eval '[ "$RC" -ne 0 ] && has "--cpu-mem 900.00 TiB is more than its" err && ! has "profile: " err'
zz profile --out "$W/no-such-dir/hw.json"
check "profile --out into a missing directory is refused before measuring" \
  eval '[ "$RC" -ne 0 ] && has "no-such-dir does not exist" err && ! has "profile: " err && [ $(($(date +%s) - start)) -lt 5 ]'

# ------------------------------------------------------------ l. the command line (issue #21)

# 4. top-k sparsity is exact: the policy line a run prints, given back to --policy, gives
# the same tokens (0.1 was a float that kept 2 of 10 keys while its line kept 1; %g
# printed 0.1234567 as 0.123457). Prompts of 3..23 tokens: every kept count from 10 keys up.
for n in $(seq 3 23); do
  printf '{"id": %d, "input_ids": [2' "$n"
  for i in $(seq 2 "$n"); do printf ', %d' $(((7 * i + n) % 900 + 10)); done
  printf ']}\n'
done >sparse.jsonl
for s in 0.1 0.1234567 0.35; do
  zz "${GEN[@]}" --prompts sparse.jsonl --out sp_flag.jsonl --attn-sparsity "$s"
  line=$(sed -n 's/^zigzag: policy \(.*\); plan:.*/\1/p' err)
  rc1=$RC
  zz "${GEN[@]}" --prompts sparse.jsonl --out sp_line.jsonl --policy "$line"
  check "--attn-sparsity $s: the printed line ($line) gives the same tokens" \
    eval '[ "$rc1" -eq 0 ] && [ "$RC" -eq 0 ] && case "$line" in *"sparsity=$s") true ;; *) false ;; esac && cmp -s sp_flag.jsonl sp_line.jsonl'
done
refused "--attn-sparsity with more than 9 decimal places" "at most 9 places" \
  "${GEN[@]}" --prompts sparse.jsonl --out o.jsonl --attn-sparsity 0.1234567891

# 19. an option the command does not take, and a bad ZZ_* value, are errors naming them
refused "generate --gen-len 5 (bench's option; generate made 32 tokens)" "--gen-len does not apply to generate" \
  "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl --gen-len 5
refused "bench --seed (generate's option)" "--seed does not apply to bench" bench --model opt-125m --dummy --seed 3
refused "tokenize --gpu-batch-size" "--gpu-batch-size does not apply to tokenize" tokenize --model "$TINY" --gpu-batch-size 2 hi
ZZ_SEED=abc refused "ZZ_SEED=abc (was a warning, then seed 0)" "ZZ_SEED=abc" "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl
ZZ_GPU_BATCH_SIZE=0 refused "ZZ_GPU_BATCH_SIZE=0 (out of range)" "ZZ_GPU_BATCH_SIZE=0" "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl
ZZ_CPU_ISA=sse9 refused "ZZ_CPU_ISA=sse9 (was a warning)" "ZZ_CPU_ISA=sse9" "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl
ZZ_FAULT_KIND=boom refused "ZZ_FAULT_KIND=boom" "ZZ_FAULT_KIND=boom: want kill, stop or error" \
  "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl
ZZ_DEVICE=gpu refused "ZZ_DEVICE=gpu" "ZZ_DEVICE=gpu (--device): want auto, cpu or cuda" \
  "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl
zz "${GEN[@]}" --prompts golden_text.jsonl --out isa.jsonl --cpu-isa portable
check "--cpu-isa portable: the golden tokens" golden_ok isa.jsonl
zz --help
check "--help lists ZZ_CPU_ISA and ZZ_FAULT_KIND in the table, with the commands each option applies to" \
  eval 'has "--cpu-isa X" outp && has "[ZZ_CPU_ISA]" outp && has "ZZ_FAULT_KIND=X" outp && has "{bench plan}" outp'

# 20. the mpirun-only options without mpirun are refused, not ignored
refused "--layers without mpirun" "started by mpirun" "${GEN[@]}" --prompts golden_text.jsonl --out o.jsonl --layers 3
refused "--comm without mpirun" "started by mpirun" bench --model opt-125m --dummy --comm mpi

# 17. no GPU: auto says so in one line and computes on the CPU; --device cuda names why
zz "${GEN[@]}" --prompts golden_text.jsonl --out dev.jsonl --device auto
if has "using the CPU device" err || has "computing on the CPU" err; then
  check "--device auto without a GPU: 'no GPU found, using the CPU device' (no CUDA runtime jargon), golden tokens" \
    eval 'golden_ok dev.jsonl && { has "zigzag: no GPU found, using the CPU device" err || has "built without CUDA, using the CPU device" err; } && ! has "insufficient" err'
  zz "${GEN[@]}" --prompts golden_text.jsonl --out dev.jsonl --device cuda
  check "--device cuda without a GPU: an error naming the missing GPU or driver" \
    eval '[ "$RC" -ne 0 ] && { has "no GPU found" err || has "built without CUDA" err || has "NVIDIA driver supports CUDA" err; }'
else
  ok "--device auto found a GPU: the no-GPU messages are not checked here"
fi

# ------------------------------------------------------------ m. real Hugging Face directories (issue #21)

# Llama-2's tokenizer_config.json as the hub ships it (model_max_length
# 1000000000000000019884624838656, added_tokens_decoder, chat_template, a null pad_token)
zz tokenize --model "$FX/tok-llama2-hub" "$TJ_TEXT"
TJ_HUB=$(cat outp)
zz tokenize --model "$FX/tok-llama2-meta" "$TJ_TEXT"
check "tokenize with Llama-2's hub tokenizer_config.json (model_max_length 1e30): the ids of the same tokenizer.json" \
  eval '[ "$RC" -eq 0 ] && [ -n "$TJ_HUB" ] && [ "$TJ_HUB" = "$(cat outp)" ]'
mkdir llhub && cp "$FX/tok-llama2-hub/tokenizer_config.json" lltok/config.json lltok/model.safetensors lltok/tokenizer.json llhub/
zz generate --model llhub --prompts lltext.jsonl --out llh.jsonl --max-new-tokens 4
check "generate: a text prompt through the hub tokenizer_config.json = its input_ids" \
  eval '[ "$RC" -eq 0 ] && [ -n "$(ids_of llh.jsonl)" ] && [ "$(ids_of llh.jsonl)" = "$(ids_of lli.jsonl)" ]'
# generation_config.json's eos_token_id [2, 182] replaces config.json's [2, 66]: golden
# prompt 0 (greedy 66 1 182 81 ...) stops at 182, the second listed id (--temperature 0:
# the file's do_sample true would sample, issue #25 item 4)
printf '{"id": 0, "input_ids": [1, 169, 178]}\n' >eos.jsonl
zz generate --model "$FX/tiny-llama-eos-gen" --prompts eos.jsonl --out eos_out.jsonl --max-new-tokens 8 --temperature 0
check "generate stops at the second end id generation_config.json lists" \
  eval '[ "$RC" -eq 0 ] && [ "$(ids_of eos_out.jsonl)" = "\"id\":0,\"output_ids\":[66,1,182]" ]'
# --model org/name from the Hugging Face cache, offline (runtime/hub.c): $HF_HOME/hub's
# models--org--name/refs/main names the snapshot; tiny-qwen2's golden prompt 0 from there
mkdir -p hfh/hub/models--Org--tiny-qwen2/refs hfh/hub/models--Org--tiny-qwen2/snapshots/c0ffee
printf 'c0ffee' >hfh/hub/models--Org--tiny-qwen2/refs/main
cp "$FX/tiny-qwen2/config.json" "$FX/tiny-qwen2/model.safetensors" hfh/hub/models--Org--tiny-qwen2/snapshots/c0ffee/
printf '{"id": 0, "input_ids": [1, 26, 38]}\n' >q2.jsonl
HF_HOME=$PWD/hfh zz generate --model Org/tiny-qwen2 --prompts q2.jsonl --out q2_out.jsonl --max-new-tokens 7 --temperature 0
check "generate --model org/name reads the Hugging Face cache's snapshot (tiny-qwen2: transformers' tokens)" \
  eval '[ "$RC" -eq 0 ] && [ "$(ids_of q2_out.jsonl)" = "\"id\":0,\"output_ids\":[211,105,91,92,25,129,2]" ]'
HF_HOME=$PWD/hfh refused "--model org/name in no cache: refused naming where it looked" \
  "hfh/hub/models--Org--absent/refs/main" generate --model Org/absent --prompts q2.jsonl --out o.jsonl
# a RoPE zigzag does not compute is refused by name from config.json alone (no weights here)
mkdir yarn && sed 's/"rope_type": "llama3"/"rope_type": "yarn"/' "$FX/tiny-llama3-v5/config.json" >yarn/config.json
refused "rope_parameters with rope_type yarn: refused by name before any weight is read" 'rope_type "yarn"' \
  generate --model yarn --prompts eos.jsonl --out o.jsonl --max-new-tokens 2
sed 's/"factor": 8.0/"factor": 1e-40/' "$FX/tiny-llama3-v5/config.json" >yarn/config.json
refused "rope_parameters factor 1e-40: refused naming the key" '"factor" = 1e-40' \
  generate --model yarn --prompts eos.jsonl --out o.jsonl --max-new-tokens 2

# ------------------------------------------------------------ n. text as Hugging Face gives it (issue #21 item 5)

# "--" ends the options: what follows is text even when it starts with "-"
# (ids from AutoTokenizer on tiny-opt)
zz tokenize --model "$TINY" -- --help
check "tokenize -- --help tokenizes the text \"--help\"" eval '[ "$RC" -eq 0 ] && [ "$(cat outp)" = "441 261 79 83" ]'
zz tokenize --model "$TINY" -- -h
check "tokenize -- -h tokenizes the text \"-h\"" eval '[ "$RC" -eq 0 ] && [ "$(cat outp)" = "16 75" ]'
zz tokenize -- --model "$TINY"
check "after --, --model is text, not an option (one text at most)" eval '[ "$RC" -eq 2 ] && has "unexpected argument" err'
# an OPT directory as facebook/opt-* publishes it: "</s>" in a prompt is id 2
zz tokenize --model "$FX/tok-opt" "a</s>b"
check "tokenize: </s> written in the text of an OPT directory is id 2 (AutoTokenizer: 68 2 69)" \
  eval '[ "$RC" -eq 0 ] && [ "$(cat outp)" = "68 2 69" ]'
mkdir optspecial && cp "$TINY/config.json" "$TINY/model.safetensors" "$FX/tok-opt/"*.json "$FX/tok-opt/merges.txt" optspecial/
printf '{"id": 0, "prompt": "Liberty</s>"}\n' >special_text.jsonl
printf '{"id": 0, "input_ids": [2, 47, 915, 2]}\n' >special_ids.jsonl
zz generate --model optspecial --max-new-tokens 4 --prompts special_text.jsonl --out special_text.out
zz generate --model optspecial --max-new-tokens 4 --prompts special_ids.jsonl --out special_ids.out
check "generate: a prompt ending in </s> is AutoTokenizer's [2, 47, 915, 2]" \
  eval '[ "$RC" -eq 0 ] && [ -n "$(ids_of special_ids.out)" ] && [ "$(ids_of special_text.out)" = "$(ids_of special_ids.out)" ]'

# ------------------------------------------------------------ o. the job's files (issue #21 items 11, 12, 13, 18)

{ cat golden_ids.jsonl; echo '{"id": 9, "input_ids": [2, 5'; cat golden_ids.jsonl; } >bad3.jsonl
# 11. nothing that was in --out is lost on any error or kill
printf 'precious\n' >keep.orig
cp keep.orig keep.jsonl
printf '{"id": 1, "input_ids": [2, 5000]}\n{"id": 2, "input_ids": [2, 5]}\n' >badfirst.jsonl
zz "${GEN[@]}" --prompts badfirst.jsonl --out keep.jsonl
check "an existing --out and a first prompt outside the vocabulary: exit 2, --out untouched" \
  eval '[ "$RC" -eq 2 ] && has "outside the vocabulary" err && cmp -s keep.jsonl keep.orig'
zz generate --model novocab --prompts golden_text.jsonl --out keep.jsonl --max-new-tokens 8
check "an existing --out and a text prompt for a model without a tokenizer: exit 2, --out untouched" \
  eval '[ "$RC" -eq 2 ] && has "tokenizer" err && cmp -s keep.jsonl keep.orig'
{ ZZ_FAULT_KILL_AFTER_BLOCKS=0 zz "${GEN[@]}" "${SMALL[@]}" --prompts job.jsonl --out keep.jsonl; } 2>/dev/null
check "a new job over an existing --out killed in its first block: the old file whole, nothing left beside it" \
  eval '[ "$RC" -eq 137 ] && cmp -s keep.jsonl keep.orig && [ -z "$(ls -A | grep -F keep.jsonl. )" ]'
{ ZZ_FAULT_KILL_AFTER_BLOCKS=1 zz "${GEN[@]}" "${SMALL[@]}" --prompts job.jsonl --out keep.jsonl; } 2>/dev/null
check "... killed after its first block: that block is in --out (the new job replaced the old file at its first commit)" \
  eval '[ "$RC" -eq 137 ] && cmp -s <(head -n 8 keep.jsonl) <(head -n 8 full.jsonl) && [ "$(wc -l <keep.jsonl)" -eq 8 ]'
zz "${GEN[@]}" "${SMALL[@]}" --prompts job.jsonl --out keep.jsonl --resume
check "... and --resume completes it to the uninterrupted bytes" eval '[ "$RC" -eq 0 ] && cmp -s keep.jsonl full.jsonl'
zz "${GEN[@]}" --prompts bad3.jsonl --out never.jsonl
check "a refused job leaves no --out it created" eval '[ "$RC" -ne 0 ] && [ ! -e never.jsonl ]'

# 12. never through a link
printf 'target\n' >target.txt
ln -s target.txt link.jsonl
zz "${GEN[@]}" --prompts golden_text.jsonl --out link.jsonl
check "a symbolic link at --out: refused (exit 2), naming it, its target untouched" \
  eval '[ "$RC" -eq 2 ] && has "symbolic link" err && [ "$(cat target.txt)" = target ] && [ -L link.jsonl ]'
zz "${GEN[@]}" --prompts golden_text.jsonl --out link.jsonl --resume
check "... with --resume too" eval '[ "$RC" -eq 2 ] && has "symbolic link" err && [ "$(cat target.txt)" = target ]'
ln -s nowhere.jsonl dangling.jsonl
zz "${GEN[@]}" --prompts golden_text.jsonl --out dangling.jsonl
check "a dangling link at --out: refused, its target not created" eval '[ "$RC" -eq 2 ] && [ ! -e nowhere.jsonl ]'
ln -s target.txt hwlink.json
zz profile --profile-seconds 0.2 --out hwlink.json
check "profile --out over a link replaces the link with the file, never writing its target" \
  eval '[ "$RC" -eq 0 ] && [ ! -L hwlink.json ] && has "\"gemm_flops\"" hwlink.json && [ "$(cat target.txt)" = target ]'

# 13. --resume only continues the job that wrote --out
check "a job writes its record beside --out: model, settings, a hash per prompt" \
  eval 'has "\"max_new_tokens\": 8" full.jsonl.job.json && has "\"config\"" full.jsonl.job.json && [ "$(grep -c "\"[0-9a-f]\{16\}\"" full.jsonl.job.json)" -eq 43 ]'
mk_done() { cp full.jsonl "$1" && cp full.jsonl.job.json "$1.job.json" && head -n 8 full.jsonl >"$1"; }
mk_done r1.jsonl && cp r1.jsonl r1.orig
zz generate --model "$TINY" --max-new-tokens 4 --prompts job.jsonl --out r1.jsonl --resume
check "--resume with another --max-new-tokens: refused, saying what differs, --out untouched" \
  eval '[ "$RC" -eq 2 ] && has "--max-new-tokens 8, this run has 4" err && cmp -s r1.jsonl r1.orig'
cp -r "$TINY" tiny2 && chmod -R u+w tiny2
zz generate --model tiny2 --max-new-tokens 8 --prompts job.jsonl --out r1.jsonl --resume
check "--resume with another model: refused, naming --model" eval '[ "$RC" -eq 2 ] && has "made with --model" err && cmp -s r1.jsonl r1.orig'
zz "${GEN[@]}" --temperature 0.8 --prompts job.jsonl --out r1.jsonl --resume
check "--resume of a greedy job with sampling: refused, naming --temperature" eval '[ "$RC" -eq 2 ] && has "--temperature" err'
zz "${GEN[@]}" --seed 99 --prompts job.jsonl --out r1.jsonl --resume
check "--resume of a greedy job with another --seed: accepted (the seed does not change greedy tokens)" \
  eval '[ "$RC" -eq 0 ] && cmp -s r1.jsonl full.jsonl'
mk_done r2.jsonl
sed 's/"Liberty 0"/"Liberty zero"/' job.jsonl >job_changed.jsonl
zz "${GEN[@]}" --prompts job_changed.jsonl --out r2.jsonl --resume
check "--resume with a prompt changed: refused, naming its id" eval '[ "$RC" -eq 2 ] && has "prompt id 0 " err'
head -n 30 job.jsonl >job_short.jsonl
zz "${GEN[@]}" --prompts job_short.jsonl --out r2.jsonl --resume
check "--resume with prompts missing: refused" eval '[ "$RC" -eq 2 ] && has "does not have" err'
mk_done r3.jsonl
printf '{"id":"stranger","output_ids":[5]}\n' >>r3.jsonl
zz "${GEN[@]}" --prompts job.jsonl --out r3.jsonl --resume
check "--resume into an --out with a foreign id: refused, naming it" eval '[ "$RC" -eq 2 ] && has "\"stranger\"" err'
mk_done r4.jsonl
head -n 1 full.jsonl >>r4.jsonl
zz "${GEN[@]}" --prompts job.jsonl --out r4.jsonl --resume
check "--resume into an --out with an id twice: refused" eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "twice" err'
head -n 8 full.jsonl >r5.jsonl
zz "${GEN[@]}" --prompts job.jsonl --out r5.jsonl --resume
check "--resume into an --out without its job record: refused, saying so" eval '[ "$RC" -eq 2 ] && has "no job record" err'

# 18. every prompt is checked before anything loads; the plan is for the longest prompt
zz generate --model opt-1.3b --dummy --device cpu --prompts bad3.jsonl --out o18.jsonl --max-new-tokens 8
check "a malformed line 5 is refused before the engine is built (no plan line)" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "bad3.jsonl:5" err && ! has "plan:" err'
{ cat golden_ids.jsonl; echo '{"id": 9, "input_ids": [2, 50000000]}'; } >bad4.jsonl
zz generate --model opt-1.3b --dummy --device cpu --prompts bad4.jsonl --out o18.jsonl --max-new-tokens 8
check "an id outside the vocabulary on the last line is refused before the engine is built" \
  eval '[ "$RC" -eq 2 ] && has "bad4.jsonl:5" err && ! has "plan:" err'
zz "${GEN[@]}" --prompts golden_ids.jsonl --out o18.jsonl --no-progress --hw tiny-hw.json
check "the memory plan is for the longest prompt of the job (37 tokens), not the model's 56" \
  eval '[ "$RC" -eq 0 ] && has "prompts of 37 tokens" err'
zz generate --model "$TINY" --max-new-tokens 70 --prompts golden_ids.jsonl --out o18.jsonl
check "--max-new-tokens beyond the positions: refused without a negative prompt length" \
  eval '[ "$RC" -eq 2 ] && has "--max-new-tokens 70 leaves no position" err && ! grep -q -- " -[0-9]" err'
zz "${GEN[@]}" --prompts - --out stdin.jsonl <job.jsonl
check "prompts from stdin are checked whole, then run: the bytes of the file run" eval '[ "$RC" -eq 0 ] && cmp -s stdin.jsonl full.jsonl'

# ------------------------------------------------------------ issue #24: scaling, caps, cgroups

# plan --ranks m answers "will m machines beat one?": the best 1-rank plan for the same file and prompts,
# the speed-up and whether it is super-linear, each rank's block; --json carries the same
zz plan --model opt-1.3b --hw "$HW/t4-gcp-x4.json" --prompt-len 32 --gen-len 8 --max-block 64 --ranks 4
check "plan --ranks 4 prints the best one-machine plan, the speed-up and whether it is super-linear, each rank's block" \
  eval '[ "$RC" -eq 0 ] && has "one machine: policy gbs=" outp && grep -qE "^speed-up of 4 machines over one: decode x[0-9.]+ \((super|sub)-linear|no gain" outp && has "rank 3: block " outp'
BLOCKS=$(sed -n 's/^rank [0-9]: block \([0-9]*\) sequences.*/\1/p' outp | sort -u)
check "plan --ranks 4 --max-block 64: the whole block (every group) is at most the 64 prompts there are" \
  eval '[ -n "$BLOCKS" ] && [ "$(echo "$BLOCKS" | wc -l)" -eq 1 ] && [ "$BLOCKS" -le 64 ]'
zz plan --model opt-1.3b --hw "$HW/t4-gcp-x4.json" --prompt-len 32 --gen-len 8 --max-block 64 --ranks 4 --json
check "plan --ranks 4 --json carries one_rank, speedup (super_linear_decode/total) and the block" \
  eval '[ "$RC" -eq 0 ] && has "\"one_rank\": {\"policy\": \"gbs=" outp && has "\"super_linear_decode\": " outp && has "\"block\": " outp && has "\"policy_given\": false" outp'
# --ranks with --policy: planned around it, or refused naming the rank; never silently replaced
PIPEPOL="gbs=4 num_gb=2 w=100,0 c=100,0 a=100,0 overlap=1 cpu_attn=0 cw=0 cc=0 sparsity=1"
zz plan --model opt-1.3b --hw "$HW/t4-gcp-x4.json" --prompt-len 32 --gen-len 8 --ranks 2 --policy "$PIPEPOL"
check "plan --ranks 2 --policy P plans every rank around P (not a searched policy)" \
  eval '[ "$RC" -eq 0 ] && has "the given policy on every rank" outp && [ "$(grep -c "^rank [01]: policy $PIPEPOL" outp)" -eq 2 ]'
zz plan --model opt-1.3b --hw tiny-hw.json --prompt-len 32 --gen-len 8 --ranks 2 --policy "$PIPEPOL" --gpu-mem 300M --cpu-mem 300M
check "plan --ranks 2 --policy P that a rank cannot hold is refused naming the rank" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && grep -q "rank [01] (layers \[" err && has "cannot run it" err'

# cgroups (root, cgroup v1 memory/cpu/cpuset mounted): the defaults follow the group's limits, and a plan
# under --cpu-mem runs inside a memory limit the planner's RAM bound respects (before #24, --cpu-mem 600M
# --gpu-mem 600M gave a plan of 837 MiB, killed by an 800 MiB limit)
CG=/sys/fs/cgroup
if [ "$(id -u)" = 0 ] && [ -w "$CG/memory" ] && [ -w "$CG/cpu" ] && [ -w "$CG/cpuset" ] && [ -e "$CG/cpu/cpu.cfs_quota_us" ]; then
  G=zzcli$$
  for c in memory cpu cpuset; do mkdir -p "$CG/$c/$G"; done
  echo 800M >"$CG/memory/$G/memory.limit_in_bytes"
  echo 50000 >"$CG/cpu/$G/cpu.cfs_quota_us"
  cat "$CG/cpuset/cpuset.mems" >"$CG/cpuset/$G/cpuset.mems"
  cut -d, -f1 "$CG/cpuset/cpuset.effective_cpus" | cut -d- -f1 >"$CG/cpuset/$G/cpuset.cpus"
  # zzg ARGS...: zz inside the group
  zzg() {
    timeout "${CLI_HANG:-120}" sh -c 'for c in memory cpu cpuset; do echo $$ >"$0/$c/$1/tasks"; done; shift; exec "$@"' \
      "$CG" "$G" "$ZZ" "$@" >"$W/outp" 2>"$W/err"
    RC=$?
  }
  zzg bench --model opt-125m --dummy --hw tiny-hw.json --cpu-mem 600M --gpu-mem 600M --prompt-len 16 --gen-len 2 --max-block 4
  check "bench under --cpu-mem 600M --gpu-mem 600M in an 800 MiB memory cgroup: planned within 600 MiB of RAM, not killed" \
    eval '[ "$RC" -eq 0 ] && has "decode" outp'
  check "in a group of 0.5 CPU on one CPU: the plan's threads are cut to 1 and the binding line names quota, cpuset, memory" \
    eval 'has "threads from the plan: GEMM 1, CPU attention 1" err && grep -q "bound to cores .*1 core to use, cgroup v1: cpuset [0-9]* (1 CPU of [0-9]*), quota 0.50 CPU per 100 ms, memory 700.00 MiB (limit 800.00 MiB)" err'
  zzg bench --model "$TINY" --prompt-len 8 --gen-len 2 --gpu-batch-size 1 --cpu-mem 750M
  check "--cpu-mem 0 means the group's memory less an eighth: 750M is refused as more than the 700 MiB of an 800 MiB limit" \
    eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "more than this machine" err && has "700.00 MiB" err'
  for c in memory cpu cpuset; do rmdir "$CG/$c/$G" 2>/dev/null; done
else
  ok "# skip cgroup checks: not root or no writable cgroup v1 memory/cpu/cpuset"
fi

# one model setup (zz_setup_model, launch/setup.c): bench and generate refuse a preset without --dummy in the same words
zz bench --model opt-125m --device cpu --prompt-len 4 --gen-len 2
check "bench: a preset without --dummy is refused as generate refuses it" \
  eval '[ "$RC" -ne 0 ] && has "--model opt-125m is a preset: add --dummy" err'

# the groups T of a pipeline: plan takes --num-inner-iterations as mpirun does (it was refused as an mpirun
# option), plans exactly that T, and refuses it without --ranks (one process runs no groups)
zz plan --model opt-1.3b --hw "$HW/t4-gcp-x4.json" --prompt-len 32 --gen-len 8 --max-block 64 --ranks 2 --num-inner-iterations 3
check "plan --ranks 2 --num-inner-iterations 3 plans 3 groups (the user's T, not searched)" \
  eval '[ "$RC" -eq 0 ] && has "2 ranks, 3 micro-batch groups (--num-inner-iterations)" outp && grep -q "^rank 1: block [0-9]* sequences (3 groups of gbs" outp'
zz plan --model opt-1.3b --hw "$HW/t4-gcp-x4.json" --prompt-len 32 --gen-len 8 --max-block 64 --ranks 2 --num-inner-iterations 3 --json
check "plan --ranks 2 --num-inner-iterations 3 --json: \"groups\": 3" eval '[ "$RC" -eq 0 ] && has "\"groups\": 3," outp'
zz plan --model opt-1.3b --hw "$HW/t4-gcp-x4.json" --prompt-len 32 --gen-len 8 --num-inner-iterations 3
check "plan --num-inner-iterations without --ranks is refused (exit 2) naming --ranks" \
  eval '[ "$RC" -eq 2 ] && has "give --ranks m too" err'

# --cpu-act int8 in the planner (issue #27): plan takes it, prices the 4-bit linears at the file's
# gemm_q4_int8_flops (compressed weights only), refuses a file without that rate by name, a bad value
# as every command does; generate/bench --hw plan with it
sed 's/"cpu_flops": 3e10}/"cpu_flops": 3e10, "gemm_q4_flops": [[1, 1e9], [64, 1e10]], "bmm_prefill_q4_flops": 5e9, "bmm_decode_q4_flops": 2e9, "cpu_attention_q4_flops": [[1, 1e9], [2, 2e9]], "quant_bytes_per_s": 1e8}/' \
  tiny-hw.json >tiny-q4-hw.json
sed 's/"quant_bytes_per_s": 1e8}/"quant_bytes_per_s": 1e8, "gemm_q4_int8_flops": [[1, 3e9], [64, 3e10]]}/' \
  tiny-q4-hw.json >tiny-i8-hw.json
tps_of() { sed -n 's/.*"total_tps": \([0-9.e+-]*\),.*/\1/p' "$1"; }
zz plan --model opt-1.3b --hw tiny-i8-hw.json --prompt-len 32 --gen-len 8 --compress-weight --gpu-batch-size 4 --json \
  --cpu-act exact
cp outp i8-exact.json
zz plan --model opt-1.3b --hw tiny-i8-hw.json --prompt-len 32 --gen-len 8 --compress-weight --gpu-batch-size 4 --json --cpu-act int8
check "plan --cpu-act int8 is accepted and predicts the same compressed policy faster than the exact path" \
  eval '[ "$RC" -eq 0 ] && [ -n "$(tps_of outp)" ] && awk -v a="$(tps_of i8-exact.json)" -v b="$(tps_of outp)" "BEGIN{exit !(b > a)}"'
zz plan --model opt-1.3b --hw tiny-i8-hw.json --prompt-len 32 --gen-len 8 --max-block 8 --cpu-act int8
check "plan --cpu-act int8 without --compress-weight searches compressed weights only (cw=1)" \
  eval '[ "$RC" -eq 0 ] && grep -q "^policy .*cw=1" outp'
zz plan --model opt-1.3b --hw tiny-q4-hw.json --prompt-len 32 --gen-len 8 --cpu-act int8
check "plan --cpu-act int8 on a file without gemm_q4_int8_flops is refused naming the field" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "gemm_q4_int8_flops" err'
zz plan --model opt-1.3b --hw tiny-q4-hw.json --prompt-len 32 --gen-len 8 --cpu-act bogus
check "plan --cpu-act bogus is refused with the choices" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "cpu-act" err && has "int8" err'
if grep -q '"device": "cpu"' measured.json; then
  check "profile on the cpu device measures the 4-bit linear with int8 x too (gemm_q4_int8_flops)" \
    has '"gemm_q4_int8_flops"' measured.json
fi
zz bench --model "$TINY" --prompt-len 16 --gen-len 4 --hw tiny-i8-hw.json --max-block 8 --device cpu --cpu-act int8
check "bench --hw --cpu-act int8 without a policy runs the planner's compressed policy" \
  eval '[ "$RC" -eq 0 ] && grep -q "no policy given: the planner.*cw=1" err && has "predicted  prefill" outp'

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
