/*
 * plan.c — `zigzag plan` and `zigzag profile`.
 *
 *   zigzag plan --model M --prompt-len S --gen-len N [--hw FILE] [--gpu-mem X --cpu-mem X --disk-mem X]
 *               [--cpu-dtype bf16 | --cpu-act int8] [--ranks m] [--json]
 *   zigzag plan --model M --prompts FILE [--max-new-tokens N] [--keep-order] ...
 *   zigzag profile [--out FILE]
 *
 * plan prints the policy the planner chose as the one line --policy accepts, the
 * predicted throughputs, the per-lane time breakdown and the peak bytes per tier;
 * with --ranks m the layer split, each rank's policy, the pipeline's throughput
 * and bubble. Given a policy (--policy or the policy flags) it predicts that one
 * instead of searching. Without --hw it measures this machine first (as profile
 * does). With --prompts (a generate job's file) the shape is the file's longest
 * prompt and most max tokens, and the whole file is predicted as generate runs it
 * (zz_plan_workload: blocks in zz_prompt_order, each at its own shape).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_launch.h"
#include "zz_limits.h"
#include "zz_planner.h"

/* ---------------------------------------------------------------- inputs */

static zz_status zz_plan_hw(const zz_opts *o, zz_hw *hw) {
  if (o->hw) return zz_hw_load(o->hw, hw);
  /* no file: the plan is for this machine, so its memory bounds the overrides
   * (checked before seconds of measuring) */
  size_t cpu = 0, ram = zz_host_memory_bytes();
  ZZ_CHECK(zz_parse_bytes(o->cpu_mem, &cpu));
  char a[32], b[32];
  if (cpu > ram)
    return zz_error(
        ZZ_ERR_INVALID_ARG,
        "plan without --hw plans for this machine, and --cpu-mem %s is more than its %s "
        "of RAM (MemTotal, or its cgroup's memory limit less room for the program); give --hw FILE to plan for another machine",
        zz_format_bytes(cpu, a, sizeof a), zz_format_bytes(ram, b, sizeof b));
  fprintf(stderr, "zigzag: no --hw file: measuring this machine first (zigzag profile --out FILE saves it)\n");
  zz_profile_opts po = {.offload_dir = o->offload_dir, .threads = o->threads, .budget_s = o->profile_seconds};
  return zz_profile_run(&po, hw);
}

zz_status zz_opts_planner(const zz_opts *o, const zz_model *m, const zz_hw *hw, zz_planner_opts *po) {
  zz_planner_opts_default(po);
  po->shape = (zz_shape){.prompt_len = o->prompt_len, .gen_len = o->gen_len};
  ZZ_CHECK(zz_parse_bytes(o->gpu_mem, &po->cap[ZZ_TIER_GPU]));
  ZZ_CHECK(zz_parse_bytes(o->cpu_mem, &po->cap[ZZ_TIER_CPU]));
  ZZ_CHECK(zz_parse_bytes(o->disk_mem, &po->cap[ZZ_TIER_DISK]));
  po->force_compress_weight = o->compress_weight;
  po->force_compress_cache = o->compress_cache;
  po->no_overlap = o->no_overlap;
  po->max_block = o->max_block;
  po->allow_compression = !o->no_compression;
  /* the run's rule (zz_opts_cpu_act) on the file's device and the policy the options
   * give; compressed weights the search chooses are priced with int8 x under auto,
   * as the run's device then takes them. A file without gemm_bf16_flops (written
   * before it was measured) cannot price bf16: auto plans f32 weights there. */
  bool cpu = strcmp(hw->device, "cpu") == 0 && hw->n_gemm_bf16 > 0, cw = o->pol.compress_weight;
  po->bf16_weights = zz_opts_cpu_bf16(o, m->cfg.dtype, cpu, cw); /* given bf16: the file must have the rate */
  po->cpu_act = zz_opts_cpu_act(o, false, false);                /* int8 as given: the search then compresses */
  po->int8_auto = zz_opts_cpu_act_auto(o);
  return ZZ_OK;
}

/* ---------------------------------------------------------------- printing */

