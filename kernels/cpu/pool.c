/*
 * pool.c — worker pools for the CPU kernels, as objects with their own thread
 * counts, so the CPU device's compute threads and the CPU-attention threads that
 * every device has (LM-Offload's parallelism control) are sized separately.
 *
 * One job at a time per pool: the caller publishes (fn, arg, n_tasks), the workers
 * and the caller pull task indices from an atomic counter, and the caller returns
 * when every task is done. A pool of n threads has n - 1 workers; the caller is
 * the n-th. Callers of one pool are serialised (the compute thread and an I/O lane
 * may share a pool); different pools run concurrently.
 *
 * The caller waits for the tasks, not for the workers: a worker not yet woken
 * when the caller (and the others) have run every task takes no part in that
 * job. On a loaded host a woken worker can wait milliseconds for a CPU, and
 * waiting for each one to check in cost every job that (zigzag's wall time at
 * 2.6x its CPU time beside transformers' 2.0x, the same load). A task index is
 * claimed together with its job's generation (one 64-bit word: generation in
 * the high half), so a late worker can never claim a task of the next job with
 * the last one's function; a job is replaced only after its every task is done.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "zz_pool.h"

struct zz_pool {
  pthread_t *threads;     /* [n_workers] */
  int n_workers;          /* threads besides the caller */
  pthread_mutex_t job_mu; /* one job at a time: held by the caller for the whole job */
  pthread_mutex_t mu;     /* guards everything below */
  pthread_cond_t start, done_cv;
  uint64_t generation; /* bumped per job, so workers see each job once */
  int stopping;
  void (*fn)(void *, int64_t);
  void *arg;
  int64_t n_tasks;
  atomic_ullong next; /* the job's generation (low 32 bits) << 32 | the next task index */
  atomic_llong done;  /* tasks of the current job finished */
};

/* Run tasks of job `gen` (fn, arg, n tasks) until none is left or the job is no
 * longer the pool's; the thread that finishes the last task wakes the caller. */
static void zz_pool_drain(zz_pool *p, uint64_t gen, void (*fn)(void *, int64_t), void *arg, int64_t n) {
  const unsigned long long hi = (unsigned long long)(uint32_t)gen << 32;
  unsigned long long v = atomic_load(&p->next);
  for (;;) {
    if ((v & ~0xffffffffull) != hi || (int64_t)(v & 0xffffffffull) >= n) return;
    if (!atomic_compare_exchange_weak(&p->next, &v, v + 1)) continue; /* v reloaded */
    fn(arg, (int64_t)(v & 0xffffffffull));
    if (atomic_fetch_add(&p->done, 1) + 1 == n) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_signal(&p->done_cv);
      pthread_mutex_unlock(&p->mu);
      return;
    }
    v = atomic_load(&p->next);
  }
}

static void *zz_pool_worker(void *arg) {
  zz_pool *p = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stopping && p->generation == seen) pthread_cond_wait(&p->start, &p->mu);
    if (p->stopping) break;
    seen = p->generation;
    void (*fn)(void *, int64_t) = p->fn;
    void *a = p->arg;
    int64_t n = p->n_tasks;
    pthread_mutex_unlock(&p->mu);
    zz_pool_drain(p, seen, fn, a, n);
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int zz_pool_create(int n_threads, zz_pool **out) {
  if (n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = n > 0 ? (int)n : 1;
    if (n_threads > ZZ_POOL_MAX_THREADS) n_threads = ZZ_POOL_MAX_THREADS;
  }
  if (n_threads > ZZ_POOL_MAX_THREADS) return EINVAL;
  zz_pool *p = calloc(1, sizeof *p);
  if (!p) return ENOMEM;
  p->n_workers = n_threads - 1;
  if (p->n_workers && !(p->threads = calloc((size_t)p->n_workers, sizeof *p->threads))) {
    free(p);
    return ENOMEM;
  }
  pthread_mutex_init(&p->job_mu, NULL);
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->start, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  for (int i = 0; i < p->n_workers; i++) {
    int rc = pthread_create(&p->threads[i], NULL, zz_pool_worker, p);
    if (rc != 0) {
      /* all or nothing: a pool smaller than asked would silently change the plan */
      p->n_workers = i;
      zz_pool_destroy(p);
      return rc;
    }
  }
  *out = p;
  return 0;
}

void zz_pool_destroy(zz_pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_workers; i++) pthread_join(p->threads[i], NULL);
  free(p->threads);
  pthread_mutex_destroy(&p->job_mu);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->start);
  pthread_cond_destroy(&p->done_cv);
  free(p);
}

int zz_pool_threads(const zz_pool *p) { return p ? p->n_workers + 1 : 1; }

void zz_pool_run(zz_pool *p, void (*fn)(void *arg, int64_t i), void *arg, int64_t n_tasks) {
  if (!p || p->n_workers == 0 || n_tasks <= 1 || n_tasks > (int64_t)UINT32_MAX) { /* the index: 32 bits of `next` */
    for (int64_t i = 0; i < n_tasks; i++) fn(arg, i);
    return;
  }
  pthread_mutex_lock(&p->job_mu);
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->arg = arg;
  p->n_tasks = n_tasks;
  uint64_t gen = ++p->generation;
  atomic_store(&p->done, 0);
  atomic_store(&p->next, (unsigned long long)(uint32_t)gen << 32);
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->mu);
  zz_pool_drain(p, gen, fn, arg, n_tasks);
  pthread_mutex_lock(&p->mu);
  while (atomic_load(&p->done) < n_tasks) pthread_cond_wait(&p->done_cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->job_mu);
}
