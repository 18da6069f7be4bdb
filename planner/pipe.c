/*
 * pipe.c — planning an m-rank pipeline (FlexGen §4.4, design.md's wavefront):
 * the contiguous layer split that minimises the slowest stage (the one split
 * algorithm, also behind zz_plan_split for a given policy), each rank's
 * policy for its slice (one gbs x num_gb for all ranks: the hidden states that
 * cross ranks have one shape), and the pipeline's predicted throughput.
 *
 * Timing of a block of T groups over m ranks (one group's stage time P_r in
 * prefill, G_r per decode step on rank r; hops of h_p / h_g seconds):
 *   prefill = sum_r (P_r + h_p) + (T - 1) max_r P_r            (fill, then one group per slowest stage)
 *   decode  = (n - 1) max(T max_r G_r, sum_r (G_r + h_g))      (per token: the slowest rank's T groups,
 *                                                               or one lap of a group round the ring)
 *   bubble  = 1 - sum_r T (P_r + (n - 1) G_r) / (m (prefill + decode))
 * So more groups shrink the prefill bubble, (m - 1) / (T + m - 1) with even
 * stages, while each group's smaller batch runs slower GEMMs (and reloads
 * offloaded weights once more per group): T is searched beside gbs and num_gb
 * (zz_pipe_best) unless the user fixed it (--num-inner-iterations).
 */
#include <stdlib.h>
#include <string.h>

#include "planner_impl.h"

zz_status zz_split_costs(const double *cost, int L, int nranks, int *bounds_out) {
  if (nranks < 1 || nranks > L)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "pipeline: %d ranks for a model of %d layers (input embedding, attention "
                    "and MLP of each transformer layer, output embedding): every rank needs one",
                    nranks, L);
  double *pre = calloc((size_t)L + 1, sizeof *pre);
  double *best = malloc((size_t)(nranks + 1) * (size_t)(L + 1) * sizeof *best);
  int *arg = malloc((size_t)(nranks + 1) * (size_t)(L + 1) * sizeof *arg);
  if (!pre || !best || !arg) {
    free(pre), free(best), free(arg);
    return zz_error(ZZ_ERR_NO_MEMORY, "pipeline: layer split");
  }
  for (int l = 0; l < L; l++) pre[l + 1] = pre[l] + cost[l];
    /* best[k][j]: the smallest possible slowest stage when k stages hold layers [0, j) */
#define B(k, j) best[(size_t)(k) * (size_t)(L + 1) + (size_t)(j)]
#define A(k, j) arg[(size_t)(k) * (size_t)(L + 1) + (size_t)(j)]
  for (int j = 1; j <= L; j++) B(1, j) = pre[j], A(1, j) = 0;
  for (int k = 2; k <= nranks; k++)
    for (int j = k; j <= L; j++) {
      B(k, j) = -1;
      for (int i = k - 1; i < j; i++) { /* stage k holds [i, j) */
        double last = pre[j] - pre[i], worst = B(k - 1, i) > last ? B(k - 1, i) : last;
        if (B(k, j) < 0 || worst < B(k, j)) B(k, j) = worst, A(k, j) = i;
      }
    }
  bounds_out[nranks] = L;
  for (int k = nranks; k >= 1; k--) bounds_out[k - 1] = A(k, bounds_out[k]);
#undef A
#undef B
  free(pre), free(best), free(arg);
  return ZZ_OK;
}

/* Per-layer predicted seconds of one block under pol, for every layer. */
static zz_status zz_plan_layer_costs(const zz_model *m, const zz_hw *hw, const zz_shape *shape, const zz_policy *pol,
                                     bool bf16_weights, double *cost_out) {
  zz_planner_opts o;
  zz_planner_opts_default(&o);
  o.shape = *shape;
  o.bf16_weights = bf16_weights;
  zz_memplan plan;
  ZZ_CHECK(zz_plan_build(m, hw, &o, pol, &plan));
  zz_cost_in in = zz_cost_in_of(m, hw, &o, pol);
  zz_cost c;
  zz_cost_plan(&in, &plan, &c, cost_out);
  zz_memplan_free(&plan);
  return ZZ_OK;
}

zz_status zz_plan_split(const zz_model *m, const zz_hw *hw, const zz_shape *shape, const zz_policy *pol,
                        bool bf16_weights, int ranks, int *bounds_out) {
  double *cost = malloc((size_t)m->n_layers * sizeof *cost);
  if (!cost) return zz_error(ZZ_ERR_NO_MEMORY, "pipeline: layer split of %d layers", m->n_layers);
  zz_status st = zz_plan_layer_costs(m, hw, shape, pol, bf16_weights, cost);
  if (st == ZZ_OK) st = zz_split_costs(cost, m->n_layers, ranks, bounds_out);
  free(cost);
  return st;
}

