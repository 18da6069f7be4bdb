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

#include "zz_planner.h"

/* ---------------------------------------------------------------- rates */

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
    int t = (int)hw->cpu_attn[i].x;
    if (t > max_threads) continue;
    if (hw->cpu_attn[i].y > rate) rate = hw->cpu_attn[i].y, best = t;
  }
  return best;
}

zz_threads zz_hw_threads(const zz_hw *hw) {
  int cores = hw->cpu_cores > 0 ? hw->cpu_cores : 1, io = ZZ_LANE_COUNT - 1;
  bool cpu = strcmp(hw->device, "cpu") == 0;
  int attn_max = cpu ? cores : cores - io;
  return (zz_threads){.gemm = cpu ? cores : 0, .attn = zz_hw_attn_threads(hw, attn_max < 1 ? 1 : attn_max), .io = io};
}

bool zz_hw_has_q4(const zz_hw *hw) {
  return hw->n_gemm_q4 > 0 && hw->n_cpu_attn_q4 > 0 && hw->bmm_prefill_q4_flops > 0 && hw->bmm_decode_q4_flops > 0 &&
         hw->quant_bw > 0;
}

zz_dtype zz_hw_compute_dtype(const zz_hw *hw) {
  return strcmp(hw->device, "cpu") == 0 ? ZZ_DTYPE_F32 : ZZ_DTYPE_F16;
}

/* ---------------------------------------------------------------- checks */

static bool zz_pos(double v) { return isfinite(v) && v > 0; }

static zz_status zz_hw_points_check(const zz_hw_point *p, int n, const char *where, const char *field) {
  if (n < 1) return zz_error(ZZ_ERR_FORMAT, "%s: %s: want at least one [x, rate] point", where, field);
  for (int i = 0; i < n; i++) {
    if (!zz_pos(p[i].x) || !zz_pos(p[i].y))
      return zz_error(ZZ_ERR_FORMAT, "%s: %s[%d] = [%g, %g]: both numbers must be finite and > 0", where, field, i,
                      p[i].x, p[i].y);
    if (i && p[i].x <= p[i - 1].x)
      return zz_error(ZZ_ERR_FORMAT, "%s: %s[%d]: points must be sorted by their first number, strictly increasing",
                      where, field, i);
  }
  return ZZ_OK;
}

zz_status zz_hw_check(const zz_hw *hw, const char *where) {
  if (strcmp(hw->device, "cuda") != 0 && strcmp(hw->device, "cpu") != 0)
    return zz_error(ZZ_ERR_FORMAT, "%s: device \"%s\": want \"cuda\" or \"cpu\"", where, hw->device);
  const struct {
    const char *name;
    double v;
  } pos[] = {
      {"gpu_mem_bytes", (double)hw->gpu_mem},           {"cpu_mem_bytes", (double)hw->cpu_mem},
      {"ctog_bytes_per_s", hw->ctog_bw},                {"gtoc_bytes_per_s", hw->gtoc_bw},
      {"disk_read_bytes_per_s", hw->disk_read_bw},      {"disk_write_bytes_per_s", hw->disk_write_bw},
      {"bmm_prefill_flops", hw->bmm_prefill_flops},     {"bmm_decode_flops", hw->bmm_decode_flops},
      {"cpu_flops", hw->cpu_flops},                     {"cpu_cores", (double)hw->cpu_cores},
      {"machines", (double)hw->machines},
  };
  for (size_t i = 0; i < sizeof pos / sizeof pos[0]; i++)
    if (!zz_pos(pos[i].v)) return zz_error(ZZ_ERR_FORMAT, "%s: %s = %g: want a finite number > 0", where, pos[i].name, pos[i].v);
  if (!(isfinite(hw->net_bw) && hw->net_bw >= 0) || !(isfinite(hw->net_latency) && hw->net_latency >= 0))
    return zz_error(ZZ_ERR_FORMAT, "%s: net_bytes_per_s and net_latency_s must be finite and >= 0", where);
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
    ZZ_CHECK(zz_hw_points_check(hw->gemm_q4, hw->n_gemm_q4, where, "gemm_q4_flops"));
    ZZ_CHECK(zz_hw_points_check(hw->cpu_attn_q4, hw->n_cpu_attn_q4, where, "cpu_attention_q4_flops"));
  }
  if (hw->n_gemm_bf16 > 0) { /* one field: all or none by itself */
    if (strcmp(hw->device, "cpu") != 0)
      return zz_error(ZZ_ERR_FORMAT, "%s: gemm_bf16_flops: bf16 weights are an option of the cpu device, and this "
                      "file's device is \"%s\"", where, hw->device);
    ZZ_CHECK(zz_hw_points_check(hw->gemm_bf16, hw->n_gemm_bf16, where, "gemm_bf16_flops"));
  }
  if (hw->machines > 1 && hw->net_bw <= 0)
    return zz_error(ZZ_ERR_FORMAT, "%s: %d machines need net_bytes_per_s > 0", where, hw->machines);
  ZZ_CHECK(zz_hw_points_check(hw->gemm, hw->n_gemm, where, "gemm_flops"));
  ZZ_CHECK(zz_hw_points_check(hw->cpu_attn, hw->n_cpu_attn, where, "cpu_attention_flops"));
  return ZZ_OK;
}

