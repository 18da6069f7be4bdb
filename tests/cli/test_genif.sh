#!/usr/bin/env bash
# test_genif.sh ZIGZAG CHECK_BATCH_OUTPUT FIXTURES — the generation interface of
# issue #25 on the tiny fixtures: OpenAI batch request lines answered in the batch
# output form (check_batch_output validates the shape), a 1,000-line vLLM-style
# batch file with bad lines, each line's own settings (max_new_tokens, sampling,
# seed, n, logprobs, penalties), stop strings, generation_config.json's defaults
# under the command line, --resume over such lines, chat templates, and the command
# line's --version, per-command --help and install.
#
# Prints "ok - ..." / "not ok - ..." per check and "N passed, N failed"; exits
# non-zero when any failed. bash and coreutils only; every run under `timeout 60`.
set -u
if [ $# -ne 3 ]; then
  echo "usage: $0 ZIGZAG CHECK_BATCH_OUTPUT FIXTURES_DIR" >&2
  exit 2
fi
ZZ=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
CHK=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
FX=$(cd "$3" && pwd)
TINY=$FX/tiny-opt
# the shared harness: $W, ok / not_ok / check, zz, has
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh" zz_genif
# line N of a file
line() { sed -n "${1}p" "$2"; }
# the output_ids of line N, spaces dropped
ids_at() { line "$1" "$2" | grep -o '"output_ids":\[[^]]*\]' | head -n 1; }
# these checks read lines by place: --keep-order writes them in file order (by
# default blocks are formed by length and lines come as their blocks finish)
GEN=(generate --model "$TINY" --no-progress --keep-order)

# ------------------------------------------------------------ 1. OpenAI batch request lines

cat >batch.jsonl <<'J'
{"custom_id": "c1", "method": "POST", "url": "/v1/completions", "body": {"model": "tiny", "prompt": "Liberty", "max_tokens": 4}}
{"custom_id": "c2", "method": "POST", "url": "/v1/completions", "body": {"model": "tiny", "prompt": [2, 47, 915], "max_tokens": 3, "logprobs": 2, "n": 2, "temperature": 0.8, "seed": 3}}
{"custom_id": "c3", "method": "POST", "url": "/v1/completions", "body": {"model": "tiny", "prompt": "Liberty", "max_tokens": 4, "logit_bias": {"5": 1}}}
{"custom_id": "c4", "method": "POST", "url": "/v1/completions", "body": {"model": "tiny", "prompt": "Liberty", "temperature": -1}}
{"custom_id": "c5", "method": "POST", "url": "/v1/embeddings", "body": {"model": "tiny", "input": "Liberty"}}
{"custom_id": "c6", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}}
{"custom_id": "c7", "method": "POST", "url": "/v1/completions", "body": {"prompt": "Liberty", "max_tokens": 2, "stop": "zz", "presence_penalty": 0.5, "frequency_penalty": 0.5, "repetition_penalty": 1.2, "top_p": 0.9, "top_k": 5}}
J
zz "${GEN[@]}" --prompts batch.jsonl --out batch.out --max-new-tokens 8
"$CHK" batch.out >shape.txt 2>shape.err
SHAPE=$?
check "a batch file: every line answered in the OpenAI batch output form, in order" \
  eval '[ "$RC" -eq 0 ] && [ "$SHAPE" -eq 0 ] && [ "$(cut -d" " -f1 shape.txt | tr "\n" " ")" = "c1 c2 c3 c4 c5 c6 c7 " ]'
check "good lines are answered: c1 one choice, c2 its n = 2, c7 its penalties" \
  eval 'has "c1 ok 1" shape.txt && has "c2 ok 2" shape.txt && has "c7 ok 1" shape.txt'
check "a key zigzag does not take is the line's error, naming it (body.logit_bias)" \
  eval 'has "c3 error unsupported_parameter" shape.txt && line 3 batch.out | grep -q "body.logit_bias"'
check "a bad value is the line's error, naming the key (body.temperature = -1)" \
  eval 'has "c4 error invalid_value" shape.txt && line 4 batch.out | grep -q "body.temperature = -1"'
check "an endpoint zigzag does not serve is the line's error (url /v1/embeddings)" \
  eval 'has "c5 error invalid_url" shape.txt && line 5 batch.out | grep -q "/v1/embeddings"'
check "usage counts the prompt's tokens: \"Liberty\" is 3 with BOS; max_tokens 4 gives 4 or fewer" \
  eval 'line 1 batch.out | grep -q "\"prompt_tokens\":3,\"completion_tokens\":[1-4],"'
