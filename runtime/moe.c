/*
 * moe.c — the mixture-of-experts feed-forward (Mixtral's block_sparse_moe,
 * Qwen's sparse MLP): the router, softmax and top-k on the device
 * (zz_device_moe_route), the routing read back once, rows grouped by expert on
 * the host, then per chosen expert one GEMM on its rows through the ordinary
 * linear path (so every weight dtype the device runs works for experts), and the
 * weighted sum scattered back. Only experts some row chose are touched.
 */
#include <math.h>
#include <string.h>

#include "moe_impl.h"

double zz_moe_experts_touched(int64_t experts, int64_t k, double rows) {
  if (experts <= 0 || k <= 0 || rows <= 0) return 0.0;
  if (k >= experts) return (double)experts;
  return (double)experts * (1.0 - pow(1.0 - (double)k / (double)experts, rows));
}

bool zz_moe_layer_sparse(const zz_config *c, int layer) {
  if (c->n_experts <= 0) return false;
  for (int i = 0; i < c->n_dense_layers; i++)
    if (c->dense_layers[i] == layer) return false;
  return c->sparse_step <= 1 || (layer + 1) % c->sparse_step == 0;
}

zz_status zz_moe_parse_layers(json_t *root, const char *path, zz_config *c) {
  ZZ_CHECK(zz_json_int_in(root, path, "decoder_sparse_step", 1, 1, c->n_layers, &c->sparse_step));
  c->n_dense_layers = 0;
  json_t *list = json_object_get(root, "mlp_only_layers");
  if (!list || json_is_null(list)) return ZZ_OK;
  if (!json_is_array(list)) return zz_error(ZZ_ERR_FORMAT, "%s: \"mlp_only_layers\" must be a list of layers", path);
  if (json_array_size(list) > ZZ_MOE_MAX_DENSE)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: mlp_only_layers lists %zu layers (at most %d supported)", path,
                    json_array_size(list), ZZ_MOE_MAX_DENSE);
  size_t i;
  json_t *v;
  json_array_foreach(list, i, v) {
    double l = json_number_value(v); /* zz_json_load_hf reads integers as reals */
    if (!json_is_number(v) || !(l >= 0 && l < (double)c->n_layers) || l != (double)(int32_t)l)
      return zz_error(ZZ_ERR_FORMAT, "%s: mlp_only_layers[%zu] is not a layer in [0, %lld)", path, i,
                      (long long)c->n_layers);
    c->dense_layers[c->n_dense_layers++] = (int32_t)l;
  }
  return ZZ_OK;
}

void zz_moe_specs(zz_weight_spec *w, const zz_config *c, int layer, const char *const fmt[ZZ_MOE_N]) {
  int64_t e = c->n_experts, h = c->hidden, f = c->expert_ffn;
  zz_arch_spec(&w[ZZ_MOE_ROUTER], true, 2, e, h, fmt[ZZ_MOE_ROUTER], layer);
  zz_arch_spec(&w[ZZ_MOE_GATE], true, 2, e * f, h, fmt[ZZ_MOE_GATE], layer);
  zz_arch_spec(&w[ZZ_MOE_UP], true, 2, e * f, h, fmt[ZZ_MOE_UP], layer);
  zz_arch_spec(&w[ZZ_MOE_DOWN], true, 2, e * h, f, fmt[ZZ_MOE_DOWN], layer);
  int64_t sf = c->shared_ffn;
  zz_arch_spec(&w[ZZ_MOE_SHARED_GATE], sf > 0, 2, sf, h, fmt[ZZ_MOE_SHARED_GATE], layer);
  zz_arch_spec(&w[ZZ_MOE_SHARED_UP], sf > 0, 2, sf, h, fmt[ZZ_MOE_SHARED_UP], layer);
  zz_arch_spec(&w[ZZ_MOE_SHARED_DOWN], sf > 0, 2, h, sf, fmt[ZZ_MOE_SHARED_DOWN], layer);
  zz_arch_spec(&w[ZZ_MOE_SHARED_SCALE], sf > 0, 2, 1, h, fmt[ZZ_MOE_SHARED_SCALE], layer);
  for (int i = 0; i < ZZ_MOE_N; i++) w[i].after_kv = true;
  w[ZZ_MOE_ROUTER].precise = w[ZZ_MOE_SHARED_SCALE].precise = true;
  for (int i = ZZ_MOE_GATE; i <= ZZ_MOE_DOWN; i++) w[i].experts = e;
}

