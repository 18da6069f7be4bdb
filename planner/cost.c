/*
 * cost.c — the cost model: FlexGen's appendix A.3 (a layer's step time is the
 * longest of the overlapped lanes; a block is the prefill step plus n - 1 decode
 * steps of every layer) written over the engine's own layer list and byte counts
 * (sizes.c), with LM-Offload's terms: attention on the CPU beside an offloaded
 * cache (its thread count chosen from the hardware file's curve), and the
 * 4-bit weights and cache: the bytes every lane moves and every tier holds shrink
 * (sizes.c), the GEMMs and the attention run at the rates the profile measured
 * for the 4-bit kernels (dequantize-and-multiply linear, attention over a 4-bit
 * cache), and the new cache rows pay their quantization at store, all on the
 * compute lane (LM-Offload §3, eq. 4–7: dequantization of weights and of the old
 * cache, quantization of the new cache rows). bf16 weight matrices (the CPU
 * device's --cpu-dtype bf16) are priced the same way: their bytes from sizes.c's
 * one rule (zz_weight_dtype_b), their GEMMs at the profile's bf16 rate. With
 * int8 activations (the CPU device's --cpu-act int8) the 4-bit linears run at the
 * profile's int8 rate (gemm_q4_int8) wherever the kernel's rule takes int8
 * (zz_cpu_act_int8_applies: 4-bit weights at any rows, 8-bit up to 128, or at
 * any where this CPU has avx512_vnni).
 *
 * Every term is a linear function of the nine placement fractions (zz_lin), so
 * the same function feeds the LP (search.c) and predicts a realised policy
 * (zz_cost_plan), where each layer's fractions are the tiers the memory plan gave
 * its weights (an MoE layer's experts split by count: zz_cost_weight_fractions),
 * cache and activations.
 *
 * What a step moves (per layer, one block of bls = gbs x num_gb sequences, the
 * engine's schedule.c):
 *   weights      W bytes (stored dtype) when not on the GPU: disk → host → device
 *   cache        decode loads the rows so far, bls x t x (K + V row); every step
 *                stores its new rows (prefill: s rows); with CPU attention the
 *                cache stays on the host and only q, k, v and the output cross
 *   hidden       each (layer, batch) loads and stores its hidden state when it
 *                lives off the GPU
 *   compute      2 x matrix elements x rows of GEMM at the rate for M = gbs x sq
 *                rows (the LM head: gbs, each sequence's last position; the
 *                prompt step's last transformer layer: its matrices after K and V,
 *                zz_weight_spec.after_kv, at gbs rows too, by the runtime's rule
 *                zz_layer_wants_all_rows); attention 4 x sq x t x hidden per
 *                sequence on the device (bmm rates) or the CPU (CPU attention rate)
 */
#include <math.h>
#include <string.h>

#include "zz_cost.h"

const char *zz_term_name(zz_term t) {
  static const char *const n[ZZ_TERM_COUNT] = {"compute", "weight_load", "cache_load", "cache_store",
                                               "disk",    "link_in",     "link_out",   "host_cores"};
  return t < ZZ_TERM_COUNT ? n[t] : "?";
}

double zz_lin_eval(const zz_lin *t, const double x[ZZ_X_COUNT]) {
  double v = t->c;
  for (int i = 0; i < ZZ_X_COUNT; i++) v += t->a[i] * x[i];
  return v;
}

double zz_cost_step(const zz_lin term[ZZ_TERM_COUNT], const double x[ZZ_X_COUNT], bool overlap) {
  if (!overlap) {
    return zz_lin_eval(&term[ZZ_TERM_COMPUTE], x) + zz_lin_eval(&term[ZZ_TERM_WEIGHT], x) +
           zz_lin_eval(&term[ZZ_TERM_LOAD], x) + zz_lin_eval(&term[ZZ_TERM_STORE], x);
  }
  double mx = 0;
  for (int k = 0; k < ZZ_TERM_COUNT; k++) {
    double v = zz_lin_eval(&term[k], x);
    if (v > mx) mx = v;
  }
  return mx;
}

/* t += k * (x[a] + x[b] + ...) : a list of fractions ending with -1 */
static void zz_add(zz_lin *t, double k, const int *xs) {
  for (; *xs >= 0; xs++) t->a[*xs] += k;
}

