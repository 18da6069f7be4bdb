/*
 * zz_hw.h — a machine as the planner sees it: the hardware file (planner/hw.c),
 * the thread split and binding it implies, and measuring this machine into one
 * (planner/profile.c). docs/planner.md documents every field.
 */
#ifndef ZZ_HW_H
#define ZZ_HW_H

#include "zz_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ hardware */

#define ZZ_HW_MAX_POINTS 24

/* One measured point of a rate curve: at x (GEMM rows M, or threads) the rate y
 * (flop/s). Between points the rate is interpolated linearly in log2(x); outside
 * them it is the nearest end's. */
typedef struct zz_hw_point {
  double x, y;
} zz_hw_point;

/* A machine, as the cost model sees it. Bandwidths in bytes/s, rates in flop/s,
 * memories in bytes. Every field is documented in docs/planner.md. */
typedef struct zz_hw {
  char name[96];
  char device[8];      /* compute device: "cuda" (f16) or "cpu" (f32, memory is host RAM) */
  size_t gpu_mem;      /* device memory for the memory plan (after what the device keeps) */
  size_t gpu_reserved; /* device memory the device keeps for itself (cuBLAS workspace, staging) */
  size_t cpu_mem, disk_mem;
  int cpu_cores;                                /* cores the host gives this rank */
  double ctog_bw, gtoc_bw;                      /* host → device and device → host copies */
  double disk_read_bw, disk_write_bw;           /* the disk tier, page cache bypassed */
  int n_disk_read_busy;                         /* its reads beside compute that spends the CPU, by bytes per read */
  zz_hw_point disk_read_busy[ZZ_HW_MAX_POINTS]; /* (0 points: not measured) */
  int n_gemm;                                   /* GEMM [M, K] x [K, N] on the compute device by rows M */
  zz_hw_point gemm[ZZ_HW_MAX_POINTS];
  double bmm_prefill_flops; /* attention (batched GEMM) on the device, prefill-shaped */
  double bmm_decode_flops;  /* attention on the device, one query per sequence */
  int n_cpu_attn;           /* CPU attention beside a host cache, by thread count */
  zz_hw_point cpu_attn[ZZ_HW_MAX_POINTS];
  double cpu_flops; /* host GEMM peak (information; the CPU device's rates are in gemm) */
  /* 4-bit compression, measured through the kernels the engine runs (all zero:
   * the device has no 4-bit ops or the file no rates, and the search leaves
   * compression out; see zz_hw_has_q4) */
  int n_gemm_q4; /* linear with 4-bit weights (dequantize and multiply) by rows M */
  zz_hw_point gemm_q4[ZZ_HW_MAX_POINTS];
  double bmm_prefill_q4_flops, bmm_decode_q4_flops; /* the device's attention over a 4-bit cache */
  int n_cpu_attn_q4;                                /* CPU attention over a 4-bit host cache, by thread count */
  zz_hw_point cpu_attn_q4[ZZ_HW_MAX_POINTS];
  double quant_bw; /* cache rows quantized at store: 4-bit bytes written per second */
  /* the CPU device's 4-bit linear with x in int8 (--cpu-act int8; 0 points: the
   * file cannot price it and an int8 plan is refused naming the field) */
  int n_gemm_q4_int8; /* by rows M, as gemm_q4 */
  zz_hw_point gemm_q4_int8[ZZ_HW_MAX_POINTS];
  /* bf16 weight matrices (--cpu-dtype bf16, CPU device only; 0 points: the file
   * cannot price them and a bf16 plan is refused naming the field) */
  int n_gemm_bf16; /* linear with bf16 weights by rows M */
  zz_hw_point gemm_bf16[ZZ_HW_MAX_POINTS];
  int machines;       /* machines of a cluster (ranks at most), 1 for one box */
  double net_bw;      /* between machines, bytes/s (0: none) */
  double net_latency; /* seconds per message */
} zz_hw;

/* Reads and checks a hardware file: every required field present, numbers finite
 * and positive, points sorted. Errors name the file and the field. */
zz_status zz_hw_load(const char *path, zz_hw *out);
/* Writes hw as a hardware file (the same fields zz_hw_load reads). */
zz_status zz_hw_save(const zz_hw *hw, const char *path);
/* The checks zz_hw_load runs, on a struct (where: the file name for messages). */
zz_status zz_hw_check(const zz_hw *hw, const char *where);
/* A run (generate, bench) with a hardware file: the device it opens, --device
 * (device: "auto", "cpu" or "cuda") or under auto the file's. */
