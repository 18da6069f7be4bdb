/*
 * search.c — FlexGen's policy search (§4.3, eq. 1): for each GPU batch size,
 * number of GPU batches and choice of CPU attention (and compression, when the
 * engine has it), the nine placement fractions come from a linear program solved
 * with GLPK — minimise the block's time per sequence subject to the memory of each
 * tier — then are rounded to percentages, confirmed with the engine's own memory
 * plan and check (zz_engine_plan_check, against the hardware file's capacities)
 * and predicted with the cost model; the best predicted throughput wins.
 *
 * The LP (per candidate):
 *   columns  x = wg wc wd cg cc cd hg hc hd in [0, 1];  for each class of
 *            identical layers c: Tp_c, Tg_c >= 0 (its prefill and decode step)
 *   minimise sum_c count_c (Tp_c + (n - 1) Tg_c) / bls
 *   rows     wg + wc + wd = 1, likewise c and h;
 *            Tp_c >= every term of class c (cost.c), Tg_c likewise (overlap on;
 *            with overlap off, >= the sum of the lanes);
 *            per tier t: sum over weights, cache, activations of B[P][t] x_Pt
 *            <= cap_t - K_t, where B[P][t] is P's home bytes on t (from memory
 *            plans with everything on one tier) and K_t what t holds besides
 *            homes (staging, workspace, index arrays) in the plan being checked;
 *            on the CPU device the GPU and CPU tiers also share the RAM.
 * A rounded answer that the memory plan refuses shrinks the LP's capacity of the
 * short tier by the shortfall and is solved again (a few rounds at most).
 */
#include <glpk.h>
#include <math.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "planner_impl.h"


void zz_planner_opts_default(zz_planner_opts *o) {
  memset(o, 0, sizeof *o);
  o->allow_compression = true; /* tried where the hardware file has 4-bit rates */
}

/* A compressed policy is priced with the file's 4-bit rates; without them there
 * is nothing to price it with. */
static zz_status zz_q4_rates_check(const zz_hw *hw, bool cw, bool cc) {
  if ((cw || cc) && !zz_hw_has_q4(hw))
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "planner: compressed %s asked for, but the hardware file \"%s\" has no 4-bit rates "
                    "(gemm_q4_flops, bmm_*_q4_flops, cpu_attention_q4_flops, quant_bytes_per_s; zigzag profile "
                    "measures them where the device has 4-bit ops)",
                    cw && cc ? "weights and cache"
                    : cw     ? "weights"
                             : "cache",
                    hw->name);
  return ZZ_OK;
}

/* bf16 weights are the CPU device's option, priced with the file's bf16 GEMM
 * rate; 4-bit weights exclude them (the engine refuses both at once). */
/* An option `opt` of the cpu device (what it does: `what`) that the file prices
 * with its field `field` (n points): refused on another device's file and on a
 * file without the field (written before it was measured). */
static zz_status zz_cpu_rate_check(const zz_hw *hw, const char *opt, const char *what, const char *field, int n) {
  if (strcmp(hw->device, "cpu") != 0)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "planner: %s: %s are an option of the cpu device, and the hardware file \"%s\" describes a %s "
                    "device",
                    opt, what, hw->name, hw->device);
  if (n <= 0)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "planner: %s asked for, but the hardware file \"%s\" has no %s (zigzag profile --out FILE "
                    "measures it where the cpu device has it; docs/planner.md)",
                    opt, hw->name, field);
  return ZZ_OK;
}

static zz_status zz_bf16_rates_check(const zz_hw *hw, const zz_planner_opts *o) {
  if (!o->bf16_weights) return ZZ_OK;
  ZZ_CHECK(zz_cpu_rate_check(hw, "--cpu-dtype bf16", "bf16 weights", "gemm_bf16_flops", hw->n_gemm_bf16));
  if (o->force_compress_weight)
    return zz_error(ZZ_ERR_INVALID_ARG, "planner: --cpu-dtype bf16 with --compress-weight: weights are either 4-bit "
                                        "or bf16; give one of them");
  return ZZ_OK;
}

/* int8 activations are the CPU device's option for compressed weights, priced
 * with the file's int8 rate: the engine refuses them beside uncompressed
 * weights (engine.c), so the search tries compressed weights only, and a request
 * that allows none is refused here. */
static zz_status zz_int8_rates_check(const zz_hw *hw, const zz_planner_opts *o) {
  if (o->cpu_act != ZZ_CPU_ACT_INT8) return ZZ_OK;
  ZZ_CHECK(zz_cpu_rate_check(hw, "--cpu-act int8", "int8 activations", "gemm_q4_int8_flops", hw->n_gemm_q4_int8));
  if (o->bf16_weights)
    return zz_error(ZZ_ERR_INVALID_ARG, "planner: --cpu-act int8 with --cpu-dtype bf16: int8 activations multiply "
                                        "4- or 8-bit weights, and bf16 weights are neither; give one of them");
  if (!o->allow_compression && !o->force_compress_weight)
    return zz_error(ZZ_ERR_INVALID_ARG, "planner: --cpu-act int8 with --no-compression: int8 activations apply only "
                                        "to 4- or 8-bit group weights (--compress-weight)");
  return ZZ_OK;
}