check "completions logprobs 2: tokens, token_logprobs, top_logprobs of 2, text_offset" \
  eval 'line 2 batch.out | grep -q "\"token_logprobs\":\[-" && line 2 batch.out | grep -q "\"top_logprobs\":\[{\"[^\"]*\":-[0-9.e-]*,\"[^\"]*\":-" && line 2 batch.out | grep -q "\"text_offset\":\[0,"'
check "a body without model is answered with --model" eval 'line 7 batch.out | grep -qF "\"model\":\"$TINY\""'
# the greedy text of "Liberty" through the batch form is the native line's text
printf '{"id": 1, "prompt": "Liberty", "max_new_tokens": 4}\n' >lib.jsonl
zz "${GEN[@]}" --prompts lib.jsonl --out lib.out --max-new-tokens 8
NT=$(grep -o '"text":"[^"]*"' lib.out)
check "the batch form's text is the native line's (greedy, the same prompt and max tokens)" \
  eval '[ -n "$NT" ] && line 1 batch.out | grep -qF "$NT"'

# ------------------------------------------------------------ 1b. 1,000 lines, a few bad

for i in $(seq 1 1000); do
  case $i in
    17) echo '{"custom_id": "r17", "method": "POST", "url": "/v1/completions", "body": {"model": "tiny", "prompt": "Liberty", "max_tokens": 2, "suffix": "x"}}' ;;
    256) echo '{"custom_id": "r256", "method": "POST", "url": "/v1/completions", "body": {"model": "tiny", "prompt": "Liberty", "max_tokens": 0}}' ;;
    511) echo '{"custom_id": "r511", "method": "GET", "url": "/v1/completions", "body": {"model": "tiny", "prompt": "Liberty", "max_tokens": 2}}' ;;
    777) echo '{"custom_id": "r777", "method": "POST", "url": "/v1/completions", "body": {"model": "tiny", "max_tokens": 2}}' ;;
    999) echo '{"custom_id": "r999", "method": "POST", "url": "/v1/completions", "body": {"model": "tiny", "prompt": "Liberty", "max_tokens": 2, "top_p": 7}}' ;;
    *) echo "{\"custom_id\": \"r$i\", \"method\": \"POST\", \"url\": \"/v1/completions\", \"body\": {\"model\": \"tiny\", \"prompt\": \"Four score $i\", \"max_tokens\": $((1 + i % 3)), \"temperature\": 0.$((i % 10)), \"seed\": $i}}" ;;
  esac
done >k.jsonl
zz "${GEN[@]}" --prompts k.jsonl --out k.out --max-new-tokens 4 --gpu-batch-size 64
"$CHK" k.out >k.txt 2>k.err
KS=$?
check "1,000 lines with 5 bad: every line answered, in order, in the batch output form" \
  eval '[ "$RC" -eq 0 ] && [ "$KS" -eq 0 ] && [ "$(wc -l <k.out)" -eq 1000 ] && [ "$(cut -d" " -f1 k.txt | sed "s/^r//" | tr "\n" " ")" = "$(seq 1 1000 | tr "\n" " ")" ]'
check "1,000 lines: the 995 good ones answered, the 5 bad ones each carry their error" \
  eval '[ "$(grep -c " ok 1$" k.txt)" -eq 995 ] && [ "$(grep -c " error " k.txt)" -eq 5 ] && has "r17 error" k.txt && has "r256 error" k.txt && has "r511 error" k.txt && has "r777 error" k.txt && has "r999 error" k.txt'
check "1,000 lines: the summary line names the prompts, the errors and the output" \
  eval 'has "1000 prompts (5 answered with an error)" err && has "output in k.out" err'
check "each line's max_tokens: line 3 asked 1 token" eval 'line 3 k.out | grep -q "\"completion_tokens\":1,"'

# ------------------------------------------------------------ 2. native lines with their own settings

cat >nat.jsonl <<'J'
{"id": 0, "prompt": "Liberty"}
{"id": 1, "prompt": "Liberty", "max_new_tokens": 3}
{"id": 2, "prompt": "Liberty", "logprobs": 3}
{"id": 3, "prompt": "Liberty", "temperature": 0.9, "seed": 11, "top_k": 20, "top_p": 0.95}
{"id": 4, "prompt": "Liberty", "n": 3, "temperature": 1.0, "seed": 4}
{"id": 5, "prompt": "Liberty", "max_tokens": 3}
{"id": 6, "prompt": "Four score and seven years ago", "repetition_penalty": 1.5}
{"id": 7, "prompt": "Four score and seven years ago"}
J
zz "${GEN[@]}" --prompts nat.jsonl --out nat.out --max-new-tokens 6 --gpu-batch-size 4
check "native lines run with their own settings in shared blocks (exit 0, a line each)" \
  eval '[ "$RC" -eq 0 ] && [ "$(wc -l <nat.out)" -eq 8 ]'
