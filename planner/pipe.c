/*
 * pipe.c — planning an m-rank pipeline (FlexGen §4.4, design.md's wavefront):
 * the contiguous layer split that minimises each phase's slowest stage, weighed
 * as the pipeline waits on it (the one split algorithm, also behind
 * zz_plan_split for a given policy), each rank's
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
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "planner_impl.h"

/* Ascending distinct sums of every run cost[i..j) of one phase (i < j): the
 * values a stage's slowest sum can take, so the candidates for its bound. */
static double *zz_run_sums(const double (*cost)[ZZ_PHASE_COUNT], int L, int ph, size_t *n_out) {
  double *v = malloc((size_t)L * (size_t)(L + 1) / 2 * sizeof *v);
  if (!v) return NULL;
  size_t n = 0;
  for (int i = 0; i < L; i++) {
    double s = 0;
    for (int j = i; j < L; j++) v[n++] = s += cost[j][ph];
  }
  qsort(v, n, sizeof *v, zz_cmp_double);
  size_t u = 0;
  for (size_t i = 0; i < n; i++)
    if (u == 0 || v[i] != v[u - 1]) v[u++] = v[i];
  *n_out = u;
  return v;
}

/* Cuts [0, L) greedily into runs whose prefill and decode sums stay within cap[]:
 * each run as long as both allow (a run inside a fitting run fits too, so no cut
 * needs fewer). The runs' count, or INT_MAX where one layer alone is over a cap. */
static int zz_split_greedy(const double (*cost)[ZZ_PHASE_COUNT], int L, const double cap[ZZ_PHASE_COUNT], int *cuts) {
  int runs = 0;
  for (int i = 0; i < L;) {
    double s[ZZ_PHASE_COUNT] = {0};
    int j = i;
    for (; j < L; j++) {
      bool fits = true;
      for (int ph = 0; ph < ZZ_PHASE_COUNT; ph++) fits = fits && s[ph] + cost[j][ph] <= cap[ph];
      if (!fits) break;
      for (int ph = 0; ph < ZZ_PHASE_COUNT; ph++) s[ph] += cost[j][ph];
    }
    if (j == i) return INT_MAX;
    if (cuts) cuts[runs] = i;
    runs++, i = j;
  }
  return runs;
}

zz_status zz_split_costs(const double (*cost)[ZZ_PHASE_COUNT], int L, int nranks, const double w[ZZ_PHASE_COUNT],
                         int *bounds_out) {
  if (nranks < 1 || nranks > L)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "pipeline: %d ranks for a model of %d layers (input embedding, attention "
                    "and MLP of each transformer layer, output embedding): every rank needs one",
                    nranks, L);
  size_t np = 0, nd = 0;
  double *cp = zz_run_sums(cost, L, ZZ_PHASE_PREFILL, &np), *cd = zz_run_sums(cost, L, ZZ_PHASE_DECODE, &nd);
  if (!cp || !cd) {
    free(cp), free(cd);
    return zz_error(ZZ_ERR_NO_MEMORY, "pipeline: layer split of %d layers", L);
  }
  /* every prefill bound in turn, each with the smallest decode bound that still
   * cuts into nranks runs (it only falls as the prefill bound grows) */
  double best = -1, cap[ZZ_PHASE_COUNT], best_cap[ZZ_PHASE_COUNT] = {0};
  size_t d = nd;
  for (size_t i = 0; i < np && d > 0; i++) {
    cap[ZZ_PHASE_PREFILL] = cp[i], cap[ZZ_PHASE_DECODE] = cd[d - 1];
    if (zz_split_greedy(cost, L, cap, NULL) > nranks) continue;
    for (; d > 1; d--) {
      cap[ZZ_PHASE_DECODE] = cd[d - 2];
      if (zz_split_greedy(cost, L, cap, NULL) > nranks) break;
    }
    double v = w[ZZ_PHASE_PREFILL] * cp[i] + w[ZZ_PHASE_DECODE] * cd[d - 1];
    if (best < 0 || v < best) best = v, best_cap[ZZ_PHASE_PREFILL] = cp[i], best_cap[ZZ_PHASE_DECODE] = cd[d - 1];
  }
  free(cp), free(cd);
  int runs = zz_split_greedy(cost, L, best_cap, bounds_out);
  /* fewer runs than ranks: cut the run of most layers in two until every rank
   * has one (a part of a fitting run fits) */
  for (; runs < nranks; runs++) {
    int widest = 0;
    for (int r = 1; r < runs; r++)
      if ((r + 1 < runs ? bounds_out[r + 1] : L) - bounds_out[r] >
          (widest + 1 < runs ? bounds_out[widest + 1] : L) - bounds_out[widest])
        widest = r;
    int hi = widest + 1 < runs ? bounds_out[widest + 1] : L;
    memmove(bounds_out + widest + 2, bounds_out + widest + 1, (size_t)(runs - widest - 1) * sizeof *bounds_out);
    bounds_out[widest + 1] = (bounds_out[widest] + hi + 1) / 2;
  }
  bounds_out[nranks] = L;
  return ZZ_OK;
}