/* Compressed weights are not a choice: given, or implied by int8 activations. */
static bool zz_cw_forced(const zz_planner_opts *o) { return o->force_compress_weight || o->cpu_act == ZZ_CPU_ACT_INT8; }

void zz_planner_caps(const zz_hw *hw, const zz_planner_opts *o, size_t cap[ZZ_TIER_COUNT]) {
  const size_t h[ZZ_TIER_COUNT] = {hw->gpu_mem, hw->cpu_mem, hw->disk_mem};
  for (int t = 0; t < ZZ_TIER_COUNT; t++) cap[t] = o->cap[t] ? o->cap[t] : h[t];
}

/* The RAM the CPU device's gpu and cpu tiers share: the file's cpu_mem_bytes, or
 * --cpu-mem when lower, by the engine's rule (zz_shared_ram_bytes), so the LP and
 * the engine's check agree. The file's figure alone let a plan under --cpu-mem
 * 1600M fill 3.1 GiB of a 2 GiB machine (issue #24). */
static double zz_shared_ram(const zz_hw *hw, const zz_planner_opts *o) {
  return (double)zz_shared_ram_bytes(hw->cpu_mem, o->cap[ZZ_TIER_CPU]);
}

zz_status zz_plan_check(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_policy *pol,
                        zz_memplan *out) {
  /* the file's device as the engine's planning sees it: a description, nothing
   * opened or allocated */
  size_t cap[ZZ_TIER_COUNT];
  zz_planner_caps(hw, o, cap);
  zz_device_desc dev;
  zz_hw_device_desc(hw, cap[ZZ_TIER_GPU], o->bf16_weights, &dev);
  dev.cpu_act = o->cpu_act; /* as zz_device_set_cpu_act sets a live one: the engine's check refuses int8 alone */
  zz_engine_opts eo = {.policy = *pol,
                       .shape = o->shape,
                       .layer_begin = o->layer_begin,
                       .layer_end = o->layer_end,
                       .n_groups = o->n_groups};
  eo.tiers.cap[ZZ_TIER_GPU] = cap[ZZ_TIER_GPU];
  eo.tiers.cap[ZZ_TIER_CPU] = cap[ZZ_TIER_CPU];
  eo.tiers.cap[ZZ_TIER_DISK] = cap[ZZ_TIER_DISK] ? cap[ZZ_TIER_DISK] : 1; /* 0: no disk at all */
  /* on a cpu file the engine's check includes the RAM both tiers draw on (the
   * description's host_memory: the file's cpu_mem, or --cpu-mem when lower) */
  return zz_engine_plan_check(&dev, m, &eo, out);
}

/* ---------------------------------------------------------------- cost inputs */

/* What every cost input takes from the run's options rather than the policy:
 * the one place they pass to the cost model. */
static zz_cost_in zz_cost_in_run(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o) {
  zz_cpu_act act = o->int8_auto ? ZZ_CPU_ACT_INT8 : o->cpu_act; /* the cost applies it to compressed weights only */
  return (zz_cost_in){.m = m, .hw = hw, .shape = o->shape, .bf16_weights = o->bf16_weights, .cpu_act = act};
}

zz_cost_in zz_cost_in_of(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_policy *p) {
  zz_cost_in in = zz_cost_in_run(m, hw, o);
  in.gbs = p->gpu_batch_size, in.num_gb = p->num_gpu_batches, in.overlap = p->overlap;
  in.cpu_attention = p->cpu_attention;
  in.compress_weight = p->compress_weight, in.compress_cache = p->compress_cache;
  in.wq = p->wq, in.cq = p->cq;
  return in;
}

zz_status zz_plan_eval(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_policy *pol,
                       zz_plan *out) {
  ZZ_CHECK(zz_q4_rates_check(hw, pol->compress_weight, pol->compress_cache));
  zz_planner_opts ob = *o;
  ob.force_compress_weight |= pol->compress_weight;
  ZZ_CHECK(zz_bf16_rates_check(hw, &ob));
  ZZ_CHECK(zz_int8_rates_check(hw, &ob));
  zz_memplan plan;
  ZZ_CHECK(zz_plan_check(m, hw, o, pol, &plan));
  memset(out, 0, sizeof *out);
  out->policy = *pol;
  zz_cost_in in = zz_cost_in_of(m, hw, o, pol);
  zz_cost_plan(&in, &plan, &out->cost, NULL);
  zz_memplan_free(&plan);
  return ZZ_OK;
}

/* ---------------------------------------------------------------- the LP */

static void zz_slice(const zz_model *m, const zz_planner_opts *o, int *lb, int *le) {
  *lb = o->layer_begin, *le = o->layer_end;
  if (*lb == 0 && *le == 0) *le = m->n_layers;
}