/* The CPU attention threads: given, or the planner's split (zz_hw_threads). */
static int zz_attn_threads(const zz_cost_in *in) {
  return in->attn_threads > 0 ? in->attn_threads : zz_hw_threads(in->hw).attn;
}

/* One pass of a step over a layer: gbs x nb sequences, sq new rows each over
 * keys keys (a prompt step with a shared prefix is two: zz_cost_layer_terms). */
typedef struct zz_pass {
  double gbs, nb, sq, keys;
  bool pre;
  double stored; /* sequences whose sq new cache rows go home (0: gbs x nb; the prefix's pass: every
                    sequence of the block, its rows copied to each, zz_prefix_spread) */
} zz_pass;

static void zz_cost_pass_terms(const zz_cost_in *in, int l, const zz_pass *ps, zz_lin t[ZZ_TERM_COUNT]);

/* A layer's terms in phase ph. The prompt step with a shared prefix of P tokens
 * (zz_shape.shared_prefix, runtime/prefix.c) is the prefix's pass for one
 * sequence (P rows over P keys, the layer's weights loaded once more) and the
 * block's pass over rows [P, s): their terms add up, each lane's time the sum of
 * the two passes' (the two maxima are priced as one, a little under). */
static void zz_cost_layer_terms(const zz_cost_in *in, int l, zz_phase ph, zz_lin t[ZZ_TERM_COUNT]) {
  double s = (double)in->shape.prompt_len, n = (double)in->shape.gen_len;
  double p = (double)in->shape.shared_prefix;
  if (ph != ZZ_PHASE_PREFILL) {
    zz_cost_pass_terms(in, l, &(zz_pass){.gbs = in->gbs, .nb = in->num_gb, .sq = 1, .keys = s + n / 2}, t);
    return;
  }
  if (!(p > 0 && p < s)) {
    zz_cost_pass_terms(in, l, &(zz_pass){.gbs = in->gbs, .nb = in->num_gb, .sq = s, .keys = s, .pre = true}, t);
    return;
  }
  zz_lin pre[ZZ_TERM_COUNT];
  double bls = (double)in->gbs * in->num_gb;
  zz_cost_pass_terms(in, l, &(zz_pass){.gbs = 1, .nb = 1, .sq = p, .keys = p, .pre = true, .stored = bls}, pre);
  zz_cost_pass_terms(in, l, &(zz_pass){.gbs = in->gbs, .nb = in->num_gb, .sq = s - p, .keys = s, .pre = true}, t);
  for (int k = 0; k < ZZ_TERM_COUNT; k++) {
    t[k].c += pre[k].c;
    for (int v = 0; v < ZZ_X_COUNT; v++) t[k].a[v] += pre[k].a[v];
  }
}

/* FLOP/s of a layer's linears at M = rows: int8 x where the CPU kernel takes it
 * for these rows (its own rule) and the file prices it (zz_plan_eval refuses an
 * int8 plan on a file without), else the rate of the weights' dtype. q4w: 4-bit
 * weights priced at the file's 4-bit rates; wq: their format. */
static double zz_gemm_rate(const zz_cost_in *in, bool q4w, const zz_qfmt *wq, double rows) {
  const zz_hw *hw = in->hw;
  bool i8 = q4w && in->cpu_act == ZZ_CPU_ACT_INT8 && hw->n_gemm_q4_int8 > 0 &&
            zz_cpu_act_int8_applies(wq ? wq->bits : ZZ_QFMT_DEFAULT.bits, (int64_t)rows);
  return i8                                        ? zz_hw_rate(hw->gemm_q4_int8, hw->n_gemm_q4_int8, rows)
         : q4w                                     ? zz_hw_rate(hw->gemm_q4, hw->n_gemm_q4, rows)
         : in->bf16_weights && hw->n_gemm_bf16 > 0 ? zz_hw_rate(hw->gemm_bf16, hw->n_gemm_bf16, rows)
                                                   : zz_hw_rate(hw->gemm, hw->n_gemm, rows);
}

