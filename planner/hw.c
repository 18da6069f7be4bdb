/*
 * hw.c — the hardware file: one JSON object describing a machine for the cost
 * model (docs/planner.md lists every field, its unit and where the shipped
 * numbers come from). Loading is strict: a missing or unknown field, a number
 * that is not finite and positive, or unsorted points are refused naming the file
 * and the field, so a typo never silently becomes a default.
 */
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "zz_hw.h"
#include "zz_limits.h"

/* ---------------------------------------------------------------- rates */

double zz_hw_disk_read_bw(const zz_hw *hw, double per_read) {
  if (hw->n_disk_read_busy == 0) return hw->disk_read_bw;
  /* never above the alone rate: work beside cannot speed the disk (a virtual
   * disk's host cache can make one short pass look so) */
  double r = zz_hw_rate(hw->disk_read_busy, hw->n_disk_read_busy, per_read);
  return r < hw->disk_read_bw ? r : hw->disk_read_bw;
}

double zz_hw_rate(const zz_hw_point *p, int n, double x) {
  if (n <= 0) return 0;
  if (x <= p[0].x) return p[0].y;
  if (x >= p[n - 1].x) return p[n - 1].y;
  for (int i = 1; i < n; i++)
    if (x <= p[i].x) {
      double a = log2(p[i - 1].x), b = log2(p[i].x), f = (log2(x) - a) / (b - a);
      return p[i - 1].y + f * (p[i].y - p[i - 1].y);
    }
  return p[n - 1].y;
}

int zz_hw_attn_threads(const zz_hw *hw, int max_threads) {
  if (max_threads < 1) max_threads = 1;
  int best = max_threads; /* no point within the bound: all of it (the curve's first rate applies) */
  double rate = -1;
  for (int i = 0; i < hw->n_cpu_attn; i++) {
    /* compared as a double first: a struct that skipped zz_hw_check may hold any x,
     * and converting one beyond int is undefined */
    double x = hw->cpu_attn[i].x;
    if (!(x >= 1) || x > max_threads) continue;
    if (hw->cpu_attn[i].y > rate) rate = hw->cpu_attn[i].y, best = (int)x;
  }
  return best;
}

zz_threads zz_hw_threads(const zz_hw *hw) {
  int cores = hw->cpu_cores > 0 ? hw->cpu_cores : 1, io = ZZ_LANE_COUNT - 1;
  bool cpu = strcmp(hw->device, "cpu") == 0;
  int attn_max = cpu ? cores : cores - io;
  return (zz_threads){.gemm = cpu ? cores : 0, .attn = zz_hw_attn_threads(hw, attn_max < 1 ? 1 : attn_max), .io = io};
}

zz_threads zz_plan_threads(const zz_hw *hw, int cores) {
  zz_hw h = *hw;
  if (cores > 0) h.cpu_cores = cores;
  return zz_hw_threads(&h);
}

zz_threads zz_plan_threads_here(const zz_threads *th) {
  /* a file measured elsewhere may give more cores than this process's cgroup
   * allows: more threads than that only take turns */
  int here = zz_limits_here()->cores;
  zz_threads t = *th;
  if (t.gemm > here) t.gemm = here;
  if (t.attn > here) t.attn = here;
  return t;
}

zz_plan_bind zz_plan_binding(const zz_hw *hw, bool threads_given) {
  /* given thread counts are the user's placement: the process is left where it is */
  return (zz_plan_bind){.on = !threads_given, .gpu_ordinal = strcmp(hw->device, "cuda") == 0 ? 0 : -1};
}

