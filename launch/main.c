/*
 * main.c — the zigzag command line: defaults, parse, init, run, free.
 *
 *   zigzag generate --model DIR|PRESET [--dummy] --prompts FILE|- --out FILE|- --max-new-tokens N
 *   zigzag tokenize --model DIR TEXT
 *   zigzag bench    --model PRESET --dummy --prompt-len S --gen-len N [--json]
 *   zigzag --help
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zz_launch.h"
#include "zz_runtime.h"

/* ---------------------------------------------------------------- generate */

typedef struct zz_block {
  zz_prompt *prompts;
  int32_t **ids;
  int64_t *lens;
  uint64_t *streams;
  int64_t n;
} zz_block;

static void zz_block_clear(zz_block *b) {
  for (int64_t i = 0; i < b->n; i++) {
    zz_prompt_free(&b->prompts[i]);
    free(b->ids[i]);
  }
  b->n = 0;
}

/* Token ids of one prompt: text is tokenized with BOS first (as OPT's tokenizer
 * does); input_ids are taken as given. Sets the outputs only on success. */
static zz_status zz_prompt_ids(const zz_opts *o, const zz_tokenizer *tok, const zz_config *cfg,
                               const zz_prompt *p, int32_t **ids_out, int64_t *n_out) {
  int32_t *ids = NULL;
  int64_t n = 0;
  if (p->ids) {
    ids = malloc((size_t)p->n_ids * sizeof *ids);
    if (!ids) return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
    memcpy(ids, p->ids, (size_t)p->n_ids * sizeof *ids);
    n = p->n_ids;
  } else {
    if (!tok)
      return zz_error(ZZ_ERR_INVALID_ARG,
                      "%s:%lld: a text prompt needs a tokenizer (vocab.json + merges.txt in --model), "
                      "or give \"input_ids\"", o->prompts, (long long)p->line);
    int32_t *raw = NULL;
    int64_t m = 0;
    zz_status st = zz_tokenizer_encode(tok, p->text, strlen(p->text), &raw, &m);
    if (st != ZZ_OK)
      return zz_error(st, "%s:%lld: %s", o->prompts, (long long)p->line, zz_error_message());
    ids = malloc((size_t)(m + 1) * sizeof *ids);
    if (!ids) {
      free(raw);
      return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
    }
    ids[0] = cfg->bos;
    memcpy(ids + 1, raw, (size_t)m * sizeof *ids);
    free(raw);
    n = m + 1;
  }
  for (int64_t i = 0; i < n; i++)
    if (ids[i] >= cfg->vocab_size) {
      zz_status st = zz_error(ZZ_ERR_INVALID_ARG, "%s:%lld: token id %d is outside the vocabulary (%lld)",
                              o->prompts, (long long)p->line, ids[i], (long long)cfg->vocab_size);
      free(ids);
      return st;
    }
  if (n > o->max_prompt_len) {
    free(ids);
    return zz_error(ZZ_ERR_INVALID_ARG, "%s:%lld: prompt has %lld tokens, more than --max-prompt-len %d",
                    o->prompts, (long long)p->line, (long long)n, o->max_prompt_len);
  }
  *ids_out = ids;
  *n_out = n;
  return ZZ_OK;
}

/* Copy of `len` bytes with every ill-formed UTF-8 sequence replaced by U+FFFD
 * (one per maximal ill-formed subpart, as Python's errors="replace" that Hugging
 * Face's decode uses). Byte-level BPE tokens can split a character, and jansson
 * refuses strings that are not valid UTF-8. NULL when out of memory. */
static char *zz_utf8_repair(const char *s, size_t len, size_t *len_out) {
  const unsigned char *b = (const unsigned char *)s;
  char *r = malloc(3 * len + 1), *w = r; /* each bad byte grows to 3 at most */
  if (!r) return NULL;
  size_t i = 0;
  while (i < len) {
    unsigned c = b[i];
    size_t need = 0;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80) need = 0;
    else if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F; /* nothing above U+10FFFF */
    } else {
      need = SIZE_MAX; /* 0x80..0xC1, 0xF5..0xFF never start a character */
    }
    size_t k = 1;
    if (need != SIZE_MAX)
      for (; k <= need && i + k < len; k++) {
        unsigned d = b[i + k];
        if (k == 1 ? (d < lo || d > hi) : (d < 0x80 || d > 0xBF)) break;
      }
    if (need != SIZE_MAX && k == need + 1) {
      memcpy(w, b + i, k);
      w += k;
    } else {
      memcpy(w, "\xEF\xBF\xBD", 3);
      w += 3;
    }
    i += k;
  }
  *w = '\0';
  *len_out = (size_t)(w - r);
  return r;
}