static void zz_print_cost(FILE *f, const char *who, const zz_cost *c, const size_t cap[ZZ_TIER_COUNT]) {
  fprintf(f,
          "%spredicted: prefill %.4g tokens/s, decode %.4g tokens/s, total %.4g tokens/s (one block: prefill %.4g s, "
          "decode %.4g s)\n",
          who, c->prefill_tps, c->decode_tps, c->total_tps, c->prefill_s, c->decode_s);
  for (int ph = 0; ph < ZZ_PHASE_COUNT; ph++) {
    fprintf(f, "%s%s lanes, seconds summed over layers%s:", who, ph == ZZ_PHASE_PREFILL ? "prefill" : "decode",
            ph == ZZ_PHASE_PREFILL ? "" : " and steps");
    for (int q = 0; q < ZZ_TERM_COUNT; q++) fprintf(f, " %s %.4g", zz_term_name((zz_term)q), c->term_s[ph][q]);
    fprintf(f, "\n");
  }
  fprintf(f, "%speak memory:", who);
  for (int t = 0; t < ZZ_TIER_COUNT; t++) {
    char a[32], b[32];
    fprintf(f, "%s %s %s of %s", t ? "," : "", zz_tier_name((zz_tier)t), zz_format_bytes(c->peak[t], a, sizeof a),
            zz_format_bytes(cap[t], b, sizeof b));
  }
  fprintf(f, "\n");
  fprintf(f, "%sthreads: GEMM %d%s, CPU attention %d%s, I/O lanes %d x 1\n", who, c->threads.gemm,
          c->threads.gemm ? " (the CPU device's pool)" : " (on the GPU)", c->threads.attn,
          c->attn_threads ? "" : " (unused by this policy)", c->threads.io);
}

static void zz_json_cost(FILE *f, const zz_cost *c) {
  fprintf(f,
          "\"prefill_tps\": %.6g, \"decode_tps\": %.6g, \"total_tps\": %.6g, \"prefill_s\": %.6g, \"decode_s\": %.6g",
          c->prefill_tps, c->decode_tps, c->total_tps, c->prefill_s, c->decode_s);
  for (int ph = 0; ph < ZZ_PHASE_COUNT; ph++) {
    fprintf(f, ", \"%s_lanes_s\": {", ph == ZZ_PHASE_PREFILL ? "prefill" : "decode");
    for (int q = 0; q < ZZ_TERM_COUNT; q++)
      fprintf(f, "%s\"%s\": %.6g", q ? ", " : "", zz_term_name((zz_term)q), c->term_s[ph][q]);
    fprintf(f, "}");
  }
  fprintf(f, ", \"peak_bytes\": {\"gpu\": %zu, \"cpu\": %zu, \"disk\": %zu}, \"attn_threads\": %d", c->peak[0],
          c->peak[1], c->peak[2], c->attn_threads);
  fprintf(f, ", \"threads\": {\"gemm\": %d, \"attn\": %d, \"io\": %d}", c->threads.gemm, c->threads.attn,
          c->threads.io);
}

/* ---------------------------------------------------------------- plan */

/* Prompts per block of a pipeline plan: T groups of gbs x num_gb. */
/* A MoE model: the experts a block of `block` sequences touches per step, in
 * expectation (zz_moe_experts_touched): each loaded once for all the block's rows. */
static void zz_print_experts(const zz_model *m, int block, int prompt_len) {
  const zz_config *c = &m->cfg;
  if (!c->n_experts) return;
  double pre = (double)block * prompt_len, dec = block;
  printf("experts: %lld per MoE layer, top %lld a row; expected touched per step: prefill %.2f (%.0f rows), "
         "decode %.2f (%.0f rows)\n",
         (long long)c->n_experts, (long long)c->n_experts_used,
         zz_moe_experts_touched(c->n_experts, c->n_experts_used, pre), pre,
         zz_moe_experts_touched(c->n_experts, c->n_experts_used, dec), dec);
}

/* A MoE model: where the policy's weight percentages put each MoE layer's experts,
 * by count (zz_policy_expert_split: the memory plan's rule). */
static void zz_print_expert_split(const zz_model *m, const zz_policy *pol, const char *who) {
  if (!m->cfg.n_experts) return;
  zz_expert_split x = zz_policy_expert_split(pol, m->cfg.n_experts);
  printf("%sexperts placed in each MoE layer: gpu %lld, cpu %lld, disk %lld\n", who, (long long)x.n[ZZ_TIER_GPU],
         (long long)x.n[ZZ_TIER_CPU], (long long)x.n[ZZ_TIER_DISK]);
}

