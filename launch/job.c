/*
 * job.c — a generate job's prompt side and output side, shared by the one-process
 * loop (main.c) and rank 0 of a pipeline (pipe.c): the checks and files before the
 * engine (zz_job_open: every prompt read and checked once, zz_job_scan; the job
 * record beside --out, and with --resume the check that --out is this job's),
 * gathering a block of prompts not yet in the output
 * (zz_job_gather: ids, tokenizing, --resume skipping, the sampling stream of each
 * prompt), writing a finished block's lines and committing them (zz_job_commit:
 * flushed and synced, so --resume works whatever ran them), and the one line an
 * interrupted or failed job prints.
 */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fault_inject_impl.h"
#include "lines_impl.h"
#include "zz_launch.h"

/* ---------------------------------------------------------------- prompts and lines */

/* Token ids of one prompt: text is tokenized with the special tokens Hugging
 * Face adds (tokenizer.json's post-processor or tokenizer_config.json; config.json's
 * BOS first for vocab.json + merges.txt, as OPT's tokenizer does); input_ids are
 * taken as given. Sets the outputs only on success. */
static zz_status zz_prompt_ids(const zz_job *j, const zz_prompt *p, bool specials, int32_t **ids_out, int64_t *n_out) {
  const zz_opts *o = j->o;
  const zz_tokenizer *tok = j->tok;
  const zz_config *cfg = &j->cfg;
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
                      "%s:%lld: a text prompt needs a tokenizer (tokenizer.json or vocab.json + merges.txt "
                      "in --model), "
                      "or give \"input_ids\"",
                      o->prompts, (long long)p->line);
    /* a text no block could hold is refused by its bytes, before it is tokenized */
    size_t bytes = strlen(p->text), most = zz_tokenizer_text_bound(tok, j->max_prompt_len);
    if (bytes > most)
      return zz_error(ZZ_ERR_INVALID_ARG,
                      "%s:%lld: the prompt's %zu bytes are more than --max-prompt-len %d tokens can hold "
                      "(%zu bytes at most with this tokenizer); refused before tokenizing",
                      o->prompts, (long long)p->line, bytes, j->max_prompt_len, most);
    int32_t *raw = NULL;
    int64_t m = 0;
    zz_status st = zz_tokenizer_encode(tok, p->text, bytes, &raw, &m);
    if (st != ZZ_OK) return zz_error(st, "%s:%lld: %s", o->prompts, (long long)p->line, zz_error_message());
    int32_t bos = -1, eos = -1;
    if (!zz_tokenizer_specials(tok, &bos, &eos)) bos = (int32_t)cfg->bos;
    if (!specials) bos = eos = -1; /* a chat template writes its own */
    ids = malloc((size_t)(m + 2) * sizeof *ids);
    if (!ids) {
      free(raw);
      return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
    }
    if (bos >= 0) ids[n++] = bos;
    memcpy(ids + n, raw, (size_t)m * sizeof *ids);
    n += m;
    if (eos >= 0) ids[n++] = eos;
    free(raw);
    if (n == 0) {
      free(ids);
      return zz_error(ZZ_ERR_INVALID_ARG, "%s:%lld: the prompt has no tokens", o->prompts, (long long)p->line);
    }
  }
  for (int64_t i = 0; i < n; i++)
    if (ids[i] >= cfg->vocab_size) {
      zz_status st = zz_error(ZZ_ERR_INVALID_ARG, "%s:%lld: token id %d is outside the vocabulary (%lld)", o->prompts,
                              (long long)p->line, ids[i], (long long)cfg->vocab_size);
      free(ids);
      return st;
    }
  if (n > j->max_prompt_len) {
    free(ids);
    return zz_error(ZZ_ERR_INVALID_ARG, "%s:%lld: prompt has %lld tokens, more than --max-prompt-len %d", o->prompts,
                    (long long)p->line, (long long)n, j->max_prompt_len);
  }
  *ids_out = ids;
  *n_out = n;
  return ZZ_OK;
}

/* SIGINT / SIGTERM: the first asks the job to stop at its next safe point (the
 * handler only records the signal); SA_RESETHAND puts the default action back,
 * so a second one ends the process at once. Committed lines stay valid either way. */
static void zz_on_stop_signal(int sig) { zz_request_stop(sig); }

void zz_catch_stop_signals(void) {
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
    fprintf(stderr,
            "zigzag: stopped by %s: %lld prompts are committed to %s (%lld by this run); run the same "
            "command with --resume to finish the rest\n",
            name, (long long)kept, o->out, (long long)added);
  return 128 + (sig == SIGTERM ? SIGTERM : SIGINT);
}


/* ---------------------------------------------------------------- the job record */