void zz_hw_nominal(const char *device, zz_hw *out) {
  /* FlexGen's measured PCIe 3 x16 link and a sustained 20 TFLOPS, flat over every
   * shape, thread count and lane: what a split without a hardware file assumed
   * before the planner's model priced it too */
  const double link = 12e9, flops = 20e12;
  zz_hw h = {.gpu_mem = (size_t)1 << 40,
             .cpu_mem = (size_t)1 << 40,
             .disk_mem = (size_t)1 << 44,
             .cpu_cores = 1,
             .ctog_bw = link,
             .gtoc_bw = link,
             .disk_read_bw = link,
             .disk_write_bw = link,
             .n_gemm = 1,
             .bmm_prefill_flops = flops,
             .bmm_decode_flops = flops,
             .n_cpu_attn = 1,
             .cpu_flops = flops,
             .n_gemm_q4 = 1,
             .bmm_prefill_q4_flops = flops,
             .bmm_decode_q4_flops = flops,
             .n_cpu_attn_q4 = 1,
             .quant_bw = link,
             .machines = 1};
  snprintf(h.name, sizeof h.name, "nominal %s machine (no --hw: a 12 GB/s link, 20 TFLOPS)", device);
  snprintf(h.device, sizeof h.device, "%s", strcmp(device, "cpu") == 0 ? "cpu" : "cuda");
  h.gemm[0] = h.cpu_attn[0] = h.gemm_q4[0] = h.cpu_attn_q4[0] = h.gemm_bf16[0] = h.gemm_q4_int8[0] = (zz_hw_point){
      1, flops};
  h.n_gemm_bf16 = h.n_gemm_q4_int8 = strcmp(h.device, "cpu") == 0; /* bf16 weights, int8 x: the CPU device's */
  *out = h;
}

bool zz_hw_has_q4(const zz_hw *hw) {
  return hw->n_gemm_q4 > 0 && hw->n_cpu_attn_q4 > 0 && hw->bmm_prefill_q4_flops > 0 && hw->bmm_decode_q4_flops > 0 &&
         hw->quant_bw > 0;
}

void zz_hw_device_desc(const zz_hw *hw, size_t capacity, bool bf16_weights, zz_device_desc *out) {
  zz_device_desc_init(strcmp(hw->device, "cpu") == 0 ? ZZ_DEVICE_CPU : ZZ_DEVICE_CUDA, capacity, out);
  out->bf16_weights = bf16_weights;
  out->host_memory = hw->cpu_mem; /* the file's machine: a CPU device's memory and the cpu tier share its RAM */
  /* 4-bit weights and caches where the file has their rates (zigzag profile
   * writes them only for a device with those ops): without, none is priced */
  if (!zz_hw_has_q4(hw)) zz_device_desc_drop_q4(out);
}

zz_dtype zz_hw_compute_dtype(const zz_hw *hw) {
  zz_device_desc d;
  zz_hw_device_desc(hw, 0, false, &d);
  return d.compute_dtype;
}

/* ---------------------------------------------------------------- checks */

/* The physical range of every number in the file: generous, but finite, so a
 * typo (1e-300, 1000x a bus) is refused naming the field instead of reaching the
 * LP, where GLPK aborts or spins on coefficients 300 decades apart. */
#define ZZ_HW_BW_LO 1e6            /* 1 MB/s: slower than any disk or bus in use */
#define ZZ_HW_BW_HI 1e13           /* 10 TB/s: above any memory or link today */
#define ZZ_HW_FLOPS_LO 1e6         /* 1 MFLOP/s */
#define ZZ_HW_FLOPS_HI 1e17        /* 100 PFLOP/s: above any one device */
#define ZZ_HW_MEM_HI 1e15          /* 1 PB */
#define ZZ_HW_THREADS_HI 4096      /* cores, threads and machines */
#define ZZ_HW_ROWS_HI 1073741824.0 /* GEMM rows M of a rate point: 2^30 */
#define ZZ_HW_LATENCY_HI 10.0      /* seconds per message */

typedef struct zz_hw_range {
  const char *name, *unit;
  double v, lo, hi;
  bool zero_ok; /* 0 means "none" (no disk, no network, nothing reserved) */
  bool whole;   /* counts */
} zz_hw_range;

static zz_status zz_hw_range_check(const zz_hw_range *r, const char *where) {
  if (r->zero_ok && r->v == 0) return ZZ_OK;
  bool in = isfinite(r->v) && r->v >= r->lo && r->v <= r->hi && (!r->whole || r->v == floor(r->v));
  if (in) return ZZ_OK;
  return zz_error(ZZ_ERR_FORMAT, "%s: %s = %g: want %s%s from %g to %g %s%s", where, r->name, r->v,
                  r->whole ? "a whole number" : "a number", r->zero_ok ? " (or 0: none)" : "", r->lo, r->hi, r->unit,
                  isfinite(r->v) && r->v > r->hi ? " (beyond any machine; a typo?)" : "");
}

/* A rate curve: x in [1, xhi] (whole when threads), rates in the flop/s range,
 * sorted by x. */