/* Seconds of a MoE layer's expert GEMMs for a GPU batch of r rows, every batch:
 * active FLOPs (k/E of the experts' elements, per row) at the rate of the rows
 * one touched expert gets, r·k over the experts touched (runtime/moe.c runs one
 * GEMM per chosen expert on its rows): a decode step's few rows spread over
 * many experts run at the GEMV rate, not at r's. */
static double zz_cost_experts(const zz_cost_in *in, bool q4w, const zz_qfmt *wq, double active, double r) {
  const zz_config *c = &in->m->cfg;
  double touched = zz_moe_experts_touched(c->n_experts, c->n_experts_used, r);
  double m_e = touched > 0 ? r * (double)c->n_experts_used / touched : r;
  return 2 * active * r * in->num_gb / zz_gemm_rate(in, q4w, wq, m_e);
}

/* On the CPU device the "link" is memcpy and f16 -> f32 conversion run by host
 * threads on the very cores the GEMMs use: besides delaying its own lane, the
 * copying takes time from compute (the host term; the disk's DMA still
 * overlaps). A GPU's copies are DMA: the term stays 0 there. */
void zz_cost_layer(const zz_cost_in *in, int l, zz_phase ph, zz_lin t[ZZ_TERM_COUNT]) {
  zz_cost_layer_terms(in, l, ph, t);
  if (strcmp(in->hw->device, "cpu") != 0) return;
  const int sum[3] = {ZZ_TERM_COMPUTE, ZZ_TERM_LINK_IN, ZZ_TERM_LINK_OUT};
  for (int k = 0; k < 3; k++) {
    t[ZZ_TERM_HOST].c += t[sum[k]].c;
    for (int v = 0; v < ZZ_X_COUNT; v++) t[ZZ_TERM_HOST].a[v] += t[sum[k]].a[v];
  }
}

/* The bytes of weight ws a step of `rows` routed rows loads, and in how many reads
 * (reads_out): the whole weight in one; an expert-stacked one's experts the rows
 * touch (zz_moe_experts_touched), one read each. */
static double zz_cost_weight_step_bytes(const zz_cost_in *in, const zz_weight_spec *ws, const zz_qfmt *wq, double rows,
                                        double *reads_out) {
  const zz_config *c = &in->m->cfg;
  double b = (double)zz_weight_bytes_q(ws, zz_weight_dtype_b(ws, c->dtype, wq, in->bf16_weights),
                                       wq ? *wq : ZZ_QFMT_DEFAULT);
  *reads_out = 1;
  if (!ws->experts) return b;
  *reads_out = zz_moe_experts_touched(ws->experts, c->n_experts_used, rows);
  return b * *reads_out / (double)ws->experts;
}