static int zz_pipe_block(const zz_pipeline_plan *p) {
  return p->groups * p->rank[0].policy.gpu_batch_size * p->rank[0].policy.num_gpu_batches;
}

/* The m-rank plan beside the best one-machine plan for the same machine file
 * and prompts (the same --max-block): what a user renting m machines asks. */
static void zz_print_vs_one(const zz_pipeline_plan *p, const zz_pipeline_plan *one) {
  char pb[256];
  int M = p->ranks;
  double sd = p->decode_tps / one->decode_tps, st = p->total_tps / one->total_tps;
  printf("one machine: policy %s (block %d sequences); predicted: prefill %.4g tokens/s, decode %.4g tokens/s, total "
         "%.4g tokens/s\n",
         zz_policy_str(&one->rank[0].policy, pb, sizeof pb), zz_pipe_block(one), one->prefill_tps, one->decode_tps,
         one->total_tps);
  printf("speed-up of %d machines over one: decode x%.2f (%s), total x%.2f (%s)\n", M, sd,
         sd > M   ? "super-linear"
         : sd > 1 ? "sub-linear"
                  : "no gain",
         st,
         st > M   ? "super-linear"
         : st > 1 ? "sub-linear"
                  : "no gain");
}

static int zz_plan_pipe(const zz_opts *o, const zz_model *m, const zz_hw *hw, const zz_planner_opts *po_in) {
  int M = o->ranks;
  zz_planner_opts pq = *po_in; /* a long search says how far it is (stderr) */
  pq.progress = true;
  pq.n_groups = o->num_inner_iterations; /* T as a run takes it: the user's, else the search's */
  const zz_planner_opts *po = &pq;
  zz_planner_opts p1 = pq; /* one machine is one process: no groups */
  p1.n_groups = 0;
  /* a given policy (--policy or its flags) is planned around: every rank runs it
   * on the split it implies, or the plan is refused naming the rank */
  bool given = o->policy || o->policy_flags_given;
  const zz_policy *pol = &o->pol;
  zz_pipeline_plan *p = malloc(sizeof *p), *more = malloc(sizeof *more), *fewer = malloc(sizeof *fewer),
                   *one = malloc(sizeof *one);
  zz_status st = p && more && fewer && one ? ZZ_OK : zz_error(ZZ_ERR_NO_MEMORY, "plan: out of memory");
#define ZZ_PIPE_PLAN(k, out)                                                                                           \
  (given ? zz_pipe_plan_eval(m, hw, po, (k), pol, (out)) : zz_pipe_plan_search(m, hw, po, (k), (out)))
  double t0 = zz_now();
  if (st == ZZ_OK) st = ZZ_PIPE_PLAN(M, p);
  double dt = zz_now() - t0;
  /* would one rank more (or fewer) change the answer? */
  bool have_more = false, have_fewer = false, have_one = false;
  if (st == ZZ_OK && dt > 5)
    fprintf(stderr, "plan: %d ranks planned in %.0f s; planning %d and %d ranks too, to compare\n", M, dt, M - 1,
            M + 1);
  if (st == ZZ_OK && M + 1 <= m->n_layers && M + 1 <= ZZ_PLAN_MAX_RANKS) {
    have_more = ZZ_PIPE_PLAN(M + 1, more) == ZZ_OK;
    zz_error_clear();
  }
  if (st == ZZ_OK && M > 1) {
    have_fewer = ZZ_PIPE_PLAN(M - 1, fewer) == ZZ_OK;
    zz_error_clear();
  }
  /* the best one-machine plan (searched, also beside a given policy) */
  if (st == ZZ_OK && M > 1) {
    if (M == 2 && have_fewer && !given && !pq.n_groups) memcpy(one, fewer, sizeof *one), have_one = true;
    else
      have_one = zz_pipe_plan_search(m, hw, &p1, 1, one) == ZZ_OK;
    zz_error_clear();
  }
#undef ZZ_PIPE_PLAN
  int rc = 0;
  if (st != ZZ_OK) {
    rc = zz_report_failure(st);
  } else if (o->json) {
    char pb[256];
    const zz_policy *rp = &p->rank[0].policy;
    printf("{\"model\": \"%s\", \"hw\": \"%s\", \"prompt_len\": %d, \"gen_len\": %d, \"ranks\": %d, \"groups\": %d, "
           "\"prefill_tps\": %.6g, \"decode_tps\": %.6g, \"total_tps\": %.6g, \"bubble\": %.4f, \"net_s\": %.6g, "
           "\"search_s\": %.4g, \"bounds\": [",
           m->cfg.name, hw->name, o->prompt_len, o->gen_len, M, p->groups, p->prefill_tps, p->decode_tps, p->total_tps,
           p->bubble, p->net_s, dt);
    for (int r = 0; r <= M; r++) printf("%s%d", r ? ", " : "", p->bounds[r]);
    printf("], \"rank\": [");
    for (int r = 0; r < M; r++) {
      printf("%s{\"policy\": \"%s\", \"block\": %d, ", r ? ", " : "", zz_policy_str(&p->rank[r].policy, pb, sizeof pb),
             zz_pipe_block(p));
      zz_json_cost(stdout, &p->rank[r].cost);
      printf("}");
    }
    printf("], \"more_ranks_total_tps\": %.6g, \"policy_given\": %s, \"block\": %d, \"gbs\": %d, \"num_gb\": %d",
           have_more ? more->total_tps : 0, given ? "true" : "false", zz_pipe_block(p), rp->gpu_batch_size,
           rp->num_gpu_batches);
    if (have_one) {
      double sd = p->decode_tps / one->decode_tps, sx = p->total_tps / one->total_tps;
      printf(", \"one_rank\": {\"policy\": \"%s\", \"block\": %d, \"prefill_tps\": %.6g, \"decode_tps\": %.6g, "
             "\"total_tps\": %.6g}, \"speedup\": {\"decode\": %.4f, \"total\": %.4f, \"super_linear_decode\": %s, "
             "\"super_linear_total\": %s}",
             zz_policy_str(&one->rank[0].policy, pb, sizeof pb), zz_pipe_block(one), one->prefill_tps, one->decode_tps,
             one->total_tps, sd, sx, sd > M ? "true" : "false", sx > M ? "true" : "false");
    }
    printf("}\n");
  } else {
    size_t cap[ZZ_TIER_COUNT];
    zz_planner_caps(hw, po, cap);
    printf("plan: %s on %s (%d machine%s in the file), prompt %d, gen %d, %d ranks, %d micro-batch groups (%s)\n",
           m->cfg.name, hw->name, hw->machines, hw->machines == 1 ? "" : "s", o->prompt_len, o->gen_len, M, p->groups,
           pq.n_groups ? "--num-inner-iterations"
           : given     ? "the ranks, as a run with a given policy has them"
                       : "searched");
    if (M > hw->machines)
      printf("note: %d ranks on a file of %d machine%s: each rank is planned as one such machine\n", M, hw->machines,
             hw->machines == 1 ? "" : "s");
    if (given) printf("note: the given policy on every rank (predicted, not searched)\n");
    printf("layers:");
    for (int r = 0; r < M; r++) printf(" rank %d [%d, %d)", r, p->bounds[r], p->bounds[r + 1]);
    printf("  (--layers");
    for (int r = 1; r < M; r++) printf("%s%d", r == 1 ? " " : ",", p->bounds[r]);
    printf(")\n");
    zz_print_experts(m, zz_pipe_block(p), o->prompt_len);
    for (int r = 0; r < M; r++) {
      char pb[256], who[32];
      snprintf(who, sizeof who, "rank %d: ", r);
      printf("%spolicy %s\n", who, zz_policy_str(&p->rank[r].policy, pb, sizeof pb));
      zz_print_expert_split(m, &p->rank[r].policy, who);
      printf("%sblock %d sequences (%d groups of gbs %d x num_gb %d)\n", who, zz_pipe_block(p), p->groups,
             p->rank[r].policy.gpu_batch_size, p->rank[r].policy.num_gpu_batches);
      zz_print_cost(stdout, who, &p->rank[r].cost, cap);
    }
    printf("pipeline predicted: prefill %.4g tokens/s, decode %.4g tokens/s, total %.4g tokens/s; bubble %.1f%%; "
           "hidden state hop %.3g ms per decode step\n",
           p->prefill_tps, p->decode_tps, p->total_tps, 100 * p->bubble, 1e3 * p->net_s);
    if (have_one) zz_print_vs_one(p, one);
    else if (M > 1)
      printf("one machine: no plan fits one machine (nothing to compare with)\n");
    if (have_fewer)
      printf("with %d rank%s: total %.4g tokens/s (x%.2f from %d to %d)\n", M - 1, M - 1 == 1 ? "" : "s",
             fewer->total_tps, p->total_tps / fewer->total_tps, M - 1, M);
    if (have_more && more->total_tps <= p->total_tps)
      printf("More ranks would not raise throughput: %d ranks predict %.4g tokens/s, not above %.4g with %d.\n", M + 1,
             more->total_tps, p->total_tps, M);
    else if (have_more)
      printf("with %d ranks: total %.4g tokens/s\n", M + 1, more->total_tps);
    if (have_fewer && fewer->total_tps >= p->total_tps)
      printf("%d ranks are no faster than %d: %.4g tokens/s against %.4g.\n", M, M - 1, p->total_tps, fewer->total_tps);
    printf("search: %.3g s\n", dt);
  }
  free(p), free(more), free(fewer), free(one);
  return rc;
}