static zz_status zz_hw_points_check(const zz_hw_point *p, int n, const char *where, const char *field, double xhi,
                                    bool threads) {
  if (n < 1) return zz_error(ZZ_ERR_FORMAT, "%s: %s: want at least one [x, rate] point", where, field);
  for (int i = 0; i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "%s[%d][0] (%s)", field, i, threads ? "threads" : "rows M");
    ZZ_CHECK(
        zz_hw_range_check(&(zz_hw_range){name, threads ? "threads" : "rows", p[i].x, 1, xhi, false, threads}, where));
    snprintf(name, sizeof name, "%s[%d][1] (rate)", field, i);
    ZZ_CHECK(
        zz_hw_range_check(&(zz_hw_range){name, "flop/s", p[i].y, ZZ_HW_FLOPS_LO, ZZ_HW_FLOPS_HI, false, false}, where));
    if (i && p[i].x <= p[i - 1].x)
      return zz_error(ZZ_ERR_FORMAT, "%s: %s[%d]: points must be sorted by their first number, strictly increasing",
                      where, field, i);
  }
  return ZZ_OK;
}

zz_status zz_hw_check(const zz_hw *hw, const char *where) {
  if (strcmp(hw->device, "cuda") != 0 && strcmp(hw->device, "cpu") != 0)
    return zz_error(ZZ_ERR_FORMAT, "%s: device \"%s\": want \"cuda\" or \"cpu\"", where, hw->device);
  const double B = ZZ_HW_BW_LO, BH = ZZ_HW_BW_HI, F = ZZ_HW_FLOPS_LO, FH = ZZ_HW_FLOPS_HI;
  const zz_hw_range r[] = {
      {"gpu_mem_bytes", "bytes", (double)hw->gpu_mem, 1, ZZ_HW_MEM_HI, false, true},
      {"gpu_reserved_bytes", "bytes", (double)hw->gpu_reserved, 1, ZZ_HW_MEM_HI, true, true},
      {"cpu_mem_bytes", "bytes", (double)hw->cpu_mem, 1, ZZ_HW_MEM_HI, false, true},
      {"disk_mem_bytes", "bytes", (double)hw->disk_mem, 1, ZZ_HW_MEM_HI, true, true},
      {"cpu_cores", "cores", (double)hw->cpu_cores, 1, ZZ_HW_THREADS_HI, false, true},
      {"ctog_bytes_per_s", "B/s", hw->ctog_bw, B, BH, false, false},
      {"gtoc_bytes_per_s", "B/s", hw->gtoc_bw, B, BH, false, false},
      {"disk_read_bytes_per_s", "B/s", hw->disk_read_bw, B, BH, false, false},
      {"disk_write_bytes_per_s", "B/s", hw->disk_write_bw, B, BH, false, false},
      {"bmm_prefill_flops", "flop/s", hw->bmm_prefill_flops, F, FH, false, false},
      {"bmm_decode_flops", "flop/s", hw->bmm_decode_flops, F, FH, false, false},
      {"cpu_flops", "flop/s", hw->cpu_flops, F, FH, false, false},
      {"bmm_prefill_q4_flops", "flop/s", hw->bmm_prefill_q4_flops, F, FH, true, false},
      {"bmm_decode_q4_flops", "flop/s", hw->bmm_decode_q4_flops, F, FH, true, false},
      {"quant_bytes_per_s", "B/s", hw->quant_bw, B, BH, true, false},
      {"machines", "machines", (double)hw->machines, 1, ZZ_HW_THREADS_HI, false, true},
      {"net_bytes_per_s", "B/s", hw->net_bw, B, BH, true, false},
      {"net_latency_s", "s", hw->net_latency, 0, ZZ_HW_LATENCY_HI, true, false},
  };
  for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) ZZ_CHECK(zz_hw_range_check(&r[i], where));
  /* the 4-bit rates come all together or not at all: half of them would price
   * compression with a made-up zero */
  bool any_q4 = hw->n_gemm_q4 > 0 || hw->n_cpu_attn_q4 > 0 || hw->bmm_prefill_q4_flops > 0 ||
                hw->bmm_decode_q4_flops > 0 || hw->quant_bw > 0;
  if (any_q4 && !zz_hw_has_q4(hw))
    return zz_error(ZZ_ERR_FORMAT,
                    "%s: 4-bit rates: give all of gemm_q4_flops, bmm_prefill_q4_flops, bmm_decode_q4_flops, "
                    "cpu_attention_q4_flops and quant_bytes_per_s (> 0), or none",
                    where);
  if (any_q4) {
    ZZ_CHECK(zz_hw_points_check(hw->gemm_q4, hw->n_gemm_q4, where, "gemm_q4_flops", ZZ_HW_ROWS_HI, false));
    ZZ_CHECK(zz_hw_points_check(hw->cpu_attn_q4, hw->n_cpu_attn_q4, where, "cpu_attention_q4_flops", ZZ_HW_THREADS_HI,
                                true));
  }
  if (hw->n_gemm_bf16 > 0) { /* one field: all or none by itself */
    if (strcmp(hw->device, "cpu") != 0)
      return zz_error(ZZ_ERR_FORMAT,
                      "%s: gemm_bf16_flops: bf16 weights are an option of the cpu device, and this "
                      "file's device is \"%s\"",
                      where, hw->device);
    ZZ_CHECK(zz_hw_points_check(hw->gemm_bf16, hw->n_gemm_bf16, where, "gemm_bf16_flops", ZZ_HW_ROWS_HI, false));
  }
  if (hw->n_gemm_q4_int8 > 0) { /* the CPU device's 4-bit linear with int8 x: beside the 4-bit rates */
    if (strcmp(hw->device, "cpu") != 0)
      return zz_error(ZZ_ERR_FORMAT,
                      "%s: gemm_q4_int8_flops: int8 activations (--cpu-act int8) are an option of the cpu device, "
                      "and this file's device is \"%s\"",
                      where, hw->device);
    if (!any_q4)
      return zz_error(ZZ_ERR_FORMAT,
                      "%s: gemm_q4_int8_flops without the 4-bit rates (gemm_q4_flops, ...): int8 activations "
                      "multiply 4-bit weights, so the file needs those too",
                      where);
    ZZ_CHECK(
        zz_hw_points_check(hw->gemm_q4_int8, hw->n_gemm_q4_int8, where, "gemm_q4_int8_flops", ZZ_HW_ROWS_HI, false));
  }
  /* the disk's reads beside compute: [bytes per read, B/s], sorted */
  for (int i = 0; i < hw->n_disk_read_busy; i++) {
    const zz_hw_point *q = &hw->disk_read_busy[i];
    char nx[64], ny[64];
    snprintf(nx, sizeof nx, "disk_read_busy_bytes_per_s[%d][0] (bytes per read)", i);
    snprintf(ny, sizeof ny, "disk_read_busy_bytes_per_s[%d][1] (rate)", i);
    ZZ_CHECK(zz_hw_range_check(&(zz_hw_range){nx, "bytes", q->x, 512, ZZ_HW_MEM_HI, false, true}, where));
    ZZ_CHECK(zz_hw_range_check(&(zz_hw_range){ny, "B/s", q->y, B, BH, false, false}, where));
    if (i && q->x <= q[-1].x)
      return zz_error(ZZ_ERR_FORMAT,
                      "%s: disk_read_busy_bytes_per_s[%d]: points must be sorted by their first number, strictly "
                      "increasing",
                      where, i);
  }
  if (hw->machines > 1 && hw->net_bw <= 0)
    return zz_error(ZZ_ERR_FORMAT, "%s: %d machines need net_bytes_per_s > 0", where, hw->machines);
  ZZ_CHECK(zz_hw_points_check(hw->gemm, hw->n_gemm, where, "gemm_flops", ZZ_HW_ROWS_HI, false));
  ZZ_CHECK(zz_hw_points_check(hw->cpu_attn, hw->n_cpu_attn, where, "cpu_attention_flops", ZZ_HW_THREADS_HI, true));
  return ZZ_OK;
}

