/* cpu_impl.h — helpers the CPU kernels share (internal to kernels/cpu). */
#ifndef ZZ_CPU_IMPL_H
#define ZZ_CPU_IMPL_H
#include <stdint.h>

/* Eight independent partial sums: the compiler may vectorise them without
 * reassociating one long float chain (which it must not do on its own). */
static inline float zz_dot(const float *a, const float *b, int64_t n) {
  float acc[8] = {0};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8)
    for (int u = 0; u < 8; u++) acc[u] += a[d + u] * b[d + u];
  float s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; d < n; d++) s += a[d] * b[d];
  return s;
}

/* The epilogue of a linear on columns [c0, c0 + cols) of y [n, ld]: + b[c0 + o]
 * when b, then ReLU when relu. */
static inline void zz_bias_relu_cols(float *y, int64_t n, int64_t ld, int64_t c0, int64_t cols, const float *b,
                                     int relu) {
  for (int64_t i = 0; i < n; i++) {
    float *yi = y + i * ld + c0;
    if (b)
      for (int64_t o = 0; o < cols; o++) yi[o] += b[c0 + o];
    if (relu)
      for (int64_t o = 0; o < cols; o++) yi[o] = yi[o] > 0 ? yi[o] : 0;
  }
}

#endif
