/*
 * zz_planner.h — the planner: a machine described by a hardware file, FlexGen's
 * cost model (appendix A.3) extended with LM-Offload's terms, and the policy
 * search that solves the placement LP with GLPK for every (gbs, num_gb, CPU
 * attention, compression) and confirms each rounded answer with the engine's own
 * memory plan. It sees the runtime's types and its sizes/memory plan, never an
 * architecture's name, and has no CUDA or MPI in it.
 *
 * Usage:
 *     zz_hw hw;              zz_hw_load("planner/hw/t4-gcp.json", &hw);
 *     zz_planner_opts po;    zz_planner_opts_default(&po);   po.shape = {512, 32};
 *     zz_plan plan;          zz_plan_search(&model, &hw, &po, &plan);
 *     printf("%s\n", zz_policy_str(&plan.policy, buf, sizeof buf));
 *
 * Files: hw.c (the hardware file), cost.c (the cost model), search.c (the LP and
 * the search), pipe.c (a pipeline's split, policies and throughput), profile.c
 * (measuring this machine through the engine's paths). docs/planner.md documents
 * every field and term.
 *
 * This header only gathers the module's headers, one per concern (listed below);
 * a file that needs one concern includes that header alone.
 */
#ifndef ZZ_PLANNER_H
#define ZZ_PLANNER_H

#include "zz_hw.h"     /* the hardware file, threads, binding, profiling */
#include "zz_cost.h"   /* the cost model */
#include "zz_search.h" /* the policy search, a pipeline's split */

#endif /* ZZ_PLANNER_H */