/* ---------------------------------------------------------------- the machine it runs on */

const char *zz_hw_run_device(const zz_hw *hw, const char *device) {
  if (device && strcmp(device, "auto") != 0) return device;
  return strcmp(hw->device, "cuda") == 0 ? "cuda" : "cpu"; /* literals: they outlive hw */
}

zz_status zz_hw_check_here(const zz_hw *hw, const char *where, const char *device, size_t cpu_cap, size_t gpu_cap) {
  const char *run = zz_hw_run_device(hw, device);
  if (strcmp(run, hw->device) != 0)
    return zz_error(
        ZZ_ERR_INVALID_ARG,
        "--hw %s describes a %s machine (\"device\": \"%s\", %s) and this run computes on %s (--device %s): "
        "a plan is made for the machine it runs on; measure this one (zigzag profile --out FILE) and "
        "give that file, or run with --device %s",
        where, hw->device, hw->device, hw->name, run, device ? device : "auto", hw->device);
  /* the RAM the plan may fill: the cpu tier, and on the cpu device its arena too */
  size_t ram = zz_host_memory_bytes();
  char a[32], b[32];
  size_t cpu = cpu_cap ? cpu_cap : hw->cpu_mem;
  if (cpu > ram)
    return zz_error(
        ZZ_ERR_INVALID_ARG,
        "--hw %s: its cpu tier of %s (%s) is more than this machine's %s of RAM (MemTotal, or its cgroup's memory limit less room for the program): the plan "
        "would place in RAM what is not there; measure this machine (zigzag profile --out FILE) or give "
        "--cpu-mem of at most %s",
        where, zz_format_bytes(cpu, a, sizeof a), cpu_cap ? "--cpu-mem" : "cpu_mem_bytes",
        zz_format_bytes(ram, b, sizeof b), b);
  size_t gpu = gpu_cap ? gpu_cap : hw->gpu_mem;
  if (strcmp(hw->device, "cpu") == 0 && gpu > ram)
    return zz_error(
        ZZ_ERR_INVALID_ARG,
        "--hw %s: its cpu device's memory of %s (%s) is host RAM, and this machine has %s (MemTotal, or its cgroup's memory limit less room for the program); "
        "measure this machine (zigzag profile --out FILE) or give --gpu-mem of at most %s",
        where, zz_format_bytes(gpu, a, sizeof a), gpu_cap ? "--gpu-mem" : "gpu_mem_bytes",
        zz_format_bytes(ram, b, sizeof b), b);
  return ZZ_OK;
}

