/*
 * workload.c — a batch file of mixed lengths replayed through one engine, three
 * times in one process (issue #47): as `zigzag generate` runs it now (prompts of
 * similar length and max tokens gathered together, each sequence ending at its own
 * max tokens, and a slot whose sequence has ended taking the next waiting line:
 * zz_request.refill), the same without refill (block by block, a GPU batch whose
 * sequences have all ended left out), and as it ran before (blocks in file order,
 * every sequence of a block run to the block's most max tokens). For each: useful
 * tokens per second (the prompt and generated tokens the lines asked for),
 * positions computed, and the share of them that were padding or finished
 * sequences; and whether every line got the same tokens every way. Dummy weights,
 * greedy, EOS ignored (a line ends at its max tokens). CSV on stdout; not a test.
 *
 * The workload: --prompts FILE (JSON Lines: "input_ids" and "max_new_tokens"), or
 * issue #47's workload (a), made here: prompt lengths log-normal with median 150
 * and p99 1500 tokens, max tokens log-normal with median 120 and p99 1000, both
 * times --scale (so it runs in a minute on a small machine); --write FILE keeps it.
 *
 *   workload [--model opt-125m] [--layers L] [--lines 64] [--scale 0.1] [--seed 1]
 *            [--gbs 8] [--num-gb 1] [--threads 0] [--prompts FILE] [--write FILE]
 *            [--refill-blocks 8]  (lines per refill request in blocks, as zigzag generate's; 0: all)
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zz_runtime.h"
#include "zz_seq.h"

typedef struct wl_line {
  int32_t *ids;
  int64_t len;
  int max_new;
  int64_t place; /* in the file: the sampling stream */
} wl_line;