/* ---------------------------------------------------------------- load */

typedef enum { ZZ_F_NUM, ZZ_F_BYTES, ZZ_F_INT, ZZ_F_STR, ZZ_F_POINTS } zz_field_kind;

typedef struct zz_field {
  const char *key;
  zz_field_kind kind;
  size_t off;      /* into zz_hw */
  size_t cap;      /* strings: buffer size; points: offset of the count */
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
      if (!s || strlen(s) >= f->cap) return zz_error(ZZ_ERR_FORMAT, "%s: %s: want a string of fewer than %zu bytes", where, f->key, f->cap);
      memcpy(base, s, strlen(s) + 1);
      return ZZ_OK;
    }
    case ZZ_F_NUM:
    case ZZ_F_BYTES:
    case ZZ_F_INT: {
      if (!json_is_number(v)) return zz_error(ZZ_ERR_FORMAT, "%s: %s: want a number", where, f->key);
      double d = json_number_value(v);
      if (!isfinite(d) || d < 0) return zz_error(ZZ_ERR_FORMAT, "%s: %s = %g: want a finite number >= 0", where, f->key, d);
      if (f->kind == ZZ_F_NUM) *(double *)base = d;
      else if (f->kind == ZZ_F_BYTES) {
        if (d > 0x1p62) return zz_error(ZZ_ERR_FORMAT, "%s: %s = %g bytes is beyond any machine", where, f->key, d);
        *(size_t *)base = (size_t)d;
      } else {
        if (d != floor(d) || d > 1 << 20) return zz_error(ZZ_ERR_FORMAT, "%s: %s = %g: want a whole number", where, f->key, d);
        *(int *)base = (int)d;
      }
      return ZZ_OK;
    }
    case ZZ_F_POINTS: {
      zz_hw_point *p = (zz_hw_point *)base;
      int *n = (int *)((char *)hw + f->cap);
      if (!json_is_array(v) || json_array_size(v) > ZZ_HW_MAX_POINTS)
        return zz_error(ZZ_ERR_FORMAT, "%s: %s: want an array of at most %d [x, rate] pairs", where, f->key, ZZ_HW_MAX_POINTS);
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
    bool absent = !f->required && v && ((json_is_array(v) && json_array_size(v) == 0) ||
                                        (json_is_number(v) && json_number_value(v) == 0));
    if (absent) json_decref(v);
    else if (!v || json_object_set_new(root, f->key, v) != 0)
      st = zz_error(ZZ_ERR_NO_MEMORY, "hardware file: out of memory");
  }
  if (!root) st = zz_error(ZZ_ERR_NO_MEMORY, "hardware file: out of memory");
  if (st == ZZ_OK) {
    if (strcmp(path, "-") == 0) {
      if (json_dumpf(root, stdout, JSON_INDENT(2) | JSON_REAL_PRECISION(6)) != 0)
        st = zz_error(ZZ_ERR_IO, "hardware file: cannot write it to stdout");
      else printf("\n");
    } else { /* a new file renamed into place: an old file stays whole until then, a link is replaced, not followed */
      char *text = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
      st = text ? zz_file_replace(path, text, strlen(text)) : zz_error(ZZ_ERR_NO_MEMORY, "hardware file: out of memory");
      if (st != ZZ_OK) st = zz_error(st, "hardware file %s: cannot write it: %s", path, zz_error_message());
      free(text);
    }
  }
  json_decref(root);
  return st;
}