/* A generate job's prompts, read and checked as generate reads them (every line
 * tokenized, its max tokens and completions), nothing written: the sequences in
 * the order blocks gather them, and the job's shape. */
static zz_status zz_plan_read_prompts(const zz_opts *o, zz_shape *shape_out, zz_workload *w_out) {
  zz_opts oc = *o;
  oc.dummy = true; /* the lines, not the weights */
  oc.out = "-";
  oc.resume = false;
  zz_job *j = calloc(1, sizeof *j);
  if (!j) return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  zz_status st = zz_job_open(j, &oc, (zz_shape){.prompt_len = 0, .gen_len = oc.max_new_tokens}, true);
  int64_t *lens = NULL, *news = NULL, n = 0;
  if (st == ZZ_OK) st = zz_job_workload(j, &lens, &news, &n);
  if (st == ZZ_OK && n == 0) st = zz_error(ZZ_ERR_INVALID_ARG, "plan: %s has no line to run", o->prompts);
  /* the tokens every prompt starts with: the prefix each block shares at least */
  int32_t *common = NULL;
  if (st == ZZ_OK && j->common && j->n_common > 0 && !(common = malloc((size_t)j->n_common * sizeof *common)))
    st = zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  if (st == ZZ_OK) {
    if (common) memcpy(common, j->common, (size_t)j->n_common * sizeof *common);
    *shape_out = j->shape;
    /* as generate runs them: refill over --refill-blocks blocks at a time (the
     * request's size is set once the policy is known) */
    *w_out = (zz_workload){.n = n,
                           .prompt_len = lens,
                           .max_new = news,
                           .refill = o->refill_blocks > 1,
                           .share_prefix = !o->no_prefix_sharing,
                           .refill_shares_prefix = !o->no_prefix_sharing, /* newcomers too, as the engine does */
                           .common = common,
                           .n_common = common ? j->n_common : 0};
  } else {
    free(lens), free(news), free(common);
  }
  zz_job_close(j);
  free(j);
  return st;
}