static void zz_cost_pass_terms(const zz_cost_in *in, int l, const zz_pass *ps, zz_lin t[ZZ_TERM_COUNT]) {
  memset(t, 0, sizeof(zz_lin) * ZZ_TERM_COUNT);
  const zz_model *m = in->m;
  const zz_layer *L = &m->layers[l];
  const zz_hw *hw = in->hw;
  const zz_config *c = &m->cfg;
  zz_dtype cdt = zz_hw_compute_dtype(hw);
  /* the formats as a policy carries them, so sizes.c answers as for the engine */
  zz_policy fmt = {
      .compress_weight = in->compress_weight, .compress_cache = in->compress_cache, .wq = in->wq, .cq = in->cq};
  zz_qfmt wbuf;
  const zz_qfmt *wq = zz_policy_wfmt(&fmt, &wbuf);
  /* 4-bit rates where the file has them (zz_plan_eval refuses a compressed
   * policy on a file without them; the search does not try one) */
  bool q4w = in->compress_weight && hw->n_gemm_q4 > 0, q4c = in->compress_cache && zz_hw_has_q4(hw);
  double gbs = ps->gbs, num_gb = ps->nb, bls = gbs * num_gb;
  bool pre = ps->pre;
  double sq = ps->sq, keys = ps->keys;
  static const int WOFF[] = {ZZ_X_WC, ZZ_X_WD, -1}, WD[] = {ZZ_X_WD, -1};
  static const int COFF[] = {ZZ_X_CC, ZZ_X_CD, -1}, CD[] = {ZZ_X_CD, -1}, CG[] = {ZZ_X_CG, -1};
  static const int HOFF[] = {ZZ_X_HC, ZZ_X_HD, -1}, HD[] = {ZZ_X_HD, -1};
  zz_lin *comp = &t[ZZ_TERM_COMPUTE], *wl = &t[ZZ_TERM_WEIGHT], *ld = &t[ZZ_TERM_LOAD], *stl = &t[ZZ_TERM_STORE];
  zz_lin *disk = &t[ZZ_TERM_DISK], *in_ = &t[ZZ_TERM_LINK_IN], *out = &t[ZZ_TERM_LINK_OUT];

  /* weights: loaded once per step for the whole block; from disk one tensor a
   * read, each at the rate of its size (zz_hw_disk_read_bw). A MoE layer's
   * expert-stacked matrices (zz_weight_spec.experts): only the experts the
   * block's bls x sq routed rows touch are loaded, one read each
   * (zz_moe_experts_touched), and each row multiplies k of the E experts'
   * matrices (k/E of their elements: the active FLOPs), apart in ex, ex_kv */
  double W = 0, Wd = 0, mat = 0, mat_kv = 0; /* mat_kv: the after_kv matrices' share */
  double ex = 0, ex_kv = 0;
  for (int k = 0; k < L->n_weights; k++) {
    const zz_weight_spec *ws = &L->weights[k];
    if (!ws->ndim) continue;
    double reads, b = zz_cost_weight_step_bytes(in, ws, wq, bls * sq, &reads);
    double active = (double)zz_weight_numel(ws);
    if (ws->experts) active *= (double)c->n_experts_used / (double)ws->experts;
    W += b;
    Wd += b / zz_hw_disk_read_bw(hw, b / reads);
    double *to = ws->experts ? &ex : &mat, *to_kv = ws->experts ? &ex_kv : &mat_kv;
    if (ws->ndim == 2 && !ws->gathered) *to += active;
    if (ws->ndim == 2 && ws->after_kv) *to_kv += active;
  }
  /* one rate for every size (a file without the curve): as one division, as
   * before, so such a file's plans stay the same to the last bit */
  if (hw->n_disk_read_busy == 0) Wd = W / zz_hw_disk_read_bw(hw, W);
  zz_add(wl, Wd, WD);
  zz_add(wl, W / hw->ctog_bw, WOFF);
  zz_add(disk, Wd, WD);
  zz_add(in_, W / hw->ctog_bw, WOFF);

  /* GEMMs: an embedding table is gathered, not multiplied (zz_weight_spec.
   * gathered: the input embedding's matrices are OPT-350M's project_in alone,
   * on every row), the LM head sees the last position, and where the runtime's
   * rule drops rows (the prompt step's last transformer layer; all_rows false:
   * no engine reads every position today) the matrices after K and V see each
   * sequence's last row alone, at that M's rate. With nothing dropped the sum
   * is the one term it always was, to the last bit. */
  if (mat > 0) {
    double rows = L->kind == ZZ_LAYER_OUTPUT_EMBED ? gbs : gbs * sq;
    double last_rows_only = zz_layer_wants_all_rows(m, L, (int64_t)sq, false) ? 0 : mat_kv;
    comp->c += 2 * (mat - last_rows_only) * rows * num_gb / zz_gemm_rate(in, q4w, wq, rows);
    if (last_rows_only > 0) comp->c += 2 * last_rows_only * gbs * num_gb / zz_gemm_rate(in, q4w, wq, gbs);
  }
  if (ex > 0) { /* each touched expert one GEMM on its own rows, at that M's rate */
    double rows = gbs * sq, last_rows_only = zz_layer_wants_all_rows(m, L, (int64_t)sq, false) ? 0 : ex_kv;
    comp->c += zz_cost_experts(in, q4w, wq, ex - last_rows_only, rows);
    if (last_rows_only > 0) comp->c += zz_cost_experts(in, q4w, wq, last_rows_only, gbs);
  }

  /* hidden states of each (layer, batch) to and from their home */
  double A = (double)zz_hidden_bytes(c->hidden, cdt, (int64_t)bls, (int64_t)sq);
  double rd = zz_hw_disk_read_bw(hw, A / num_gb); /* one batch a read */
  if (L->kind != ZZ_LAYER_INPUT_EMBED) {
    zz_add(ld, A / hw->ctog_bw, HOFF), zz_add(ld, A / rd, HD);
    zz_add(in_, A / hw->ctog_bw, HOFF), zz_add(disk, A / rd, HD);
  }
  if (L->kind != ZZ_LAYER_OUTPUT_EMBED) {
    zz_add(stl, A / hw->gtoc_bw, HOFF), zz_add(stl, A / hw->disk_write_bw, HD);
    zz_add(out, A / hw->gtoc_bw, HOFF), zz_add(disk, A / hw->disk_write_bw, HD);
  }

  if (!L->has_cache) return;
  /* the KV cache: rows of K and V */
  zz_cache_spec cs = zz_cache_spec_for(L, &fmt, cdt);
  double row2 = 2.0 * (double)zz_cache_row_bytes(&cs);
  double cload = pre ? 0 : bls * keys * row2, cstore = (ps->stored > 0 ? ps->stored : bls) * sq * row2;
  /* QK^T and PV over the keys a query sees: a sliding window's at most
   * (zz_attn_first_key), by heads × head_dim (Qwen3's exceed hidden) */
  double seen = cs.window > 0 && (double)cs.window < keys ? (double)cs.window : keys;
  double flops = 4 * bls * sq * seen * (double)(c->n_heads * c->head_dim);
  double bmm = q4c ? (pre ? hw->bmm_prefill_q4_flops : hw->bmm_decode_q4_flops)
                   : (pre ? hw->bmm_prefill_flops : hw->bmm_decode_flops);
  if (q4c) comp->c += cstore / hw->quant_bw;       /* new rows quantized where they are appended */
  double rc = zz_hw_disk_read_bw(hw, keys * row2); /* one sequence a read */
  zz_add(ld, cload / rc, CD), zz_add(disk, cload / rc, CD);
  zz_add(stl, cstore / hw->disk_write_bw, CD), zz_add(disk, cstore / hw->disk_write_bw, CD);
  if (in->cpu_attention && !pre) {
    /* the cache stays on the host: q, k, v of the new position go down, the
     * output comes up, on the compute lane around the CPU kernel */
    double es = (double)zz_dtype_nbytes(cdt, 1);
    double qkv = bls * (double)c->hidden * es + bls * row2; /* q, and the new k and v rows */
    double o = bls * (double)c->hidden * es;
    double rate = q4c ? zz_hw_rate(hw->cpu_attn_q4, hw->n_cpu_attn_q4, zz_attn_threads(in))
                      : zz_hw_rate(hw->cpu_attn, hw->n_cpu_attn, zz_attn_threads(in));
    zz_add(comp, flops / rate + qkv / hw->gtoc_bw + o / hw->ctog_bw, COFF);
    zz_add(out, qkv / hw->gtoc_bw, COFF), zz_add(in_, o / hw->ctog_bw, COFF);
    zz_add(comp, flops / bmm, CG);
  } else {
    zz_add(ld, cload / hw->ctog_bw, COFF), zz_add(in_, cload / hw->ctog_bw, COFF);
    zz_add(stl, cstore / hw->gtoc_bw, COFF), zz_add(out, cstore / hw->gtoc_bw, COFF);
    comp->c += flops / bmm;
  }
}