/* A policy with all three kinds on tier t (the LP's memory coefficients). */
static zz_policy zz_corner(const zz_cost_in *in, bool overlap, zz_tier t) {
  zz_policy p;
  zz_policy_default(&p);
  p.gpu_batch_size = in->gbs, p.num_gpu_batches = in->num_gb, p.overlap = overlap;
  p.cpu_attention = in->cpu_attention, p.compress_weight = in->compress_weight, p.compress_cache = in->compress_cache;
  p.wq = in->wq, p.cq = in->cq;
  double g = t == ZZ_TIER_GPU ? 100 : 0, c = t == ZZ_TIER_CPU ? 100 : 0;
  p.w_gpu = p.c_gpu = p.a_gpu = g;
  p.w_cpu = p.c_cpu = p.a_cpu = c;
  return p;
}

/* The memory plan without the capacity check (the LP's coefficients). */
zz_status zz_plan_build(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_policy *p,
                        zz_memplan *out) {
  zz_planner_opts big = *o;
  for (int t = 0; t < ZZ_TIER_COUNT; t++) big.cap[t] = (size_t)1 << 62;
  zz_hw h = *hw;
  h.cpu_mem = (size_t)1 << 62;
  return zz_plan_check(m, &h, &big, p, out);
}

typedef struct zz_lp_mem {
  double B[3][ZZ_TIER_COUNT]; /* home bytes of weights / cache / act when all on tier t */
  double K[ZZ_TIER_COUNT];    /* bytes on t besides homes */
} zz_lp_mem;

static const zz_purpose zz_home[3] = {ZZ_PURPOSE_WEIGHTS, ZZ_PURPOSE_CACHE, ZZ_PURPOSE_ACT};

static zz_status zz_lp_memory(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_cost_in *in,
                              zz_lp_mem *out) {
  zz_memplan c[ZZ_TIER_COUNT];
  int built = 0;
  zz_status st = ZZ_OK;
  for (; built < ZZ_TIER_COUNT && st == ZZ_OK; built++) {
    zz_policy p = zz_corner(in, in->overlap, (zz_tier)built);
    st = zz_plan_build(m, hw, o, &p, &c[built]);
    if (st != ZZ_OK) break;
  }
  if (st == ZZ_OK) {
    for (int t = 0; t < ZZ_TIER_COUNT; t++) {
      int other = (t + 1) % ZZ_TIER_COUNT;
      double base = 0;
      for (int P = 0; P < 3; P++) {
        out->B[P][t] = (double)c[t].bytes[t][zz_home[P]] - (double)c[other].bytes[t][zz_home[P]];
        base += (double)c[other].bytes[t][zz_home[P]];
      }
      /* staging and workspace of the plan with everything on the GPU: the least
       * any placement needs; the check adds what a real placement needs more */
      out->K[t] = base + (double)c[ZZ_TIER_GPU].bytes[t][ZZ_PURPOSE_STAGING] +
                  (double)c[ZZ_TIER_GPU].bytes[t][ZZ_PURPOSE_WORKSPACE];
    }
  }
  for (int i = 0; i < built; i++) zz_memplan_free(&c[i]);
  return st;
}

#define ZZ_GIB 1073741824.0
/* The LP's capacities: one per tier, and on the CPU device one more for the RAM
 * its gpu and cpu tiers share (rounding shrinks each on its own). */
#define ZZ_LP_RAM ZZ_TIER_COUNT
#define ZZ_LP_CAPS (ZZ_TIER_COUNT + 1)
/* GLPK's bounds per LP: the problem has tens of rows, so a solve that needs more
 * than this is cycling on badly scaled numbers; "no plan" beats a hang */
#define ZZ_LP_IT_LIM 20000
#define ZZ_LP_TM_LIM_MS 10000

/* GLPK reports an internal error by printing and calling abort(); its error
 * hook lets the planner leave through longjmp instead (GLPK's manual: then
 * glp_free_env), keeping the last line GLPK printed for the message. The planner
 * runs on one thread, so one trap serves. */
static struct {
  jmp_buf jb;
  char msg[200];
} zz_glp_trap;

static int zz_glp_print(void *info, const char *s) {
  (void)info;
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == ' ')) n--;
  if (n) snprintf(zz_glp_trap.msg, sizeof zz_glp_trap.msg, "%.*s", (int)n, s);
  return 1; /* nothing on the terminal: the planner's message says it */
}

static void zz_glp_fatal(void *info) {
  (void)info;
  longjmp(zz_glp_trap.jb, 1);
}

