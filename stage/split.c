/*
 * split.c — which layers each rank holds: the cost of one layer (zz_stage_layer_cost,
 * the one rule, documented in zz_stage.h) and the contiguous split of the layer list
 * that minimises the slowest stage.
 */
#include <stdlib.h>

#include "zz_stage.h"

double zz_stage_layer_cost(const zz_model *m, int l, const zz_policy *pol, const zz_shape *shape, zz_dtype dt) {
  const zz_layer *L = &m->layers[l];
  double bls = (double)pol->gpu_batch_size * pol->num_gpu_batches;
  double s = (double)shape->prompt_len, n = (double)shape->gen_len, h = (double)m->cfg.hidden;
  double numel = (double)L->weight_numel, positions = s + n - 1, flops = 0;
  switch (L->kind) {
    case ZZ_LAYER_INPUT_EMBED: flops = bls * positions * h; break; /* a gather and the position add */
    case ZZ_LAYER_OUTPUT_EMBED: flops = 2 * numel * bls * n; break; /* the last position of each step */
    case ZZ_LAYER_MLP: flops = 2 * numel * bls * positions; break;
    case ZZ_LAYER_ATTENTION: {
      double keys = 0; /* keys attended to over the decode steps */
      for (double i = 1; i < n; i++) keys += s + i;
      flops = 2 * numel * bls * positions + 4 * bls * h * (s * s / 2 + keys);
      break;
    }
  }
  double off = 1 - pol->w_gpu / 100.0;
  double load = n * (off > 0 ? off : 0) * (double)zz_layer_weight_layout(L, dt, ZZ_ALIGN, NULL);
  double tl = load / ZZ_SPLIT_LINK_BW, tc = flops / ZZ_SPLIT_FLOPS;
  return pol->overlap ? (tl > tc ? tl : tc) : tl + tc;
}

zz_status zz_stage_split_layers(const zz_model *m, const zz_policy *pol, const zz_shape *shape, zz_dtype dt,
                                int nranks, int *bounds_out) {
  int L = m->n_layers;
  if (nranks < 1 || nranks > L)
    return zz_error(ZZ_ERR_INVALID_ARG, "pipeline: %d ranks for a model of %d layers (input embedding, attention "
                    "and MLP of each transformer layer, output embedding): every rank needs one", nranks, L);
  double *pre = calloc((size_t)L + 1, sizeof *pre);
  double *best = malloc((size_t)(nranks + 1) * (size_t)(L + 1) * sizeof *best);
  int *arg = malloc((size_t)(nranks + 1) * (size_t)(L + 1) * sizeof *arg);
  if (!pre || !best || !arg) {
    free(pre);
    free(best);
    free(arg);
    return zz_error(ZZ_ERR_NO_MEMORY, "pipeline: layer split");
  }
  for (int l = 0; l < L; l++) pre[l + 1] = pre[l] + zz_stage_layer_cost(m, l, pol, shape, dt);
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
  free(pre);
  free(best);
  free(arg);
  return ZZ_OK;
}