/* Hidden state bytes crossing one hop per group: prefill and a decode step. */
static void zz_hop_s(const zz_model *m, const zz_hw *hw, const zz_shape *sh, int bls, double *hp, double *hg) {
  zz_dtype cdt = zz_hw_compute_dtype(hw);
  double bp = (double)zz_hidden_bytes(m->cfg.hidden, cdt, bls, sh->prompt_len);
  double bg = (double)zz_hidden_bytes(m->cfg.hidden, cdt, bls, 1);
  *hp = hw->net_bw > 0 ? bp / hw->net_bw + hw->net_latency : 0;
  *hg = hw->net_bw > 0 ? bg / hw->net_bw + hw->net_latency : 0;
}

/* The pipeline's times from each rank's plan. */
static void zz_pipe_times(const zz_model *m, const zz_hw *hw, const zz_shape *sh, zz_pipeline_plan *p) {
  int M = p->ranks, T = p->groups;
  const zz_policy *pol = &p->rank[0].policy;
  int bls = pol->gpu_batch_size * pol->num_gpu_batches;
  double hp = 0, hg = 0;
  if (M > 1) zz_hop_s(m, hw, sh, bls, &hp, &hg);
  double maxP = 0, maxG = 0, sumP = 0, sumG = 0, busy = 0, n = (double)sh->gen_len;
  for (int r = 0; r < M; r++) {
    double P = p->rank[r].cost.prefill_s, G = n > 1 ? p->rank[r].cost.decode_s / (n - 1) : 0;
    if (P > maxP) maxP = P;
    if (G > maxG) maxG = G;
    sumP += P + (M > 1 ? hp : 0);
    sumG += G + (M > 1 ? hg : 0);
    busy += T * (P + (n - 1) * G);
  }
  p->prefill_s = sumP + (T - 1) * maxP;
  double per_tok = T * maxG > sumG ? T * maxG : sumG;
  p->decode_s = (n - 1) * per_tok;
  p->net_s = hg;
  double tok = (double)T * bls, s = (double)sh->prompt_len;
  p->prefill_tps = tok * s / p->prefill_s;
  p->decode_tps = n > 1 ? tok * (n - 1) / p->decode_s : 0;
  p->total_tps = tok * n / (p->prefill_s + p->decode_s);
  p->bubble = 1 - busy / (M * (p->prefill_s + p->decode_s));
}

/* Every rank's best policy for one (gbs, num_gb) over the split in p->bounds. */
static zz_status zz_pipe_plan_ranks(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, int gbs, int nb,
                                    zz_pipeline_plan *p) {
  for (int r = 0; r < p->ranks; r++) {
    zz_planner_opts ro = *o;
    ro.layer_begin = p->bounds[r], ro.layer_end = p->bounds[r + 1], ro.n_groups = p->groups;
    ZZ_CHECK(zz_plan_one(m, hw, &ro, gbs, nb, &p->rank[r]));
  }
  zz_pipe_times(m, hw, &o->shape, p);
  return ZZ_OK;
}

/* Where a long pipeline search is (64 ranks take minutes): a line on stderr at
 * most every few seconds, so a search is never silent for long. */
typedef struct zz_pipe_prog {
  double t0, last;
  int round;
} zz_pipe_prog;

static void zz_pipe_progress(const zz_planner_opts *o, zz_pipe_prog *g, int ranks, int done, int total) {
  double now = zz_now();
  if (!o->progress || now - g->last < 5) return;
  g->last = now;
  fprintf(stderr, "planner: %d ranks: split %d of at most 3, block shape %d of at most %d, %.0f s so far\n", ranks,
          g->round + 1, done, total, now - g->t0);
}

int zz_pipe_groups(int ranks, int given) { return given > 0 ? given : ranks; }

/* The groups T a search tries, in order: the user's T alone; one rank: 1 (one
 * process runs no groups, and more of them only hold more memory); else m first
 * (so where m stays best the plan is the one it was), then multiples of m. The
 * list stops at 16 m: by then a group is a sixteenth of the block, and the
 * bubble's share (m - 1) / (T + m - 1) is under 1/17. */