/* One output line, newline included: {"id": ..., "output_ids": [...], "text": "..."}.
 * NULL when out of memory. */
static char *zz_format_result(const zz_tokenizer *tok, const zz_prompt *p, const int32_t *toks, int64_t n) {
  json_t *o = json_object();
  json_t *id = json_loads(p->id, JSON_DECODE_ANY, NULL);
  json_object_set_new(o, "id", id ? id : json_string(p->id));
  json_t *arr = json_array();
  for (int64_t i = 0; i < n; i++) json_array_append_new(arr, json_integer(toks[i]));
  json_object_set_new(o, "output_ids", arr);
  if (tok) {
    /* ids past the tokenizer (padding rows of the embedding) have no text */
    int32_t *known = malloc((size_t)(n ? n : 1) * sizeof *known);
    int64_t m = 0;
    for (int64_t i = 0; known && i < n; i++)
      if (toks[i] < zz_tokenizer_vocab_size(tok)) known[m++] = toks[i];
    char *text = NULL, *good = NULL;
    size_t len = 0, good_len = 0;
    if (known && zz_tokenizer_decode(tok, known, m, &text, &len) == ZZ_OK &&
        (good = zz_utf8_repair(text, len, &good_len)) != NULL)
      json_object_set_new(o, "text", json_stringn(good, good_len));
    free(good);
    free(text);
    free(known);
  }
  char *body = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
  json_decref(o);
  if (!body) return NULL;
  size_t len = strlen(body);
  char *line = realloc(body, len + 2);
  if (!line) {
    free(body);
    return NULL;
  }
  line[len] = '\n';
  line[len + 1] = '\0';
  return line;
}

static zz_status zz_write_result(FILE *out, const char *outpath, const zz_tokenizer *tok,
                                 const zz_prompt *p, const int32_t *toks, int64_t n) {
  char *line = zz_format_result(tok, p, toks, n);
  if (!line) return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  int bad = fputs(line, out) < 0;
  free(line);
  if (bad) return zz_error(ZZ_ERR_IO, "%s: write failed: %s", outpath, strerror(errno));
  return ZZ_OK;
}

/* Fault injection for the kill/resume test (tests/cli/test_cli.sh):
 * ZZ_FAULT_KILL_AFTER_BLOCKS=N lets N blocks commit, then writes the first half
 * of the next block's first output line, flushes it and raises SIGKILL — what a
 * job killed in the middle of a write leaves behind. Unset or empty: off. */
static zz_status zz_fault_kill_after(int64_t *n_out) {
  const char *v = getenv("ZZ_FAULT_KILL_AFTER_BLOCKS");
  *n_out = -1;
  if (!v || !*v) return ZZ_OK;
  char *end = NULL;
  long long n = strtoll(v, &end, 10);
  if (end == v || *end || n < 0)
    return zz_error(ZZ_ERR_INVALID_ARG, "ZZ_FAULT_KILL_AFTER_BLOCKS=%s: want a block count >= 0", v);
  *n_out = n;
  return ZZ_OK;
}

static void zz_fault_kill_now(FILE *out, const zz_tokenizer *tok, const zz_prompt *p, const int32_t *toks,
                              int64_t n) {
  char *line = zz_format_result(tok, p, toks, n);
  if (line) fwrite(line, 1, strlen(line) / 2, out);
  fflush(out);
  fprintf(stderr, "zigzag: ZZ_FAULT_KILL_AFTER_BLOCKS: killing myself in the middle of a write\n");
  raise(SIGKILL);
  abort(); /* not reached */
}

/* SIGINT / SIGTERM: the first asks the job to stop at its next safe point (the
 * handler only records the signal); SA_RESETHAND puts the default action back,
 * so a second one ends the process at once. Committed lines stay valid either way. */
static void zz_on_stop_signal(int sig) { zz_request_stop(sig); }

static void zz_catch_stop_signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = zz_on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND | SA_RESTART;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

/* The one line an interrupted job prints; returns the exit status (128 + signal). */
static int zz_report_interrupt(const zz_opts *o, int64_t kept, int64_t added) {
  int sig = zz_stop_requested();
  const char *name = sig == SIGTERM ? "SIGTERM" : "SIGINT";
  if (isatty(STDERR_FILENO)) fputc('\n', stderr); /* end a progress line */
  if (strcmp(o->out, "-") == 0)
    fprintf(stderr, "zigzag: stopped by %s: %lld prompts were written to stdout, each line complete\n", name,
            (long long)added);
  else
    fprintf(stderr, "zigzag: stopped by %s: %lld prompts are committed to %s (%lld by this run); run the same "
            "command with --resume to finish the rest\n", name, (long long)kept, o->out, (long long)added);
  return 128 + (sig == SIGTERM ? SIGTERM : SIGINT);
}