/* ---------------------------------------------------------------- load */

typedef enum { ZZ_F_NUM, ZZ_F_BYTES, ZZ_F_INT, ZZ_F_STR, ZZ_F_POINTS } zz_field_kind;

typedef struct zz_field {
  const char *key;
  zz_field_kind kind;
  size_t off; /* into zz_hw */
  size_t cap; /* strings: buffer size; points: offset of the count */
  bool required;
} zz_field;

#define ZZ_HWO(f) offsetof(zz_hw, f)
static const zz_field zz_fields[] = {
    {"name", ZZ_F_STR, ZZ_HWO(name), sizeof(((zz_hw *)0)->name), true},
    {"device", ZZ_F_STR, ZZ_HWO(device), sizeof(((zz_hw *)0)->device), true},
    {"gpu_mem_bytes", ZZ_F_BYTES, ZZ_HWO(gpu_mem), 0, true},
    {"gpu_reserved_bytes", ZZ_F_BYTES, ZZ_HWO(gpu_reserved), 0, false},
    {"cpu_mem_bytes", ZZ_F_BYTES, ZZ_HWO(cpu_mem), 0, true},
    {"disk_mem_bytes", ZZ_F_BYTES, ZZ_HWO(disk_mem), 0, true},
    {"cpu_cores", ZZ_F_INT, ZZ_HWO(cpu_cores), 0, true},
    {"ctog_bytes_per_s", ZZ_F_NUM, ZZ_HWO(ctog_bw), 0, true},
    {"gtoc_bytes_per_s", ZZ_F_NUM, ZZ_HWO(gtoc_bw), 0, true},
    {"disk_read_bytes_per_s", ZZ_F_NUM, ZZ_HWO(disk_read_bw), 0, true},
    {"disk_write_bytes_per_s", ZZ_F_NUM, ZZ_HWO(disk_write_bw), 0, true},
    {"disk_read_busy_bytes_per_s", ZZ_F_POINTS, ZZ_HWO(disk_read_busy), ZZ_HWO(n_disk_read_busy), false},
    {"gemm_flops", ZZ_F_POINTS, ZZ_HWO(gemm), ZZ_HWO(n_gemm), true},
    {"bmm_prefill_flops", ZZ_F_NUM, ZZ_HWO(bmm_prefill_flops), 0, true},
    {"bmm_decode_flops", ZZ_F_NUM, ZZ_HWO(bmm_decode_flops), 0, true},
    {"cpu_attention_flops", ZZ_F_POINTS, ZZ_HWO(cpu_attn), ZZ_HWO(n_cpu_attn), true},
    {"cpu_flops", ZZ_F_NUM, ZZ_HWO(cpu_flops), 0, true},
    {"gemm_q4_flops", ZZ_F_POINTS, ZZ_HWO(gemm_q4), ZZ_HWO(n_gemm_q4), false},
    {"bmm_prefill_q4_flops", ZZ_F_NUM, ZZ_HWO(bmm_prefill_q4_flops), 0, false},
    {"bmm_decode_q4_flops", ZZ_F_NUM, ZZ_HWO(bmm_decode_q4_flops), 0, false},
    {"cpu_attention_q4_flops", ZZ_F_POINTS, ZZ_HWO(cpu_attn_q4), ZZ_HWO(n_cpu_attn_q4), false},
    {"quant_bytes_per_s", ZZ_F_NUM, ZZ_HWO(quant_bw), 0, false},
    {"gemm_bf16_flops", ZZ_F_POINTS, ZZ_HWO(gemm_bf16), ZZ_HWO(n_gemm_bf16), false},
    {"gemm_q4_int8_flops", ZZ_F_POINTS, ZZ_HWO(gemm_q4_int8), ZZ_HWO(n_gemm_q4_int8), false},
    {"machines", ZZ_F_INT, ZZ_HWO(machines), 0, false},
    {"net_bytes_per_s", ZZ_F_NUM, ZZ_HWO(net_bw), 0, false},
    {"net_latency_s", ZZ_F_NUM, ZZ_HWO(net_latency), 0, false},
};
#define ZZ_NFIELDS (sizeof zz_fields / sizeof zz_fields[0])

