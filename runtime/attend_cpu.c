/*
 * attend_cpu.c — attention on the CPU beside a cache kept on the CPU tier (or
 * staged there from disk), FlexGen's CPU delegation (§4.2): in a decode step only
 * the new q, k and v come down from the device, are appended to the host cache,
 * attended over by the CPU kernel (zz_cpu_attention_ex, one zz_attn_args as every
 * backend takes), and the output goes back up; the cache never moves. The
 * schedule (schedule.c) hands an ATTENTION layer this as zz_step.attend.
 */
#include "engine_impl.h"

zz_status zz_cpu_attend(void *ctx, const void *q, const void *k, const void *v, void *out) {
  zz_attend_ctx *a = ctx;
  zz_engine *e = a->e;
  zz_device *dev = e->dev;
  const zz_config *c = &e->m->cfg;
  int64_t nq = a->cnt * c->n_heads * c->head_dim, kvw = c->n_kv_heads * c->head_dim;
  double t0 = zz_now();
  ZZ_CHECK(zz_device_download(dev, ZZ_LANE_COMPUTE, e->ca[0], ZZ_DTYPE_F32, q, nq));
  ZZ_CHECK(zz_device_download(dev, ZZ_LANE_COMPUTE, e->ca[1], ZZ_DTYPE_F32, k, a->cnt * kvw));
  ZZ_CHECK(zz_device_download(dev, ZZ_LANE_COMPUTE, e->ca[2], ZZ_DTYPE_F32, v, a->cnt * kvw));
  ZZ_CHECK(zz_device_sync(dev, ZZ_LANE_COMPUTE));
  double t1 = zz_now();
  e->attn_wait_s += t1 - t0;
  /* the cache keeps the device's dtype (f16 beside a GPU) or Q4, so the new rows
   * are narrowed or quantized as they are appended and widened as attention reads them */
  zz_dtype kv_dt = a->kv.dt;
  if (kv_dt == ZZ_DTYPE_Q4) {
    zz_cpu_kv_append_q(e->ca[1], a->cnt, 1, c->n_kv_heads, c->head_dim, a->k, a->kv.q, a->kv.seq_bytes, a->pos);
    zz_cpu_kv_append_q(e->ca[2], a->cnt, 1, c->n_kv_heads, c->head_dim, a->v, a->kv.q, a->kv.seq_bytes, a->pos);
  } else {
    for (int64_t i = 0; i < a->cnt; i++) {
      size_t at = (size_t)(i * a->kv.seq_bytes) + zz_dtype_nbytes(kv_dt, a->pos * kvw);
      zz_convert(ZZ_DTYPE_F32, e->ca[1] + i * kvw, kv_dt, a->k + at, kvw);
      zz_convert(ZZ_DTYPE_F32, e->ca[2] + i * kvw, kv_dt, a->v + at, kvw);
    }
  }
  zz_attn_args args = {.q = e->ca[0],
                       .k = a->k,
                       .v = a->v,
                       .kv = a->kv,
                       .b = a->cnt,
                       .sq = 1,
                       .t = a->pos + 1,
                       .q_start = a->pos,
                       .heads = c->n_heads,
                       .kv_heads = c->n_kv_heads,
                       .hd = c->head_dim,
                       .pad = a->pad,
                       .keep = a->keep,
                       .window = a->window,
                       .out = e->ca[3],
                       .scratch = e->ca[4]};
  if (c->head_dim > ZZ_ATTN_MAX_HEAD_DIM)
    return zz_error(ZZ_ERR_UNSUPPORTED, "CPU attention: head dim %lld is above %d", (long long)c->head_dim,
                    ZZ_ATTN_MAX_HEAD_DIM);
  zz_cpu_attention_ex(zz_device_attn_pool(dev), &args);
  e->attn_cpu_s += zz_now() - t1;
  return zz_device_upload(dev, ZZ_LANE_COMPUTE, out, e->ca[3], ZZ_DTYPE_F32, nq);
}