/* A prompt as the job runs it: its tokens and its place in the file (the sampling
 * stream), FNV-1a; a line with its own settings (raw) adds the line's text, so a
 * changed setting is another prompt to --resume. */
static uint64_t zz_prompt_hash(uint64_t stream, const int32_t *ids, int64_t n, const char *raw) {
  uint64_t h = zz_fnv1a(zz_fnv1a(ZZ_FNV_BASIS, &stream, sizeof stream), ids, (size_t)n * sizeof *ids);
  return raw ? zz_fnv1a(h, raw, strlen(raw)) : h;
}

/* ---------------------------------------------------------------- each line's settings */

/* The job's per-line state: the settings lines start from, the chat template, and
 * the block being gathered — per prompt its line and tokens, per sequence (a prompt
 * of n completions has n) its settings and its prompt. */
struct zz_job_lines {
  zz_line_defaults defs;
  zz_chat_ctx chat;
  int max_new;           /* the largest max_new_tokens of a line still to run */
  zz_line *lines;        /* [cap] per prompt */
  int32_t **pids;        /* [cap] per prompt: its tokens */
  int64_t *plen, *first; /* [cap] per prompt: tokens, its first sequence */
  zz_seq_params *params; /* [cap] per sequence */
  int64_t *seq_prompt;   /* [cap] per sequence: its prompt in the block */
  int64_t nseq;
  /* the prompts still to run, in the order they are gathered: file order with
   * --keep-order, else by length and max tokens (zz_job_order) */
  struct zz_job_entry *order;
  int64_t n_order, cap_order, next;
  zz_prompt pend; /* read but left for the next block (its completions did not fit) */
  uint64_t pend_stream;
  bool has_pend;
};

/* A prompt still to run: where its line is in --prompts, its place (the sampling
 * stream), its tokens and the new tokens it asks (0 and 0 for a line answered
 * with an error). */
struct zz_job_entry {
  int64_t at, line;
  uint64_t stream;
  int64_t len;
  int max_new;
  int n; /* completions: the sequences it runs */
};

static int zz_job_entry_cmp(const void *pa, const void *pb) {
  const struct zz_job_entry *a = pa, *b = pb;
  int c = zz_prompt_order(a->len, a->max_new, b->len, b->max_new);
  return c ? c : a->stream < b->stream ? -1 : a->stream > b->stream;
}

/* Blocks by length: prompts of similar max tokens and length run together
 * (zz_prompt_order), so a block pads little and its sequences end near each other. A
 * prompt's tokens do not depend on its block (its stream is its place in the file),
 * so only the order of the output lines changes. */
static void zz_job_order(struct zz_job_lines *lx, bool keep_order) {
  if (!keep_order && lx->n_order > 1) qsort(lx->order, (size_t)lx->n_order, sizeof *lx->order, zz_job_entry_cmp);
}

static zz_status zz_job_entry_add(struct zz_job_lines *lx, struct zz_job_entry e) {
  if (lx->n_order == lx->cap_order) {
    int64_t cap = lx->cap_order ? lx->cap_order * 2 : 64;
    void *o = realloc(lx->order, (size_t)cap * sizeof *lx->order);
    if (!o) return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
    lx->order = o;
    lx->cap_order = cap;
  }
  lx->order[lx->n_order++] = e;
  return ZZ_OK;
}

/* The sampling stream of completion c of the prompt at place `index` in the file:
 * the place itself for the first (as before completions existed), then apart by
 * 2^40; a line with its own seed draws streams 0..n-1 of that seed, so it gives the
 * same text wherever it stands. */
static uint64_t zz_line_stream(const zz_line *l, uint64_t index, int c) {
  return l->own_seed ? (uint64_t)c : index + ((uint64_t)c << 40);
}

/* Reads prompt p's line into *l and its tokens: a native line's bad prompt stops the
 * job (as it always has); anything else wrong is the line's error (l->err). */
