/* lanes_impl.h — I/O lanes of the schedule (internal to runtime/). */
#ifndef ZZ_LANES_IMPL_H
#define ZZ_LANES_IMPL_H
#include "zz_device.h"

/* A lane runs submitted tasks in order on its own thread (or inline when the
 * schedule runs without overlap). Each submission returns a ticket; waiting for a
 * ticket waits for that task and every earlier one of the lane. */
typedef struct zz_lanes zz_lanes;
typedef zz_status (*zz_task_fn)(void *ctx, const void *args);

#define ZZ_TASK_ARGS 96 /* bytes of arguments copied with each task */

zz_status zz_lanes_create(int n_lanes, bool threaded, void *ctx, zz_task_fn fn, zz_lanes **out);
void zz_lanes_destroy(zz_lanes *l);
/* Copies args (at most ZZ_TASK_ARGS bytes) and queues fn(ctx, args) on lane. */
uint64_t zz_lanes_submit(zz_lanes *l, int lane, const void *args, size_t len);
/* Waits until task `ticket` of lane (and all before it) finished; returns the
 * first error any task of the lane met (and clears it). ticket 0: all so far. */
zz_status zz_lanes_wait(zz_lanes *l, int lane, uint64_t ticket);
/* Seconds the lane spent running tasks. */
double zz_lanes_busy(const zz_lanes *l, int lane);

#endif