/* ---------------------------------------------------------------- a realised plan */

static double zz_frac(const zz_tier *tiers, size_t n, size_t stride, size_t first, zz_tier t) {
  size_t k = 0, tot = 0;
  for (size_t i = first; i < n; i += stride, tot++) k += tiers[i] == t;
  return tot ? (double)k / (double)tot : 0;
}

/* Layer j's weight fractions on each tier as the memory plan placed them: a
 * layer's tier, or for an MoE layer the mix, by the bytes a step loads, of its
 * plain weights' tier and its experts' split by count (zz_expert_split). */
static void zz_cost_weight_fractions(const zz_cost_in *in, const zz_memplan *plan, int j, zz_phase ph, double *xw) {
  const zz_layer *L = &in->m->layers[j];
  const zz_expert_split *sp = &plan->expert_split[j - plan->spec.layer_begin];
  zz_tier t0 = plan->weight_tier[j - plan->spec.layer_begin];
  zz_qfmt wbuf;
  zz_policy fmt = {.compress_weight = in->compress_weight, .wq = in->wq};
  const zz_qfmt *wq = zz_policy_wfmt(&fmt, &wbuf);
  double rows = (double)in->gbs * in->num_gb * (ph == ZZ_PHASE_PREFILL ? (double)in->shape.prompt_len : 1);
  double plain = 0, expert = 0, reads;
  for (int k = 0; k < L->n_weights; k++) {
    const zz_weight_spec *ws = &L->weights[k];
    if (!ws->ndim) continue;
    double b = zz_cost_weight_step_bytes(in, ws, wq, rows, &reads);
    if (ws->experts) expert += b;
    else
      plain += b;
  }
  int64_t ne = sp->n[0] + sp->n[1] + sp->n[2];
  for (int t = 0; t < 3; t++) {
    double f = ne ? (double)sp->n[t] / (double)ne : 0;
    xw[t] = plain + expert > 0 ? (plain * (t0 == (zz_tier)t) + expert * f) / (plain + expert) : t0 == (zz_tier)t;
  }
}

