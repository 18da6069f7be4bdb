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
  pthread_cond_t start, done;
  uint64_t generation; /* bumped per job, so workers see each job once */
  int stopping;
  void (*fn)(void *, int64_t);
  void *arg;
  int64_t n_tasks;
  atomic_llong next;
  int busy; /* workers still inside the current job */
};

static void zz_pool_drain(zz_pool *p) {
  for (;;) {
    long long i = atomic_fetch_add(&p->next, 1);
    if (i >= p->n_tasks) break;
    p->fn(p->arg, (int64_t)i);
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
    pthread_mutex_unlock(&p->mu);
    zz_pool_drain(p);
    pthread_mutex_lock(&p->mu);
    if (--p->busy == 0) pthread_cond_signal(&p->done);
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
  pthread_cond_init(&p->done, NULL);
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
  pthread_cond_destroy(&p->done);
  free(p);
}

int zz_pool_threads(const zz_pool *p) { return p ? p->n_workers + 1 : 1; }

void zz_pool_run(zz_pool *p, void (*fn)(void *arg, int64_t i), void *arg, int64_t n_tasks) {
  if (!p || p->n_workers == 0 || n_tasks <= 1) {
    for (int64_t i = 0; i < n_tasks; i++) fn(arg, i);
    return;
  }
  pthread_mutex_lock(&p->job_mu);
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->arg = arg;
  p->n_tasks = n_tasks;
  atomic_store(&p->next, 0);
  p->busy = p->n_workers;
  p->generation++;
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->mu);
  zz_pool_drain(p);
  pthread_mutex_lock(&p->mu);
  while (p->busy > 0) pthread_cond_wait(&p->done, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->job_mu);
}