static zz_status zz_job_line(zz_job *j, const zz_prompt *p, zz_line *l, int32_t **ids_out, int64_t *n_out) {
  *ids_out = NULL;
  *n_out = 0;
  ZZ_CHECK(zz_line_parse(p, &j->lx->defs, l));
  if (l->err) return ZZ_OK;
  if (l->n_stop && !j->tok)
    zz_line_fail(l, "invalid_value", "stop strings need the model's tokenizer (tokenizer.json or vocab.json)");
  zz_status st = ZZ_OK;
  if (l->kind == ZZ_LINE_NATIVE) {
    ZZ_CHECK(zz_prompt_ids(j, p, true, ids_out, n_out));
  } else if (!l->err) {
    zz_prompt q = {.id = p->id, .line = p->line};
    char *rendered = NULL;
    json_t *v = json_object_get(l->body, l->kind == ZZ_LINE_CHAT ? "messages" : "prompt");
    char err[512];
    if (l->kind == ZZ_LINE_CHAT) {
      if (!zz_chat_render_request(&j->lx->chat, l->body, &rendered, &l->tool_format, err, sizeof err))
        zz_line_fail(l, "chat_template_error", "%s", err);
      q.text = rendered;
    } else if (json_is_string(v)) {
      q.text = (char *)json_string_value(v);
    } else {
      q.n_ids = (int64_t)json_array_size(v);
      q.ids = malloc((size_t)q.n_ids * sizeof *q.ids);
      for (int64_t i = 0; q.ids && i < q.n_ids; i++) {
        json_int_t x = json_integer_value(json_array_get(v, (size_t)i));
        q.ids[i] = x < 0 || x > INT32_MAX ? INT32_MAX : (int32_t)x;
      }
      if (!q.ids) st = zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
    }
    if (st == ZZ_OK && !l->err && zz_prompt_ids(j, &q, l->kind != ZZ_LINE_CHAT, ids_out, n_out) != ZZ_OK) {
      zz_line_fail(l, "invalid_value", "%s", zz_error_message());
      zz_error_clear();
    }
    free(rendered);
    free(q.ids);
  }
  if (st == ZZ_OK && !l->err && *n_out + l->sp.max_new_tokens > j->cfg.max_pos)
    zz_line_fail(l, "invalid_value", "a prompt of %lld tokens and %d new tokens exceed the model's %lld positions",
                 (long long)*n_out, l->sp.max_new_tokens, (long long)j->cfg.max_pos);
  if (l->err) {
    free(*ids_out);
    *ids_out = NULL;
    *n_out = 0;
  }
  return st;
}

/* What makes an output line what it is, apart from the prompt: the model (its
 * directory and config.json, or the preset) and the settings that change tokens.
 * The policy (placement, batch sizes, compression), the device and its dtype are
 * not recorded: the planner may choose them differently from one run to the next,
 * and a resumed job may move to other hardware. Sampling settings only when
 * sampling: a greedy job's tokens do not depend on them. */
static zz_status zz_job_record_head(const zz_job *j, json_t *rec) {
  const zz_opts *o = j->o;
  char real[4096] = "", cfgpath[4200];
  struct stat sb;
  json_t *cfg_hash = NULL;
  if (stat(o->model, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    if (!realpath(o->model, real)) snprintf(real, sizeof real, "%s", o->model);
    snprintf(cfgpath, sizeof cfgpath, "%s/config.json", o->model);
    FILE *f = fopen(cfgpath, "rb");
    if (!f) return zz_error(ZZ_ERR_IO, "%s: cannot read: %s", cfgpath, strerror(errno));
    uint64_t h = ZZ_FNV_BASIS;
    unsigned char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) h = zz_fnv1a(h, buf, got);
    bool bad = ferror(f);
    fclose(f);
    if (bad) return zz_error(ZZ_ERR_IO, "%s: read failed", cfgpath);
    char hex[24];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    cfg_hash = json_string(hex);
  } else {
    snprintf(real, sizeof real, "%s", o->model);
    cfg_hash = json_string("preset");
  }
  json_object_set_new(rec, "zigzag_job", json_integer(1));
  json_object_set_new(rec, "model", json_string(real));
  json_object_set_new(rec, "config", cfg_hash);
  json_object_set_new(rec, "dummy", json_boolean(o->dummy));
  json_object_set_new(rec, "max_new_tokens", json_integer(o->max_new_tokens));
  zz_sampling sp = zz_opts_sampling(o);
  json_object_set_new(rec, "temperature", json_real(sp.temperature));
  if (sp.temperature > 0) {
    json_object_set_new(rec, "top_k", json_integer(sp.top_k));
    json_object_set_new(rec, "top_p", json_real(sp.top_p));
    json_object_set_new(rec, "seed", json_integer((json_int_t)sp.seed));
  }
  return ZZ_OK;
}

static char *zz_json_text(const json_t *v) {
  return v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : strdup("(none)");
}

/* --resume into an output with lines: its record must be this job's, and its
 * lines this job's prompts. Says the first thing that differs. */