/* The widest intermediate rows: an expert's or the shared expert's. */
static int64_t zz_moe_width(const zz_config *c) {
  return c->shared_ffn > c->expert_ffn ? c->shared_ffn : c->expert_ffn;
}

/* The workspace, in order, each part on a 256-byte line. */
typedef struct zz_moe_work {
  void *logits;        /* [r, experts] */
  int32_t *idx;        /* [r, k] the router's experts */
  float *w;            /* [r, k] and their weights */
  int32_t *rows;       /* [r * k] rows grouped by expert, ascending */
  float *rw;           /* [r * k] each row's weight for that expert */
  void *x, *g, *u, *y; /* one expert's rows: [r, h], [r, f] twice (f: zz_moe_width), [r, h] */
} zz_moe_work;

static size_t zz_moe_carve(const zz_config *c, size_t es, int64_t r, char *base, zz_moe_work *out) {
  int64_t k = c->n_experts_used, h = c->hidden, f = zz_moe_width(c);
  const size_t sz[] = {(size_t)(r * c->n_experts) * es,
                       (size_t)(r * k) * sizeof(int32_t),
                       (size_t)(r * k) * 4,
                       (size_t)(r * k) * sizeof(int32_t),
                       (size_t)(r * k) * 4,
                       (size_t)(r * h) * es,
                       (size_t)(r * f) * es,
                       (size_t)(r * f) * es,
                       (size_t)(r * h) * es};
  void *p[9];
  size_t off = 0;
  for (int i = 0; i < 9; i++) {
    p[i] = base ? base + off : NULL;
    off += zz_align_up(sz[i], 256);
  }
  if (out)
    *out = (zz_moe_work){
        .logits = p[0], .idx = p[1], .w = p[2], .rows = p[3], .rw = p[4], .x = p[5], .g = p[6], .u = p[7], .y = p[8]};
  return off;
}

size_t zz_moe_workspace(const zz_config *c, size_t es, int64_t r) { return zz_moe_carve(c, es, r, NULL, NULL); }

/* Expert e's matrix of a stacked tensor: its rows, as a tensor of its own. */
static zz_tensor zz_moe_expert(const zz_tensor *t, int64_t experts, int64_t e) {
  zz_tensor v = *t;
  v.shape[0] = t->shape[0] / experts;
  const zz_weight_spec ws = {.ndim = 2, .shape = {v.shape[0], v.shape[1]}};
  v.nbytes = zz_weight_bytes_q(&ws, t->dtype, t->q);
  v.data = (char *)t->data + (size_t)e * v.nbytes;
  return v;
}

/* The host side of the routing, carved from the device's host scratch: the
 * router's choices read back, the rows grouped by expert, and where each expert's
 * group starts. The shared expert reuses rows / rw for its r rows (r <= r * k). */
typedef struct zz_moe_host {
  int32_t *idx;   /* [r * k] the router's experts */
  float *w;       /* [r * k] and their weights */
  int32_t *rows;  /* [r * k] rows grouped by expert */
  float *rw;      /* [r * k] each row's weight for that expert */
  int64_t *at;    /* [experts + 1] the counting sort's cursor */
  int64_t *first; /* [experts + 1] where expert e's group starts */
} zz_moe_host;

