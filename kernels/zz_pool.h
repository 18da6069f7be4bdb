/*
 * zz_pool.h — the worker pools of the CPU kernels (kernels/cpu/pool.c).
 */
#ifndef ZZ_POOL_H
#define ZZ_POOL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- CPU worker pools */

/* Worker threads for the CPU kernels that parallelise (attention, layernorm); GEMMs
 * use OpenBLAS's own threads. A program may hold several pools with different
 * thread counts (the CPU device's compute pool, the CPU-attention pool). */
typedef struct zz_pool zz_pool;

#define ZZ_POOL_MAX_THREADS 1024

/* A pool of n_threads threads, the caller of zz_pool_run being one of them (so
 * n_threads - 1 are started). n_threads <= 0: the online cores (at most
 * ZZ_POOL_MAX_THREADS). Returns 0, EINVAL when n_threads > ZZ_POOL_MAX_THREADS,
 * or the errno of the allocation or pthread_create that failed (then no thread
 * is left running: a pool smaller than asked is never handed out). */
int zz_pool_create(int n_threads, zz_pool **out);
/* Joins every thread. Accepts NULL. No job may be running. */
void zz_pool_destroy(zz_pool *pool);
/* Threads that run a job, the caller included (1 for NULL). */
int zz_pool_threads(const zz_pool *pool);
/* Runs fn(arg, i) for i in [0, n_tasks) on the pool's threads and the caller, and
 * returns when all are done. pool NULL: runs them inline on the caller. Callers
 * of one pool are serialised; fn must not call zz_pool_run on the same pool. */
void zz_pool_run(zz_pool *pool, void (*fn)(void *arg, int64_t i), void *arg, int64_t n_tasks);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_POOL_H */