static zz_status zz_job_record_check(const zz_job *j, const json_t *mine) {
  const zz_opts *o = j->o;
  char rp[4200];
  zz_output_record_path(o->out, rp, sizeof rp);
  json_error_t err;
  json_t *old = json_load_file(rp, JSON_REJECT_DUPLICATES, &err);
  if (!old && access(rp, F_OK) != 0)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "--resume: %s has %lld lines but no job record %s beside it (an older "
                    "zigzag, or a new job killed before its record was written), so they cannot be checked "
                    "against this job; run without --resume, or choose another --out",
                    o->out, (long long)zz_resume_count(j->done_ids), rp);
  json_t *op = old ? json_object_get(old, "prompts") : NULL;
  if (!old || !json_is_object(op) || json_integer_value(json_object_get(old, "zigzag_job")) != 1) {
    json_decref(old);
    return zz_error(ZZ_ERR_FORMAT, "--resume: %s: not a zigzag job record%s%s", rp, old ? "" : ": ",
                    old ? "" : err.text);
  }
  static const struct {
    const char *key, *what;
  } fields[] = {
      {"model", "--model"},
      {"config", "--model's config.json (hash)"},
      {"dummy", "--dummy"},
      {"max_new_tokens", "--max-new-tokens"},
      {"temperature", "--temperature"},
      {"top_k", "--top-k"},
      {"top_p", "--top-p"},
      {"seed", "--seed"},
  };
  zz_status st = ZZ_OK;
  for (size_t i = 0; st == ZZ_OK && i < sizeof fields / sizeof fields[0]; i++) {
    const json_t *a = json_object_get(old, fields[i].key), *b = json_object_get(mine, fields[i].key);
    if ((!a && !b) || (a && b && json_equal((json_t *)a, (json_t *)b))) continue;
    char *ta = zz_json_text(a), *tb = zz_json_text(b);
    st = zz_error(ZZ_ERR_INVALID_ARG,
                  "--resume: %s was made with %s %s, this run has %s: its lines would mix "
                  "with another job's; rerun with the same settings, or without --resume (or another --out)",
                  o->out, fields[i].what, ta ? ta : "?", tb ? tb : "?");
    free(ta);
    free(tb);
  }
  const json_t *np = json_object_get(mine, "prompts");
  const char *id;
  json_t *v;
  json_object_foreach(op, id, v) {
    if (st != ZZ_OK) break;
    const json_t *w = json_object_get(np, id);
    if (!w)
      st = zz_error(ZZ_ERR_INVALID_ARG,
                    "--resume: the job that made %s had prompt id %s, which %s does not "
                    "have: these are other prompts; run without --resume, or choose another --out",
                    o->out, id, o->prompts);
    else if (!json_equal(v, (json_t *)w))
      st = zz_error(ZZ_ERR_INVALID_ARG,
                    "--resume: prompt id %s in %s is not the prompt %s was made for (its "
                    "tokens or its place in the file changed); run without --resume, or choose another --out",
                    id, o->prompts, o->out);
  }
  json_object_foreach((json_t *)np, id, v) {
    if (st != ZZ_OK) break;
    if (!json_object_get(op, id))
      st = zz_error(ZZ_ERR_INVALID_ARG,
                    "--resume: %s has prompt id %s, which the job that made %s did not have; "
                    "run without --resume, or choose another --out",
                    o->prompts, id, o->out);
  }
  /* the record and the prompts agree; every line of --out must be one of them */
  for (size_t pos = 0; st == ZZ_OK && (id = zz_resume_next(j->done_ids, &pos)) != NULL;)
    if (!zz_resume_has(j->hashes, id))
      st = zz_error(ZZ_ERR_INVALID_ARG,
                    "--resume: %s has a line with id %s, which is not a prompt of its job "
                    "(%s); refusing to mix",
                    o->out, id, rp);
  json_decref(old);
  return st;
}

/* One pass over every prompt before anything loads: each line's JSON, its id
 * (once), its tokens (tokenizer, vocabulary, --max-prompt-len); the hashes for the
 * job record, and the count and longest of the prompts still to run. Then back to
 * the first line for zz_job_gather. */