static zz_status zz_moe_host_take(zz_device *dev, const zz_config *c, int64_t r, zz_moe_host *out) {
  size_t m = (size_t)(r * c->n_experts_used), ne = (size_t)c->n_experts + 1;
  char *p;
  ZZ_CHECK(zz_device_host_scratch(dev, m * 16 + ne * 16, (void **)&p));
  *out = (zz_moe_host){.at = (int64_t *)p,
                       .first = (int64_t *)p + ne,
                       .idx = (int32_t *)(p + ne * 16),
                       .w = (float *)(p + ne * 16 + m * 4),
                       .rows = (int32_t *)(p + ne * 16 + m * 8),
                       .rw = (float *)(p + ne * 16 + m * 12)};
  return ZZ_OK;
}

/* The routing read back: rows grouped by expert (a counting sort, so each group
 * keeps the rows ascending) into rows/rw, hw->first[e] where expert e's group
 * starts (first[experts] = r * k). */
static zz_status zz_moe_group(zz_device *dev, const zz_config *c, int64_t r, const zz_moe_work *wk,
                              const zz_moe_host *hw) {
  int64_t k = c->n_experts_used, m = r * k, ne = c->n_experts;
  int64_t *at = hw->at;
  ZZ_CHECK(zz_device_read(dev, ZZ_LANE_COMPUTE, hw->idx, wk->idx, (size_t)m * sizeof *hw->idx));
  ZZ_CHECK(zz_device_read(dev, ZZ_LANE_COMPUTE, hw->w, wk->w, (size_t)m * sizeof *hw->w));
  ZZ_CHECK(zz_device_sync(dev, ZZ_LANE_COMPUTE));
  memset(at, 0, (size_t)(ne + 1) * sizeof *at);
  for (int64_t i = 0; i < m; i++) {
    if (hw->idx[i] < 0 || hw->idx[i] >= ne)
      return zz_error(ZZ_ERR_DEVICE, "moe: the router chose expert %d", (int)hw->idx[i]);
    at[hw->idx[i] + 1]++;
  }
  for (int64_t e = 0; e < ne; e++) at[e + 1] += at[e];
  memcpy(hw->first, at, (size_t)(ne + 1) * sizeof *at);
  for (int64_t i = 0; i < m; i++) {
    int64_t j = at[hw->idx[i]]++;
    hw->rows[j] = (int32_t)(i / k);
    hw->rw[j] = hw->w[i];
  }
  ZZ_CHECK(zz_device_write(dev, ZZ_LANE_COMPUTE, wk->rows, hw->rows, (size_t)m * sizeof *hw->rows));
  ZZ_CHECK(zz_device_write(dev, ZZ_LANE_COMPUTE, wk->rw, hw->rw, (size_t)m * sizeof *hw->rw));
  return zz_device_sync(dev, ZZ_LANE_COMPUTE); /* before the host scratch is used again */
}

/* The shared expert on all r rows, scaled per row by the sigmoid of its gate's
 * linear (read back, formed in f32 on the host), added into out last: the rows'
 * and weights' buffers are free again once the experts are queued. */