/* The workload's prediction as generate runs it (c) and block by block (blocks: the
 * baseline, NULL when c is that already). */
static void zz_print_workload(const zz_workload *w, const zz_workload_cost *c, const zz_workload_cost *blocks,
                              bool json) {
  double total = c->prefill_s + c->refill_s + c->decode_s, computed = (double)(c->prefill_pos + c->decode_pos);
  double base = blocks ? blocks->prefill_s + blocks->refill_s + blocks->decode_s : total;
  if (json) {
    printf(", \"workload\": {\"sequences\": %lld, \"blocks\": %lld, \"refill\": %s, \"refilled\": %lld, "
           "\"prefill_s\": %.6g, \"refill_prefill_s\": %.6g, \"decode_s\": %.6g, \"total_s\": %.6g, "
           "\"block_by_block_total_s\": %.6g, \"positions\": %lld, \"useful_positions\": %lld, "
           "\"prefix_shared_positions\": %lld}",
           (long long)w->n, (long long)c->blocks, c->refill ? "true" : "false", (long long)c->refilled, c->prefill_s,
           c->refill_s, c->decode_s, total, base, (long long)computed, (long long)c->useful_pos,
           (long long)c->shared_pos);
    return;
  }
  printf("workload: %lld sequences, %s: %lld blocks", (long long)w->n,
         c->refill ? "with refill (--refill-blocks)" : "block by block", (long long)c->blocks);
  if (c->refill) printf(", %lld newcomers (their prompt steps %.4g s)", (long long)c->refilled, c->refill_s);
  printf("; predicted prefill %.4g s, decode %.4g s, total %.4g s; %lld positions computed, %.1f%% of them padding "
         "or sequences already ended",
         c->prefill_s + c->refill_s, c->decode_s, total, (long long)computed,
         computed > 0 ? 100.0 * (computed - (double)c->useful_pos) / computed : 0.0);
  if (blocks) printf("; block by block (--refill-blocks 1) %.4g s", base);
  printf("\n");
}