static zz_status zz_job_scan(zz_job *j, json_t *prompts) {
  const zz_opts *o = j->o;
  zz_status st = ZZ_OK;
  uint64_t index = 0;
  for (;;) {
    zz_prompt p;
    bool got = false;
    int64_t at = 0, at_line = 0;
    ZZ_CHECK(zz_prompt_reader_tell(j->rd, &at, &at_line));
    ZZ_CHECK(zz_prompt_reader_next(j->rd, &p, &got));
    if (!got) break;
    uint64_t stream = index++;
    int32_t *ids = NULL;
    int64_t n = 0;
    bool fresh = false;
    /* ids name prompts in the output and for --resume, so they must be unique */
    if (zz_resume_has(j->hashes, p.id))
      st = zz_error(ZZ_ERR_INVALID_ARG,
                    "%s:%lld: id %s appears twice in the prompts (a line without \"id\" "
                    "takes its line number as id)",
                    o->prompts, (long long)p.line, p.id);
    zz_line l = {0};
    if (st == ZZ_OK) st = zz_job_line(j, &p, &l, &ids, &n);
    uint64_t h = st == ZZ_OK ? zz_prompt_hash(stream, ids, n, p.raw) : 0;
    if (st == ZZ_OK) st = zz_resume_put(j->hashes, p.id, h, &fresh);
    char hex[24];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    if (st == ZZ_OK && json_object_set_new(prompts, p.id, json_string(hex)) != 0)
      st = zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
    if (st == ZZ_OK && !zz_resume_has(j->done_ids, p.id)) {
      j->todo++;
      if (n > j->longest) j->longest = n;
      if (j->todo == 1 || n < j->shortest) j->shortest = n;
      if (j->todo == 1 && n > 0 && (j->common = malloc((size_t)n * sizeof *ids))) {
        memcpy(j->common, ids, (size_t)n * sizeof *ids);
        j->n_common = n;
      } else if (j->todo > 1) {
        const int32_t *two[2] = {j->common, ids};
        j->n_common = zz_prefix_common(two, 2, j->n_common < n ? j->n_common : n);
      }
      if (!l.err && l.sp.max_new_tokens > j->lx->max_new) j->lx->max_new = l.sp.max_new_tokens;
      if (!l.err) j->prompt_todo += n * l.n, j->gen_todo += (int64_t)l.sp.max_new_tokens * l.n;
      st = zz_job_entry_add(j->lx, (struct zz_job_entry){.at = at,
                                                         .line = at_line,
                                                         .stream = stream,
                                                         .len = n,
                                                         .max_new = l.err ? 0 : l.sp.max_new_tokens,
                                                         .n = l.err ? 0 : l.n});
    }
    zz_line_free(&l);
    free(ids);
    zz_prompt_free(&p);
    if (st != ZZ_OK) return st;
  }
  zz_job_order(j->lx, o->keep_order);
  return zz_prompt_reader_rewind(j->rd);
}

/* ---------------------------------------------------------------- the job */

zz_status zz_job_open(zz_job *j, const zz_opts *o, zz_shape asked, bool files) {
  memset(j, 0, sizeof *j);
  j->o = o;
  j->files = files;
  j->kill_after = -1;
  if (!(j->lx = calloc(1, sizeof *j->lx))) return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  zz_line_defaults_init(o, &j->lx->defs);
  if (files) {
    j->kill_after = o->fault_kill_after; /* ZZ_FAULT_KILL_AFTER_BLOCKS, checked by the options table */
    if (!(j->hashes = zz_resume_new())) return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
    /* --out is opened (and truncated) before --prompts is read */
    struct stat in_sb, out_sb;
    if (stat(o->prompts, &in_sb) == 0 && stat(o->out, &out_sb) == 0 && in_sb.st_dev == out_sb.st_dev &&
        in_sb.st_ino == out_sb.st_ino && S_ISREG(in_sb.st_mode))
      return zz_error(ZZ_ERR_INVALID_ARG, "--out %s is the same file as --prompts %s", o->out, o->prompts);
  }
  ZZ_CHECK(zz_setup_model(o, files ? ZZ_SETUP_WEIGHTS | ZZ_SETUP_TOKENIZER_IF_ANY : ZZ_SETUP_WEIGHTS, &j->cfg,
                          &j->model, &j->ck, &j->tok));
  int max_new = (int)asked.gen_len;
  if (max_new >= j->cfg.max_pos)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "--max-new-tokens %d leaves no position for a prompt: the model has %lld "
                    "positions",
                    max_new, (long long)j->cfg.max_pos);
  bool len_given = asked.prompt_len > 0; /* else the longest prompt sizes the plan */
  j->max_prompt_len = len_given ? (int)asked.prompt_len : (int)(j->cfg.max_pos - max_new);
  if (j->max_prompt_len < 1 || j->max_prompt_len + max_new > j->cfg.max_pos)
    return zz_error(ZZ_ERR_INVALID_ARG, "--max-prompt-len %d + --max-new-tokens %d exceed the model's %lld positions",
                    j->max_prompt_len, max_new, (long long)j->cfg.max_pos);
  /* the model's chat template, for /v1/chat/completions lines and `messages` */
  struct stat sb;
  if (files && stat(o->model, &sb) == 0 && S_ISDIR(sb.st_mode)) ZZ_CHECK(zz_chat_ctx_load(o->model, &j->lx->chat));
  j->shape = (zz_shape){.prompt_len = j->max_prompt_len, .gen_len = max_new};
  if (!files) return ZZ_OK;
  /* every path and every prompt before the weights: a missing --prompts, a bad line
   * anywhere in it, an --out that cannot be written, is another job's or is not
   * this job's (--resume) are refused in a moment. The engine then refuses a plan
   * that does not fit before it allocates or loads. */
  ZZ_CHECK(zz_prompt_reader_open(o->prompts, &j->rd));
  ZZ_CHECK(zz_output_open(&j->out, o->out, o->resume, &j->done_ids));
  json_t *rec = json_object(), *prompts = json_object();
  zz_status st = rec && prompts ? ZZ_OK : zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  if (st == ZZ_OK) st = zz_job_scan(j, prompts);
  if (st == ZZ_OK) st = zz_job_record_head(j, rec);
  if (st == ZZ_OK && json_object_set(rec, "prompts", prompts) != 0) st = zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  if (st == ZZ_OK && j->out.resume && j->out.regular && zz_resume_count(j->done_ids) > 0)
    st = zz_job_record_check(j, rec);
  if (st == ZZ_OK && !(j->record = json_dumps(rec, JSON_INDENT(1)))) st = zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  json_decref(prompts);
  json_decref(rec);
  /* without --max-prompt-len the memory plan is for the longest prompt the job
   * runs, not the longest the model could take */
  if (st == ZZ_OK && !len_given) j->shape.prompt_len = j->longest > 0 ? j->longest : 1;
  /* the prefix every prompt shares, which each block's shares at least, as the
   * engine's rule takes it (the cost model prices its prompt steps with it) */
  if (st == ZZ_OK && !o->no_prefix_sharing && j->common) {
    const int32_t *two[2] = {j->common, j->common};
    j->shape.shared_prefix = zz_prefix_shared(two, 2, j->shortest < j->n_common + 1 ? j->shortest : j->n_common + 1);
  }
  /* a line may ask for more new tokens than the command line: the cache is sized
   * for the most any line asks */
  if (st == ZZ_OK && j->lx->max_new > j->shape.gen_len) {
    j->shape.gen_len = j->lx->max_new;
    if (j->shape.prompt_len + j->shape.gen_len > j->cfg.max_pos)
      st = zz_error(ZZ_ERR_INVALID_ARG,
                    "%s: the longest prompt (%lld tokens) and the most new tokens a line asks "
                    "(%lld) together exceed the model's %lld positions; split the lines into two jobs",
                    o->prompts, (long long)j->shape.prompt_len, (long long)j->shape.gen_len, (long long)j->cfg.max_pos);
  }
  return st;
}