static int zz_cmd_generate(const zz_opts *opts) {
  zz_opts oo = *opts, *o = &oo;
  zz_config cfg;
  zz_model model = {0};
  zz_checkpoint *ck = NULL;
  zz_tokenizer *tok = NULL;
  zz_device *dev = NULL;
  zz_engine *eng = NULL;
  zz_prompt_reader *rd = NULL;
  zz_resume_set *done_ids = NULL, *seen = zz_resume_new();
  FILE *out = NULL;
  zz_block blk = {0};
  zz_progress prog;
  zz_status st;
  int rc = 1;
  int64_t kill_after = -1, committed = 0; /* blocks; see zz_fault_kill_after */
  int64_t written = 0;                    /* prompts committed by this run */

  if (!o->prompts || !o->out) {
    fprintf(stderr, "zigzag generate: --prompts and --out are required (see zigzag --help)\n");
    return 2;
  }
  ZZ_CHECK_GOTO(zz_fault_kill_after(&kill_after), st, fail);
  zz_catch_stop_signals();
  /* --out is opened (and truncated) before --prompts is read */
  struct stat in_sb, out_sb;
  if (stat(o->prompts, &in_sb) == 0 && stat(o->out, &out_sb) == 0 && in_sb.st_dev == out_sb.st_dev &&
      in_sb.st_ino == out_sb.st_ino && S_ISREG(in_sb.st_mode)) {
    st = zz_error(ZZ_ERR_INVALID_ARG, "--out %s is the same file as --prompts %s", o->out, o->prompts);
    goto fail;
  }
  ZZ_CHECK_GOTO(zz_config_resolve(o->model, &cfg), st, fail);
  ZZ_CHECK_GOTO(zz_model_init(&cfg, &model), st, fail);
  if (!o->max_prompt_len) o->max_prompt_len = (int)(cfg.max_pos - o->max_new_tokens);
  if (o->max_prompt_len < 1 || o->max_prompt_len + o->max_new_tokens > cfg.max_pos) {
    st = zz_error(ZZ_ERR_INVALID_ARG, "--max-prompt-len %d + --max-new-tokens %d exceed the model's %lld positions",
                  o->max_prompt_len, o->max_new_tokens, (long long)cfg.max_pos);
    goto fail;
  }
  struct stat sb;
  bool is_dir = stat(o->model, &sb) == 0 && S_ISDIR(sb.st_mode);
  if (is_dir && !o->dummy) ZZ_CHECK_GOTO(zz_checkpoint_open(o->model, &ck), st, fail);
  if (!is_dir && !o->dummy) {
    st = zz_error(ZZ_ERR_INVALID_ARG, "--model %s is a preset: add --dummy for random weights, or give a directory", o->model);
    goto fail;
  }
  if (is_dir) {
    char vocab[4096];
    snprintf(vocab, sizeof vocab, "%s/vocab.json", o->model);
    if (access(vocab, R_OK) == 0) ZZ_CHECK_GOTO(zz_tokenizer_load(o->model, &tok), st, fail);
  }
  zz_policy pol;
  zz_shape shape = {.prompt_len = o->max_prompt_len, .gen_len = o->max_new_tokens};
  ZZ_CHECK_GOTO(zz_opts_policy(o, &pol), st, fail);
  /* every path before the weights: a missing --prompts, an --out that cannot be
   * written or is another job's, a bad --resume file are refused in a moment. The
   * engine then refuses a plan that does not fit before it allocates or loads. */
  ZZ_CHECK_GOTO(zz_prompt_reader_open(o->prompts, &rd), st, fail);
  ZZ_CHECK_GOTO(zz_resume_open(o->out, o->resume, &done_ids, &out), st, fail);
  ZZ_CHECK_GOTO(zz_opts_device(o, &dev), st, fail);
  ZZ_CHECK_GOTO(zz_opts_engine(o, dev, &model, ck, &shape, &eng), st, fail);
  ZZ_CHECK_GOTO(zz_output_begin(out, o->out, o->resume), st, fail);

  int64_t bls = (int64_t)pol.gpu_batch_size * pol.num_gpu_batches;
  blk.prompts = calloc((size_t)bls, sizeof *blk.prompts);
  blk.ids = calloc((size_t)bls, sizeof *blk.ids);
  blk.lens = calloc((size_t)bls, sizeof *blk.lens);
  blk.streams = calloc((size_t)bls, sizeof *blk.streams);
  if (!blk.prompts || !blk.ids || !blk.lens || !blk.streams) {
    st = zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
    goto fail;
  }
  zz_progress_start(&prog, o, zz_count_lines(o->prompts));
  prog.skipped = 0;
  bool more = true;
  int64_t index = 0; /* prompt number in the file: the sampling stream */
  while (more) {
    ZZ_CHECK_GOTO(zz_check_stop(), st, fail); /* between blocks: everything so far is committed */
    /* gather one block of prompts not yet in the output */
    while (blk.n < bls) {
      zz_prompt p;
      ZZ_CHECK_GOTO(zz_prompt_reader_next(rd, &p, &more), st, fail);
      if (!more) break;
      uint64_t stream = (uint64_t)index++;
      /* ids name prompts in the output and for --resume, so they must be unique */
      bool fresh = false;
      st = seen ? zz_resume_insert(seen, p.id, &fresh) : zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
      if (st == ZZ_OK && !fresh)
        st = zz_error(ZZ_ERR_INVALID_ARG, "%s:%lld: id %s appears twice in the prompts (a line without \"id\" "
                      "takes its line number as id)", o->prompts, (long long)p.line, p.id);
      if (st != ZZ_OK) {
        zz_prompt_free(&p);
        goto fail;
      }
      if (zz_resume_has(done_ids, p.id)) {
        prog.skipped++;
        zz_prompt_free(&p);
        continue;
      }
      int64_t k = blk.n;
      blk.prompts[k] = p;
      blk.streams[k] = stream;
      blk.ids[k] = NULL;
      blk.n++;
      ZZ_CHECK_GOTO(zz_prompt_ids(o, tok, &cfg, &blk.prompts[k], &blk.ids[k], &blk.lens[k]), st, fail);
    }
    if (blk.n == 0) break;
    zz_request req = {
        .n = blk.n, .ids = (const int32_t *const *)blk.ids, .lens = blk.lens, .streams = blk.streams,
        .max_new_tokens = o->max_new_tokens,
        .sampling = {.temperature = o->temperature, .top_k = o->top_k, .top_p = o->top_p, .seed = o->seed},
    };
    zz_result res;
    ZZ_CHECK_GOTO(zz_generate(eng, &req, &res), st, fail);
    if (kill_after >= 0 && committed == kill_after)
      zz_fault_kill_now(out, tok, &blk.prompts[0], res.tokens[0], res.n_tokens[0]);
    int64_t new_tokens = 0;
    for (int64_t i = 0; i < blk.n && st == ZZ_OK; i++) {
      st = zz_write_result(out, o->out, tok, &blk.prompts[i], res.tokens[i], res.n_tokens[i]);
      new_tokens += res.n_tokens[i];
    }
    zz_result_free(&res, blk.n);
    if (st != ZZ_OK) goto fail;
    /* a finished block is never lost: flushed and synced before the next starts */
    ZZ_CHECK_GOTO(zz_output_commit(out, o->out), st, fail);
    committed++;
    written += blk.n;
    zz_progress_update(&prog, blk.n, new_tokens);
    zz_block_clear(&blk);
  }
  zz_progress_finish(&prog);
  zz_report_peaks(eng, stderr);
  rc = 0;
  goto done;
fail:
  if (st == ZZ_ERR_INTERRUPTED || zz_stop_requested())
    rc = zz_report_interrupt(o, zz_resume_count(done_ids) + written, written);
  else
    rc = zz_report_failure(st);
done:
  zz_block_clear(&blk);
  free(blk.prompts);
  free(blk.ids);
  free(blk.lens);
  free(blk.streams);
  zz_prompt_reader_close(rd);
  if (out && out != stdout) fclose(out);
  zz_resume_free(done_ids);
  zz_resume_free(seen);
  zz_engine_destroy(eng);
  zz_device_destroy(dev);
  zz_tokenizer_free(tok);
  zz_checkpoint_close(ck);
  zz_model_free(&model);
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

/* ---------------------------------------------------------------- main */

int main(int argc, char **argv) {
  zz_opts o;
  zz_opts_defaults(&o);
  int r = zz_opts_parse(argc, argv, &o);
  if (r != 0) return r < 0 ? 0 : r; /* -1: --help was printed */
  if (strcmp(o.command, "generate") == 0) return zz_cmd_generate(&o);
  if (strcmp(o.command, "tokenize") == 0) return zz_cmd_tokenize(&o);
  if (strcmp(o.command, "bench") == 0) return zz_cmd_bench(&o);
  fprintf(stderr, "zigzag: unknown command '%s' (generate, tokenize, bench; see zigzag --help)\n", o.command);
  return 2;
}
