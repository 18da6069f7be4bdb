/*
 * workload.c — the planner's prediction for a whole batch file (issue #47): the
 * sequences in the order the engine runs them, scheduled as the engine schedules
 * them. The memory plan is the engine's, made once for the workload's longest
 * prompt and most new tokens; every step is priced by the one cost model
 * (zz_cost_plan). Each sequence ends at its own max tokens.
 *
 * Block by block (zz_generate without refill: blocks of gbs x num_gb consecutive
 * sequences, GPU batches of gbs within a block):
 *   prefill   the block's prompts left-padded to its longest (the engine's g->s),
 *             a shared prefix once (zz_shape.shared_prefix), each GPU batch its
 *             share of the block's prefill (cnt / bls of it);
 *   decode    each GPU batch runs until its own sequences have all ended (the
 *             engine skips a batch with none running), so batch k decodes
 *             max_k - 1 steps, priced at shape (s_block, max_k): 1 / num_gb of
 *             the block's decode at that shape, times cnt_k / gbs; each step's
 *             positions are the batch's rows up to its last running sequence
 *             (zz_step_rows).
 *
 * With refill (zz_request.refill): the runtime's slot schedule itself (zz_slots,
 * runtime/slots.c) turns over a simulation of the engine, so which sequence is in
 * which slot, when a newcomer enters and when a group begins a fresh block are the
 * runtime's; each turn is priced at its own shape:
 *   fresh block  its prompts padded to their longest, a shared prefix once, at the
 *                rows of its GPU batches;
 *   newcomer     one sequence alone over every layer, its prompt's rows (the
 *                engine's zz_schedule_refill);
 *   decode       each step's GPU batches up to their last running sequence, each
 *                row attending to its own keys (the kernels skip a sequence's
 *                padding): consecutive steps of the same rows are priced together
 *                at their mean keys.
 * A step of nbt GPU batches of rows c_k is priced as the cost model's block of
 * num_gb = nbt batches of gbs = max c_k rows, times sum c_k / (nbt max c_k): exact
 * for full batches, and on the CPU device (every term there grows with rows) up to
 * the GEMM rate's rows; an offloaded policy's weights are loaded once per step.
 * What is counted is named in docs/planner.md.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "planner_impl.h"
#include "zz_generate.h"

static int64_t zz_wl_min(int64_t a, int64_t b) { return a < b ? a : b; }

/* Seconds of a step (prefill: its prompt step; else n - 1 decode steps) of nbt GPU
 * batches holding `rows` sequences, at most `most` in one, at shape sh. */
static double zz_wl_price(zz_cost_in *in, const zz_memplan *plan, int64_t rows, int64_t most, int64_t nbt, zz_shape sh,
                          bool prefill) {
  zz_cost c;
  in->gbs = (int)most;
  in->num_gb = (int)nbt;
  in->shape = sh;
  zz_cost_plan(in, plan, &c, NULL);
  return (prefill ? c.prefill_s : c.decode_s) * (double)rows / (double)(most * nbt);
}

/* The prefix a group's prompts share and the engine computes once (runtime/prefix.c:
 * zz_prefix_shared over the group's prompts, up to its shortest less one): seq[cnt]
 * the group's sequences. */
static int64_t zz_wl_prefix(const zz_workload *w, const int64_t *seq, int64_t cnt, const int32_t **scratch) {
  if (!w->share_prefix || cnt < 2 || (!w->ids && !w->common)) return 0;
  int64_t shortest = w->prompt_len[seq[0]];
  for (int64_t i = 0; i < cnt; i++) {
    shortest = zz_wl_min(shortest, w->prompt_len[seq[i]]);
    scratch[i] = w->ids ? w->ids[seq[i]] : w->common;
  }
  /* the common tokens alone are known: no further than them */
  if (!w->ids) shortest = zz_wl_min(shortest, w->n_common + 1);
  return zz_prefix_shared(scratch, cnt, shortest);
}

/* ---------------------------------------------------------------- block by block */