zz_status zz_job_start(zz_job *j, int64_t cap) {
  const zz_opts *o = j->o;
  struct zz_job_lines *lx = j->lx;
  ZZ_CHECK(zz_output_begin(&j->out, j->record));
  j->cap = cap;
  j->prompts = calloc((size_t)cap, sizeof *j->prompts);
  j->ids = calloc((size_t)cap, sizeof *j->ids);
  j->lens = calloc((size_t)cap, sizeof *j->lens);
  j->streams = calloc((size_t)cap, sizeof *j->streams);
  lx->lines = calloc((size_t)cap, sizeof *lx->lines);
  lx->pids = calloc((size_t)cap, sizeof *lx->pids);
  lx->plen = calloc((size_t)cap, sizeof *lx->plen);
  lx->first = calloc((size_t)cap, sizeof *lx->first);
  lx->params = calloc((size_t)cap, sizeof *lx->params);
  lx->seq_prompt = calloc((size_t)cap, sizeof *lx->seq_prompt);
  if (!j->prompts || !j->ids || !j->lens || !j->streams || !lx->lines || !lx->pids || !lx->plen || !lx->first ||
      !lx->params || !lx->seq_prompt)
    return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  zz_progress_start(&j->prog, o, zz_resume_count(j->hashes));
  j->prog.skipped = zz_resume_count(j->hashes) - j->todo; /* already in --out (--resume) */
  j->prog.max_tokens = j->todo * j->shape.gen_len;
  j->prog.eta.prompt_left = j->prompt_todo;
  j->prog.eta.gen_left = j->gen_todo;
  j->more = lx->n_order > 0;
  return ZZ_OK;
}

/* j->n prompts of the block, j->lx->nseq sequences; j->ids[s] points into the
 * prompt's tokens (lx->pids), which own them. */
static void zz_job_clear(zz_job *j) {
  struct zz_job_lines *lx = j->lx;
  for (int64_t i = 0; i < j->n; i++) {
    zz_prompt_free(&j->prompts[i]);
    zz_line_free(&lx->lines[i]);
    free(lx->pids[i]);
    lx->pids[i] = NULL;
  }
  j->n = 0;
  if (lx) lx->nseq = 0;
}

/* Sequence q's tokens so far: true ends it, when its line's stop string is in their
 * text. Also the progress line within a block. */
