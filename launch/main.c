/*
 * main.c — the zigzag command line: defaults, parse, init, run, free.
 *
 *   zigzag generate --model DIR|PRESET [--dummy] --prompts FILE|- --out FILE|- --max-new-tokens N
 *   zigzag tokenize --model DIR [--] TEXT
 *   zigzag bench    --model PRESET --dummy --prompt-len S --gen-len N [--json]
 *   zigzag plan     --model M --prompt-len S --gen-len N [--hw FILE] [--ranks m] [--json]
 *   zigzag profile  [--out FILE]
 *   zigzag perplexity --model DIR --text FILE [--window N] [--compress-weight] [--compress-cache] ...
 *   zigzag chat-template --model DIR --messages FILE [--tools FILE] [--chat-template-kwargs JSON]
 *   zigzag CMD --help | zigzag --version | zigzag man | zigzag completion
 */
#include <stdlib.h>
#include <string.h>

#include "lines_impl.h"
#include "zz_launch.h"
#include "zz_planner.h"
#include "zz_runtime.h"

/* ---------------------------------------------------------------- generate */

/* The job (every prompt read and checked, --out opened) sizes the run (the longest
 * prompt, the most new tokens); the run (policy, device, engine) then takes blocks
 * of the job's prompts until none are left. */
static int zz_cmd_generate(const zz_opts *o) {
  zz_job job;
  zz_run run = {0};
  zz_status st;
  int rc = 1;
  if (!o->prompts || !o->out) {
    fprintf(stderr, "zigzag generate: --prompts and --out are required (see zigzag --help)\n");
    return 2;
  }
  zz_catch_stop_signals();
  zz_shape asked = {.prompt_len = o->max_prompt_len, .gen_len = o->max_new_tokens};
  ZZ_CHECK_GOTO(zz_job_open(&job, o, asked, true), st, fail);
  ZZ_CHECK_GOTO(zz_run_open(&run, o, true, &job.model, job.ck, &job.shape), st, fail);
  if (run.predicted)
    fprintf(stderr, "zigzag: predicted for full blocks: %.4g tokens/s total (prompts of %lld tokens, %lld new)\n",
            run.pred.cost.total_tps, (long long)job.shape.prompt_len, (long long)job.shape.gen_len);
  /* --refill-blocks blocks' worth of prompts at a time: a slot whose sequence ends
   * takes the next of them (zz_request.refill); they are committed together */
  int64_t bls = (int64_t)run.pol.gpu_batch_size * run.pol.num_gpu_batches * o->refill_blocks;
  ZZ_CHECK_GOTO(zz_job_start(&job, bls), st, fail);
  for (;;) {
    zz_request req;
    ZZ_CHECK_GOTO(zz_job_gather(&job, bls, &req), st, fail);
    if (req.n == 0) break;
    req.refill = true;
    zz_result res;
    ZZ_CHECK_GOTO(zz_generate(run.eng, &req, &res), st, fail);
    st = zz_job_commit(&job, &res);
    zz_result_free(&res, req.n);
    if (st != ZZ_OK) goto fail;
  }
  zz_progress_finish(&job.prog);
  zz_report_peaks(run.eng, stderr);
  rc = 0;
  goto done;
fail:
  rc = zz_job_fail(&job, st);
done:
  zz_job_close(&job);
  zz_run_free(&run);
  return rc;
}

/* ---------------------------------------------------------------- tokenize */