static void zz_wl_blocks(const zz_workload *w, zz_cost_in *in, const zz_memplan *plan, const zz_policy *pol,
                         const int32_t **scratch, int64_t *seq, bool *ended, zz_workload_cost *out) {
  int64_t gbs = pol->gpu_batch_size, nb = pol->num_gpu_batches, bls = gbs * nb;
  for (int64_t b = 0; b < w->n; b += bls) {
    int64_t cnt = zz_wl_min(bls, w->n - b), s = 0;
    for (int64_t i = 0; i < cnt; i++) {
      seq[i] = b + i;
      if (w->prompt_len[b + i] > s) s = w->prompt_len[b + i];
    }
    int64_t p = zz_wl_prefix(w, seq, cnt, scratch);
    double pre = zz_wl_price(in, plan, cnt, gbs, nb, (zz_shape){.prompt_len = s, .gen_len = 1, .shared_prefix = p},
                             true);
    out->prefill_s += pre;
    out->first_s += pre;
    out->prefill_pos += p > 0 ? p + cnt * (s - p) : cnt * s;
    out->shared_pos += (cnt - 1) * p;
    for (int64_t k = b; k < b + cnt; k += gbs) {
      int64_t kc = zz_wl_min(gbs, b + cnt - k), mk = 0;
      for (int64_t i = k; i < k + kc; i++) {
        if (w->max_new[i] > mk) mk = w->max_new[i];
        out->useful_pos += w->prompt_len[i] + w->max_new[i] - 1;
      }
      /* decode step t computes the batch up to its last sequence still running */
      for (int64_t t = 1; t < mk; t++) {
        for (int64_t i = 0; i < kc; i++) ended[i] = w->max_new[k + i] <= t;
        out->decode_pos += zz_step_rows(ended, kc);
      }
      if (mk < 2) continue;
      out->decode_s += zz_wl_price(in, plan, kc, gbs, nb, (zz_shape){.prompt_len = s, .gen_len = mk}, false);
    }
    out->blocks++;
  }
}

/* ---------------------------------------------------------------- with refill */

/* Consecutive decode steps of one group with the same rows in each GPU batch. */
typedef struct zz_wl_run {
  int64_t *rows; /* [num_gb] rows of each batch (0: skipped) */
  int64_t steps; /* steps so far */
  double keys;   /* keys summed over rows and steps */
} zz_wl_run;

/* The simulated engine the slot schedule turns over (zz_slot_ops). */
typedef struct zz_wl_sim {
  const zz_workload *w;
  zz_cost_in *in;
  const zz_memplan *plan;
  zz_shape shape; /* the engine's: the workload's longest prompt and most new tokens */
  int64_t gbs, nb, first_q;
  int64_t *ntok;       /* [request] tokens each sequence has made */
  int64_t *s, *p;      /* [groups] the block's padded length and shared prefix */
  int64_t *pad;        /* [cap] each slot's key start (its left padding) */
  int64_t *wseq;       /* [cap] scratch: a fresh block's sequences in the workload */
  int64_t *first;      /* [groups] the block's first sequence (its prompt holds the shared prefix) */
  zz_wl_run *run;      /* [groups] */
  int64_t *rows;       /* [num_gb] scratch */
  const int32_t **two; /* [cap] scratch */
  bool first_round;
  zz_workload_cost *out;
} zz_wl_sim;

static void zz_wl_flush(zz_wl_sim *x, int gr) {
  zz_wl_run *r = &x->run[gr];
  if (r->steps == 0) return;
  int64_t rows = 0, most = 0, nbt = 0;
  for (int64_t k = 0; k < x->nb; k++) {
    rows += r->rows[k];
    nbt += r->rows[k] > 0;
    if (r->rows[k] > most) most = r->rows[k];
  }
  /* the cost model's decode of n steps attends s + n / 2 keys: n = steps + 1 and s
   * so that this is the run's mean */
  double mean = r->keys / (double)(rows * r->steps);
  int64_t s = llround(mean - (double)(r->steps + 1) / 2);
  zz_shape sh = {.prompt_len = s > 0 ? s : 0, .gen_len = r->steps + 1};
  x->out->decode_s += zz_wl_price(x->in, x->plan, rows, most, nbt, sh, false);
  r->steps = 0;
  r->keys = 0;
}

static int64_t zz_wl_room(void *ctx, int gr, int step, int64_t len) {
  zz_wl_sim *x = ctx;
  return zz_refill_room(&x->shape, x->s[gr], step, len);
}
static int64_t zz_wl_max_new(void *ctx, int64_t q) {
  zz_wl_sim *x = ctx;
  return x->w->max_new[x->first_q + q];
}
static bool zz_wl_done(void *ctx, int64_t q) {
  zz_wl_sim *x = ctx;
  return x->ntok[q] >= x->w->max_new[x->first_q + q];
}