int zz_cmd_plan(const zz_opts *o) {
  zz_config cfg;
  zz_model m = {0};
  zz_hw hw;
  zz_planner_opts po;
  if (o->num_inner_iterations && !o->ranks) /* before a profile's seconds */
    return zz_report_failure(zz_error(ZZ_ERR_INVALID_ARG,
                                      "plan: --num-inner-iterations %d is the groups of a pipeline: give --ranks m "
                                      "too (one process runs no groups)",
                                      o->num_inner_iterations));
  if (o->prompts && o->ranks)
    return zz_report_failure(
        zz_error(ZZ_ERR_INVALID_ARG, "plan: --prompts predicts one process; a pipeline's (--ranks) is not yet"));
  zz_workload w = {0};
  zz_shape job_shape = {0};
  zz_status st = o->prompts ? zz_plan_read_prompts(o, &job_shape, &w) : ZZ_OK;
  if (st == ZZ_OK) st = zz_setup_model(o, 0, &cfg, &m, NULL, NULL);
  if (st == ZZ_OK) st = zz_plan_hw(o, &hw);
  if (st == ZZ_OK) st = zz_opts_planner(o, &m, &hw, &po);
  if (o->prompts) po.shape = job_shape; /* the plan is for the file's longest prompt and most max tokens */
  if (st == ZZ_OK && !o->prompts && (int64_t)o->prompt_len + o->gen_len > cfg.max_pos)
    st = zz_error(ZZ_ERR_INVALID_ARG, "plan: prompt length %d + generation length %d exceed %s's %lld positions",
                  o->prompt_len, o->gen_len, cfg.name, (long long)cfg.max_pos);
  if (st != ZZ_OK) {
    zz_model_free(&m);
    return zz_report_failure(st);
  }
  if (o->ranks > 0) {
    int rc = zz_plan_pipe(o, &m, &hw, &po);
    zz_model_free(&m);
    return rc;
  }
  zz_plan plan;
  bool given = o->policy || o->policy_flags_given; /* predict that policy instead of searching */
  if (given) {
    st = zz_plan_eval(&m, &hw, &po, &o->pol, &plan);
  } else {
    st = zz_plan_search(&m, &hw, &po, &plan);
  }
  zz_workload_cost wc = {0}, wb = {0};
  if (st == ZZ_OK && o->prompts) {
    w.per_request = (int64_t)plan.policy.gpu_batch_size * plan.policy.num_gpu_batches * o->refill_blocks;
    st = zz_plan_workload(&m, &hw, &po, &plan.policy, &w, &wc);
  }
  zz_workload wbase = w;
  wbase.refill = false;
  if (st == ZZ_OK && o->prompts && wc.refill) st = zz_plan_workload(&m, &hw, &po, &plan.policy, &wbase, &wb);
  free((void *)w.prompt_len), free((void *)w.max_new), free((void *)w.common);
  if (st != ZZ_OK) {
    zz_model_free(&m);
    return zz_report_failure(st);
  }
  char pb[256];
  size_t cap[ZZ_TIER_COUNT];
  zz_planner_caps(&hw, &po, cap);
  if (o->json) {
    printf("{\"model\": \"%s\", \"hw\": \"%s\", \"prompt_len\": %lld, \"gen_len\": %lld, \"policy\": \"%s\", ",
           cfg.name, hw.name, (long long)po.shape.prompt_len, (long long)po.shape.gen_len,
           zz_policy_str(&plan.policy, pb, sizeof pb));
    zz_json_cost(stdout, &plan.cost);
    printf(", \"lp_x\": [");
    for (int v = 0; v < ZZ_X_COUNT; v++) printf("%s%.4f", v ? ", " : "", plan.x[v]);
    printf("], \"candidates\": %d, \"feasible\": %d, \"search_s\": %.4g", plan.candidates, plan.feasible,
           plan.search_s);
    if (o->prompts) zz_print_workload(&w, &wc, wc.refill ? &wb : NULL, true);
    printf("}\n");
  } else {
    printf("plan: %s on %s, prompt %lld, gen %lld%s\n", cfg.name, hw.name, (long long)po.shape.prompt_len,
           (long long)po.shape.gen_len, o->prompts ? " (the longest prompt and most max tokens of --prompts)" : "");
    printf("policy %s%s\n", zz_policy_str(&plan.policy, pb, sizeof pb),
           given ? " (given: predicted, not searched)" : "");
    zz_print_cost(stdout, "", &plan.cost, cap);
    if (o->prompts) zz_print_workload(&w, &wc, wc.refill ? &wb : NULL, false);
    zz_print_experts(&m, plan.policy.gpu_batch_size * plan.policy.num_gpu_batches, (int)po.shape.prompt_len);
    zz_print_expert_split(&m, &plan.policy, "");
    if (given) {
      zz_model_free(&m);
      return 0;
    }
    for (int v = 0; v < ZZ_X_COUNT; v++)
      if (plan.x[v] > -0.005 && plan.x[v] < 0.005) plan.x[v] = 0; /* no "-0.00" */
    printf("LP fractions: w %.2f %.2f %.2f, c %.2f %.2f %.2f, h %.2f %.2f %.2f (gpu cpu disk)\n", plan.x[0], plan.x[1],
           plan.x[2], plan.x[3], plan.x[4], plan.x[5], plan.x[6], plan.x[7], plan.x[8]);
    printf("search: %d (gbs, num_gb) tried, %d fit, %.3g s\n", plan.candidates, plan.feasible, plan.search_s);
  }
  zz_model_free(&m);
  return 0;
}