static zz_status zz_field_read(const zz_field *f, json_t *v, const char *where, zz_hw *hw) {
  char *base = (char *)hw + f->off;
  switch (f->kind) {
    case ZZ_F_STR: {
      const char *s = json_string_value(v);
      if (!s || strlen(s) >= f->cap)
        return zz_error(ZZ_ERR_FORMAT, "%s: %s: want a string of fewer than %zu bytes", where, f->key, f->cap);
      memcpy(base, s, strlen(s) + 1);
      return ZZ_OK;
    }
    case ZZ_F_NUM:
    case ZZ_F_BYTES:
    case ZZ_F_INT: {
      if (!json_is_number(v)) return zz_error(ZZ_ERR_FORMAT, "%s: %s: want a number", where, f->key);
      double d = json_number_value(v);
      if (!isfinite(d) || d < 0)
        return zz_error(ZZ_ERR_FORMAT, "%s: %s = %g: want a finite number >= 0", where, f->key, d);
      if (f->kind == ZZ_F_NUM) *(double *)base = d;
      else if (f->kind == ZZ_F_BYTES) {
        if (d > ZZ_HW_MEM_HI) /* before the conversion to size_t; the range is zz_hw_check's */
          return zz_error(ZZ_ERR_FORMAT, "%s: %s = %g: want a number from 0 to %g bytes (beyond any machine; a typo?)",
                          where, f->key, d, ZZ_HW_MEM_HI);
        *(size_t *)base = (size_t)d;
      } else {
        if (d != floor(d) || d > ZZ_HW_THREADS_HI) /* before the conversion to int */
          return zz_error(ZZ_ERR_FORMAT, "%s: %s = %g: want a whole number from 1 to %d", where, f->key, d,
                          ZZ_HW_THREADS_HI);
        *(int *)base = (int)d;
      }
      return ZZ_OK;
    }
    case ZZ_F_POINTS: {
      zz_hw_point *p = (zz_hw_point *)base;
      int *n = (int *)((char *)hw + f->cap);
      if (!json_is_array(v) || json_array_size(v) > ZZ_HW_MAX_POINTS)
        return zz_error(ZZ_ERR_FORMAT, "%s: %s: want an array of at most %d [x, rate] pairs", where, f->key,
                        ZZ_HW_MAX_POINTS);
      *n = (int)json_array_size(v);
      for (int i = 0; i < *n; i++) {
        json_t *e = json_array_get(v, (size_t)i);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_number(json_array_get(e, 0)) ||
            !json_is_number(json_array_get(e, 1)))
          return zz_error(ZZ_ERR_FORMAT, "%s: %s[%d]: want a pair of numbers [x, rate]", where, f->key, i);
        p[i].x = json_number_value(json_array_get(e, 0));
        p[i].y = json_number_value(json_array_get(e, 1));
      }
      return ZZ_OK;
    }
  }
  return ZZ_OK;
}

