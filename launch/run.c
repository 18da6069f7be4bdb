/*
 * run.c — options become a run, once: the policy (the options', or with --hw and
 * none given the planner's), the device it opens and its threads, the binding the
 * plan asks for, the device, the engine. generate, bench and perplexity call
 * zz_run_open; a pipeline's rank takes the same steps one at a time (launch/pipe.c),
 * agreeing with the other ranks between them. The options are read, never written:
 * what the run decides lives in zz_run.
 */
#include <string.h>

#include "zz_bind.h"
#include "zz_launch.h"
#include "zz_planner.h"

/* ---------------------------------------------------------------- the run's plan */

/* A run's --hw file, read and checked against the machine the run is on (it runs
 * here, unlike `zigzag plan`'s), and the planner's options for shape. */
static zz_status zz_run_plan_here(const zz_opts *o, const zz_model *m, const zz_shape *shape, zz_hw *hw,
                                  zz_planner_opts *po) {
  ZZ_CHECK(zz_hw_load(o->hw, hw));
  ZZ_CHECK(zz_opts_planner(o, m, hw, po));
  ZZ_CHECK(zz_hw_check_here(hw, o->hw, o->device, po->cap[ZZ_TIER_CPU], po->cap[ZZ_TIER_GPU]));
  po->shape = *shape;
  return ZZ_OK;
}

zz_status zz_run_plan_pipeline(const zz_opts *o, const zz_model *m, const zz_shape *shape, int ranks, int groups,
                               zz_pipeline_plan *out, zz_hw *hw_out) {
  zz_hw hw;
  zz_planner_opts po;
  ZZ_CHECK(zz_run_plan_here(o, m, shape, &hw, &po));
  po.n_groups = groups;
  if (hw_out) *hw_out = hw;
  return out ? zz_pipe_plan_search(m, &hw, &po, ranks, out) : ZZ_OK;
}

void zz_run_init(zz_run *r, const zz_opts *o) {
  *r = (zz_run){.pol = o->pol, .device = o->device, .threads = o->threads, .attn_threads = o->attn_threads};
}

zz_status zz_run_take_policy(zz_run *r, const zz_policy *planned) {
  /* the line printed is the policy that runs: `--policy LINE` runs it again */
  zz_policy_str(planned, r->pline, sizeof r->pline);
  return zz_policy_parse(r->pline, &r->pol);
}

bool zz_run_take_threads(zz_run *r, const zz_opts *o, const zz_threads *th) {
  bool gemm = !o->threads && th->gemm, attn = !o->attn_threads; /* th->gemm is 0 beside a GPU */
  zz_threads here = zz_plan_threads_here(th);                   /* at most this process's cores */
  if (gemm) r->threads = here.gemm;
  if (attn) r->attn_threads = here.attn;
  return gemm || attn;
}

/* The plan's binding of this process, before its device starts its threads: the
 * planner decides (zz_plan_binding), the runtime binds (runtime/bind.c, hwloc). A
 * run that cannot bind still runs, saying why. A pipeline's ranks bind in
 * launch/pipe.c, collectively. */
static void zz_run_bind(const zz_plan_bind *b) {
  if (!b->on) return;
  zz_binding bd;
  if (zz_binding_init_local(b->gpu_ordinal, &bd) != ZZ_OK) {
    fprintf(stderr, "zigzag: not bound: %s\n", zz_error_message());
    zz_error_clear();
    return;
  }
  zz_binding_free(&bd); /* the process stays bound; only the handles go */
}

/* --hw: the planner's policy when none is given (or the prediction of the given
 * one), the device the file was made for under --device auto, the plan's threads
 * where none are given, and its binding, applied before any device starts its
 * threads. */
static zz_status zz_run_plan(zz_run *r, const zz_opts *o, const zz_model *m, const zz_shape *shape) {
  zz_hw hw;
  zz_planner_opts po;
  ZZ_CHECK(zz_run_plan_here(o, m, shape, &hw, &po));
  r->device = zz_hw_run_device(&hw, o->device);
  if (o->policy || o->policy_flags_given) {
    ZZ_CHECK(zz_plan_eval(m, &hw, &po, &r->pol, &r->pred));
  } else {
    ZZ_CHECK(zz_plan_search(m, &hw, &po, &r->pred));
    ZZ_CHECK(zz_run_take_policy(r, &r->pred.policy));
    fprintf(stderr, "zigzag: no policy given: the planner's for %s (--hw %s): %s\n", m->cfg.name, o->hw, r->pline);
  }
  /* LM-Offload's thread control: the split the plan assumed, where none is given */
  zz_threads th = r->pred.cost.threads;
  if (zz_run_take_threads(r, o, &th))
    fprintf(stderr,
            "zigzag: threads from the plan: GEMM %d, CPU attention %d, I/O lanes %d x 1 (--threads, "
            "--attn-threads override)\n",
            r->threads, r->attn_threads, th.io);
  r->pred.bind = zz_plan_binding(&hw, o->threads || o->attn_threads);
  zz_run_bind(&r->pred.bind);
  r->predicted = true;
  return ZZ_OK;
}

