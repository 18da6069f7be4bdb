/* fuzz_hw.c — the hardware file (--hw): loaded, or refused with a message; a
 * file that loads is planned for a small model (one block shape, every
 * candidate through GLPK, once more with int8 activations), which must answer
 * or refuse with a message, never abort inside GLPK, spin in the simplex, or
 * convert a number past its type. */
#include <math.h>

#include "fuzz_util.h"
#include "zz_planner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  static zz_model m;
  static int ready;
  if (!ready) {
    zz_config c;
    if (zz_config_preset("opt-125m", &c) != ZZ_OK || zz_model_init(&c, &m) != ZZ_OK) abort();
    ready = 1;
  }
  char path[512];
  zz_fuzz_file("hw.json", data, len, path, sizeof path);
  zz_hw hw;
  zz_error_clear();
  zz_status st = zz_hw_load(path, &hw);
  zz_fuzz_expect_message(st);
  if (st != ZZ_OK) return 0;
  zz_threads th = zz_hw_threads(&hw);
  if (th.attn < 1 || th.attn > hw.cpu_cores || th.gemm < 0 || th.gemm > hw.cpu_cores) {
    fprintf(stderr, "thread split %d/%d/%d outside the file's %d cores\n", th.gemm, th.attn, th.io, hw.cpu_cores);
    abort();
  }
  for (double x = 1; x < 1e6; x *= 7) {
    double r = zz_hw_rate(hw.gemm, hw.n_gemm, x);
    if (!(r > 0) || !isfinite(r)) abort(); /* interpolated between in-range rates */
  }
  zz_planner_opts o;
  zz_planner_opts_default(&o);
  o.shape = (zz_shape){8, 4};
  static const int one[] = {1};
  o.gbs_list = one, o.n_gbs = 1, o.num_gb_list = one, o.n_num_gb = 1;
  zz_plan plan;
  zz_error_clear();
  st = zz_plan_search(&m, &hw, &o, &plan);
  zz_fuzz_expect_message(st);
  if (st == ZZ_OK && !(plan.cost.total_tps > 0 && isfinite(plan.cost.total_tps))) {
    fprintf(stderr, "a plan of %g tokens/s\n", plan.cost.total_tps);
    abort();
  }
  /* int8 activations (--cpu-act int8): where the file prices them, the same
   * search once more with them; elsewhere a refusal with a message */
  o.cpu_act = ZZ_CPU_ACT_INT8;
  zz_error_clear();
  st = zz_plan_search(&m, &hw, &o, &plan);
  zz_fuzz_expect_message(st);
  if (st == ZZ_OK && !(plan.cost.total_tps > 0 && isfinite(plan.cost.total_tps) && plan.policy.compress_weight)) {
    fprintf(stderr, "an int8 plan of %g tokens/s, cw=%d\n", plan.cost.total_tps, plan.policy.compress_weight);
    abort();
  }
  zz_error_clear();
  return 0;
}