check "max_new_tokens 3 on a line: its first 3 greedy tokens, finish_reason length" \
  eval '[ "$(line 2 nat.out | grep -o "\"output_ids\":\[[0-9,]*\]")" = "$(line 1 nat.out | grep -o "\"output_ids\":\[[0-9]*,[0-9]*,[0-9]*")]" ] && line 2 nat.out | grep -q "\"finish_reason\":\"length\""'
check "logprobs 3: one log-probability per token and 3 alternatives each" \
  eval '[ "$(line 3 nat.out | grep -o "\"logprobs\":\[[^]]*\]" | tr "," "\n" | wc -l)" -eq 6 ] && [ "$(line 3 nat.out | grep -o "{\"id\":[0-9]*,\"logprob\"" | wc -l)" -eq 18 ]'
check "greedy with logprobs: the chosen token is the most likely (first alternative)" \
  eval '[ "$(line 3 nat.out | grep -o "\"top_logprobs\":\[\[{\"id\":[0-9]*" | grep -o "[0-9]*$")" = "$(ids_at 3 nat.out | grep -o "\[[0-9]*" | tr -d "[")" ]'
check "n = 3: three choices, each with output_ids and finish_reason" \
  eval '[ "$(line 5 nat.out | grep -o "\"index\":[0-9]" | tr "\n" " ")" = "\"index\":0 \"index\":1 \"index\":2 " ]'
check "an unknown key on a native line (max_tokens) is that line's error, naming it; the others ran" \
  eval 'line 6 nat.out | grep -q "\"error\":{\"code\":\"unsupported_parameter\",\"message\":\"\\\\\"max_tokens\\\\\"" && ! line 7 nat.out | grep -q error'
check "repetition_penalty 1.5 changes the greedy tokens (they repeat 1003 and 966 without it)" \
  eval '[ -n "$(ids_at 8 nat.out)" ] && [ "$(ids_at 7 nat.out)" != "$(ids_at 8 nat.out)" ]'
# each line's sampling is its own: the same line alone, in another block size, in another place
line 4 nat.jsonl >one.jsonl
zz "${GEN[@]}" --prompts one.jsonl --out one.out --max-new-tokens 6
check "a line with its own seed samples the same tokens alone as among other lines" \
  eval '[ -n "$(ids_at 1 one.out)" ] && [ "$(ids_at 1 one.out)" = "$(ids_at 4 nat.out)" ]'
zz "${GEN[@]}" --prompts nat.jsonl --out nat1.out --max-new-tokens 6 --gpu-batch-size 1 --refill-blocks 1
check "blocks of 1 sequence: a line of n = 3 is refused, the rest give the tokens of blocks of 4" \
  eval '[ "$RC" -eq 0 ] && line 5 nat1.out | grep -q "more than a block" && [ "$(sed 5d nat1.out | grep -o "\"output_ids\":\[[^]]*\]")" = "$(sed 5d nat.out | grep -o "\"output_ids\":\[[^]]*\]")" ]'
zz "${GEN[@]}" --prompts nat.jsonl --out nat2.out --max-new-tokens 6 --logprobs 0
check "--logprobs 0: every line carries its tokens' log-probabilities" \
  eval '[ "$RC" -eq 0 ] && [ "$(grep -c "\"logprobs\":\[" nat2.out)" -eq 7 ]'

# ------------------------------------------------------------ 2b. --resume over such lines

cat batch.jsonl nat.jsonl k.jsonl | head -n 200 >mix.jsonl
zz "${GEN[@]}" --prompts mix.jsonl --out mix_full.out --max-new-tokens 6 --gpu-batch-size 8
ZZ_FAULT_KILL_AFTER_BLOCKS=4 timeout 60 "$ZZ" "${GEN[@]}" --prompts mix.jsonl --out mix.out --max-new-tokens 6 \
  --gpu-batch-size 8 --refill-blocks 2 >/dev/null 2>&1
KRC=$?
zz "${GEN[@]}" --prompts mix.jsonl --out mix.out --max-new-tokens 6 --gpu-batch-size 8 --refill-blocks 2 --resume
check "a killed job of batch and native lines resumes to the uninterrupted lines (\"created\" aside)" \
  eval '[ "$KRC" -eq 137 ] && [ "$RC" -eq 0 ] && [ "$(sed "s/\"created\":[0-9]*//" mix.out)" = "$(sed "s/\"created\":[0-9]*//" mix_full.out)" ]'

# ------------------------------------------------------------ 2c. blocks by length

