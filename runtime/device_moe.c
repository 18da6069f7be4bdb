/*
 * device_moe.c — the checked wrappers of the mixture-of-experts ops (zz_device.h):
 * the router's top-k, one expert's weighted scatter-add and the zero fill of the
 * sum they add into. Checks as every wrapper's (device.c); values inside device
 * arrays (expert ids, rows) are not checked: they may live on the GPU.
 */
#include "device_impl.h"
#include "zz_moe.h"

zz_status zz_device_moe_route(zz_device *dev, const void *logits, int64_t n, int64_t experts, int64_t k, bool renorm,
                              int32_t *idx, float *w) {
  zz_site s = {dev, "moe_route"};
  ZZ_CHECK(zz_arg_op(s, ZZ_OP_MOE_ROUTE));
  ZZ_CHECK(zz_arg_pos(s, "n", n));
  ZZ_CHECK(zz_arg_pos(s, "experts", experts));
  ZZ_CHECK(zz_arg_pos(s, "k", k));
  if (k > experts || k > ZZ_MOE_MAX_TOPK)
    return zz_error(ZZ_ERR_INVALID_ARG, "%s device: moe_route: k = %lld, want at most experts (%lld) and %d",
                    dev->desc.name, (long long)k, (long long)experts, ZZ_MOE_MAX_TOPK);
  ZZ_CHECK(zz_arg_mat(s, "logits", logits, n, experts, zz_es(dev)));
  ZZ_CHECK(zz_arg_mat(s, "idx", idx, n, k, sizeof *idx));
  ZZ_CHECK(zz_arg_mat(s, "w", w, n, k, sizeof *w));
  return dev->ops->moe_route(dev, logits, n, experts, k, renorm, idx, w);
}

zz_status zz_device_moe_scatter(zz_device *dev, const void *y, const int32_t *rows, const float *w, int64_t m,
                                int64_t dim, void *out, int64_t out_rows) {
  zz_site s = {dev, "moe_scatter"};
  ZZ_CHECK(zz_arg_op(s, ZZ_OP_MOE_SCATTER));
  ZZ_CHECK(zz_arg_pos(s, "m", m));
  ZZ_CHECK(zz_arg_pos(s, "dim", dim));
  ZZ_CHECK(zz_arg_pos(s, "out_rows", out_rows));
  ZZ_CHECK(zz_arg_mat(s, "y", y, m, dim, zz_es(dev)));
  ZZ_CHECK(zz_arg_dev(s, "rows", rows, m, sizeof *rows));
  ZZ_CHECK(zz_arg_dev(s, "w", w, m, sizeof *w));
  ZZ_CHECK(zz_arg_mat(s, "out", out, out_rows, dim, zz_es(dev)));
  return dev->ops->moe_scatter(dev, y, rows, w, m, dim, out);
}

zz_status zz_device_zero(zz_device *dev, void *p, int64_t n) {
  zz_site s = {dev, "zero"};
  ZZ_CHECK(zz_arg_op(s, ZZ_OP_MOE_SCATTER));
  ZZ_CHECK(zz_arg_pos(s, "n", n));
  ZZ_CHECK(zz_arg_dev(s, "p", p, n, zz_es(dev)));
  return dev->ops->zero(dev, p, (size_t)n * zz_es(dev));
}