static zz_status zz_wl_begin(void *ctx, int gr, int64_t cnt, const int64_t *seq) {
  zz_wl_sim *x = ctx;
  const zz_workload *w = x->w;
  int64_t s = 0, base = gr * x->gbs * x->nb, *at = x->wseq + base; /* the workload's indices */
  for (int64_t i = 0; i < cnt; i++) {
    at[i] = x->first_q + seq[i];
    s = w->prompt_len[at[i]] > s ? w->prompt_len[at[i]] : s;
  }
  int64_t p = zz_wl_prefix(w, at, cnt, x->two);
  zz_wl_flush(x, gr);
  double pre = zz_wl_price(x->in, x->plan, cnt, zz_wl_min(cnt, x->gbs), (cnt + x->gbs - 1) / x->gbs,
                           (zz_shape){.prompt_len = s, .gen_len = 1, .shared_prefix = p}, true);
  x->out->prefill_s += pre;
  if (x->first_round) x->out->first_s += pre;
  x->out->prefill_pos += p > 0 ? p + cnt * (s - p) : cnt * s;
  x->out->shared_pos += (cnt - 1) * p;
  x->out->blocks++;
  x->s[gr] = s;
  x->p[gr] = p;
  x->first[gr] = at[0];
  for (int64_t i = 0; i < cnt; i++) {
    x->pad[base + i] = s - w->prompt_len[at[i]];
    x->ntok[seq[i]] = 1;
  }
  return ZZ_OK;
}

static zz_status zz_wl_refill(void *ctx, int gr, int64_t i, int64_t q, int step) {
  zz_wl_sim *x = ctx;
  const zz_workload *w = x->w;
  int64_t len = w->prompt_len[x->first_q + q], at = x->s[gr] + step - 1, shared = 0;
  if (w->refill_shares_prefix && x->p[gr] > 0) { /* what follows the block's prefix, where it starts with it */
    x->two[0] = w->ids ? w->ids[x->first[gr]] : w->common;
    x->two[1] = w->ids ? w->ids[x->first_q + q] : w->common;
    shared = zz_prefix_shared(x->two, 2, zz_wl_min(len, x->p[gr] + 1));
  }
  x->out->refill_s += zz_wl_price(x->in, x->plan, 1, 1, 1, (zz_shape){.prompt_len = len - shared, .gen_len = 1}, true);
  x->out->prefill_pos += len - shared;
  x->out->shared_pos += shared;
  x->out->refilled++;
  x->pad[gr * x->gbs * x->nb + i] = at - len;
  x->ntok[q] = 1;
  return ZZ_OK;
}

static zz_status zz_wl_step(void *ctx, int gr, int step, int64_t cnt, const int64_t *seq, const bool *ended) {
  zz_wl_sim *x = ctx;
  zz_wl_run *r = &x->run[gr];
  const int64_t *pad = x->pad + gr * x->gbs * x->nb;
  int64_t at = x->s[gr] + step - 1; /* the key position this step writes */
  bool same = r->steps > 0;
  for (int64_t k = 0; k < x->nb; k++) {
    int64_t first = k * x->gbs, kc = first < cnt ? zz_wl_min(x->gbs, cnt - first) : 0;
    x->rows[k] = kc > 0 ? zz_step_rows(ended + first, kc) : 0;
    same = same && x->rows[k] == r->rows[k];
  }
  if (!same) {
    zz_wl_flush(x, gr);
    memcpy(r->rows, x->rows, (size_t)x->nb * sizeof *r->rows);
  }
  for (int64_t k = 0; k < x->nb; k++)
    for (int64_t i = k * x->gbs; i < k * x->gbs + x->rows[k]; i++) {
      r->keys += (double)(at + 1 - pad[i]);
      x->out->decode_pos++;
    }
  r->steps++;
  for (int64_t i = 0; i < cnt; i++) x->ntok[seq[i]] += !ended[i];
  return ZZ_OK;
}

static const zz_slot_ops zz_wl_ops = {.room = zz_wl_room,
                                      .max_new = zz_wl_max_new,
                                      .done = zz_wl_done,
                                      .begin = zz_wl_begin,
                                      .refill = zz_wl_refill,
                                      .step = zz_wl_step};