zz_status zz_hw_load(const char *path, zz_hw *out) {
  json_error_t err;
  json_t *root = json_load_file(path, 0, &err);
  if (!root) return zz_error(ZZ_ERR_FORMAT, "hardware file %s: line %d: %s", path, err.line, err.text);
  zz_hw hw;
  memset(&hw, 0, sizeof hw);
  hw.machines = 1;
  zz_status st = ZZ_OK;
  if (!json_is_object(root)) st = zz_error(ZZ_ERR_FORMAT, "hardware file %s: want one JSON object", path);
  const char *key;
  json_t *v;
  if (st == ZZ_OK) json_object_foreach(root, key, v) {
      if (strcmp(key, "notes") == 0) continue; /* where the numbers come from: for people */
      size_t i = 0;
      while (i < ZZ_NFIELDS && strcmp(zz_fields[i].key, key) != 0) i++;
      if (i == ZZ_NFIELDS) {
        st = zz_error(ZZ_ERR_FORMAT, "hardware file %s: unknown field \"%s\" (see docs/planner.md)", path, key);
        break;
      }
      if ((st = zz_field_read(&zz_fields[i], v, path, &hw)) != ZZ_OK) break;
    }
  for (size_t i = 0; st == ZZ_OK && i < ZZ_NFIELDS; i++)
    if (zz_fields[i].required && !json_object_get(root, zz_fields[i].key))
      st = zz_error(ZZ_ERR_FORMAT, "hardware file %s: the field \"%s\" is missing (see docs/planner.md)", path,
                    zz_fields[i].key);
  json_decref(root);
  if (st == ZZ_OK) st = zz_hw_check(&hw, path);
  if (st == ZZ_OK) *out = hw;
  return st;
}

/* ---------------------------------------------------------------- save */

zz_status zz_hw_save(const zz_hw *hw, const char *path) {
  ZZ_CHECK(zz_hw_check(hw, "hardware to save"));
  json_t *root = json_object();
  zz_status st = ZZ_OK;
  for (size_t i = 0; root && i < ZZ_NFIELDS; i++) {
    const zz_field *f = &zz_fields[i];
    const char *base = (const char *)hw + f->off;
    json_t *v = NULL;
    switch (f->kind) {
      case ZZ_F_STR: v = json_string(base); break;
      case ZZ_F_NUM: v = json_real(*(const double *)base); break;
      case ZZ_F_BYTES: v = json_integer((json_int_t) * (const size_t *)base); break;
      case ZZ_F_INT: v = json_integer(*(const int *)base); break;
      case ZZ_F_POINTS: {
        const zz_hw_point *p = (const zz_hw_point *)base;
        int n = *(const int *)((const char *)hw + f->cap);
        v = json_array();
        for (int k = 0; v && k < n; k++) json_array_append_new(v, json_pack("[f, f]", p[k].x, p[k].y));
        break;
      }
    }
    /* an optional rate this machine lacks (4-bit ops on a device without them) is left out */
    bool absent = !f->required && v &&
                  ((json_is_array(v) && json_array_size(v) == 0) || (json_is_number(v) && json_number_value(v) == 0));
    if (absent) json_decref(v);
    else if (!v || json_object_set_new(root, f->key, v) != 0)
      st = zz_error(ZZ_ERR_NO_MEMORY, "hardware file: out of memory");
  }
  if (!root) st = zz_error(ZZ_ERR_NO_MEMORY, "hardware file: out of memory");
  if (st == ZZ_OK) {
    if (strcmp(path, "-") == 0) {
      if (json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) != 0)
        st = zz_error(ZZ_ERR_IO, "hardware file: cannot write it to stdout");
      else
        printf("\n");
    } else { /* a new file renamed into place: an old file stays whole until then, a link is replaced, not followed */
      char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
      st = text ? zz_file_replace(path, text, strlen(text))
                : zz_error(ZZ_ERR_NO_MEMORY, "hardware file: out of memory");
      if (st != ZZ_OK) st = zz_error(st, "hardware file %s: cannot write it: %s", path, zz_error_message());
      free(text);
    }
  }
  json_decref(root);
  return st;
}
