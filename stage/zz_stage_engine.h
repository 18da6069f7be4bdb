/*
 * zz_stage_engine.h — the pipeline stage over this rank's engine (stage/engine_stage.c)
 * (part of zz_stage.h, which includes it at its end).
 */
#ifndef ZZ_STAGE_ENGINE_H
#define ZZ_STAGE_ENGINE_H

#include "zz_stage.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ the engine adapter */

/*
 * zz_stage_callbacks over a zz_engine (stage/engine_stage.c): this rank's engine runs
 * its slice of layers on the wavefront's items; rank 0 (the slice from layer 0) cuts
 * each request it is fed into groups of gbs x num_gb sequences (so group g of a
 * block is exactly what one process would run as one block), feeds prompts and
 * tokens, and collects the tokens; the last rank (the slice to the LM head) runs
 * the token loop's per-sequence step (zz_gen_take, zz_generate's own) on its
 * logits, so tokens equal the one-process run.
 *
 *     zz_engine_stage_config ec = {.engine = eng, .max_new_tokens = 32, .sampling = samp,
 *                                  .next = feed, .finished = write, .ctx = job};
 *     ZZ_CHECK(zz_engine_stage_create(&ec, &es));
 *     if ((s = zz_engine_stage_run(es, st)) != ZZ_OK) zz_stage_fail(st, s);   // every rank
 *     zz_engine_stage_destroy(es);
 */
typedef struct zz_engine_stage_config {
  zz_engine *engine;    /* this rank's slice; its n_groups bounds the groups of a block */
  zz_device *device;    /* the engine's device: the stage's exchange buffers are its
                          host memory (zz_stage_use_device); NULL: malloc */
  int max_new_tokens;   /* per sequence, <= the engine's gen_len */
  bool ignore_eos;      /* benchmarks: every sequence runs max_new_tokens steps */
  zz_sampling sampling; /* last rank: temperature, top-k/p, seed */
  /* Every rank the same: requests of up to refill_blocks blocks' sequences, a slot
   * whose sequence has ended taking the next waiting one (zz_stage_block.nslots);
   * 0 or 1: a request is one block. Needs every rank's group caches on its device
   * (zz_engine_can_refill) and the MPI exchange. */
  int refill_blocks;
  /* Rank 0: the next request of at most max_n prompts in req_out (n, ids, lens,
   * streams; the rest is the adapter's); n = 0 when there are none left. Its arrays
   * stay valid until finished() for it has returned. */
  zz_status (*next)(void *ctx, int64_t max_n, zz_request *req_out);
  /* Rank 0: the request's tokens (res->tokens[i] of res->n_tokens[i], EOS included;
   * prefill_s: from the block's start at rank 0 until every group's first token is
   * back there; decode_s: the rest). res is the adapter's: read, do not free. */
  zz_status (*finished)(void *ctx, const zz_request *req, const zz_result *res);
  /* Every rank, optional: called before each item is computed (stop requests,
   * fault injection); an error stops the pipeline. */
  zz_status (*step_hook)(void *ctx, int64_t block, int step, int group);
  void *ctx;
} zz_engine_stage_config;

typedef struct zz_engine_stage zz_engine_stage;

zz_status zz_engine_stage_create(const zz_engine_stage_config *cfg, zz_engine_stage **out);
/* Checks that this rank's slice fits its place (rank 0 from layer 0, the last rank
 * to the LM head, groups within the stage's), then zz_stage_run. */
zz_status zz_engine_stage_run(zz_engine_stage *es, zz_stage *st);
void zz_engine_stage_destroy(zz_engine_stage *es);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_STAGE_ENGINE_H */
