/*
 * pool.c — the worker threads of the CPU kernels. One job at a time: the caller
 * publishes (fn, arg, n_tasks), workers and the caller pull task indices from an
 * atomic counter, and the caller returns when every task is done. Thread counts
 * are explicit so the planner can give attention threads and I/O threads their
 * own cores (LM-Offload's parallelism control).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "zz_kernels.h"

typedef struct zz_pool {
  pthread_t *threads;
  int n_workers; /* threads besides the caller */
  pthread_mutex_t mu;
  pthread_cond_t start, done;
  uint64_t generation; /* bumped per job, so workers see each job once */
  int stopping;
  void (*fn)(void *, int64_t);
  void *arg;
  int64_t n_tasks;
  atomic_llong next;
  int busy; /* workers still inside the current job */
} zz_pool;

static zz_pool zz_the_pool;
/* Serialises callers: I/O threads and the compute thread may both use the pool. */
static pthread_mutex_t zz_pool_job_mu = PTHREAD_MUTEX_INITIALIZER;
static int zz_pool_ready;

static void zz_pool_drain(zz_pool *p) {
  for (;;) {
    long long i = atomic_fetch_add(&p->next, 1);
    if (i >= p->n_tasks) break;
    p->fn(p->arg, (int64_t)i);
  }
}

static void *zz_pool_worker(void *unused) {
  (void)unused;
  zz_pool *p = &zz_the_pool;
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

int zz_cpu_pool_init(int n_threads) {
  if (zz_pool_ready) return 0;
  if (n_threads <= 0) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    n_threads = n > 0 ? (int)n : 1;
  }
  zz_pool *p = &zz_the_pool;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->start, NULL);
  pthread_cond_init(&p->done, NULL);
  p->n_workers = n_threads - 1;
  p->threads = p->n_workers ? calloc((size_t)p->n_workers, sizeof *p->threads) : NULL;
  if (p->n_workers && !p->threads) return -1;
  for (int i = 0; i < p->n_workers; i++) {
    if (pthread_create(&p->threads[i], NULL, zz_pool_worker, NULL) != 0) {
      p->n_workers = i;
      break;
    }
  }
  zz_pool_ready = 1;
  return 0;
}

void zz_cpu_pool_free(void) {
  if (!zz_pool_ready) return;
  zz_pool *p = &zz_the_pool;
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  pthread_cond_broadcast(&p->start);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->n_workers; i++) pthread_join(p->threads[i], NULL);
  free(p->threads);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->start);
  pthread_cond_destroy(&p->done);
  *p = (zz_pool){0};
  zz_pool_ready = 0;
}

void zz_cpu_pool_run(void (*fn)(void *arg, int64_t i), void *arg, int64_t n_tasks) {
  zz_pool *p = &zz_the_pool;
  if (!zz_pool_ready || p->n_workers == 0 || n_tasks <= 1) {
    for (int64_t i = 0; i < n_tasks; i++) fn(arg, i);
    return;
  }
  pthread_mutex_lock(&zz_pool_job_mu);
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
  pthread_mutex_unlock(&zz_pool_job_mu);
}