static zz_status zz_wl_refill_run(const zz_workload *w, zz_cost_in *in, const zz_memplan *plan, const zz_policy *pol,
                                  zz_shape shape, zz_workload_cost *out) {
  int n_groups = plan->spec.n_groups;
  int64_t gbs = pol->gpu_batch_size, nb = pol->num_gpu_batches, bls = gbs * nb, cap = bls * n_groups;
  int64_t per = w->per_request > 0 ? w->per_request : w->n;
  zz_wl_sim x = {.w = w, .in = in, .plan = plan, .shape = shape, .gbs = gbs, .nb = nb, .out = out};
  x.ntok = calloc((size_t)zz_wl_min(per, w->n), sizeof *x.ntok);
  x.s = calloc((size_t)n_groups, sizeof *x.s);
  x.p = calloc((size_t)n_groups, sizeof *x.p);
  x.first = calloc((size_t)n_groups, sizeof *x.first);
  x.pad = calloc((size_t)cap, sizeof *x.pad);
  x.wseq = calloc((size_t)cap, sizeof *x.wseq);
  x.run = calloc((size_t)n_groups, sizeof *x.run);
  x.rows = calloc((size_t)nb, sizeof *x.rows);
  x.two = calloc((size_t)(cap > 2 ? cap : 2), sizeof *x.two);
  zz_status st = !x.ntok || !x.s || !x.p || !x.first || !x.pad || !x.wseq || !x.run || !x.rows || !x.two
                     ? zz_error(ZZ_ERR_NO_MEMORY, "plan: out of memory")
                     : ZZ_OK;
  for (int gr = 0; st == ZZ_OK && gr < n_groups; gr++)
    if (!(x.run[gr].rows = calloc((size_t)nb, sizeof *x.run[gr].rows)))
      st = zz_error(ZZ_ERR_NO_MEMORY, "plan: out of memory");
  for (int64_t b = 0; st == ZZ_OK && b < w->n; b += per) {
    int64_t cnt = zz_wl_min(per, w->n - b);
    x.first_q = b;
    memset(x.ntok, 0, (size_t)cnt * sizeof *x.ntok);
    for (int64_t i = b; i < b + cnt; i++) out->useful_pos += w->prompt_len[i] + w->max_new[i] - 1;
    zz_slots sl;
    if ((st = zz_slots_init(&sl, n_groups, bls, cnt, w->prompt_len + b, &zz_wl_ops, &x)) != ZZ_OK) break;
    for (x.first_round = true; st == ZZ_OK && zz_slots_busy(&sl); x.first_round = false)
      for (int gr = 0; st == ZZ_OK && gr < n_groups; gr++) st = zz_slots_turn(&sl, gr);
    for (int gr = 0; gr < n_groups; gr++) zz_wl_flush(&x, gr);
    zz_slots_free(&sl);
  }
  for (int gr = 0; x.run && gr < n_groups; gr++) free(x.run[gr].rows);
  free(x.ntok), free(x.s), free(x.p), free(x.first), free(x.pad), free(x.wseq), free(x.run), free(x.rows), free(x.two);
  return st;
}

zz_status zz_plan_workload(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_policy *pol,
                           const zz_workload *w, zz_workload_cost *out) {
  memset(out, 0, sizeof *out);
  if (w->n < 1) return zz_error(ZZ_ERR_INVALID_ARG, "plan: a workload of no sequences");
  int64_t longest = 0, most = 0;
  for (int64_t i = 0; i < w->n; i++) {
    if (w->prompt_len[i] < 1 || w->max_new[i] < 1)
      return zz_error(ZZ_ERR_INVALID_ARG,
                      "plan: workload sequence %lld has %lld prompt tokens and %lld new tokens; "
                      "each needs at least 1 of both",
                      (long long)i, (long long)w->prompt_len[i], (long long)w->max_new[i]);
    if (w->prompt_len[i] > longest) longest = w->prompt_len[i];
    if (w->max_new[i] > most) most = w->max_new[i];
  }
  if (longest + most > m->cfg.max_pos)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "plan: the workload's longest prompt (%lld tokens) and most new tokens (%lld) exceed %s's %lld "
                    "positions",
                    (long long)longest, (long long)most, m->cfg.name, (long long)m->cfg.max_pos);
  /* the engine's memory plan: made once, for the workload's shape */
  zz_planner_opts ow = *o;
  ow.shape = (zz_shape){.prompt_len = longest, .gen_len = most};
  zz_memplan plan;
  ZZ_CHECK(zz_plan_check(m, hw, &ow, pol, &plan));
  zz_cost_in in = zz_cost_in_of(m, hw, &ow, pol);
  /* refill where the engine can (zz_engine_can_refill: every group's cache on the device) */
  bool refill = w->refill;
  for (int gr = 0; refill && gr < plan.spec.n_groups; gr++) refill = zz_memplan_cache_on_device(&plan, m, gr);
  zz_status st = ZZ_OK;
  if (refill) {
    out->refill = true;
    st = zz_wl_refill_run(w, &in, &plan, pol, ow.shape, out);
  } else {
    int64_t bls = (int64_t)pol->gpu_batch_size * pol->num_gpu_batches;
    const int32_t **scratch = calloc((size_t)bls, sizeof *scratch);
    int64_t *seq = calloc((size_t)bls, sizeof *seq);
    bool *ended = calloc((size_t)bls, sizeof *ended);
    if (!scratch || !seq || !ended) st = zz_error(ZZ_ERR_NO_MEMORY, "plan: out of memory");
    else
      zz_wl_blocks(w, &in, &plan, pol, scratch, seq, ended, out);
    free(scratch), free(seq), free(ended);
  }
  out->useful_pos -= out->shared_pos;
  zz_memplan_free(&plan);
  return st;
}