# prompts of mixed lengths and max tokens, greedy and sampled with their own seeds,
# one of n = 2: by default blocks are formed by length, so lines come out of file
# order, and 8 lines on 4 slots refill the slots of lines that end; every line's
# tokens are those of file order and of the line run alone
W10="a b c d e f g h i j"
cat >len.jsonl <<J
{"id": "l0", "prompt": "$W10 $W10 $W10 $W10", "max_new_tokens": 5}
{"id": "l1", "prompt": "Liberty", "max_new_tokens": 2}
{"id": "l2", "prompt": "$W10 $W10 $W10", "temperature": 0.9, "seed": 5, "max_new_tokens": 6}
{"id": "l3", "prompt": "Four score", "max_new_tokens": 6}
{"id": "l4", "prompt": "$W10 $W10 $W10 $W10 $W10", "max_new_tokens": 1}
{"id": "l5", "prompt": "Liberty and", "n": 2, "temperature": 1.0, "seed": 9, "max_new_tokens": 4}
{"id": "l6", "prompt": "$W10", "max_new_tokens": 3}
{"id": "l7", "prompt": "$W10 $W10", "temperature": 0.7, "seed": 2, "max_new_tokens": 6}
J
# one line per id: the id and every output_ids of it
by_id() { sed 's/"created":[0-9]*//' "$1" | while IFS= read -r l; do
  printf '%s %s\n' "$(printf '%s' "$l" | grep -o '"id":"l[0-9]"' | head -n 1)" "$(printf '%s' "$l" | grep -o '"output_ids":\[[^]]*\]' | tr '\n' ' ')"
done | sort; }
zz generate --model "$TINY" --no-progress --prompts len.jsonl --out len.out --max-new-tokens 6 --gpu-batch-size 2 --num-gpu-batches 2
LRC=$RC
zz "${GEN[@]}" --prompts len.jsonl --out len_keep.out --max-new-tokens 6 --gpu-batch-size 3
check "blocks by length: every line once, and not in file order (fewest max tokens, then shortest, first)" \
  eval '[ "$LRC" -eq 0 ] && [ "$(wc -l <len.out)" -eq 8 ] && [ "$(by_id len.out | cut -d" " -f1 | uniq | wc -l)" -eq 8 ] && [ "$(grep -o "\"id\":\"l[0-9]\"" len.out | head -n 2 | tr -d "\n")" = "\"id\":\"l4\"\"id\":\"l1\"" ]'
check "--keep-order writes file order" \
  eval '[ "$(grep -o "\"id\":\"l[0-9]\"" len_keep.out | tr -d "\n")" = "\"id\":\"l0\"\"id\":\"l1\"\"id\":\"l2\"\"id\":\"l3\"\"id\":\"l4\"\"id\":\"l5\"\"id\":\"l6\"\"id\":\"l7\"" ]'
check "blocks by length give every line the tokens of file order (greedy, own seeds, n = 2)" \
  eval '[ -n "$(by_id len.out)" ] && [ "$(by_id len.out)" = "$(by_id len_keep.out)" ]'
ALONE_OK=1
for i in 1 2 3 4 5 6 7 8; do
  line "$i" len.jsonl >alone.jsonl
  zz "${GEN[@]}" --prompts alone.jsonl --out alone.out --max-new-tokens 6
  A=$(by_id alone.out)
  [ -n "$A" ] && by_id len.out | grep -qxF "$A" || ALONE_OK=0
done
check "... and each line's tokens run alone" eval '[ "$ALONE_OK" -eq 1 ]'
# gathered 2 blocks of 2 at a time (4 lines on 2 slots: refilled), committed together
ZZ_FAULT_KILL_AFTER_BLOCKS=1 timeout 60 "$ZZ" generate --model "$TINY" --no-progress --prompts len.jsonl --out len_k.out \
  --max-new-tokens 6 --gpu-batch-size 2 --refill-blocks 2 >/dev/null 2>&1
KRC=$?
KEPT=$(wc -l <len_k.out)
zz generate --model "$TINY" --no-progress --prompts len.jsonl --out len_k.out --max-new-tokens 6 --gpu-batch-size 2 \
  --refill-blocks 2 --resume
check "blocks by length: killed after a block, --resume finishes with each line once and its tokens" \
  eval '[ "$KRC" -eq 137 ] && [ "$KEPT" -ge 1 ] && [ "$KEPT" -lt 8 ] && [ "$RC" -eq 0 ] && [ "$(by_id len_k.out)" = "$(by_id len.out)" ]'

