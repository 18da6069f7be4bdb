/*
 * workload.c — a batch file of mixed lengths replayed through one engine, three or
 * four times in one process (issue #47): as it ran before (blocks in file order,
 * every sequence of a block run to the block's most max tokens, no shared prefix),
 * sorted block by block (blocks of prompts of similar length and max tokens, each
 * sequence ending at its own max tokens, a block's shared prefix computed once,
 * runtime/prefix.c), as `zigzag generate` runs it now (the same with refill, below),
 * and with --system the run now without prefix sharing. For each: useful tokens per
 * second (the prompt and generated tokens the lines asked for), positions computed,
 * the share of them that were padding or finished sequences, and whether every line
 * got the same tokens every way. Dummy weights, greedy, EOS ignored (a line ends at
 * its max tokens). CSV on stdout; not a test. With sharing, a block's prompts need
 * (n - 1) x P fewer positions than they have tokens: `wasted` counts against the
 * positions the lines needed, prefix_saved says how many that took off. Each run's
 * wall time and the process's CPU time (on a shared machine the neighbours' load
 * moves the second least; --threads 1 makes it the work done).
 *
 * Refill (zz_request.refill, requests of --refill-blocks blocks, as zigzag generate
 * gathers them): a sequence that ends hands its slot to the next waiting line. The
 * sorted run, block by block without refill, shows what the refill alone gives.
 *
 * With --hw FILE (zigzag profile --out FILE on this machine) each run also prints
 * the planner's prediction of it (zz_plan_workload: block by block, each block at
 * its own padded prompt length and each GPU batch to its own most new tokens; with
 * refill, the runtime's slot schedule priced turn by turn) and its ratio to the
 * measured seconds. Either way every run's positions are checked: the engine's
 * count of computed positions, of those a shared prefix took off and of newcomers
 * against the planner's schedule of the same run, and (the runs with each line's
 * own max tokens) the engine's useful positions against the lines' asked tokens; a
 * mismatch exits 4, as a wrong "wasted" column would be.
 *
 *   workload [--model opt-125m] [--layers L] [--lines 64] [--scale 0.1] [--seed 1]
 *            [--gbs 8] [--num-gb 1] [--threads 0] [--system 0] [--prompts FILE] [--write FILE] [--hw FILE]
 *            [--width H] [--refill-blocks 8]
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zz_runtime.h"
#include "zz_search.h"
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

/* CPU time of the process: on a machine others load, the figure their load moves least */
static double wl_cpu_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct wl_run {
  double s, cpu_s;
  int64_t computed, useful;
  int64_t saved;                           /* prompt positions a shared prefix took off (zz_prefix_shared per block) */
  int64_t engine_useful;                   /* zz_result's pos_useful, summed */
  double prefill_s, decode_s;              /* zz_result's, summed */
  double predicted_s, predicted_prefill_s; /* zz_plan_workload's (0: no --hw) */
  int64_t predicted_pos;                   /* its positions computed */
  int64_t predicted_saved;                 /* its positions a shared prefix took off */
  int64_t predicted_refilled;              /* its newcomers */
  double predicted_newcomer_s;             /* of predicted_s, the newcomers' prompt steps */
  int64_t refilled;                        /* sequences that joined a running block */
} wl_run;

/* The lines in `order`, requests of `per` lines: each its own max tokens (own) or
 * all the request's most (before); with refill, a request of more lines than the
 * engine's slots (zz_request.refill). tokens[place] keeps each line's first max_new
 * tokens. */