void zz_cost_plan(const zz_cost_in *in, const zz_memplan *plan, zz_cost *out, double (*layer_s)[ZZ_PHASE_COUNT]) {
  memset(out, 0, sizeof *out);
  const zz_model *m = in->m;
  const zz_plan_spec *sp = &plan->spec;
  int lb = sp->layer_begin, le = sp->layer_end, nb = sp->policy.num_gpu_batches, G = sp->n_groups;
  int lc_total = 0;
  for (int j = lb; j < le; j++) lc_total += m->layers[j].has_cache;
  size_t n_act = (size_t)G * (size_t)nb;
  double x[ZZ_X_COUNT] = {0};
  for (int t = 0; t < 3; t++) x[ZZ_X_HG + t] = zz_frac(plan->act_tier, n_act, 1, 0, (zz_tier)t);
  double n = (double)in->shape.gen_len;
  int lc = 0;
  for (int j = lb; j < le; j++) {
    if (m->layers[j].has_cache) {
      /* items (g, lc, k) of this layer: index (g * lc_total + lc) * nb + k */
      for (int t = 0; t < 3; t++) {
        size_t cnt = 0;
        for (int g = 0; g < G; g++)
          for (int k = 0; k < nb; k++) cnt += plan->cache_tier[((size_t)g * lc_total + lc) * nb + k] == (zz_tier)t;
        x[ZZ_X_CG + t] = (double)cnt / (double)(G * nb);
      }
      lc++;
    } else {
      x[ZZ_X_CG] = 1, x[ZZ_X_CC] = x[ZZ_X_CD] = 0;
    }
    for (int ph = 0; ph < ZZ_PHASE_COUNT; ph++) {
      zz_lin term[ZZ_TERM_COUNT];
      zz_cost_weight_fractions(in, plan, j, (zz_phase)ph, &x[ZZ_X_WG]);
      zz_cost_layer(in, j, (zz_phase)ph, term);
      double k = ph == ZZ_PHASE_PREFILL ? 1 : n - 1;
      double step = k * zz_cost_step(term, x, in->overlap);
      if (layer_s) layer_s[j - lb][ph] = step;
      if (ph == ZZ_PHASE_PREFILL) out->prefill_s += step;
      else
        out->decode_s += step;
      for (int q = 0; q < ZZ_TERM_COUNT; q++) out->term_s[ph][q] += k * zz_lin_eval(&term[q], x);
    }
  }
  double bls = (double)in->gbs * in->num_gb, s = (double)in->shape.prompt_len;
  out->prefill_tps = out->prefill_s > 0 ? bls * s / out->prefill_s : 0;
  out->decode_tps = out->decode_s > 0 ? bls * (n - 1) / out->decode_s : 0;
  out->total_tps = bls * n / (out->prefill_s + out->decode_s);
  for (int t = 0; t < ZZ_TIER_COUNT; t++) out->peak[t] = zz_memplan_tier_total(plan, (zz_tier)t);
  out->attn_threads = in->cpu_attention ? zz_attn_threads(in) : 0;
  out->threads = zz_hw_threads(in->hw);
  out->threads.attn = zz_attn_threads(in);
}