# a line no block could hold is refused by its bytes, before it is tokenized
{ printf '{"id": "short", "prompt": "Liberty"}\n{"id": "huge", "prompt": "'; head -c 4000000 /dev/zero | tr '\0' 'a'; printf '"}\n'; } >huge.jsonl
zz generate --model "$TINY" --no-progress --prompts huge.jsonl --out huge.out --max-new-tokens 2 --max-prompt-len 8
check "a 4 MB prompt beside --max-prompt-len 8 is refused by its bytes, naming its line, before tokenizing" \
  eval '[ "$RC" -ne 0 ] && has "huge.jsonl:2: the prompt" err && has "4000000 bytes are more than --max-prompt-len 8 tokens can hold" err && has "refused before tokenizing" err && [ ! -s huge.out ]'

# ------------------------------------------------------------ 3. stop strings

printf '{"id": 0, "prompt": "Four score and seven years ago"}\n' >s0.jsonl
zz "${GEN[@]}" --prompts s0.jsonl --out s0.out --max-new-tokens 8
T0=$(grep -o '"text":"[^"]*"' s0.out | sed 's/^"text":"//; s/"$//')
# a stop string from the middle of the greedy text: the text before it, finish "stop"
STOP=${T0:3:3}
PRE=${T0%%"$STOP"*}
printf '{"id": 0, "prompt": "Four score and seven years ago", "stop": ["%s", "never-there"]}\n' "$STOP" >s1.jsonl
zz "${GEN[@]}" --prompts s1.jsonl --out s1.out --max-new-tokens 8
check "stop: the text ends before the stop string (\"$STOP\" in \"$T0\"), finish_reason stop, fewer tokens" \
  eval '[ "$RC" -eq 0 ] && [ ${#T0} -ge 6 ] && grep -qF "\"text\":\"$PRE\",\"finish_reason\":\"stop\"" s1.out && [ "$(ids_at 1 s1.out | tr "," "\n" | wc -l)" -lt 8 ]'
printf '{"id": 0, "input_ids": [2, 47], "stop": "x"}\n' >s2.jsonl
mkdir notok && cp "$TINY/config.json" "$TINY/model.safetensors" notok/
zz generate --keep-order --model notok --no-progress --prompts s2.jsonl --out s2.out --max-new-tokens 2
check "stop without a tokenizer: the line's error, saying why" eval '[ "$RC" -eq 0 ] && has "stop strings need the model" s2.out'

# ------------------------------------------------------------ 4. generation_config.json

mkdir gc && cp "$FX/tiny-llama/config.json" "$FX/tiny-llama/model.safetensors" gc/
printf '{"id": 0, "input_ids": [1, 169, 178]}\n' >gc.jsonl
zz generate --keep-order --model gc --no-progress --prompts gc.jsonl --out gc_greedy.out --max-new-tokens 6
printf '{"do_sample": true, "temperature": 0.9, "top_k": 7, "top_p": 0.8, "max_new_tokens": 5, "repetition_penalty": 1.1}\n' >gc/generation_config.json
zz generate --keep-order --model gc --no-progress --prompts gc.jsonl --out gc1.out
check "generation_config.json: do_sample, temperature, top_k, top_p, max_new_tokens are the job's defaults" \
  eval '[ "$RC" -eq 0 ] && has "\"temperature\": 0.89999" gc1.out.job.json && has "\"top_k\": 7" gc1.out.job.json && has "\"max_new_tokens\": 5" gc1.out.job.json'
zz generate --keep-order --model gc --no-progress --prompts gc.jsonl --out gc2.out --temperature 0 --max-new-tokens 6 --repetition-penalty 1
check "the command line over generation_config.json: --temperature 0 is greedy again" \
  eval '[ "$RC" -eq 0 ] && [ "$(ids_at 1 gc2.out)" = "$(ids_at 1 gc_greedy.out)" ]'
printf '{"id": 0, "input_ids": [1, 169, 178], "temperature": 0, "max_new_tokens": 6, "repetition_penalty": 1}\n' >gc3.jsonl
zz generate --keep-order --model gc --no-progress --prompts gc3.jsonl --out gc3.out
check "a line over both: its temperature 0 and max_new_tokens 6 give the greedy tokens" \
  eval '[ "$RC" -eq 0 ] && [ "$(ids_at 1 gc3.out)" = "$(ids_at 1 gc_greedy.out)" ]'
printf '{"do_sample": false, "temperature": 0.9}\n' >gc/generation_config.json
zz generate --keep-order --model gc --no-progress --prompts gc.jsonl --out gc4.out --max-new-tokens 6
check "do_sample false is greedy, whatever its temperature (Hugging Face's rule)" \
  eval '[ "$RC" -eq 0 ] && [ "$(ids_at 1 gc4.out)" = "$(ids_at 1 gc_greedy.out)" ]'