/* ---------------------------------------------------------------- device and engine */

zz_status zz_run_device(zz_run *r, const zz_opts *o, const zz_model *m, int ordinal) {
  size_t cap = 0;
  ZZ_CHECK(zz_parse_bytes(o->gpu_mem, &cap));
  zz_status st;
  zz_device **out = &r->dev;
  if (strcmp(r->device, "cpu") == 0) st = zz_device_create_cpu(cap, r->threads, r->attn_threads, out);
  else if (strcmp(r->device, "cuda") == 0)
    st = zz_device_create_cuda(ordinal, cap, r->attn_threads, out);
  else if (strcmp(r->device, "auto") == 0)
    st = zz_device_create_best(ordinal, cap, r->threads, r->attn_threads, out);
  else
    return zz_error(ZZ_ERR_INVALID_ARG, "--device %s: want auto, cpu or cuda", r->device);
  if (st != ZZ_OK) return st;
  /* the options' words as this device and this policy take them (zz_opts_cpu_act) */
  bool cpu = zz_device_describe(*out)->kind == ZZ_DEVICE_CPU, cw = r->pol.compress_weight;
  zz_dtype wdt = zz_opts_cpu_bf16(o, m->cfg.dtype, cpu, cw) ? ZZ_DTYPE_BF16 : ZZ_DTYPE_F32;
  zz_cpu_act act = zz_opts_cpu_act(o, cpu, cw);
  if ((st = zz_device_set_weight_dtype(*out, wdt)) != ZZ_OK || (st = zz_device_set_cpu_act(*out, act)) != ZZ_OK) {
    zz_device_destroy(*out);
    *out = NULL;
  }
  return st;
}

zz_status zz_run_engine_opts(const zz_run *r, const zz_opts *o, const zz_shape *shape, int layer_begin, int layer_end,
                             int groups, zz_engine_opts *out) {
  zz_engine_opts e = {.shape = *shape,
                      .policy = r->pol,
                      .layer_begin = layer_begin,
                      .layer_end = layer_end,
                      .n_groups = groups,
                      .no_prefix_sharing = o->no_prefix_sharing};
  ZZ_CHECK(zz_opts_tiers(o, &e.tiers));
  *out = e;
  return ZZ_OK;
}

zz_status zz_run_engine(zz_run *r, const zz_model *m, const zz_checkpoint *ck, const zz_engine_opts *eo,
                        const char *who) {
  double t0 = zz_now();
  ZZ_CHECK(zz_engine_create_opts(r->dev, m, ck, eo, &r->eng));
  r->load_s = zz_now() - t0;
  char pb[256], g[32], c[32], d[32];
  const zz_memplan *p = zz_engine_plan(r->eng);
  fprintf(stderr, "zigzag: %spolicy %s; plan: device (%s) %s, cpu %s, disk %s\n", who,
          zz_policy_str(&eo->policy, pb, sizeof pb), zz_device_describe(r->dev)->name,
          zz_format_bytes(zz_memplan_tier_total(p, ZZ_TIER_GPU), g, sizeof g),
          zz_format_bytes(zz_memplan_tier_total(p, ZZ_TIER_CPU), c, sizeof c),
          zz_format_bytes(zz_memplan_tier_total(p, ZZ_TIER_DISK), d, sizeof d));
  return ZZ_OK;
}

/* ---------------------------------------------------------------- one process */

zz_status zz_run_open(zz_run *r, const zz_opts *o, bool plan, const zz_model *m, const zz_checkpoint *ck,
                      const zz_shape *shape) {
  zz_run_init(r, o);
  if (plan && o->hw) ZZ_CHECK(zz_run_plan(r, o, m, shape));
  ZZ_CHECK(zz_run_device(r, o, m, 0));
  zz_engine_opts eo;
  ZZ_CHECK(zz_run_engine_opts(r, o, shape, 0, 0, 1, &eo));
  return zz_run_engine(r, m, ck, &eo, "");
}

void zz_run_free(zz_run *r) {
  zz_engine_destroy(r->eng);
  zz_device_destroy(r->dev);
  r->eng = NULL;
  r->dev = NULL;
}

void zz_report_peaks(const zz_engine *eng, FILE *f) {
  size_t peak[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
  zz_engine_peaks(eng, peak);
  const zz_memplan *plan = zz_engine_plan(eng);
  fprintf(f, "zigzag: peak memory");
  for (int t = 0; t < ZZ_TIER_COUNT; t++) {
    size_t sum = 0;
    for (int p = 0; p < ZZ_PURPOSE_COUNT; p++) sum += peak[t][p];
    char a[32], b[32];
    fprintf(f, "%s %s %s of %s planned", t ? "," : ":", t == ZZ_TIER_GPU ? "device" : zz_tier_name((zz_tier)t),
            zz_format_bytes(sum, a, sizeof a), zz_format_bytes(zz_memplan_tier_total(plan, (zz_tier)t), b, sizeof b));
  }
  fprintf(f, "\n");
}
