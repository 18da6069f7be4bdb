/* planner_impl.h — what the planner's files share (internal). */
#ifndef ZZ_PLANNER_IMPL_H
#define ZZ_PLANNER_IMPL_H
#include "zz_planner.h"

/* The engine's memory plan for pol on hw without the capacity check. */
zz_status zz_plan_build(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_policy *p,
                        zz_memplan *out);
/* The cost model's inputs for a policy. */
zz_cost_in zz_cost_in_of(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, const zz_policy *p);
/* Best confirmed policy for one (gbs, num_gb) over the CPU-attention choice (and
 * compression when allowed); ZZ_ERR_INFEASIBLE when none fits. */
zz_status zz_plan_one(const zz_model *m, const zz_hw *hw, const zz_planner_opts *o, int gbs, int num_gb, zz_plan *out);
/* One more search for zz_planner_searches. */
void zz_planner_count_search(void);
/* qsort's order of doubles, ascending. */
int zz_cmp_double(const void *a, const void *b);
/* The (gbs, num_gb) lists a search tries: o's, or the defaults where o gives none. */
void zz_plan_lists(const zz_planner_opts *o, const int **gbs, int *n_gbs, const int **num_gb, int *n_num_gb);
#endif