static uint64_t wl_next(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static double wl_uniform(uint64_t *s) { return ((double)(wl_next(s) >> 11) + 0.5) / 9007199254740992.0; }

/* Log-normal with this median and 99th percentile (z = 2.3263), times scale, in [1, cap]. */
static int64_t wl_lognormal(uint64_t *s, double median, double p99, double scale, int64_t cap) {
  double z = sqrt(-2 * log(wl_uniform(s))) * cos(2 * M_PI * wl_uniform(s));
  double x = exp(log(median) + z * log(p99 / median) / 2.3263) * scale;
  int64_t v = (int64_t)llround(x);
  return v < 1 ? 1 : v > cap ? cap : v;
}

static int wl_read(const char *path, int64_t vocab, wl_line **out, int64_t *n_out) {
  FILE *f = fopen(path, "r");
  if (!f) return fprintf(stderr, "workload: cannot open %s\n", path), 1;
  char *buf = NULL;
  size_t cap = 0;
  int64_t n = 0, room = 0;
  wl_line *w = NULL;
  while (getline(&buf, &cap, f) > 0) {
    json_error_t err;
    json_t *o = json_loads(buf, 0, &err), *ids = json_object_get(o, "input_ids");
    json_t *mn = json_object_get(o, "max_new_tokens");
    if (!json_is_array(ids) || !json_array_size(ids) || !json_is_integer(mn) || json_integer_value(mn) < 1) {
      fprintf(stderr, "workload: %s:%lld: needs input_ids and max_new_tokens\n", path, (long long)n + 1);
      return 1;
    }
    if (n == room) w = realloc(w, (size_t)(room = room ? 2 * room : 64) * sizeof *w);
    wl_line *l = &w[n];
    *l = (wl_line){.len = (int64_t)json_array_size(ids), .max_new = (int)json_integer_value(mn), .place = n};
    l->ids = malloc((size_t)l->len * sizeof *l->ids);
    for (int64_t i = 0; i < l->len; i++) l->ids[i] = (int32_t)(json_integer_value(json_array_get(ids, i)) % vocab);
    n++;
    json_decref(o);
  }
  free(buf);
  fclose(f);
  *out = w;
  *n_out = n;
  return 0;
}

/* zigzag's order (zz_prompt_order), then the file's */
static int wl_cmp(const void *pa, const void *pb) {
  const wl_line *a = *(wl_line *const *)pa, *b = *(wl_line *const *)pb;
  int c = zz_prompt_order(a->len, a->max_new, b->len, b->max_new);
  return c ? c : a->place < b->place ? -1 : a->place > b->place;
}

static int wl_cmp_len(const void *pa, const void *pb) {
  int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
  return a < b ? -1 : a > b;
}

typedef struct wl_run {
  double s;
  int64_t computed, useful, refilled;
} wl_run;

/* The lines in `order`, requests of `per` lines: each its own max tokens (own) or
 * all the request's most (before); with refill, a request of more lines than the
 * engine's slots (zz_request.refill). tokens[place] keeps each line's first max_new
 * tokens. */
static zz_status wl_replay(zz_engine *e, wl_line **order, int64_t n, int64_t per, bool own, bool refill,
                           int32_t **tokens, wl_run *out) {
  *out = (wl_run){0};
  const int32_t **ids = malloc((size_t)per * sizeof *ids);
  int64_t *lens = malloc((size_t)per * sizeof *lens);
  uint64_t *streams = malloc((size_t)per * sizeof *streams);
  zz_seq_params *sp = malloc((size_t)per * sizeof *sp);
  if (!ids || !lens || !streams || !sp) return zz_error(ZZ_ERR_NO_MEMORY, "workload: out of memory");
  double t0 = zz_now();
  zz_status st = ZZ_OK;
  for (int64_t b = 0; st == ZZ_OK && b < n; b += per) {
    int64_t cnt = n - b < per ? n - b : per;
    int most = 1;
    for (int64_t i = 0; i < cnt; i++) {
      const wl_line *l = order[b + i];
      ids[i] = l->ids;
      lens[i] = l->len;
      streams[i] = (uint64_t)l->place;
      sp[i] = (zz_seq_params){
          .sampling = {.top_p = 1}, .max_new_tokens = l->max_new, .repetition_penalty = 1, .logprobs = -1};
      if (l->max_new > most) most = l->max_new;
    }
    zz_request req = {.n = cnt,
                      .ids = ids,
                      .lens = lens,
                      .streams = streams,
                      .max_new_tokens = most,
                      .ignore_eos = true,
                      .sampling = {.top_p = 1},
                      .params = own ? sp : NULL,
                      .refill = refill};
    zz_result res;
    if ((st = zz_generate(e, &req, &res)) != ZZ_OK) break;
    out->computed += res.pos_computed;
    out->refilled += res.refilled;
    for (int64_t i = 0; i < cnt; i++)
      memcpy(tokens[order[b + i]->place], res.tokens[i], (size_t)order[b + i]->max_new * sizeof(int32_t));
    zz_result_free(&res, cnt);
  }
  out->s = zz_now() - t0;
  for (int64_t i = 0; i < n; i++) out->useful += order[i]->len + order[i]->max_new - 1;
  free(ids);
  free(lens);
  free(streams);
  free(sp);
  return st;
}

int main(int argc, char **argv) {
  const char *model = "opt-125m", *prompts = NULL, *write = NULL;
  int layers = 0, gbs = 8, num_gb = 1, threads = 0, refill_blocks = 8;
  int64_t lines = 64;
  double scale = 0.1;
  uint64_t seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "--model")) model = v;
    else if (!strcmp(k, "--layers"))
      layers = atoi(v);
    else if (!strcmp(k, "--lines"))
      lines = atoll(v);
    else if (!strcmp(k, "--scale"))
      scale = atof(v);
    else if (!strcmp(k, "--seed"))
      seed = (uint64_t)atoll(v) * 2654435761u + 1;
    else if (!strcmp(k, "--gbs"))
      gbs = atoi(v);
    else if (!strcmp(k, "--num-gb"))
      num_gb = atoi(v);
    else if (!strcmp(k, "--threads"))
      threads = atoi(v);
    else if (!strcmp(k, "--prompts"))
      prompts = v;
    else if (!strcmp(k, "--write"))
      write = v;
    else if (!strcmp(k, "--refill-blocks"))
      refill_blocks = atoi(v);
    else
      return fprintf(stderr, "workload: unknown option %s (see the head of bench/workload.c)\n", k), 2;
  }
  zz_config cfg;
  zz_model m;
  if (zz_config_resolve(model, &cfg) != ZZ_OK) return fprintf(stderr, "workload: %s\n", zz_error_message()), 1;
  if (layers > 0 && layers < cfg.n_layers) cfg.n_layers = layers;
  if (zz_model_init(&cfg, &m) != ZZ_OK) return fprintf(stderr, "workload: %s\n", zz_error_message()), 1;
  wl_line *w = NULL;
  int64_t n = 0;
  if (prompts) {
    if (wl_read(prompts, cfg.vocab_size, &w, &n)) return 1;
  } else {
    n = lines;
    w = calloc((size_t)n, sizeof *w);
    int64_t half = cfg.max_pos / 2;
    for (int64_t i = 0; i < n; i++) {
      w[i] = (wl_line){.len = wl_lognormal(&seed, 150, 1500, scale, half),
                       .max_new = (int)wl_lognormal(&seed, 120, 1000, scale, half),
                       .place = i};
      w[i].ids = malloc((size_t)w[i].len * sizeof *w[i].ids);
      w[i].ids[0] = (int32_t)cfg.bos;
      for (int64_t t = 1; t < w[i].len; t++)
        w[i].ids[t] = (int32_t)(4 + wl_next(&seed) % (uint64_t)(cfg.vocab_size - 4));
    }
  }
  if (write) {
    FILE *f = fopen(write, "w");
    for (int64_t i = 0; f && i < n; i++) {
      fprintf(f, "{\"id\": %lld, \"input_ids\": [", (long long)i);
      for (int64_t t = 0; t < w[i].len; t++) fprintf(f, "%s%d", t ? ", " : "", w[i].ids[t]);
      fprintf(f, "], \"max_new_tokens\": %d}\n", w[i].max_new);
    }
    if (f) fclose(f);
  }
  int64_t longest = 1, most = 1, asked = 0;
  for (int64_t i = 0; i < n; i++) {
    if (w[i].len > longest) longest = w[i].len;
    if (w[i].max_new > most) most = w[i].max_new;
    asked += w[i].len + w[i].max_new;
  }
  zz_device *dev = NULL;
  zz_policy pol;
  zz_policy_default(&pol);
  pol.gpu_batch_size = gbs;
  pol.num_gpu_batches = num_gb;
  zz_shape shape = {.prompt_len = longest, .gen_len = most};
  zz_engine *e = NULL;
  if (zz_device_create_cpu(0, threads, threads, &dev) != ZZ_OK ||
      zz_engine_create(dev, &m, NULL, &pol, &shape, &e) != ZZ_OK)
    return fprintf(stderr, "workload: %s\n", zz_error_message()), 1;
  wl_line **file = malloc((size_t)n * sizeof *file), **sorted = malloc((size_t)n * sizeof *sorted);
  enum { RUNS = 3 };
  int32_t **tok[RUNS];
  for (int r = 0; r < RUNS; r++) tok[r] = calloc((size_t)n, sizeof **tok);
  for (int64_t i = 0; i < n; i++) {
    file[i] = sorted[i] = &w[i];
    for (int r = 0; r < RUNS; r++) tok[r][i] = malloc((size_t)w[i].max_new * sizeof ***tok);
  }
  qsort(sorted, (size_t)n, sizeof *sorted, wl_cmp);
  int64_t bls = (int64_t)gbs * num_gb, win = refill_blocks > 0 ? bls * refill_blocks : n;
  wl_run runs[RUNS];
  if (wl_replay(e, file, n, bls, false, false, tok[0], &runs[0]) != ZZ_OK ||
      wl_replay(e, sorted, n, bls, true, false, tok[1], &runs[1]) != ZZ_OK ||
      wl_replay(e, sorted, n, win, true, true, tok[2], &runs[2]) != ZZ_OK)
    return fprintf(stderr, "workload: %s\n", zz_error_message()), 1;
  int same = 1;
  for (int r = 1; r < RUNS; r++)
    for (int64_t i = 0; i < n; i++) same &= !memcmp(tok[0][i], tok[r][i], (size_t)w[i].max_new * sizeof ***tok);
  printf("model,layers,lines,prompt_tokens_p50,asked_tokens,bls,run,seconds,useful_tok_s,positions,wasted,refilled,"
         "same_tokens\n");
  const char *names[RUNS] = {"before: file order; every sequence to its block's most",
                             "sorted: zz_prompt_order; own max tokens; block by block",
                             "now: sorted; own max tokens; refill (a finished slot takes the next line)"};
  int64_t *lens = malloc((size_t)n * sizeof *lens);
  for (int64_t i = 0; i < n; i++) lens[i] = w[i].len;
  qsort(lens, (size_t)n, sizeof *lens, wl_cmp_len);
  for (int r = 0; r < RUNS; r++)
    printf("%s,%lld,%lld,%lld,%lld,%lld,%s,%.2f,%.1f,%lld,%.3f,%lld,%d\n", model, (long long)cfg.n_layers, (long long)n,
           (long long)lens[n / 2], (long long)asked, (long long)bls, names[r], runs[r].s, (double)asked / runs[r].s,
           (long long)runs[r].computed, 1.0 - (double)runs[r].useful / (double)runs[r].computed,
           (long long)runs[r].refilled, same);
  printf("# useful tokens/s: sorted %.2fx, now (refill) %.2fx the baseline; refill alone %.2fx\n",
         runs[0].s / runs[1].s, runs[0].s / runs[2].s, runs[1].s / runs[2].s);
  for (int64_t i = 0; i < n; i++) {
    free(w[i].ids);
    for (int r = 0; r < RUNS; r++) free(tok[r][i]);
  }
  for (int r = 0; r < RUNS; r++) free(tok[r]);
  free(lens);
  free(w);
  free(file);
  free(sorted);
  zz_engine_destroy(e);
  zz_device_destroy(dev);
  zz_model_free(&m);
  return same ? 0 : 3;
}
