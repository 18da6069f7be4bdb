/*
 * bind.c — applying a plan's binding to this process (generate, bench): the plan
 * decides (zz_plan_binding: bind where its thread split runs, near which device),
 * stage/bind.c binds with hwloc (the node choice and core sets a pipeline's ranks
 * use too). A pipeline's ranks bind in launch/pipe.c, collectively.
 */
#include "zz_launch.h"
#include "zz_planner.h"
#include "zz_stage.h"

void zz_run_bind(const zz_plan_bind *b) {
  if (!b->on) return;
  zz_binding bd;
  if (zz_binding_init_local(b->gpu_ordinal, &bd) != ZZ_OK) { /* a run that cannot bind still runs */
    fprintf(stderr, "zigzag: not bound: %s\n", zz_error_message());
    zz_error_clear();
    return;
  }
  zz_binding_free(&bd); /* the process stays bound; only the handles go */
}
