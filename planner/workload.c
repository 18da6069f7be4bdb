/*
 * workload.c — the planner's prediction for a whole batch file (issue #47): the
 * sequences in the order the engine runs them, cut as the engine cuts them
 * (zz_generate: blocks of gbs x num_gb consecutive sequences, GPU batches of gbs
 * within a block). The memory plan is the engine's, made once for the workload's
 * longest prompt and most new tokens; each block is priced at its own shape by
 * the one cost model (zz_cost_plan):
 *   prefill   the block's prompts left-padded to its longest (the engine's g->s),
 *             each GPU batch its share of the block's prefill (cnt / bls of it);
 *   decode    each GPU batch runs until its own sequences have all ended (the
 *             engine skips a batch with none running), so batch k decodes
 *             max_k - 1 steps, priced at shape (s_block, max_k): 1 / num_gb of
 *             the block's decode at that shape, times cnt_k / gbs; each step's
 *             positions are the batch's rows up to its last running sequence.
 * Scaling a batch's share by its rows is exact for the terms that scale with rows
 * (the GEMMs on the CPU device, attention, the cache and hidden-state traffic) and
 * an approximation for weights loaded once per step for every batch (an offloaded
 * policy's weight lane); what is counted is named in docs/planner.md.
 */
#include <stdlib.h>
#include <string.h>

#include "planner_impl.h"

static int64_t zz_wl_min(int64_t a, int64_t b) { return a < b ? a : b; }

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
  int64_t gbs = pol->gpu_batch_size, nb = pol->num_gpu_batches, bls = gbs * nb;
  for (int64_t b = 0; b < w->n; b += bls) {
    int64_t cnt = zz_wl_min(bls, w->n - b), s = 0;
    for (int64_t i = b; i < b + cnt; i++)
      if (w->prompt_len[i] > s) s = w->prompt_len[i];
    zz_cost c;
    in.shape = (zz_shape){.prompt_len = s, .gen_len = 1};
    zz_cost_plan(&in, &plan, &c, NULL);
    out->prefill_s += c.prefill_s * (double)cnt / (double)bls;
    out->prefill_pos += cnt * s;
    for (int64_t k = b; k < b + cnt; k += gbs) {
      int64_t kc = zz_wl_min(gbs, b + cnt - k), mk = 0;
      for (int64_t i = k; i < k + kc; i++) {
        if (w->max_new[i] > mk) mk = w->max_new[i];
        out->useful_pos += w->prompt_len[i] + w->max_new[i] - 1;
      }
      /* decode step t computes the batch up to its last sequence still running
       * (runtime/schedule.c, zz_step_count): one with max_new > t */
      for (int64_t t = 1; t < mk; t++) {
        int64_t last = kc - 1;
        while (w->max_new[k + last] <= t) last--;
        out->decode_pos += last + 1;
      }
      if (mk < 2) continue;
      in.shape = (zz_shape){.prompt_len = s, .gen_len = mk};
      zz_cost_plan(&in, &plan, &c, NULL);
      out->decode_s += c.decode_s / (double)nb * (double)kc / (double)gbs;
    }
    out->blocks++;
  }
  zz_memplan_free(&plan);
  return ZZ_OK;
}