static int zz_pipe_groups_list(const zz_planner_opts *o, int ranks, int out[8]) {
  static const int k[] = {1, 2, 3, 4, 6, 8, 12, 16};
  if (o->n_groups > 0 || ranks == 1) return out[0] = zz_pipe_groups(ranks, o->n_groups), 1;
  int n = 0;
  for (int i = 0; i < (int)(sizeof k / sizeof *k) && k[i] * ranks <= ZZ_PLAN_MAX_GROUPS; i++) out[n++] = k[i] * ranks;
  return n;
}

/* The best (T, gbs, num_gb) for the split in p->bounds. A larger T that fits
 * nothing (the cache of T groups grows with T) or two larger T's in a row that
 * predict no better end the search over T. Beyond T = m a block is at most
 * --max-block, or without it the best block of T = m, and at least half that:
 * the prompts re-cut into more groups (every block memory allows, at every T,
 * made OPT-30B's 4-rank search on 4 T4s 81 s instead of 7). */
static zz_status zz_pipe_best(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, zz_pipeline_plan *p,
                              zz_pipe_prog *g) {
  const int *gl = o->gbs_list ? o->gbs_list : zz_plan_gbs_default;
  int ng = o->gbs_list ? o->n_gbs : zz_plan_n_gbs_default;
  const int *nl = o->num_gb_list ? o->num_gb_list : zz_plan_num_gb_default;
  int nn = o->num_gb_list ? o->n_num_gb : zz_plan_n_num_gb_default;
  int tl[8], nt = zz_pipe_groups_list(o, p->ranks, tl);
  zz_pipeline_plan *cur = malloc(sizeof *cur);
  if (!cur) return zz_error(ZZ_ERR_NO_MEMORY, "planner: out of memory");
  bool have = false;
  long long cap = o->max_block; /* the largest block (0: any) */
  for (int t = 0, worse = 0; t < nt && worse < 2; t++) {
    bool fit = false, better = false;
    if (t == 1 && !cap)
      cap = (long long)p->groups * p->rank[0].policy.gpu_batch_size * p->rank[0].policy.num_gpu_batches;
    for (int a = 0; a < nn; a++)
      for (int b = 0; b < ng; b++) {
        if (o->max_gbs && gl[b] > o->max_gbs) break;
        /* the prompts there are fill all T groups of a block, not one */
        long long block = (long long)gl[b] * nl[a] * tl[t];
        if (cap && block > cap) break;
        if (t > 0 && 2 * block < cap) continue;
        memcpy(cur, p, sizeof *cur);
        cur->groups = tl[t];
        zz_pipe_progress(o, g, p->ranks, (t * nn + a) * ng + b + 1, nt * nn * ng);
        zz_status st = zz_pipe_plan_ranks(m, hw, o, gl[b], nl[a], cur);
        if (st == ZZ_ERR_INFEASIBLE) {
          zz_error_clear();
          break;
        }
        if (st != ZZ_OK) {
          free(cur);
          return st;
        }
        fit = true;
        if (!have || cur->total_tps > p->total_tps) memcpy(p, cur, sizeof *p), have = better = true;
      }
    if (!fit) break;
    worse = better ? 0 : worse + 1;
  }
  free(cur);
  return have ? ZZ_OK
              : zz_error(ZZ_ERR_INFEASIBLE, "planner: no policy fits every rank of the %d-rank split", p->ranks);
}