static bool zz_job_on_token(void *ctx, int64_t q, const int32_t *tokens, int64_t n) {
  zz_job *j = ctx;
  zz_progress_token(&j->prog);
  const zz_line *l = &j->lx->lines[j->lx->seq_prompt[q]];
  if (!l->n_stop || !j->tok) return false;
  char *text = NULL;
  size_t len = 0, at;
  if (zz_tokenizer_decode(j->tok, tokens, n, &text, &len) != ZZ_OK) {
    zz_error_clear();
    return false;
  }
  bool hit = zz_line_find_stop(l, text, len, &at) >= 0;
  free(text);
  return hit;
}

static zz_status zz_job_write_block(zz_job *j, const zz_result *res);

zz_status zz_job_gather(zz_job *j, int64_t max_n, zz_request *req_out) {
  const zz_opts *o = j->o;
  struct zz_job_lines *lx = j->lx;
  if (max_n > j->cap) max_n = j->cap;
  for (;;) {
    zz_job_clear(j);
    ZZ_CHECK(zz_check_stop()); /* between blocks: everything so far is committed */
    while ((j->more || lx->has_pend) && j->n < max_n && lx->nseq < max_n) {
      zz_prompt p;
      uint64_t stream;
      if (lx->has_pend) {
        p = lx->pend;
        stream = lx->pend_stream;
        lx->has_pend = false;
      } else {
        const struct zz_job_entry *e = &lx->order[lx->next++];
        j->more = lx->next < lx->n_order;
        int64_t at = 0, at_line = 0;
        ZZ_CHECK(zz_prompt_reader_tell(j->rd, &at, &at_line));
        if (at != e->at) ZZ_CHECK(zz_prompt_reader_seek(j->rd, e->at, e->line));
        bool got = false;
        ZZ_CHECK(zz_prompt_reader_next(j->rd, &p, &got));
        if (!got)
          return zz_error(ZZ_ERR_IO, "%s:%lld: the prompts file changed while the job ran (it ends sooner)", o->prompts,
                          (long long)e->line + 1);
        stream = e->stream; /* prompt number in the file: the sampling stream */
      }
      zz_line l;
      int32_t *ids = NULL;
      int64_t n = 0;
      zz_status st = zz_job_line(j, &p, &l, &ids, &n);
      if (st != ZZ_OK) {
        zz_prompt_free(&p);
        return st;
      }
      /* the file was checked whole before the job began; it must not change under it */
      uint64_t h = 0;
      if (!zz_resume_get(j->hashes, p.id, &h) || h != zz_prompt_hash(stream, ids, n, p.raw)) {
        st = zz_error(ZZ_ERR_IO, "%s:%lld: the prompts file changed while the job ran (prompt id %s)", o->prompts,
                      (long long)p.line, p.id);
        zz_line_free(&l);
        free(ids);
        zz_prompt_free(&p);
        return st;
      }
      int need = l.err ? 0 : l.n;
      if (need > max_n) {
        zz_line_fail(&l, "invalid_value",
                     "n = %d completions are more than a block's %lld sequences (--gpu-batch-size "
                     "x --num-gpu-batches)",
                     l.n, (long long)max_n);
        need = 0;
      }
      if (lx->nseq + need > max_n) { /* its completions stay together: the next block */
        lx->pend = p;
        lx->pend_stream = stream;
        lx->has_pend = true;
        zz_line_free(&l);
        free(ids);
        break;
      }
      int64_t k = j->n++;
      j->prompts[k] = p;
      lx->lines[k] = l;
      lx->pids[k] = ids;
      lx->plen[k] = n;
      lx->first[k] = lx->nseq;
      for (int c = 0; c < need; c++) {
        int64_t q = lx->nseq++;
        j->ids[q] = ids;
        j->lens[q] = n;
        j->streams[q] = zz_line_stream(&l, stream, c);
        lx->params[q] = l.sp;
        lx->seq_prompt[q] = k;
      }
    }
    if (j->n == 0 || lx->nseq > 0) break;
    /* a block of lines that are all errors: answered now, and on to the next */
    ZZ_CHECK(zz_job_write_block(j, NULL));
  }
  /* a job with nothing to write still replaces an old --out (with nothing) */
  if (j->n == 0 && j->out.old) ZZ_CHECK(zz_output_commit(&j->out));
  int max_new = o->max_new_tokens > lx->max_new ? o->max_new_tokens : lx->max_new;
  *req_out = (zz_request){
      .n = lx->nseq,
      .ids = (const int32_t *const *)j->ids,
      .lens = j->lens,
      .streams = j->streams,
      .max_new_tokens = max_new,
      .sampling = zz_opts_sampling(o),
  };
  /* each line's own settings (a pipeline's block message carries them to the last
   * rank); stop strings are checked where the tokens are collected (a pipeline's
   * rank 0, which holds the tokenizer) */
  req_out->params = lx->params;
  req_out->on_token = zz_job_on_token;
  req_out->ctx = j;
  return ZZ_OK;
}

