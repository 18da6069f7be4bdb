/*
 * quant.c — group-wise min/max quantization (FlexGen §5): the format's sizes, the
 * quantizer and dequantizer, and the CPU kernels that read quantized tensors
 * (dequantize-and-multiply linear over panels of output rows, embedding rows,
 * cache appends). The layout is drawn in zz_kernels.h and docs/compression.md.
 */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_impl.h"
#include "zz_kernels.h"

/* ---------------------------------------------------------------- sizes */

int zz_qfmt_valid(zz_qfmt f) {
  return (f.bits == 2 || f.bits == 4 || f.bits == 8) && f.group >= ZZ_QGROUP_MIN && f.group <= ZZ_QGROUP_MAX &&
         f.group % 2 == 0;
}

/* Header (min, step) then the packed values, padded to an even byte count. */
static size_t zz_q_group_bytes(zz_qfmt f, int64_t m) {
  size_t data = (size_t)((m * f.bits + 7) / 8);
  return 4 + (data + 1) / 2 * 2;
}

size_t zz_q_row_bytes(zz_qfmt f, int64_t len) {
  int64_t full = len / f.group, rest = len % f.group;
  return (size_t)full * zz_q_group_bytes(f, f.group) + (rest ? zz_q_group_bytes(f, rest) : 0);
}

size_t zz_kv_row_bytes(zz_dtype dt, zz_qfmt f, int64_t heads, int64_t hd) {
  if (dt == ZZ_DTYPE_Q4) return (size_t)heads * zz_q_row_bytes(f, hd);
  return zz_dtype_nbytes(dt, heads * hd);
}

/* ---------------------------------------------------------------- one group */

/* The largest half <= x and the smallest half >= x (finite x within half range). */
static uint16_t zz_f16_down(float x) {
  uint16_t h = zz_f32_to_f16(x);
  if (zz_f16_to_f32(h) <= x) return h;
  if (h == 0) return 0x8001;                   /* +0 → the smallest negative subnormal */
  return (h & 0x8000) ? (uint16_t)(h + 1) : (uint16_t)(h - 1);
}

static uint16_t zz_f16_up(float x) {
  uint16_t h = zz_f32_to_f16(x);
  if (zz_f16_to_f32(h) >= x) return h;
  if (h == 0x8000) return 0x0001;
  return (h & 0x8000) ? (uint16_t)(h - 1) : (uint16_t)(h + 1);
}

static void zz_q_put_group(zz_qfmt f, const float *x, int64_t m, unsigned char *g) {
  float mn = x[0], mx = x[0];
  for (int64_t e = 1; e < m; e++) {
    if (x[e] < mn) mn = x[e];
    if (x[e] > mx) mx = x[e];
  }
  const int levels = (1 << f.bits) - 1;
  uint16_t hmin = zz_f16_down(mn);
  float lo = zz_f16_to_f32(hmin);
  /* the step is rounded up so that lo + levels * step still reaches the maximum */
  uint16_t hstep = mx > lo ? zz_f16_up((mx - lo) / (float)levels) : 0;
  float step = zz_f16_to_f32(hstep), inv = step > 0 ? 1.0f / step : 0;
  memcpy(g, &hmin, 2);
  memcpy(g + 2, &hstep, 2);
  unsigned char *d = g + 4;
  memset(d, 0, zz_q_group_bytes(f, m) - 4);
  for (int64_t e = 0; e < m; e++) {
    long q = lrintf((x[e] - lo) * inv);
    if (q < 0) q = 0;
    if (q > levels) q = levels;
    int64_t bit = e * f.bits;
    d[bit / 8] |= (unsigned char)(q << (bit % 8));
  }
}

static void zz_q_get_group(zz_qfmt f, const unsigned char *g, int64_t m, float *y) {
  uint16_t hmin, hstep;
  memcpy(&hmin, g, 2);
  memcpy(&hstep, g + 2, 2);
  const float *tab = zz_f16_table();
  float lo = tab[hmin], step = tab[hstep];
  const unsigned char *d = g + 4;
  if (f.bits == 4) {
    int64_t e = 0;
    for (; e + 2 <= m; e += 2) {
      unsigned char b = d[e / 2];
      y[e] = lo + (float)(b & 15) * step;
      y[e + 1] = lo + (float)(b >> 4) * step;
    }
    if (e < m) y[e] = lo + (float)(d[e / 2] & 15) * step;
    return;
  }
  const unsigned mask = (1u << f.bits) - 1;
  for (int64_t e = 0; e < m; e++) {
    int64_t bit = e * f.bits;
    y[e] = lo + (float)((d[bit / 8] >> (bit % 8)) & mask) * step;
  }
}

/* ---------------------------------------------------------------- rows */

void zz_q_quantize(zz_qfmt f, const float *x, int64_t rows, int64_t len, void *dst) {
  unsigned char *p = dst;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t at = 0; at < len; at += f.group) {
      int64_t m = len - at < f.group ? len - at : f.group;
      zz_q_put_group(f, x + r * len + at, m, p);
      p += zz_q_group_bytes(f, m);
    }
}

void zz_q_dequantize(zz_qfmt f, const void *src, int64_t rows, int64_t len, float *y) {
  const unsigned char *p = src;
  for (int64_t r = 0; r < rows; r++)
    for (int64_t at = 0; at < len; at += f.group) {
      int64_t m = len - at < f.group ? len - at : f.group;
      zz_q_get_group(f, p, m, y + r * len + at);
      p += zz_q_group_bytes(f, m);
    }
}

float zz_q_half_step(zz_qfmt f, const void *row, int64_t len, int64_t e) {
  (void)len;
  const unsigned char *g = (const unsigned char *)row + (size_t)(e / f.group) * zz_q_group_bytes(f, f.group);
  uint16_t hstep;
  memcpy(&hstep, g + 2, 2);
  return zz_f16_to_f32(hstep) / 2;
}