static zz_status zz_plan_lp_mem(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_cost_in *in,
                                const zz_lp_mem *mem, const double cap[ZZ_LP_CAPS], double x_out[ZZ_X_COUNT],
                                double *obj_out) {
  (void)hw;
  int lb, le;
  zz_slice(m, o, &lb, &le);
  int nl = le - lb;
  /* classes of identical layers */
  zz_lin(*terms)[ZZ_PHASE_COUNT][ZZ_TERM_COUNT] = malloc((size_t)nl * sizeof *terms);
  int *count = calloc((size_t)nl, sizeof *count);
  /* volatile: read after a longjmp out of GLPK (zz_glp_fatal) */
  int *volatile ia = NULL, *volatile ja = NULL;
  double *volatile ar = NULL;
  glp_prob *volatile lp = NULL;
  volatile zz_status st = ZZ_OK;
  if (!terms || !count) {
    st = zz_error(ZZ_ERR_NO_MEMORY, "planner: out of memory");
    goto done;
  }
  int nc = 0;
  for (int j = lb; j < le; j++) {
    zz_lin t[ZZ_PHASE_COUNT][ZZ_TERM_COUNT];
    for (int ph = 0; ph < ZZ_PHASE_COUNT; ph++) zz_cost_layer(in, j, (zz_phase)ph, t[ph]);
    int k = 0;
    while (k < nc && memcmp(terms[k], t, sizeof t) != 0) k++;
    if (k == nc) memcpy(terms[nc++], t, sizeof t);
    count[k]++;
  }
  /* time in units of the largest term, so the time rows hold numbers near 1 as
   * the memory rows (GiB) do; a term that is not finite (a rate of ~0 in a
   * struct that skipped zz_hw_check) is refused before GLPK sees it */
  double unit = 0;
  for (int c = 0; c < nc; c++)
    for (int ph = 0; ph < ZZ_PHASE_COUNT; ph++)
      for (int q = 0; q < ZZ_TERM_COUNT; q++) {
        zz_lin *l = &terms[c][ph][q];
        double sum = fabs(l->c);
        for (int v = 0; v < ZZ_X_COUNT; v++) sum += fabs(l->a[v]);
        if (!isfinite(sum)) {
          st = zz_error(ZZ_ERR_INVALID_ARG,
                        "planner: no plan: the %s term of layer class %d is not finite "
                        "(hardware \"%s\": a rate of about 0?)",
                        zz_term_name((zz_term)q), c, in->hw->name);
          goto done;
        }
        if (sum > unit) unit = sum;
      }
  if (unit <= 0) unit = 1;
  for (int c = 0; c < nc; c++) /* negligible next to the largest term: 0, not a denormal for GLPK to scale */
    for (int ph = 0; ph < ZZ_PHASE_COUNT; ph++)
      for (int q = 0; q < ZZ_TERM_COUNT; q++) {
        zz_lin *l = &terms[c][ph][q];
        l->c = fabs(l->c) < 1e-12 * unit ? 0 : l->c / unit;
        for (int v = 0; v < ZZ_X_COUNT; v++) l->a[v] = fabs(l->a[v]) < 1e-12 * unit ? 0 : l->a[v] / unit;
      }
  double bls = (double)in->gbs * in->num_gb, n = (double)in->shape.gen_len;
  bool shared = strcmp(in->hw->device, "cpu") == 0;
  int ncols = ZZ_X_COUNT + 2 * nc;
  const volatile int rows_per = in->overlap ? ZZ_TERM_COUNT : 1;
  int nrows = 3 + 2 * nc * rows_per + ZZ_TIER_COUNT + (shared ? 1 : 0);
  size_t nz_cap = (size_t)nrows * (size_t)(ZZ_X_COUNT + 1) + 16;
  ia = malloc((nz_cap + 1) * sizeof *ia), ja = malloc((nz_cap + 1) * sizeof *ja),
  ar = malloc((nz_cap + 1) * sizeof *ar);
  if (!ia || !ja || !ar) {
    st = zz_error(ZZ_ERR_NO_MEMORY, "planner: out of memory");
    goto done;
  }
  zz_glp_trap.msg[0] = '\0';
  glp_term_hook(zz_glp_print, NULL);
  glp_error_hook(zz_glp_fatal, NULL);
  if (setjmp(zz_glp_trap.jb)) { /* GLPK failed inside: its memory goes with its environment */
    glp_error_hook(NULL, NULL);
    glp_term_hook(NULL, NULL);
    glp_free_env();
    lp = NULL;
    st = zz_error(ZZ_ERR_UNSUPPORTED,
                  "planner: no plan: GLPK failed on the LP of gbs=%d num_gb=%d (%s); the hardware "
                  "file \"%s\" has rates too far apart to solve",
                  in->gbs, in->num_gb, zz_glp_trap.msg[0] ? zz_glp_trap.msg : "no message", in->hw->name);
    goto done;
  }
  glp_term_out(GLP_OFF);
  lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  glp_add_cols(lp, ncols);
  for (int v = 1; v <= ZZ_X_COUNT; v++) glp_set_col_bnds(lp, v, GLP_DB, 0, 1);
  for (int c = 0; c < nc; c++) {
    int tp = ZZ_X_COUNT + 1 + 2 * c, tg = tp + 1;
    glp_set_col_bnds(lp, tp, GLP_LO, 0, 0);
    glp_set_col_bnds(lp, tg, GLP_LO, 0, 0);
    glp_set_obj_coef(lp, tp, count[c] / bls);
    glp_set_obj_coef(lp, tg, count[c] * (n - 1) / bls);
  }
  /* ties (a placement whose traffic hides under another lane costs nothing in
   * the max) go to the placement that moves less: each fraction pays 0.1% of the
   * lane time it adds */
  for (int v = 0; v < ZZ_X_COUNT; v++) {
    double pen = 0;
    for (int c = 0; c < nc; c++)
      for (int q = 0; q < ZZ_TERM_COUNT; q++)
        pen += count[c] * (terms[c][ZZ_PHASE_PREFILL][q].a[v] + (n - 1) * terms[c][ZZ_PHASE_DECODE][q].a[v]);
    glp_set_obj_coef(lp, 1 + v, 1e-3 * pen / bls);
  }
  glp_add_rows(lp, nrows);
  size_t nz = 0;
  int r = 1;
#define ZZ_NZ(row, col, val) (nz++, ia[nz] = (row), ja[nz] = (col), ar[nz] = (val))
  for (int P = 0; P < 3; P++, r++) { /* fractions of each kind sum to one */
    glp_set_row_bnds(lp, r, GLP_FX, 1, 1);
    for (int t = 0; t < 3; t++) ZZ_NZ(r, 1 + 3 * P + t, 1.0);
  }
  for (int c = 0; c < nc; c++)
    for (int ph = 0; ph < ZZ_PHASE_COUNT; ph++) {
      int col = ZZ_X_COUNT + 1 + 2 * c + ph;
      for (int q = 0; q < rows_per; q++, r++) {
        zz_lin sum;
        if (in->overlap) {
          sum = terms[c][ph][q];
        } else { /* compute + the three I/O lanes, one after another */
          memset(&sum, 0, sizeof sum);
          for (int k = ZZ_TERM_COMPUTE; k <= ZZ_TERM_STORE; k++) {
            sum.c += terms[c][ph][k].c;
            for (int v = 0; v < ZZ_X_COUNT; v++) sum.a[v] += terms[c][ph][k].a[v];
          }
        }
        /* T - sum a x >= c */
        glp_set_row_bnds(lp, r, GLP_LO, sum.c, 0);
        ZZ_NZ(r, col, 1.0);
        for (int v = 0; v < ZZ_X_COUNT; v++)
          if (sum.a[v] != 0) ZZ_NZ(r, 1 + v, -sum.a[v]);
      }
    }
  /* memory per tier, in GiB so the rows are scaled like the time rows (near 1) */
  for (int t = 0; t < ZZ_TIER_COUNT; t++, r++) {
    glp_set_row_bnds(lp, r, GLP_UP, 0, (cap[t] - mem->K[t]) / ZZ_GIB);
    for (int P = 0; P < 3; P++)
      if (mem->B[P][t] != 0) ZZ_NZ(r, 1 + 3 * P + t, mem->B[P][t] / ZZ_GIB);
  }
  if (shared) { /* the CPU device's memory is the host's RAM */
    glp_set_row_bnds(lp, r, GLP_UP, 0, (cap[ZZ_LP_RAM] - mem->K[ZZ_TIER_GPU] - mem->K[ZZ_TIER_CPU]) / ZZ_GIB);
    for (int P = 0; P < 3; P++)
      for (int t = 0; t < 2; t++)
        if (mem->B[P][t] != 0) ZZ_NZ(r, 1 + 3 * P + t, mem->B[P][t] / ZZ_GIB);
    r++;
  }
#undef ZZ_NZ
  glp_load_matrix(lp, (int)nz, ia, ja, ar);
  glp_scale_prob(lp, GLP_SF_AUTO);

  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_OFF; /* GLPK 5.0's presolver left glp_get_obj_val at 0 on these */
  parm.it_lim = ZZ_LP_IT_LIM;
  parm.tm_lim = ZZ_LP_TM_LIM_MS;
  int rc = glp_simplex(lp, &parm);
  int status = rc == 0 ? glp_get_status(lp) : GLP_UNDEF;
  if (rc == GLP_ENOPFS || status == GLP_NOFEAS || status == GLP_INFEAS) {
    st = zz_error(ZZ_ERR_INFEASIBLE, "planner: gbs=%d num_gb=%d: no placement fits the tiers", in->gbs, in->num_gb);
  } else if (rc == GLP_EITLIM || rc == GLP_ETMLIM) { /* not "does not fit": the search must not go on quietly */
    st = zz_error(ZZ_ERR_UNSUPPORTED,
                  "planner: no plan: GLPK stopped on the LP of gbs=%d num_gb=%d after %s without "
                  "an optimum; the hardware file \"%s\" has rates too far apart to solve",
                  in->gbs, in->num_gb, rc == GLP_EITLIM ? "20000 iterations" : "10 s", in->hw->name);
  } else if (rc != 0 || status != GLP_OPT) {
    st = zz_error(ZZ_ERR_UNSUPPORTED,
                  "planner: no plan: GLPK's simplex failed on the LP of gbs=%d num_gb=%d (rc %d, "
                  "status %d%s%s)",
                  in->gbs, in->num_gb, rc, status, zz_glp_trap.msg[0] ? ": " : "", zz_glp_trap.msg);
  } else {
    for (int v = 0; v < ZZ_X_COUNT; v++) x_out[v] = glp_get_col_prim(lp, 1 + v);
    *obj_out = glp_get_obj_val(lp) * unit;
  }
  glp_error_hook(NULL, NULL);
  glp_term_hook(NULL, NULL);
done:
  if (lp) glp_delete_prob(lp);
  free(ia), free(ja), free(ar);
  free(terms), free(count);
  return st;
}