static int zz_cmd_tokenize(const zz_opts *o) {
  zz_tokenizer *tok = NULL;
  if (!o->text) {
    fprintf(stderr, "zigzag tokenize: give the text to tokenize (zigzag tokenize --model DIR \"text\")\n");
    return 2;
  }
  zz_status st = zz_tokenizer_load(o->model, &tok);
  if (st != ZZ_OK) {
    fprintf(stderr, "zigzag: %s\n", zz_error_message());
    return 1;
  }
  int32_t *ids = NULL;
  int64_t n = 0;
  st = zz_tokenizer_encode(tok, o->text, strlen(o->text), &ids, &n);
  if (st == ZZ_OK) {
    for (int64_t i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
    printf("\n");
  } else {
    fprintf(stderr, "zigzag: %s\n", zz_error_message());
  }
  free(ids);
  zz_tokenizer_free(tok);
  return st == ZZ_OK ? 0 : 1;
}

/* ---------------------------------------------------------------- chat-template */

/* The text the model's chat template renders for --messages (a JSON list of
 * messages as a chat request carries them), --tools and --chat-template-kwargs,
 * with the generation prompt unless --no-generation-prompt: what a chat line runs. */
static int zz_cmd_chat_template(const zz_opts *o) {
  if (!o->messages) {
    fprintf(stderr, "zigzag chat-template: give --messages FILE (a JSON list of {\"role\", \"content\"})\n");
    return 2;
  }
  json_error_t e;
  json_t *body = json_object(), *v;
  const char *files[2] = {o->messages, o->tools}, *keys[2] = {"messages", "tools"};
  for (int i = 0; i < 2; i++) {
    if (!files[i]) continue;
    if (!(v = json_load_file(files[i], 0, &e)) || !json_is_array(v)) {
      fprintf(stderr, "zigzag: %s:%d: %s\n", files[i], v ? 1 : e.line, v ? "want a JSON list" : e.text);
      json_decref(v);
      json_decref(body);
      return 2;
    }
    json_object_set_new(body, keys[i], v);
  }
  if (o->chat_kwargs) {
    if (!(v = json_loads(o->chat_kwargs, 0, &e)) || !json_is_object(v)) {
      fprintf(stderr, "zigzag: --chat-template-kwargs: want a JSON object (%s)\n", v ? "not an object" : e.text);
      json_decref(v);
      json_decref(body);
      return 2;
    }
    json_object_set_new(body, "chat_template_kwargs", v);
  }
  json_object_set_new(body, "add_generation_prompt", json_boolean(!o->no_generation_prompt));
  int rc = 0;
  zz_chat_ctx chat;
  char err[600], *text = NULL;
  if (zz_chat_ctx_load(o->model, &chat) != ZZ_OK) {
    rc = zz_report_failure(ZZ_ERR_FORMAT);
  } else {
    if (!zz_chat_render_request(&chat, body, &text, NULL, err, sizeof err)) {
      fprintf(stderr, "zigzag: --model %s: %s\n", o->model, err);
      rc = 1;
    } else {
      fputs(text, stdout);
    }
    zz_chat_ctx_free(&chat);
  }
  free(text);
  json_decref(body);
  return rc;
}

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
  zz_opts o;
  zz_opts_defaults(&o);
  int r = zz_opts_parse(argc, argv, &o);
  if (r != 0) return r < 0 ? 0 : r; /* -1: --help was printed */
  static char model_dir[4096];      /* --model org/name: its snapshot in the Hugging Face cache */
  zz_status located = zz_model_locate(o.model, model_dir, sizeof model_dir);
  if (located != ZZ_OK) return zz_report_failure(located);
  o.model = model_dir;
  zz_cpu_isa isa; /* --cpu-isa / ZZ_CPU_ISA, checked by the parse */
  if (zz_opts_cpu_isa(&o, &isa) == ZZ_OK) zz_cpu_isa_set(isa);
  /* generation_config.json's settings under the command line's, for every rank */
  if (strcmp(o.command, "generate") == 0 && zz_opts_generation_defaults(&o) != ZZ_OK)
    return zz_report_failure(ZZ_ERR_FORMAT);
  bool pipelined = strcmp(o.command, "generate") == 0 || strcmp(o.command, "bench") == 0;
  if (pipelined && zz_pipe_ranks() > 1) return zz_cmd_pipe(&o); /* mpirun -np m, m > 1; else no MPI at all */
  if (strcmp(o.command, "generate") == 0) return zz_cmd_generate(&o);
  if (strcmp(o.command, "tokenize") == 0) return zz_cmd_tokenize(&o);
  if (strcmp(o.command, "bench") == 0) return zz_cmd_bench(&o);
  if (strcmp(o.command, "plan") == 0) return zz_cmd_plan(&o);
  if (strcmp(o.command, "profile") == 0) return zz_cmd_profile(&o);
  if (strcmp(o.command, "perplexity") == 0) return zz_cmd_perplexity(&o);
  if (strcmp(o.command, "chat-template") == 0) return zz_cmd_chat_template(&o);
  if (strcmp(o.command, "man") == 0) return zz_print_man(stdout), 0;
  if (strcmp(o.command, "completion") == 0) return zz_print_bash_completion(stdout), 0;
  fprintf(stderr,
          "zigzag: unknown command '%s' (generate, tokenize, bench, plan, profile, perplexity, chat-template; "
          "see zigzag --help)\n",
          o.command);
  return 2;
}