zz_status zz_pipe_plan_search(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, int ranks,
                              zz_pipeline_plan *out) {
  zz_planner_count_search();
  if (ranks < 1 || ranks > ZZ_PLAN_MAX_RANKS || ranks > m->n_layers)
    return zz_error(ZZ_ERR_INVALID_ARG, "planner: --ranks %d: want 1 to %d (and at most the model's %d layers)", ranks,
                    ZZ_PLAN_MAX_RANKS, m->n_layers);
  zz_pipeline_plan *p = calloc(1, sizeof *p);
  double *cost = calloc((size_t)m->n_layers, sizeof *cost);
  zz_status st = ZZ_OK;
  if (!p || !cost) st = zz_error(ZZ_ERR_NO_MEMORY, "planner: out of memory");
  if (st == ZZ_OK) {
    p->ranks = ranks;
    p->groups = zz_pipe_groups(ranks, o->n_groups); /* zz_pipe_best sets the best T */
    /* first split: by weight bytes (memory is what a rank must hold) */
    for (int l = 0; l < m->n_layers; l++) cost[l] = (double)m->layers[l].weight_numel + 1;
    st = zz_split_costs(cost, m->n_layers, ranks, p->bounds);
  }
  /* then: by the cost model's per-layer time under each rank's policy, twice;
   * the best of the rounds is kept */
  zz_pipeline_plan *best = st == ZZ_OK ? malloc(sizeof *best) : NULL;
  if (st == ZZ_OK && !best) st = zz_error(ZZ_ERR_NO_MEMORY, "planner: out of memory");
  bool have = false;
  zz_pipe_prog g = {.t0 = zz_now()};
  g.last = g.t0;
  for (int it = 0; st == ZZ_OK && it < 3; it++) {
    g.round = it;
    st = zz_pipe_best(m, hw, o, p, &g);
    if (st == ZZ_ERR_INFEASIBLE && have) { /* a later split fits worse: keep the earlier */
      zz_error_clear();
      st = ZZ_OK;
      break;
    }
    if (st != ZZ_OK) break;
    if (!have || p->total_tps > best->total_tps) memcpy(best, p, sizeof *best), have = true;
    if (ranks == 1 || it == 2) break;
    int old[ZZ_PLAN_MAX_RANKS + 1];
    memcpy(old, p->bounds, sizeof old);
    for (int r = 0; st == ZZ_OK && r < ranks; r++) {
      zz_planner_opts ro = *o;
      ro.layer_begin = p->bounds[r], ro.layer_end = p->bounds[r + 1], ro.n_groups = p->groups;
      zz_memplan plan;
      st = zz_plan_build(m, hw, &ro, &p->rank[r].policy, &plan);
      if (st != ZZ_OK) break;
      zz_cost_in in = zz_cost_in_of(m, hw, &ro, &p->rank[r].policy);
      zz_cost c;
      zz_cost_plan(&in, &plan, &c, cost + p->bounds[r]);
      zz_memplan_free(&plan);
    }
    if (st == ZZ_OK) st = zz_split_costs(cost, m->n_layers, ranks, p->bounds);
    if (st == ZZ_OK && memcmp(old, p->bounds, sizeof old) == 0) break;
  }
  if (st == ZZ_OK) *out = *best;
  free(best);
  free(p);
  free(cost);
  return st;
}

zz_status zz_pipe_plan_eval(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, int ranks,
                            const zz_policy *pol, zz_pipeline_plan *out) {
  if (ranks < 1 || ranks > ZZ_PLAN_MAX_RANKS || ranks > m->n_layers)
    return zz_error(ZZ_ERR_INVALID_ARG, "planner: --ranks %d: want 1 to %d (and at most the model's %d layers)", ranks,
                    ZZ_PLAN_MAX_RANKS, m->n_layers);
  zz_pipeline_plan *p = calloc(1, sizeof *p);
  double *cost = calloc((size_t)m->n_layers, sizeof *cost);
  zz_status st = p && cost ? ZZ_OK : zz_error(ZZ_ERR_NO_MEMORY, "planner: out of memory");
  if (st == ZZ_OK) {
    p->ranks = ranks;
    p->groups = zz_pipe_groups(ranks, o->n_groups); /* a given policy's T: as the run has it */
    /* the split mpirun --hw FILE --policy P runs (launch/pipe.c): per-layer
     * seconds under P, balanced */
    st = zz_plan_layer_costs(m, hw, &o->shape, pol, o->bf16_weights, cost);
  }
  if (st == ZZ_OK) st = zz_split_costs(cost, m->n_layers, ranks, p->bounds);
  for (int r = 0; st == ZZ_OK && r < ranks; r++) {
    zz_planner_opts ro = *o;
    ro.layer_begin = p->bounds[r], ro.layer_end = p->bounds[r + 1], ro.n_groups = p->groups;
    st = zz_plan_eval(m, hw, &ro, pol, &p->rank[r]);
    if (st != ZZ_OK) {
      char msg[1024], pb[256];
      snprintf(msg, sizeof msg, "%s", zz_error_message());
      st = zz_error(st,
                    "planner: --ranks %d with the policy \"%s\": rank %d (layers [%d, %d), %d groups) cannot run "
                    "it: %s; leave the policy out to plan each rank's own",
                    ranks, zz_policy_str(pol, pb, sizeof pb), r, p->bounds[r], p->bounds[r + 1], p->groups, msg);
    }
  }
  if (st == ZZ_OK) {
    zz_pipe_times(m, hw, &o->shape, p);
    *out = *p;
  }
  free(p);
  free(cost);
  return st;
}