zz_status zz_plan_lp(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_cost_in *in,
                     const size_t cap[ZZ_TIER_COUNT], double x_out[ZZ_X_COUNT], double *obj_out) {
  zz_lp_mem mem;
  ZZ_CHECK(zz_lp_memory(m, hw, o, in, &mem));
  double c[ZZ_LP_CAPS];
  for (int t = 0; t < ZZ_TIER_COUNT; t++) c[t] = (double)cap[t];
  c[ZZ_LP_RAM] = zz_shared_ram(hw, o);
  return zz_plan_lp_mem(m, hw, o, in, &mem, c, x_out, obj_out);
}

/* ---------------------------------------------------------------- rounding */

/* Fractions of one kind to GPU and CPU percentages (whole numbers, summing to at
 * most 100; the memory plan places at layer / tensor granularity anyway). */
static void zz_round_pair(const double *x3, double *g, double *c) {
  double gg = round(100 * x3[0]), cc = round(100 * (x3[0] + x3[1])) - gg;
  if (gg < 0) gg = 0;
  if (gg > 100) gg = 100;
  if (cc < 0) cc = 0;
  if (gg + cc > 100) cc = 100 - gg;
  *g = gg + 0.0, *c = cc + 0.0; /* never "-0" in the printed policy */
}

static zz_policy zz_policy_of(const zz_cost_in *in, const double x[ZZ_X_COUNT]) {
  zz_policy p = zz_corner(in, in->overlap, ZZ_TIER_GPU);
  zz_round_pair(&x[ZZ_X_WG], &p.w_gpu, &p.w_cpu);
  zz_round_pair(&x[ZZ_X_CG], &p.c_gpu, &p.c_cpu);
  zz_round_pair(&x[ZZ_X_HG], &p.a_gpu, &p.a_cpu);
  if (p.c_gpu >= 100) p.cpu_attention = false; /* nothing to attend to on the CPU */
  return p;
}

