/*
 * split.c — which layers each rank holds: the cost of one layer (zz_stage_layer_cost,
 * the one rule, documented in zz_stage.h) fed to the contiguous split that minimises
 * the slowest stage (zz_split_costs in planner/pipe.c, which the planner feeds with
 * its cost model's per-layer times).
 */
#include <stdlib.h>

#include "zz_planner.h"
#include "zz_stage.h"

double zz_stage_layer_cost(const zz_model *m, int l, const zz_policy *pol, const zz_shape *shape, zz_dtype dt,
                           bool bf16) {
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
  double load = n * (off > 0 ? off : 0) * (double)zz_layer_weight_layout_b(L, dt, NULL, bf16, ZZ_ALIGN, NULL);
  double tl = load / ZZ_SPLIT_LINK_BW, tc = flops / ZZ_SPLIT_FLOPS;
  return pol->overlap ? (tl > tc ? tl : tc) : tl + tc;
}

zz_status zz_stage_split_layers(const zz_model *m, const zz_policy *pol, const zz_shape *shape, zz_dtype dt,
                                bool bf16, int nranks, int *bounds_out) {
  double *cost = malloc((size_t)m->n_layers * sizeof *cost);
  if (!cost) return zz_error(ZZ_ERR_NO_MEMORY, "pipeline: layer split");
  for (int l = 0; l < m->n_layers; l++) cost[l] = zz_stage_layer_cost(m, l, pol, shape, dt, bf16);
  /* the one split algorithm (planner/pipe.c), also fed by the cost model's times */
  zz_status st = zz_split_costs(cost, m->n_layers, nranks, bounds_out);
  free(cost);
  return st;
}