static zz_status zz_moe_shared(zz_device *dev, const zz_config *c, const zz_tensor *w, const void *xn, int64_t r,
                               void *out, const zz_moe_work *wk, const zz_moe_host *hw) {
  int64_t h = c->hidden, sf = c->shared_ffn;
  float *sig = hw->rw;
  int32_t *all = hw->rows;
  ZZ_CHECK(zz_device_linear(dev, xn, r, h, &w[ZZ_MOE_SHARED_GATE], NULL, sf, wk->g, 0));
  ZZ_CHECK(zz_device_linear(dev, xn, r, h, &w[ZZ_MOE_SHARED_UP], NULL, sf, wk->u, 0));
  ZZ_CHECK(zz_device_silu_mul(dev, wk->g, wk->u, r * sf, wk->g));
  ZZ_CHECK(zz_device_linear(dev, wk->g, r, sf, &w[ZZ_MOE_SHARED_DOWN], NULL, h, wk->y, 0));
  ZZ_CHECK(zz_device_linear(dev, xn, r, h, &w[ZZ_MOE_SHARED_SCALE], NULL, 1, wk->logits, 0));
  ZZ_CHECK(zz_device_download(dev, ZZ_LANE_COMPUTE, sig, ZZ_DTYPE_F32, wk->logits, r));
  ZZ_CHECK(zz_device_sync(dev, ZZ_LANE_COMPUTE));
  for (int64_t i = 0; i < r; i++) {
    sig[i] = 1.0f / (1.0f + expf(-sig[i]));
    all[i] = (int32_t)i;
  }
  ZZ_CHECK(zz_device_write(dev, ZZ_LANE_COMPUTE, wk->rows, all, (size_t)r * sizeof *all));
  ZZ_CHECK(zz_device_write(dev, ZZ_LANE_COMPUTE, wk->rw, sig, (size_t)r * sizeof *sig));
  ZZ_CHECK(zz_device_moe_scatter(dev, wk->y, wk->rows, wk->rw, r, h, out, r));
  return zz_device_sync(dev, ZZ_LANE_COMPUTE); /* before the host scratch is used again */
}

zz_status zz_moe_forward(zz_device *dev, const zz_config *c, const zz_tensor *w, const void *xn, int64_t r, void *out,
                         void *work, const zz_step *st_in) {
  size_t es = zz_dtype_nbytes(zz_device_describe(dev)->compute_dtype, 1);
  int64_t ne = c->n_experts, h = c->hidden, f = c->expert_ffn;
  zz_moe_work wk;
  zz_moe_carve(c, es, r, work, &wk);
  ZZ_CHECK(zz_device_linear(dev, xn, r, h, &w[ZZ_MOE_ROUTER], NULL, ne, wk.logits, 0));
  ZZ_CHECK(zz_device_moe_route(dev, wk.logits, r, ne, c->n_experts_used, c->norm_topk, wk.idx, wk.w));
  zz_moe_host hw;
  ZZ_CHECK(zz_moe_host_take(dev, c, r, &hw));
  ZZ_CHECK(zz_moe_group(dev, c, r, &wk, &hw));
  const int64_t *first = hw.first;
  zz_status st = zz_device_zero(dev, out, r * h);
  for (int64_t e = 0; st == ZZ_OK && e < ne; e++) {
    int64_t n = first[e + 1] - first[e];
    if (!n) continue; /* no row chose it: never read */
    if (st_in && st_in->need_expert) st = st_in->need_expert(st_in->expert_ctx, e);
    if (st != ZZ_OK) break;
    const int32_t *rows = wk.rows + first[e];
    zz_tensor gate = zz_moe_expert(&w[ZZ_MOE_GATE], ne, e), up = zz_moe_expert(&w[ZZ_MOE_UP], ne, e);
    zz_tensor down = zz_moe_expert(&w[ZZ_MOE_DOWN], ne, e);
    st = zz_device_gather_rows(dev, xn, r, h, rows, n, wk.x);
    if (st == ZZ_OK) st = zz_device_linear(dev, wk.x, n, h, &gate, NULL, f, wk.g, 0);
    if (st == ZZ_OK) st = zz_device_linear(dev, wk.x, n, h, &up, NULL, f, wk.u, 0);
    if (st == ZZ_OK) st = zz_device_silu_mul(dev, wk.g, wk.u, n * f, wk.g);
    if (st == ZZ_OK) st = zz_device_linear(dev, wk.g, n, f, &down, NULL, h, wk.y, 0);
    if (st == ZZ_OK) st = zz_device_moe_scatter(dev, wk.y, rows, wk.rw + first[e], n, h, out, r);
  }
  if (st != ZZ_OK || !c->shared_ffn) return st;
  return zz_moe_shared(dev, c, w, xn, r, out, &wk, &hw);
}