/* ---------------------------------------------------------------- kernels */

/* Output rows per panel: a panel of a 4096-wide matrix is 256 KiB of f32, about
 * what one core's L2 keeps while the GEMM reads it. */
#define ZZ_Q_PANEL 16

/* Each thread widens its panels into its own buffer, grown once to the largest
 * panel it has seen (the hot loop allocates only on growth) and freed when the
 * thread ends (a pool's workers when the pool is destroyed). */
typedef struct zz_q_buf {
  float *p;
  size_t cap;
} zz_q_buf;

static pthread_key_t zz_q_key;
static pthread_once_t zz_q_once = PTHREAD_ONCE_INIT;

static void zz_q_buf_free(void *arg) {
  zz_q_buf *b = arg;
  free(b->p);
  free(b);
}

static void zz_q_key_init(void) { pthread_key_create(&zz_q_key, zz_q_buf_free); }

static float *zz_q_panel(size_t floats) {
  pthread_once(&zz_q_once, zz_q_key_init);
  zz_q_buf *b = pthread_getspecific(zz_q_key);
  if (!b) {
    if (!(b = calloc(1, sizeof *b))) return NULL;
    if (pthread_setspecific(zz_q_key, b) != 0) {
      free(b);
      return NULL;
    }
  }
  if (floats > b->cap) {
    float *p = realloc(b->p, floats * sizeof *p);
    if (!p) return NULL;
    b->p = p;
    b->cap = floats;
  }
  return b->p;
}

/* Rows of x up to which the linear uses its own dot products instead of a GEMM. */
#define ZZ_Q_SMALL_N 16

typedef struct zz_qlin_job {
  const float *x, *b;
  const unsigned char *w;
  zz_qfmt f;
  int64_t n, in, out, panel;
  size_t row_bytes;
  float *y;
  int relu;
} zz_qlin_job;

static void zz_qlin_panel(void *arg, int64_t p) {
  const zz_qlin_job *j = arg;
  int64_t o0 = p * j->panel, rows = j->out - o0 < j->panel ? j->out - o0 : j->panel;
  float *wp = zz_q_panel((size_t)(j->panel * j->in));
  if (!wp) {
    /* a kernel has no error path: a panel is at most 64 rows, so this is the machine out of memory */
    fprintf(stderr, "zz_cpu_linear_q: out of memory for a %lld-float panel\n", (long long)(j->panel * j->in));
    abort();
  }
  zz_q_dequantize(j->f, j->w + (size_t)o0 * j->row_bytes, rows, j->in, wp);
  if (j->n <= ZZ_Q_SMALL_N) {
    /* decoding: a few rows of x, dot products on this thread (a small sgemm would
     * pay OpenBLAS's call and threading overhead per panel) */
    for (int64_t i = 0; i < j->n; i++)
      for (int64_t o = 0; o < rows; o++) j->y[i * j->out + o0 + o] = zz_dot(j->x + i * j->in, wp + o * j->in, j->in);
  } else {
    /* y[:, o0 .. o0+rows) = x · panelᵀ */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)j->n, (blasint)rows, (blasint)j->in, 1.0f, j->x,
                (blasint)j->in, wp, (blasint)j->in, 0.0f, j->y + o0, (blasint)j->out);
  }
  zz_bias_relu_cols(j->y, j->n, j->out, o0, rows, j->b, j->relu);
}

void zz_cpu_linear_q(zz_pool *pool, const float *x, int64_t n, int64_t in, const void *w, zz_qfmt f,
                     const float *b, int64_t out, float *y, int relu) {
  /* decoding: panels of 16 rows over the pool's threads, dot products; prefill:
   * panels of 64 rows over the pool's threads too, each a GEMM, single-threaded
   * on the CPU device (zz_cpu_blas_single); a threaded OpenBLAS serialises them */
  bool small = n <= ZZ_Q_SMALL_N;
  int64_t panel = small ? ZZ_Q_PANEL : 4 * ZZ_Q_PANEL;
  zz_qlin_job job = {x, b, w, f, n, in, out, panel, zz_q_row_bytes(f, in), y, relu};
  zz_pool_run(pool, zz_qlin_panel, &job, (out + panel - 1) / panel);
}

void zz_cpu_embed_rows_q(const void *table, zz_qfmt f, int64_t dim, const int32_t *ids, int64_t n, float *out,
                         int add) {
  size_t rb = zz_q_row_bytes(f, dim);
  float row[ZZ_QGROUP_MAX];
  for (int64_t i = 0; i < n; i++) {
    const unsigned char *src = (const unsigned char *)table + (size_t)ids[i] * rb;
    float *o = out + i * dim;
    for (int64_t at = 0; at < dim; at += f.group) {
      int64_t m = dim - at < f.group ? dim - at : f.group;
      zz_q_get_group(f, src, m, add ? row : o + at);
      if (add)
        for (int64_t e = 0; e < m; e++) o[at + e] += row[e];
      src += zz_q_group_bytes(f, m);
    }
  }
}

void zz_cpu_kv_append_q(const float *x, int64_t b, int64_t sq, int64_t heads, int64_t hd, void *cache, zz_qfmt f,
                        int64_t seq_bytes, int64_t pos) {
  size_t row = zz_kv_row_bytes(ZZ_DTYPE_Q4, f, heads, hd);
  for (int64_t i = 0; i < b; i++)
    zz_q_quantize(f, x + i * sq * heads * hd, sq * heads, hd,
                  (char *)cache + (size_t)(i * seq_bytes) + (size_t)pos * row);
}