printf '{"do_sample": "yes"}\n' >gc/generation_config.json
zz generate --keep-order --model gc --no-progress --prompts gc.jsonl --out gc5.out
check "a bad generation_config.json value is refused naming the key and the file" \
  eval '[ "$RC" -ne 0 ] && [ "$RC" -lt 128 ] && has "do_sample" err && has "generation_config.json" err'

# ------------------------------------------------------------ 5. chat templates

# tiny-opt with Meta-Llama-3-8B-Instruct's chat template, then Mistral-7B-Instruct-v0.2's
# (its short prompts fit tiny-opt's 64 positions)
mkdir chat && cp "$TINY/config.json" "$TINY/model.safetensors" "$TINY/vocab.json" "$TINY/merges.txt" chat/
# (the fixture's JSON string of the template: one line of chat_templates.json)
L3=$(grep -m 1 '"chat_template": "{% set loop_messages' "$FX/chat_templates.json" | sed 's/^ *"chat_template": //; s/,$//')
printf '{"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": %s}\n' "$L3" >chat/tokenizer_config.json
printf '[{"role": "system", "content": "You are terse."}, {"role": "user", "content": "  What is 2+2?\\n"}]\n' >msgs.json
zz chat-template --model chat --messages msgs.json
printf '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n' >want.txt
check "chat-template prints transformers' apply_chat_template(add_generation_prompt=True) text (Llama-3)" \
  eval '[ "$RC" -eq 0 ] && cmp -s outp want.txt'
MI=$(grep -m 1 '"chat_template": "{{ bos_token }}.*eos_token}}{% else' "$FX/chat_templates.json" | sed 's/^ *"chat_template": //; s/,$//')
mkdir mistral && cp chat/config.json chat/model.safetensors chat/vocab.json chat/merges.txt mistral/
printf '{"bos_token": "<s>", "eos_token": "</s>", "chat_template": %s}\n' "$MI" >mistral/tokenizer_config.json
cat >chat.jsonl <<'J'
{"custom_id": "ok", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "tiny", "messages": [{"role": "user", "content": "Hi"}], "max_completion_tokens": 3, "logprobs": true, "top_logprobs": 2}}
{"custom_id": "nomsg", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "tiny", "prompt": "x"}}
{"custom_id": "sys", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "tiny", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}}
J
zz generate --keep-order --model mistral --no-progress --prompts chat.jsonl --out chat.out --max-new-tokens 4
"$CHK" chat.out >chat.txt 2>chat.err
CS=$?
# the rendered text, tokenized without a BOS added (the template wrote "<s>" itself)
zz tokenize --model mistral "<s>[INST] Hi [/INST]"
NTOK=$(wc -w <outp)
check "a /v1/chat/completions line: a chat.completion answer, its prompt the rendered text and no BOS added" \
  eval '[ "$CS" -eq 0 ] && has "ok ok 1" chat.txt && line 1 chat.out | grep -q "\"object\":\"chat.completion\"" && line 1 chat.out | grep -q "\"prompt_tokens\":$NTOK,"'
check "chat logprobs: content entries with bytes, token, logprob and 2 top_logprobs" \
  eval 'line 1 chat.out | grep -q "\"logprobs\":{\"content\":\[{\"bytes\":\[" && line 1 chat.out | grep -q "\"top_logprobs\":\[{\"bytes\":\[[0-9,]*\],\"token\":\"[^\"]*\",\"logprob\":-[0-9.e-]*},{"'
check "a chat line without messages (prompt is not a chat key): its error names both" \
  eval 'has "nomsg error" chat.txt && line 2 chat.out | grep -q "body.prompt is not supported"'
check "a template that refuses the messages (Mistral: a system role) is that line's error, with its message" \
  eval 'line 3 chat.out | grep -q "\"code\":\"chat_template_error\",\"message\":\"chat template: the template refused the messages: Conversation roles must alternate"'
printf '{"chat_template": "{%% for m in messages %%}{{ m.content | wordwrap }}{%% endfor %%}"}\n' >mistral/tokenizer_config.json
zz chat-template --model mistral --messages msgs.json
check "a template outside the subset: refused naming the construct and its line, never a guess" \
  eval '[ "$RC" -eq 1 ] && has "line 1 of the template: the filter '"'"'wordwrap'"'"' is not supported" err && [ ! -s outp ]'
zz generate --keep-order --model mistral --no-progress --prompts chat.jsonl --out mis2.out --max-new-tokens 2
check "... and in a job, the line's error (the job goes on)" \
  eval '[ "$RC" -eq 0 ] && line 1 mis2.out | grep -q "wordwrap" && [ "$(wc -l <mis2.out)" -eq 3 ]'