static zz_status wl_replay(zz_engine *e, wl_line **order, int64_t n, int64_t per, bool own, bool share, bool refill,
                           int32_t **tokens, wl_run *out) {
  *out = (wl_run){0};
  zz_engine_set_prefix_sharing(e, share);
  const int32_t **ids = malloc((size_t)per * sizeof *ids);
  int64_t *lens = malloc((size_t)per * sizeof *lens);
  uint64_t *streams = malloc((size_t)per * sizeof *streams);
  zz_seq_params *sp = malloc((size_t)per * sizeof *sp);
  zz_status st = !ids || !lens || !streams || !sp ? zz_error(ZZ_ERR_NO_MEMORY, "workload: out of memory") : ZZ_OK;
  double t0 = zz_now(), c0 = wl_cpu_s();
  for (int64_t b = 0; st == ZZ_OK && b < n; b += per) {
    int64_t cnt = n - b < per ? n - b : per;
    int most = 1;
    int64_t shortest = order[b]->len;
    for (int64_t i = 0; i < cnt; i++) {
      const wl_line *l = order[b + i];
      if (l->len < shortest) shortest = l->len;
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
    /* a request of one block: its shared prefix, as the engine finds it (a refill
     * request's blocks are the engine's to form: its count is taken below) */
    if (share && !refill) out->saved += (cnt - 1) * zz_prefix_shared(ids, cnt, shortest);
    zz_result res;
    if ((st = zz_generate(e, &req, &res)) != ZZ_OK) break;
    out->computed += res.pos_computed;
    out->engine_useful += res.pos_useful;
    out->prefill_s += res.prefill_s;
    out->decode_s += res.decode_s;
    out->refilled += res.refilled;
    for (int64_t i = 0; i < cnt; i++)
      memcpy(tokens[order[b + i]->place], res.tokens[i], (size_t)order[b + i]->max_new * sizeof(int32_t));
    zz_result_free(&res, cnt);
  }
  out->s = zz_now() - t0;
  out->cpu_s = wl_cpu_s() - c0;
  for (int64_t i = 0; i < n; i++) out->useful += order[i]->len + order[i]->max_new - 1;
  if (refill) out->saved = out->useful - out->engine_useful;
  free(ids);
  free(lens);
  free(streams);
  free(sp);
  return st;
}

/* The preset narrowed to hidden `width`: its head_dim kept, the query and K/V heads
 * and the MLP in its ratios (the MLP to a multiple of 64). */
static int wl_narrow(zz_config *c, int64_t width) {
  if (c->hidden != c->n_heads * c->head_dim || c->embed_dim != c->hidden || c->n_experts || width % c->head_dim ||
      width >= c->hidden)
    return fprintf(stderr,
                   "workload: --width %lld: the preset %s needs hidden = heads x head_dim (%lld), no experts, "
                   "and a width below %lld that head_dim divides\n",
                   (long long)width, c->name, (long long)c->head_dim, (long long)c->hidden),
           1;
  int64_t heads = width / c->head_dim, kv = c->n_kv_heads * heads / c->n_heads;
  c->ffn = (c->ffn * width / c->hidden + 63) / 64 * 64;
  c->n_kv_heads = kv < 1 ? 1 : kv;
  while (heads % c->n_kv_heads) c->n_kv_heads--; /* grouped-query attention: whole groups */
  c->n_heads = heads;
  c->hidden = c->embed_dim = width;
  return 0;
}

/* The planner's prediction of a replay of `order` (wl_replay's arguments: requests
 * of `per`; own: each line's max tokens, else its block's most; share: a group's
 * shared prefix once; refill): seconds with hw, positions always. */
static zz_status wl_predict(const zz_model *m, const zz_hw *hw, const zz_policy *pol, wl_line **order, int64_t n,
                            int64_t per, bool own, bool share, bool refill, wl_run *r) {
  int64_t *lens = malloc((size_t)n * sizeof *lens), *max_new = malloc((size_t)n * sizeof *max_new);
  const int32_t **ids = malloc((size_t)n * sizeof *ids);
  if (!lens || !max_new || !ids)
    return free(lens), free(max_new), free(ids), zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  for (int64_t b = 0; b < n; b += per) {
    int64_t cnt = n - b < per ? n - b : per, most = 1;
    for (int64_t i = b; i < b + cnt; i++) most = order[i]->max_new > most ? order[i]->max_new : most;
    for (int64_t i = b; i < b + cnt; i++) {
      lens[i] = order[i]->len;
      max_new[i] = own ? order[i]->max_new : most;
      ids[i] = order[i]->ids;
    }
  }
  zz_workload w = {.n = n,
                   .prompt_len = lens,
                   .max_new = max_new,
                   .refill = refill,
                   .per_request = per,
                   .share_prefix = share,
                   .ids = ids,
                   .refill_shares_prefix = share};
  zz_workload_cost c = {0};
  zz_hw nominal; /* without a file, the positions alone are asked for */
  zz_hw_nominal("cpu", &nominal);
  zz_planner_opts po;
  zz_planner_opts_default(&po);
  zz_status st = zz_plan_workload(m, hw ? hw : &nominal, &po, pol, &w, &c);
  if (st == ZZ_OK) {
    r->predicted_s = hw ? c.prefill_s + c.refill_s + c.decode_s : 0;
    r->predicted_prefill_s = hw ? c.first_s : 0;
    r->predicted_pos = c.prefill_pos + c.decode_pos;
    r->predicted_saved = c.shared_pos;
    r->predicted_refilled = c.refilled;
    r->predicted_newcomer_s = hw ? c.refill_s : 0;
  }
  free(lens);
  free(max_new);
  free(ids);
  return st;
}

int main(int argc, char **argv) {
  const char *model = "opt-125m", *prompts = NULL, *write = NULL, *hw_path = NULL;
  int layers = 0, gbs = 8, num_gb = 1, threads = 0, width = 0, system = 0, refill_blocks = 8;
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
    else if (!strcmp(k, "--system"))
      system = atoi(v);
    else if (!strcmp(k, "--prompts"))
      prompts = v;
    else if (!strcmp(k, "--write"))
      write = v;
    else if (!strcmp(k, "--hw"))
      hw_path = v;
    else if (!strcmp(k, "--width"))
      width = atoi(v);
    else if (!strcmp(k, "--refill-blocks"))
      refill_blocks = atoi(v);
    else
      return fprintf(stderr, "workload: unknown option %s (see the head of bench/workload.c)\n", k), 2;
  }
  zz_config cfg;
  zz_model m;
  if (zz_config_resolve(model, &cfg) != ZZ_OK) return fprintf(stderr, "workload: %s\n", zz_error_message()), 1;
  if (layers > 0 && layers < cfg.n_layers) cfg.n_layers = layers;
  if (width > 0 && wl_narrow(&cfg, width)) return 2;
  if (zz_model_init(&cfg, &m) != ZZ_OK) return fprintf(stderr, "workload: %s\n", zz_error_message()), 1;
  wl_line *w = NULL;
  int64_t n = 0;
  if (prompts) {
    if (wl_read(prompts, cfg.vocab_size, &w, &n)) return 1;
  } else {
    n = lines;
    w = calloc((size_t)n, sizeof *w);
    int64_t half = cfg.max_pos / 2, sys = system > 0 ? (int64_t)llround(system * scale) : 0;
    if (sys >= half) return fprintf(stderr, "workload: --system %d x --scale leaves no room for a prompt\n", system), 2;
    /* workload (b): one system prompt (BOS, then its tokens, drawn from a stream of
     * its own) before each line of workload (a), the line's own BOS left out: the
     * lines are (a)'s, token for token */
    uint64_t sys_seed = seed ^ 0x9E3779B97F4A7C15u;
    int32_t *sys_ids = malloc((size_t)(sys + 1) * sizeof *sys_ids);
    for (int64_t t = 0; t < sys; t++)
      sys_ids[t] = t ? (int32_t)(4 + wl_next(&sys_seed) % (uint64_t)(cfg.vocab_size - 4)) : (int32_t)cfg.bos;
    int64_t skip = sys > 0; /* the line's BOS */
    for (int64_t i = 0; i < n; i++) {
      w[i] = (wl_line){.len = wl_lognormal(&seed, 150, 1500, scale, half - sys),
                       .max_new = (int)wl_lognormal(&seed, 120, 1000, scale, half),
                       .place = i};
      int64_t own = w[i].len;
      w[i].len = sys + own - skip;
      w[i].ids = malloc((size_t)(w[i].len + 1) * sizeof *w[i].ids);
      memcpy(w[i].ids, sys_ids, (size_t)sys * sizeof *sys_ids);
      int32_t *line = w[i].ids + sys - skip; /* line[0]: the system prompt's last token, or the BOS */
      for (int64_t t = 1; t < own; t++) line[t] = (int32_t)(4 + wl_next(&seed) % (uint64_t)(cfg.vocab_size - 4));
      if (!skip) line[0] = (int32_t)cfg.bos;
    }
    free(sys_ids);
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
  enum { RUNS = 4 }; /* before, sorted block by block, now (refill), now without prefix sharing (--system) */
  int n_runs = system > 0 ? 4 : 3;
  int32_t **tok[RUNS];
  for (int r = 0; r < RUNS; r++) tok[r] = calloc((size_t)n, sizeof **tok);
  for (int64_t i = 0; i < n; i++) {
    file[i] = sorted[i] = &w[i];
    for (int r = 0; r < RUNS; r++) tok[r][i] = malloc((size_t)w[i].max_new * sizeof ***tok);
  }
  qsort(sorted, (size_t)n, sizeof *sorted, wl_cmp);
  int64_t bls = (int64_t)gbs * num_gb, win = refill_blocks > 0 ? bls * refill_blocks : n;
  wl_run runs[RUNS] = {0};
  if (wl_replay(e, file, n, bls, false, false, false, tok[0], &runs[0]) != ZZ_OK ||
      wl_replay(e, sorted, n, bls, true, true, false, tok[1], &runs[1]) != ZZ_OK ||
      wl_replay(e, sorted, n, win, true, true, true, tok[2], &runs[2]) != ZZ_OK ||
      (n_runs == 4 && wl_replay(e, sorted, n, win, true, false, true, tok[3], &runs[3]) != ZZ_OK))
    return fprintf(stderr, "workload: %s\n", zz_error_message()), 1;
  int same = 1;
  for (int r = 1; r < n_runs; r++)
    for (int64_t i = 0; i < n; i++) same &= !memcmp(tok[0][i], tok[r][i], (size_t)w[i].max_new * sizeof ***tok);
  zz_hw hw;
  const zz_hw *hwp = hw_path ? &hw : NULL;
  if ((hw_path && zz_hw_load(hw_path, &hw) != ZZ_OK) ||
      wl_predict(&m, hwp, &pol, file, n, bls, false, false, false, &runs[0]) != ZZ_OK ||
      wl_predict(&m, hwp, &pol, sorted, n, bls, true, true, false, &runs[1]) != ZZ_OK ||
      wl_predict(&m, hwp, &pol, sorted, n, win, true, true, true, &runs[2]) != ZZ_OK ||
      (n_runs == 4 && wl_predict(&m, hwp, &pol, sorted, n, win, true, false, true, &runs[3]) != ZZ_OK))
    return fprintf(stderr, "workload: %s\n", zz_error_message()), 1;
  /* the wasted column is 1 - (useful - saved) / computed: every run's counts are
   * checked against the planner's schedule of it (positions computed, those a shared
   * prefix took off, newcomers), and the engine's useful positions against the
   * lines' asked tokens (the run before runs each line to its block's most) */
  int counts_ok = 1;
  for (int r = 0; r < n_runs; r++) {
    const wl_run *x = &runs[r];
    int ok = x->computed == x->predicted_pos && x->saved == x->predicted_saved &&
             x->refilled == x->predicted_refilled && (r == 0 || x->engine_useful == x->useful - x->saved);
    if (!ok)
      fprintf(stderr,
              "workload: run %d: positions disagree: %lld computed, %lld by the planner's schedule; %lld shared, %lld "
              "by the planner; %lld refilled, %lld by the planner; %lld useful by the engine, %lld asked less "
              "shared\n",
              r, (long long)x->computed, (long long)x->predicted_pos, (long long)x->saved,
              (long long)x->predicted_saved, (long long)x->refilled, (long long)x->predicted_refilled,
              (long long)x->engine_useful, (long long)(x->useful - x->saved));
    counts_ok &= ok;
  }
  printf("model,layers,lines,prompt_tokens_p50,asked_tokens,bls,run,seconds,useful_tok_s,cpu_seconds,useful_tok_cpu_s,"
         "positions,wasted,prefix_saved,refilled,same_tokens,predicted_s,predicted_over_measured,prefill_s,"
         "predicted_prefill_s,decode_s,predicted_decode_s,predicted_newcomer_prefill_s\n");
  const char *names[RUNS] = {"before: file order; every sequence to its block's most; no prefix sharing",
                             "sorted: zz_prompt_order; own max tokens; shared prefix once; block by block",
                             "now: sorted; own max tokens; shared prefix once; refill", "now without prefix sharing"};
  int64_t *lens = malloc((size_t)n * sizeof *lens);
  for (int64_t i = 0; i < n; i++) lens[i] = w[i].len;
  qsort(lens, (size_t)n, sizeof *lens, wl_cmp_len);
  for (int r = 0; r < n_runs; r++) {
    const wl_run *x = &runs[r];
    printf(
        "%s,%lld,%lld,%lld,%lld,%lld,%s,%.2f,%.1f,%.2f,%.1f,%lld,%.3f,%lld,%lld,%d,%.2f,%.3f,%.2f,%.2f,%.2f,%.2f,%.2f\n",
        model, (long long)cfg.n_layers, (long long)n, (long long)lens[n / 2], (long long)asked, (long long)bls,
        names[r], x->s, (double)asked / x->s, x->cpu_s, (double)asked / x->cpu_s, (long long)x->computed,
        1.0 - (double)(x->useful - x->saved) / (double)x->computed, (long long)x->saved, (long long)x->refilled, same,
        x->predicted_s, x->predicted_s / x->s, x->prefill_s, x->predicted_prefill_s, x->decode_s,
        x->predicted_s - x->predicted_prefill_s, x->predicted_newcomer_s);
  }
  printf("# useful tokens/s against the run before: sorted %.2fx wall (%.2fx CPU), now %.2fx wall (%.2fx CPU)",
         runs[0].s / runs[1].s, runs[0].cpu_s / runs[1].cpu_s, runs[0].s / runs[2].s, runs[0].cpu_s / runs[2].cpu_s);
  if (n_runs == 4)
    printf("; the shared prefix in it %.2fx wall (%.2fx CPU)", runs[3].s / runs[2].s, runs[3].cpu_s / runs[2].cpu_s);
  printf("\n");
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
  return !same ? 3 : !counts_ok ? 4 : 0;
}