/* The weights of the split's objective for a pipeline of T groups (zz_pipe_times):
 * the prefill waits (T - 1) times on its slowest stage beyond the fill, each
 * decode step T times on its slowest stage (T >= m: the ring is never the bound). */
static void zz_split_weights(int groups, double w[ZZ_PHASE_COUNT]) {
  w[ZZ_PHASE_PREFILL] = groups > 1 ? groups - 1 : 1;
  w[ZZ_PHASE_DECODE] = groups;
}

/* Per-layer predicted seconds of one block under pol, per phase, for every layer. */
static zz_status zz_plan_layer_costs(const zz_model *m, const zz_hw *hw, const zz_shape *shape, const zz_policy *pol,
                                     const zz_planner_opts *run, double (*cost_out)[ZZ_PHASE_COUNT]) {
  zz_planner_opts o;
  zz_planner_opts_default(&o);
  o.shape = *shape;
  if (run) o.bf16_weights = run->bf16_weights, o.cpu_act = run->cpu_act;
  zz_memplan plan;
  ZZ_CHECK(zz_plan_build(m, hw, &o, pol, &plan));
  zz_cost_in in = zz_cost_in_of(m, hw, &o, pol);
  zz_cost c;
  zz_cost_plan(&in, &plan, &c, cost_out);
  zz_memplan_free(&plan);
  return ZZ_OK;
}

zz_status zz_plan_split(const zz_model *m, const zz_hw *hw, const zz_shape *shape, const zz_policy *pol,
                        const zz_planner_opts *run, int ranks, int groups, int *bounds_out) {
  double(*cost)[ZZ_PHASE_COUNT] = malloc((size_t)m->n_layers * sizeof *cost);
  if (!cost) return zz_error(ZZ_ERR_NO_MEMORY, "pipeline: layer split of %d layers", m->n_layers);
  double w[ZZ_PHASE_COUNT];
  zz_split_weights(groups, w);
  zz_status st = zz_plan_layer_costs(m, hw, shape, pol, run, cost);
  if (st == ZZ_OK) st = zz_split_costs(cost, m->n_layers, ranks, w, bounds_out);
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
  const int *gl, *nl;
  int ng, nn;
  zz_plan_lists(o, &gl, &ng, &nl, &nn);
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
  double(*cost)[ZZ_PHASE_COUNT] = calloc((size_t)m->n_layers, sizeof *cost);
  zz_status st = ZZ_OK;
  if (!p || !cost) st = zz_error(ZZ_ERR_NO_MEMORY, "planner: out of memory");
  if (st == ZZ_OK) {
    p->ranks = ranks;
    p->groups = zz_pipe_groups(ranks, o->n_groups); /* zz_pipe_best sets the best T */
    /* first split: by weight bytes (memory is what a rank must hold) */
    for (int l = 0; l < m->n_layers; l++) cost[l][ZZ_PHASE_PREFILL] = (double)m->layers[l].weight_numel + 1;
    st = zz_split_costs(cost, m->n_layers, ranks, (const double[ZZ_PHASE_COUNT]){1, 0}, p->bounds);
  }
  /* then: by the cost model's per-layer time under each rank's policy, each
   * phase's slowest stage weighed as the pipeline of the plan's T waits on it,
   * twice; the best of the rounds is kept */
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
    double w[ZZ_PHASE_COUNT];
    zz_split_weights(p->groups, w);
    if (st == ZZ_OK) st = zz_split_costs(cost, m->n_layers, ranks, w, p->bounds);
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
  zz_status st = p ? ZZ_OK : zz_error(ZZ_ERR_NO_MEMORY, "planner: out of memory");
  if (st == ZZ_OK) {
    p->ranks = ranks;
    p->groups = zz_pipe_groups(ranks, o->n_groups); /* a given policy's T: as the run has it */
    /* the split mpirun --hw FILE --policy P runs (launch/pipe.c) */
    st = zz_plan_split(m, hw, &o->shape, pol, o, ranks, p->groups, p->bounds);
  }
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
  return st;
}