/* ---------------------------------------------------------------- profile */

/* --out must be writable before seconds of measuring, not after them. */
static zz_status zz_profile_out_check(const char *out) {
  if (!out || strcmp(out, "-") == 0) return ZZ_OK;
  char dir[4096];
  if (snprintf(dir, sizeof dir, "%s", out) >= (int)sizeof dir)
    return zz_error(ZZ_ERR_INVALID_ARG, "profile --out %s: the path is too long", out);
  char *slash = strrchr(dir, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == dir)
    dir[1] = '\0'; /* "/x": the root */
  else
    *slash = '\0';
  if (access(dir, W_OK | X_OK) != 0)
    return zz_error(ZZ_ERR_IO, "profile --out %s: the directory %s %s (checked before measuring)", out, dir,
                    access(dir, F_OK) != 0 ? "does not exist" : "is not writable");
  if (access(out, F_OK) == 0 && access(out, W_OK) != 0)
    return zz_error(ZZ_ERR_IO, "profile --out %s: the file exists and is not writable (checked before measuring)", out);
  return ZZ_OK;
}

int zz_cmd_profile(const zz_opts *o) {
  zz_profile_opts po = {
      .offload_dir = o->offload_dir, .threads = o->threads, .budget_s = o->profile_seconds, .verbose = true};
  zz_hw hw;
  zz_status st = zz_profile_out_check(o->out);
  if (st == ZZ_OK) st = zz_profile_run(&po, &hw);
  if (st == ZZ_OK) st = zz_hw_save(&hw, o->out ? o->out : "-");
  if (st != ZZ_OK) return zz_report_failure(st);
  if (o->out && strcmp(o->out, "-") != 0) fprintf(stderr, "zigzag: wrote %s\n", o->out);
  return 0;
}
