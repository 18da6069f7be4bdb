/*
 * zz_weights.h — where weights come from: a safetensors checkpoint (one file or an
 * index and its shards; runtime/checkpoint.c), checked against the model before a
 * byte is read, or --dummy values scaled like a trained checkpoint's.
 *
 * Usage:
 *     zz_checkpoint *ck;
 *     ZZ_CHECK(zz_checkpoint_open(dir, &ck));
 *     ZZ_CHECK(zz_checkpoint_check_model(ck, &model));
 *     ZZ_CHECK(zz_checkpoint_read(ck, w->name, ZZ_DTYPE_F32, dst, zz_weight_numel(w)));
 *     zz_checkpoint_close(ck);
 */
#ifndef ZZ_WEIGHTS_H
#define ZZ_WEIGHTS_H

#include "zz_model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ checkpoints */

/* An opened checkpoint: the safetensors headers of every shard, checked against
 * each file's size; the data stays on disk until read. */
typedef struct zz_checkpoint zz_checkpoint;

/* DIR/model.safetensors or DIR/model.safetensors.index.json and its shards. */
zz_status zz_checkpoint_open(const char *dir, zz_checkpoint **out);
void zz_checkpoint_close(zz_checkpoint *ck);
/* Number of tensors, and tensor i's entry (name as in the file). */
int64_t zz_checkpoint_count(const zz_checkpoint *ck);
/* Looks a tensor up by canonical name, accepting the file's name with or without
 * the "model." prefix; checks dtype is known and shape equals ndim/shape. */
zz_status zz_checkpoint_check(const zz_checkpoint *ck, const char *name, int ndim, const int64_t *shape);
/* Reads a tensor converted to dst_dt into dst (numel elements). */
zz_status zz_checkpoint_read(const zz_checkpoint *ck, const char *name, zz_dtype dst_dt, void *dst, int64_t numel);
/* Checks every weight of the model exists with the right shape (tied lm_head may
 * be absent). */
/* A weight of the model: one tensor, or an expert-stacked spec (spec.experts > 0)
 * read as its experts' tensors, each named with its index in place of the '*'. */
zz_status zz_checkpoint_check_weight(const zz_checkpoint *ck, const zz_weight_spec *w);
zz_status zz_checkpoint_read_weight(const zz_checkpoint *ck, const zz_weight_spec *w, zz_dtype dst_dt, void *dst);
zz_status zz_checkpoint_check_model(const zz_checkpoint *ck, const zz_model *m);

/* Deterministic random values for weight `spec`, scaled like a real checkpoint:
 * matrices with std 0.02 around 0, LN gains near 1, biases small. Element i is a
 * function of (name, i) alone: the same values for any pool (NULL: the caller's
 * thread), run and device; `pool` fills ranges in parallel. */
void zz_weights_dummy(const zz_weight_spec *spec, zz_dtype dt, void *dst, zz_pool *pool);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_WEIGHTS_H */