rm -f mistral/tokenizer_config.json
zz generate --keep-order --model mistral --no-progress --prompts chat.jsonl --out mis3.out --max-new-tokens 2
check "a model without a chat template: a chat line's error says so" \
  eval '[ "$RC" -eq 0 ] && line 1 mis3.out | grep -q "no chat template (looked for chat_template.jinja"'

# issue 46: a template as transformers 5 saves it (chat_template.jinja), tools, tool calls
mkdir qwen && cp "$FX/chat_corpus/Qwen-Qwen2.5-7B-Instruct.jinja" qwen/chat_template.jinja
printf '[{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "abc123xyz", "type": "function", "function": {"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]}, {"role": "tool", "tool_call_id": "abc123xyz", "content": "21 C"}]\n' >tc.json
printf '[{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]\n' >tools.json
zz chat-template --model qwen --messages tc.json --tools tools.json
check "chat-template --tools: Qwen2.5's <tool_call> block from OpenAI's string arguments, the tools in the system turn" \
  eval '[ "$RC" -eq 0 ] && grep -qx "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}" outp && has "<tools>" outp && [ "$(tail -n 1 outp)" = "<|im_start|>assistant" ]'
zz chat-template --model qwen --messages tc.json --no-generation-prompt --chat-template-kwargs '{"enable_thinking": false}'
check "chat-template --no-generation-prompt and --chat-template-kwargs: no assistant header at the end" \
  eval '[ "$RC" -eq 0 ] && [ "$(tail -n 1 outp)" = "</tool_response><|im_end|>" ]'
zz chat-template --model qwen --messages tc.json --chat-template-kwargs '[1]'
check "--chat-template-kwargs that is not a JSON object is refused" eval '[ "$RC" -eq 2 ] && has "want a JSON object" err'
# a tiny instruct model saved by transformers 5 (chat_template.jinja; make_chat_model_fixture.py):
# the chat line's prompt ids and greedy text are transformers' (apply_chat_template, generate)
CM=$FX/chat-llama3-v5
printf '{"custom_id": "c1", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "tiny", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "zigzag the"}], "max_completion_tokens": 6, "temperature": 0}}\n' >cm.jsonl
printf '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "zigzag the"}]\n' >cm.json
zz chat-template --model "$CM" --messages cm.json
RENDERED=$(cat outp; printf x)
zz tokenize --model "$CM" -- "${RENDERED%x}"
WANT_IDS=$(tr -d ' \n' <"$CM/expected.json" | grep -o '"prompt_ids":\[[0-9,]*\]' | sed 's/.*\[//; s/\]//; s/,/ /g')
check "transformers 5's layout: the rendered chat tokenizes to apply_chat_template(tokenize=True)'s ids" \
  eval '[ "$RC" -eq 0 ] && [ "$(tr -s " \n" " " <outp | sed "s/ $//")" = "$WANT_IDS" ]'
zz generate --keep-order --model "$CM" --no-progress --prompts cm.jsonl --out cm.out --max-prompt-len 40 --max-new-tokens 6
WANT_TEXT=$(grep -o '"text": "[^"]*"' "$CM/expected.json" | sed 's/"text": //')
check "... and generate answers it with transformers' greedy text and token counts" \
  eval '[ "$RC" -eq 0 ] && grep -qF "\"content\":$WANT_TEXT}" cm.out && grep -q "\"prompt_tokens\":35,\"completion_tokens\":6," cm.out'

# ------------------------------------------------------------ 6. the command line explains and installs itself

zz --version
check "--version prints the version" eval '[ "$RC" -eq 0 ] && grep -q "^zigzag [0-9][0-9.]* (with" outp'
zz generate --help
check "generate --help: generate's usage and options only (--prompts, --logprobs; not plan's --ranks)" \
  eval '[ "$RC" -eq 0 ] && has "usage: zigzag generate" outp && has "--prompts" outp && has "--logprobs" outp && ! has "--ranks" outp && ! has "--prompt-len" outp'
zz help plan
check "help plan: plan's options (--ranks), not generate's (--resume)" \
  eval '[ "$RC" -eq 0 ] && has "usage: zigzag plan" outp && has "--ranks" outp && ! has "--resume" outp'