/* How far each tier of a plan is over cap (0 where it fits), and on the CPU
 * device how far its gpu and cpu tiers together are over the RAM they share
 * (the LP's own row: shrinking the cpu tier for it never moved the answer). */
static void zz_overshoot(const zz_memplan *p, const zz_hw *hw, const zz_planner_opts *o,
                         const size_t cap[ZZ_TIER_COUNT], double over[ZZ_LP_CAPS]) {
  for (int t = 0; t < ZZ_TIER_COUNT; t++) {
    double need = (double)zz_memplan_tier_total(p, (zz_tier)t);
    over[t] = need > (double)cap[t] ? need - (double)cap[t] : 0;
  }
  over[ZZ_LP_RAM] = 0;
  if (strcmp(hw->device, "cpu") == 0) {
    double both = (double)zz_memplan_tier_total(p, ZZ_TIER_GPU) + (double)zz_memplan_tier_total(p, ZZ_TIER_CPU);
    if (both > zz_shared_ram(hw, o)) over[ZZ_LP_RAM] = both - zz_shared_ram(hw, o);
  }
}

/* One candidate: LP, round, confirm (shrinking the short tier), predict. */
static zz_status zz_candidate(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_cost_in *in,
                              zz_plan *out) {
  zz_lp_mem mem;
  ZZ_CHECK(zz_lp_memory(m, hw, o, in, &mem));
  size_t cap[ZZ_TIER_COUNT];
  zz_planner_caps(hw, o, cap);
  double lpcap[ZZ_LP_CAPS], full[ZZ_LP_CAPS];
  for (int t = 0; t < ZZ_TIER_COUNT; t++) full[t] = lpcap[t] = (double)cap[t];
  full[ZZ_LP_RAM] = lpcap[ZZ_LP_RAM] = zz_shared_ram(hw, o);
  for (int round_ = 0; round_ < 8; round_++) {
    double x[ZZ_X_COUNT], obj;
    ZZ_CHECK(zz_plan_lp_mem(m, hw, o, in, &mem, lpcap, x, &obj));
    zz_policy p = zz_policy_of(in, x);
    zz_memplan plan;
    ZZ_CHECK(zz_plan_build(m, hw, o, &p, &plan));
    double over[ZZ_LP_CAPS];
    zz_overshoot(&plan, hw, o, cap, over);
    bool fits = over[0] == 0 && over[1] == 0 && over[2] == 0 && over[ZZ_LP_RAM] == 0;
    if (fits) {
      memset(out, 0, sizeof *out);
      out->policy = p;
      out->lp_objective = obj;
      memcpy(out->x, x, sizeof x);
      zz_cost_in pin = zz_cost_in_of(m, hw, o, &p);
      zz_cost_plan(&pin, &plan, &out->cost, NULL);
      zz_memplan_free(&plan);
      return ZZ_OK;
    }
    zz_memplan_free(&plan);
    /* the plan places whole layers: a cut smaller than one moves nothing, and
     * the same 1 MiB overshoot came back for all 8 rounds (opt-125m on a 700 MiB
     * cpu device: no plan although 90% of the weights on disk fits), so the
     * margin doubles each round */
    for (int t = 0; t < ZZ_LP_CAPS; t++)
      if (over[t] > 0) lpcap[t] -= over[t] + 0.002 * full[t] * (double)(1 << round_);
  }
  return zz_error(ZZ_ERR_INFEASIBLE, "planner: gbs=%d num_gb=%d: no rounded placement fits", in->gbs, in->num_gb);
}