/* Why sequence q ended, where the loop did not say (a request without params): an end id last. */
static zz_finish zz_job_finish(const zz_job *j, const zz_result *res, int64_t q) {
  if (res->out) return res->out[q].finish;
  int64_t n = res->n_tokens[q];
  return n > 0 && zz_config_is_eos(&j->cfg, res->tokens[q][n - 1]) ? ZZ_FINISH_EOS : ZZ_FINISH_LENGTH;
}

/* The block's lines in order, flushed and synced (res NULL: every line an error). */
static zz_status zz_job_write_block(zz_job *j, const zz_result *res) {
  const zz_opts *o = j->o;
  struct zz_job_lines *lx = j->lx;
  zz_progress_block pb = {.lines = j->n};
  for (int64_t i = 0; i < j->n; i++) {
    const zz_line *l = &lx->lines[i];
    zz_completion c[ZZ_MAX_COMPLETIONS];
    int nc = l->err ? 0 : l->n;
    for (int k = 0; k < nc; k++) {
      int64_t q = lx->first[i] + k;
      c[k] = (zz_completion){.tokens = res->tokens[q],
                             .n_tokens = res->n_tokens[q],
                             .finish = zz_job_finish(j, res, q),
                             .out = res->out ? &res->out[q] : NULL};
      pb.new_tokens += res->n_tokens[q];
      pb.prompt_tokens += lx->plen[i];
      pb.asked_tokens += lx->params[q].max_new_tokens;
    }
    char *line = zz_line_answer(&j->prompts[i], l, j->tok, &j->cfg, c, lx->plen[i], &lx->defs);
    if (!line) return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
    if (i == 0) zz_fault_at_commit(j->kill_after, j->committed, j->out.f, line); /* ZZ_FAULT_* */
    int bad = fputs(line, j->out.f) < 0;
    free(line);
    if (bad) return zz_error(ZZ_ERR_IO, "%s: write failed: %s", o->out, strerror(errno));
    if (l->err) j->prog.errors++;
  }
  if (res) {
    pb.prefill_s = res->prefill_s, pb.decode_s = res->decode_s;
    j->prog.pos_computed += res->pos_computed;
    j->prog.pos_useful += res->pos_useful;
    j->prog.refilled += res->refilled;
  }
  /* a finished block is never lost: flushed and synced before the next starts */
  ZZ_CHECK(zz_output_commit(&j->out));
  j->committed++;
  j->written += j->n;
  zz_progress_update(&j->prog, &pb);
  zz_job_clear(j);
  return ZZ_OK;
}

zz_status zz_job_commit(zz_job *j, const zz_result *res) { return zz_job_write_block(j, res); }

zz_status zz_job_workload(const zz_job *j, int64_t **lens_out, int64_t **max_new_out, int64_t *n_out) {
  const struct zz_job_lines *lx = j->lx;
  int64_t n = 0, k = 0;
  for (int64_t i = 0; i < lx->n_order; i++) n += lx->order[i].n;
  int64_t *lens = malloc((size_t)(n ? n : 1) * sizeof *lens), *news = malloc((size_t)(n ? n : 1) * sizeof *news);
  if (!lens || !news) {
    free(lens), free(news);
    return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  }
  for (int64_t i = 0; i < lx->n_order; i++)
    for (int c = 0; c < lx->order[i].n; c++) lens[k] = lx->order[i].len, news[k++] = lx->order[i].max_new;
  *lens_out = lens;
  *max_new_out = news;
  *n_out = n;
  return ZZ_OK;
}

int zz_job_fail(const zz_job *j, zz_status st) {
  if (st == ZZ_ERR_INTERRUPTED || zz_stop_requested())
    return zz_report_interrupt(j->o, zz_resume_count(j->done_ids) + j->written, j->written);
  return zz_report_failure(st);
}

void zz_job_close(zz_job *j) {
  struct zz_job_lines *lx = j->lx;
  if (lx) {
    zz_job_clear(j);
    if (lx->has_pend) zz_prompt_free(&lx->pend);
    free(lx->lines);
    free(lx->pids);
    free(lx->plen);
    free(lx->first);
    free(lx->params);
    free(lx->seq_prompt);
    free(lx->order);
    zz_chat_ctx_free(&lx->chat);
    free(lx);
  }
  free(j->prompts);
  free(j->ids);
  free(j->lens);
  free(j->streams);
  zz_prompt_reader_close(j->rd);
  zz_output_close(&j->out);
  zz_resume_free(j->done_ids);
  zz_resume_free(j->hashes);
  free(j->record);
  free(j->common);
  zz_tokenizer_free(j->tok);
  zz_checkpoint_close(j->ck);
  zz_model_free(&j->model);
  memset(j, 0, sizeof *j);
}