zz --help chat-template
check "--help chat-template: its --messages" eval '[ "$RC" -eq 0 ] && has "--messages" outp && ! has "--gpu-batch-size" outp'
zz help nosuch
check "help for a command that does not exist: the whole page and a non-zero exit" eval '[ "$RC" -eq 2 ] && has "no command" err'
BUILD=$(dirname "$ZZ")
if [ -f "$BUILD/cmake_install.cmake" ]; then
  timeout 120 cmake --install "$BUILD" --prefix "$W/inst" >inst.log 2>&1
  IRC=$?
  check "cmake --install: bin/zigzag, share/man/man1/zigzag.1, the bash completion" \
    eval '[ "$IRC" -eq 0 ] && [ -x inst/bin/zigzag ] && grep -q "^.TH ZIGZAG 1" inst/share/man/man1/zigzag.1 && grep -q "complete -o default -F _zigzag zigzag" inst/share/bash-completion/completions/zigzag'
  COMP=$(bash -c 'source inst/share/bash-completion/completions/zigzag; COMP_WORDS=(zigzag generate --max-n); COMP_CWORD=2; _zigzag; echo "${COMPREPLY[@]}"')
  check "the completion completes generate's options (--max-n -> --max-new-tokens)" eval '[ "$COMP" = "--max-new-tokens" ]'
  check "the man page lists every option (--logprobs, --messages, ZZ_FAULT_KIND)" \
    eval 'grep -q "logprobs" inst/share/man/man1/zigzag.1 && grep -q "messages" inst/share/man/man1/zigzag.1 && grep -q "ZZ_FAULT_KIND" inst/share/man/man1/zigzag.1'
fi
zz "${GEN[@]}" --prompts nat.jsonl --out sum.out --max-new-tokens 2 --no-progress
check "the summary at the end when stderr is a file: prompts, tokens, tokens/s, elapsed, output" \
  eval '[ "$RC" -eq 0 ] && grep -q "^zigzag: done: 8 prompts (1 answered with an error), [0-9]* new tokens, [0-9.]* tokens/s, [0-9.]* s elapsed; output in sum.out$" err && grep -q "^zigzag: positions: [0-9]* computed, [0-9.]*% of them padding or sequences already ended$" err'

# ------------------------------------------------------------ 7. under mpirun (a pipeline of 2 ranks)

# the block message carries each line's settings to the last rank: a line's own,
# the batch form, a repetition penalty, stop strings and log-probabilities give one
# process's answers
if command -v mpirun >/dev/null 2>&1; then
  # Open MPI's own allocations live to the exit: leaks are not looked for here (as in tests/mpi)
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
  MPI=(mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader,tcp --mca btl_tcp_if_include lo
       -x ASAN_OPTIONS -np 2)
  printf '{"id": 0, "prompt": "Liberty"}\n{"id": 1, "prompt": "Liberty", "temperature": 0.5, "seed": 3}\n{"custom_id": "c", "url": "/v1/completions", "body": {"prompt": "Liberty"}}\n' >pp.jsonl
  for pen in 1 1.3; do
    GA=(generate --model "$TINY" --device cpu --no-progress --keep-order --prompts pp.jsonl --max-new-tokens 4
        --repetition-penalty "$pen")
    OPENBLAS_NUM_THREADS=1 timeout -k 5 120 "$ZZ" "${GA[@]}" --out pp1.out >outp 2>err
    OPENBLAS_NUM_THREADS=1 timeout -k 5 120 "${MPI[@]}" "$ZZ" "${GA[@]}" --out pp.out >outp 2>err
    RC=$?
    check "mpirun: a plain line, a line with its own settings and a batch line (repetition penalty $pen) as in one process" \
      eval '[ "$RC" -eq 0 ] && cmp -s <(sed "s/\"created\":[0-9]*//" pp.out) <(sed "s/\"created\":[0-9]*//" pp1.out) && ! grep -q "\"code\":\"unsupported" pp.out'
  done
  # stop strings (checked on rank 0, which holds the tokenizer) and --logprobs (back
  # from the last rank with each token) as in one process
  printf '{"id": 0, "prompt": "Liberty", "stop": ["e"]}\n{"id": 1, "prompt": "Liberty", "logprobs": 3, "max_new_tokens": 6}\n' >ps.jsonl
  for lp in -1 2; do
    GA=(generate --model "$TINY" --device cpu --no-progress --keep-order --prompts ps.jsonl --max-new-tokens 4
        --logprobs "$lp")
    OPENBLAS_NUM_THREADS=1 timeout -k 5 120 "$ZZ" "${GA[@]}" --out ps1.out >outp 2>err
    OPENBLAS_NUM_THREADS=1 timeout -k 5 120 "${MPI[@]}" "$ZZ" "${GA[@]}" --out ps.out >outp 2>err
    RC=$?
    check "mpirun: stop strings, a line's logprobs and max tokens above --max-new-tokens (--logprobs $lp) as in one process" \
      eval '[ "$RC" -eq 0 ] && cmp -s ps.out ps1.out && ! grep -q "\"error\"" ps.out && grep -q logprobs ps.out'
  done
fi

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