/* ---------------------------------------------------------------- the search */


/* Why nothing fits: the smallest block with everything that can leave a tier
 * moved off it, tier by tier. Each message names the tier that is short, by how
 * much, and what would fit. */
static zz_status zz_explain(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, int gbs) {
  size_t cap[ZZ_TIER_COUNT];
  zz_planner_caps(hw, o, cap);
  /* the smallest footprint the search could have chosen: 4-bit where it may */
  bool q4 = o->allow_compression && zz_hw_has_q4(hw);
  zz_cost_in in = zz_cost_in_run(m, hw, o);
  in.gbs = gbs, in.num_gb = 1, in.overlap = true;
  in.compress_weight = (q4 || zz_cw_forced(o)) && !o->bf16_weights;
  in.compress_cache = q4 || o->force_compress_cache;
  const char *how = in.compress_weight && in.compress_cache ? " in 4 bits"
                    : o->bf16_weights                       ? " (weights in bf16)"
                                                            : "";
  zz_policy p = zz_corner(&in, true, ZZ_TIER_DISK);
  zz_memplan plan;
  ZZ_CHECK(zz_plan_build(m, hw, o, &p, &plan));
  double need[ZZ_TIER_COUNT];
  for (int t = 0; t < ZZ_TIER_COUNT; t++) need[t] = (double)zz_memplan_tier_total(&plan, (zz_tier)t);
  zz_memplan_free(&plan);
  char a[32], b[32], d[32], e[32], f[32];
#define ZZ_B(v, buf) zz_format_bytes((v) > 0 ? (size_t)(v) : 0, buf, sizeof buf)
  static const char *const flag[ZZ_TIER_COUNT] = {"--gpu-mem", "--cpu-mem", "--disk-mem"};
  for (int t = 0; t < 2; t++)
    if (need[t] > (double)cap[t])
      return zz_error(ZZ_ERR_INFEASIBLE,
                      "no policy fits: the %s tier is short by %s — even gbs=%d num_gb=1 with all weights, cache and "
                      "activations%s on disk needs %s there (buffers the schedule cannot move) and it has %s; a %s "
                      "tier of %s or more would fit (%s, or the hardware file)",
                      zz_tier_name((zz_tier)t), ZZ_B(need[t] - (double)cap[t], a), gbs, how, ZZ_B(need[t], b),
                      ZZ_B((double)cap[t], d), zz_tier_name((zz_tier)t), ZZ_B(need[t], e), flag[t]);
  bool shared = strcmp(hw->device, "cpu") == 0; /* the gpu and cpu tiers are both the host's RAM */
  double ram = zz_shared_ram(hw, o);
  if (shared && need[0] + need[1] > ram)
    return zz_error(
        ZZ_ERR_INFEASIBLE,
        "no policy fits: the host's RAM is short by %s — on the cpu device the gpu and cpu tiers are both "
        "RAM, and even gbs=%d num_gb=1 with everything%s on disk needs %s of it (buffers the schedule cannot "
        "move) and %s gives %s; %s of %s or more would fit",
        ZZ_B(need[0] + need[1] - ram, a), gbs, how, ZZ_B(need[0] + need[1], b),
        o->cap[ZZ_TIER_CPU] ? "--cpu-mem" : "the hardware file", ZZ_B(ram, d),
        o->cap[ZZ_TIER_CPU] ? "--cpu-mem" : "cpu_mem_bytes", ZZ_B(need[0] + need[1], e));
  /* homes the disk cannot hold could go to the room the gpu and cpu tiers have left */
  double spare = (double)cap[ZZ_TIER_GPU] - need[0] + (double)cap[ZZ_TIER_CPU] - need[1];
  if (shared && ram - need[0] - need[1] < spare) spare = ram - need[0] - need[1];
  if (spare < 0) spare = 0;
  double short_ = need[2] - (double)cap[ZZ_TIER_DISK] - spare;
  if (short_ >= 1048576) /* "short by about 0 B" said nothing: under a MiB is rounding, the check below decides */
    return zz_error(ZZ_ERR_INFEASIBLE,
                    "no policy fits: the disk tier is short by about %s — even gbs=%d num_gb=1 needs %s for weights, "
                    "cache and activations%s, the disk has %s and the gpu and cpu tiers can take only about %s of it; "
                    "a disk tier of about %s or more would fit (--disk-mem, or --offload-dir on a larger disk)",
                    ZZ_B(short_, a), gbs, ZZ_B(need[2], b), how, ZZ_B((double)cap[ZZ_TIER_DISK], d), ZZ_B(spare, e),
                    ZZ_B(need[2] - spare, f));
  /* no tier is short for that block: the engine's own check says whether it
   * runs, and either way the message says what would */
  char pb[256];
  zz_policy_str(&p, pb, sizeof pb);
  zz_planner_opts ob = *o;
  zz_status st = zz_plan_check(m, hw, &ob, &p, &plan);
  if (st != ZZ_OK) return st; /* its message names the tier and the numbers */
  zz_memplan_free(&plan);
#undef ZZ_B
  return zz_error(ZZ_ERR_INFEASIBLE,
                  "no policy fits the search, though no tier is short: gbs=%d num_gb=1 with everything%s on disk fits "
                  "(--policy \"%s\"); the rounded placements the LP proposed did not, so this is a planner defect: "
                  "please report it with the command line",
                  gbs, how, pb);
}

