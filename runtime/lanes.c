/*
 * lanes.c — the concurrent lanes of the zig-zag schedule on the host: one
 * thread per I/O lane (weight load, cache load, cache store), each draining a
 * FIFO of tasks. With overlap off, tasks run inline at submission, which is the
 * same work in the same order, serialised.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "lanes_impl.h"

#define ZZ_LANE_QUEUE 256

typedef struct zz_task {
  unsigned char args[ZZ_TASK_ARGS];
} zz_task;

typedef struct zz_lane_q {
  pthread_t thread;
  zz_task ring[ZZ_LANE_QUEUE];
  uint64_t submitted, finished; /* tickets: task t is ring[(t - 1) % size] */
  zz_status error;
  char message[1024];
  double busy;
} zz_lane_q;

typedef struct zz_lane_arg {
  struct zz_lanes *l;
  int lane;
} zz_lane_arg;

struct zz_lanes {
  int n;
  zz_lane_arg *args; /* one per thread, alive as long as the threads */
  bool threaded, stopping;
  void *ctx;
  zz_task_fn fn;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  zz_lane_q *q;
};


static void zz_lane_run(zz_lanes *l, zz_lane_q *q, const zz_task *t) {
  double t0 = zz_now();
  zz_status st = l->fn(l->ctx, t->args);
  double dt = zz_now() - t0;
  pthread_mutex_lock(&l->mu);
  q->busy += dt;
  if (st != ZZ_OK && q->error == ZZ_OK) {
    q->error = st;
    snprintf(q->message, sizeof q->message, "%s", zz_error_message());
  }
  q->finished++;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

static void *zz_lane_main(void *p) {
  zz_lane_arg *a = p;
  zz_lanes *l = a->l;
  zz_lane_q *q = &l->q[a->lane];
  pthread_mutex_lock(&l->mu);
  for (;;) {
    while (!l->stopping && q->finished == q->submitted) pthread_cond_wait(&l->cv, &l->mu);
    if (q->finished == q->submitted) break; /* stopping and drained */
    zz_task t = q->ring[q->finished % ZZ_LANE_QUEUE];
    pthread_mutex_unlock(&l->mu);
    zz_lane_run(l, q, &t);
    pthread_mutex_lock(&l->mu);
  }
  pthread_mutex_unlock(&l->mu);
  return NULL;
}

zz_status zz_lanes_create(int n, bool threaded, void *ctx, zz_task_fn fn, zz_lanes **out) {
  zz_lanes *l = calloc(1, sizeof *l);
  if (!l || !(l->q = calloc((size_t)n, sizeof *l->q))) {
    free(l);
    return zz_error(ZZ_ERR_NO_MEMORY, "lanes: out of memory");
  }
  l->n = n;
  l->threaded = threaded;
  l->ctx = ctx;
  l->fn = fn;
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->cv, NULL);
  if (threaded) {
    if (!(l->args = calloc((size_t)n, sizeof *l->args))) {
      l->n = 0; /* no thread started: nothing to join */
      zz_lanes_destroy(l);
      return zz_error(ZZ_ERR_NO_MEMORY, "lanes: out of memory");
    }
    for (int i = 0; i < n; i++) {
      l->args[i] = (zz_lane_arg){l, i};
      if (pthread_create(&l->q[i].thread, NULL, zz_lane_main, &l->args[i]) != 0) {
        l->n = i;
        zz_lanes_destroy(l);
        return zz_error(ZZ_ERR_NO_MEMORY, "lanes: cannot start I/O thread %d", i);
      }
    }
  }
  *out = l;
  return ZZ_OK;
}

void zz_lanes_destroy(zz_lanes *l) {
  if (!l) return;
  if (l->threaded) {
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->n; i++) pthread_join(l->q[i].thread, NULL);
  }
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
  free(l->q);
  free(l->args);
  free(l);
}

uint64_t zz_lanes_submit(zz_lanes *l, int lane, const void *args, size_t len) {
  zz_lane_q *q = &l->q[lane];
  zz_task t;
  memset(&t, 0, sizeof t);
  memcpy(t.args, args, len < ZZ_TASK_ARGS ? len : ZZ_TASK_ARGS);
  if (!l->threaded) {
    q->submitted++;
    zz_lane_run(l, q, &t);
    return q->submitted;
  }
  pthread_mutex_lock(&l->mu);
  while (q->submitted - q->finished >= ZZ_LANE_QUEUE) pthread_cond_wait(&l->cv, &l->mu);
  q->ring[q->submitted % ZZ_LANE_QUEUE] = t;
  uint64_t ticket = ++q->submitted;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
  return ticket;
}

zz_status zz_lanes_wait(zz_lanes *l, int lane, uint64_t ticket) {
  zz_lane_q *q = &l->q[lane];
  pthread_mutex_lock(&l->mu);
  if (ticket == 0) ticket = q->submitted;
  while (q->finished < ticket) pthread_cond_wait(&l->cv, &l->mu);
  zz_status st = q->error;
  if (st != ZZ_OK) {
    zz_error(st, "%s", q->message);
    q->error = ZZ_OK;
  }
  pthread_mutex_unlock(&l->mu);
  return st;
}

double zz_lanes_busy(const zz_lanes *l, int lane) { return l->q[lane].busy; }