const char *zz_hw_run_device(const zz_hw *hw, const char *device);
/* Whether hw describes this machine closely enough to run its plan here: the
 * device a run computes on is the file's, and the RAM the plan may fill (the cpu
 * tier: cpu_cap, else the file's; on the cpu device also its memory: gpu_cap,
 * else the file's) is at most this machine's (MemTotal). ZZ_ERR_INVALID_ARG
 * naming the file, both numbers and what to do otherwise. where: the file name. */
zz_status zz_hw_check_here(const zz_hw *hw, const char *where, const char *device, size_t cpu_cap, size_t gpu_cap);
/* The disk tier's read rate (bytes/s) the cost model prices a disk read of
 * per_read bytes at: the engine reads one tensor (or one sequence's cache, one
 * batch's hidden states) a call beside its own compute, and under a CPU quota a
 * read issued after the period's quota is spent waits for the next period, so
 * the rate measured beside compute at that read size (disk_read_busy_bytes_per_s)
 * where the file has it (at most the alone rate), else the rate measured alone
 * (files written before issue #24 price as they did). */
double zz_hw_disk_read_bw(const zz_hw *hw, double per_read);
/* Rate of a curve at x (see zz_hw_point). */
double zz_hw_rate(const zz_hw_point *pts, int n, double x);
/* The thread count of the fastest CPU attention within max_threads (>= 1). */
int zz_hw_attn_threads(const zz_hw *hw, int max_threads);
/* LM-Offload's thread control (§4): how the host's cores are split. */
typedef struct zz_threads {
  int gemm; /* the CPU device's compute pool (--threads); 0 on a GPU, whose GEMMs are not the host's */
  int attn; /* CPU attention's pool (--attn-threads) */
  int io;   /* I/O lanes, one thread each (weight load, cache load, cache store) */
} zz_threads;
/* The split for hw: on the CPU device the GEMMs take every core and CPU
 * attention, which runs on the compute lane between them, the fastest count of
 * the profile's curve within all cores; beside a GPU the I/O lanes keep a core
 * each and CPU attention takes the fastest count within the rest. */
zz_threads zz_hw_threads(const zz_hw *hw);

/* The thread rule for a process given `cores` cores of hw's machine (<= 0: the
 * file's cpu_cores), as zz_hw_threads splits them. Everything that applies the
 * plan's threads (generate, bench, each mpirun rank over its binding's cores) asks
 * this. */
zz_threads zz_plan_threads(const zz_hw *hw, int cores);
/* A split as this process applies it: GEMM and attention threads at most the
 * cores its cgroup allows (zz_limits_here); the plan's own split is left as
 * predicted. */
zz_threads zz_plan_threads_here(const zz_threads *th);

/* How the runtime binds the process that runs a plan (runtime/bind.c applies it,
 * before the device starts its threads; the planner only decides). */
typedef struct zz_plan_bind {
  bool on;         /* bind: the plan's thread split runs (no --threads / --attn-threads given) */
  int gpu_ordinal; /* inside the NUMA node nearest this GPU; -1: the CPU device's (first node with cores) */
} zz_plan_bind;
/* The binding rule for one process alone on hw's machine. */
zz_plan_bind zz_plan_binding(const zz_hw *hw, bool threads_given);

/* A nominal machine of a device ("cpu" or "cuda") for a layer split without a
 * hardware file: a 12 GB/s link and 20 TFLOPS for every rate (4-bit, and bf16
 * and 4-bit with int8 activations on the cpu),
 * memories unbounded. */
void zz_hw_nominal(const char *device, zz_hw *out);

/* Whether hw has every 4-bit rate the cost model needs to price compression. */
bool zz_hw_has_q4(const zz_hw *hw);

/* ================================================================ profile */

typedef struct zz_profile_opts {
  const char *offload_dir; /* where the disk test file goes (NULL: $TMPDIR or /tmp) */
  double budget_s;         /* rough total seconds (default 15) */
  int threads;             /* the CPU device's compute threads (0: all cores) */
  bool verbose;
} zz_profile_opts;

/* Measures this machine through the engine's paths (the device's copy lanes, the
 * disk tier's I/O, the device's linear and attention ops, CPU attention per
 * thread count) into hw. */
zz_status zz_profile_run(const zz_profile_opts *o, zz_hw *out);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_HW_H */