zz_status zz_plan_one(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, int gbs, int num_gb, zz_plan *out) {
  ZZ_CHECK(zz_int8_rates_check(hw, o)); /* first: its message says why weights are compressed */
  ZZ_CHECK(zz_q4_rates_check(hw, zz_cw_forced(o), o->force_compress_cache));
  ZZ_CHECK(zz_bf16_rates_check(hw, o));
  /* compression is a choice only where the file can price it (4-bit weights
   * not beside bf16 ones, and not where int8 activations need them) */
  bool choose = o->allow_compression && zz_hw_has_q4(hw);
  int ncw = choose && !zz_cw_forced(o) && !o->bf16_weights ? 2 : 1;
  int ncc = choose && !o->force_compress_cache ? 2 : 1;
  bool have = false;
  for (int attn = 0; attn < 2; attn++)
    for (int cw = 0; cw < ncw; cw++)
      for (int cc = 0; cc < ncc; cc++) {
        zz_cost_in in = zz_cost_in_run(m, hw, o);
        in.gbs = gbs, in.num_gb = num_gb, in.overlap = !o->no_overlap, in.cpu_attention = attn != 0;
        in.compress_weight = zz_cw_forced(o) || cw;
        in.compress_cache = o->force_compress_cache || cc;
        zz_plan p;
        zz_status st = zz_candidate(m, hw, o, &in, &p);
        if (st == ZZ_ERR_INFEASIBLE) {
          zz_error_clear();
          continue;
        }
        if (st != ZZ_OK) return st;
        if (o->verbose) {
          char buf[256];
          fprintf(stderr, "planner: %s -> %.3f tokens/s\n", zz_policy_str(&p.policy, buf, sizeof buf),
                  p.cost.total_tps);
        }
        if (!have || p.cost.total_tps > out->cost.total_tps) *out = p, have = true;
      }
  return have ? ZZ_OK : zz_error(ZZ_ERR_INFEASIBLE, "planner: gbs=%d num_gb=%d: nothing fits", gbs, num_gb);
}

static const int zz_plan_gbs_default[] = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512};
static const int zz_plan_num_gb_default[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};

void zz_plan_lists(const zz_planner_opts *o, const int **gbs, int *n_gbs, const int **num_gb, int *n_num_gb) {
  *gbs = o->gbs_list ? o->gbs_list : zz_plan_gbs_default;
  *n_gbs = o->gbs_list ? o->n_gbs : (int)(sizeof zz_plan_gbs_default / sizeof *zz_plan_gbs_default);
  *num_gb = o->num_gb_list ? o->num_gb_list : zz_plan_num_gb_default;
  *n_num_gb = o->num_gb_list ? o->n_num_gb : (int)(sizeof zz_plan_num_gb_default / sizeof *zz_plan_num_gb_default);
}

/* Searches this process ran (zz_planner_searches): one per zz_plan_search or
 * zz_pipe_plan_search called from outside (a pipeline search's inner
 * per-rank searches are its own). */
static int zz_searches;

int zz_planner_searches(void) { return zz_searches; }

void zz_planner_count_search(void) { zz_searches++; }

zz_status zz_plan_search(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, zz_plan *out) {
  zz_planner_count_search();
  double t0 = zz_now();
  const int *gl, *nl;
  int ng, nn;
  zz_plan_lists(o, &gl, &ng, &nl, &nn);
  if (o->shape.prompt_len < 1 || o->shape.gen_len < 1)
    return zz_error(ZZ_ERR_INVALID_ARG, "planner: prompt length and generation length must be >= 1");

  zz_plan best;
  memset(&best, 0, sizeof best);
  bool have = false;
  int cand = 0, feas = 0;
  for (int a = 0; a < nn; a++)
    for (int b = 0; b < ng; b++) {
      if (o->max_gbs && gl[b] > o->max_gbs) break;
      if (o->max_block && gl[b] * nl[a] > o->max_block) break;
      cand++;
      zz_plan p;
      zz_status st = zz_plan_one(m, hw, o, gl[b], nl[a], &p);
      if (st == ZZ_ERR_INFEASIBLE) { /* memory grows with gbs: a larger one fits no better */
        zz_error_clear();
        break;
      }
      if (st != ZZ_OK) return st;
      feas++;
      if (!have || p.cost.total_tps > best.cost.total_tps) best = p, have = true;
    }
  if (!have) return zz_explain(m, hw, o, gl[0]);
  best.candidates = cand;
  best.feasible = feas;
  best.search_s = zz_now() - t0;
  *out = best;
  return ZZ_OK;
}
