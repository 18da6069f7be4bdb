/*
 * zz_dtype.h — element types of the kernels (f32, f16, bf16, Q4) and the
 * group-wise quantization format (kernels/cpu/dtype.c, kernels/cpu/quant.c).
 */
#ifndef ZZ_DTYPE_H
#define ZZ_DTYPE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- dtypes */

typedef enum zz_dtype {
  ZZ_DTYPE_F32 = 0,
  ZZ_DTYPE_F16,
  ZZ_DTYPE_BF16,
  ZZ_DTYPE_Q4, /* 4-bit, group-packed; size via zz_dtype_nbytes */
  ZZ_DTYPE_COUNT
} zz_dtype;

/* "f32", "f16", "bf16", "q4". */
const char *zz_dtype_name(zz_dtype dt);
/* Bytes taken by n elements of dt (q4: packed nibbles plus per-group scales). */
size_t zz_dtype_nbytes(zz_dtype dt, int64_t n);

float zz_f16_to_f32(uint16_t h);
uint16_t zz_f32_to_f16(float f); /* round to nearest even, overflow to inf */
float zz_bf16_to_f32(uint16_t h);
uint16_t zz_f32_to_bf16(float f); /* round to nearest even */
/* The bits of zz_f32_to_bf16 (the high 16 bits of the result) from f's bits,
 * inline for the kernels that round in their loops. */
static inline uint32_t zz_bf16_round_bits(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return u | 0x400000u; /* quiet nan */
  return u + 0x7fff + ((u >> 16) & 1);
}

/* dst[0..n) = src[0..n) converted; src_dt/dst_dt among f32, f16, bf16. */
void zz_convert(zz_dtype src_dt, const void *src, zz_dtype dst_dt, void *dst, int64_t n);

/* ---------------------------------------------------------------- group-wise quantization */
/*
 * FlexGen's compression (§5): asymmetric min/max quantization in groups of
 * `group` contiguous elements. A tensor is a sequence of rows (a weight's output
 * rows, grouped along its input dimension; a cache row's heads, grouped along the
 * head dimension); each row of len elements is cut into ceil(len / group) groups,
 * the last one possibly shorter. A group of m elements is stored as
 *   bytes 0-1  minimum (IEEE half, little endian), rounded down
 *   bytes 2-3  step    (IEEE half), rounded up: (max - min) / (2^bits - 1)
 *   bytes 4-   m values of `bits` bits, element e of the group in byte e*bits/8
 *              at bit (e*bits) % 8 (low bits first), padded to an even byte count
 * and decodes as min + q * step; rows and groups follow each other with no gap.
 * ZZ_DTYPE_Q4 is this layout; its descriptor (bits, group) travels beside it.
 * docs/compression.md draws it byte by byte.
 */
typedef struct zz_qfmt {
  int bits;  /* 2, 4 or 8 */
  int group; /* elements per group, even, in [ZZ_QGROUP_MIN, ZZ_QGROUP_MAX] */
} zz_qfmt;
#define ZZ_QGROUP_MIN 32
#define ZZ_QGROUP_MAX 256
/* FlexGen's choice: 4 bits, groups of 64. */
#define ZZ_QFMT_DEFAULT ((zz_qfmt){.bits = 4, .group = 64})
/* 1 when f is a format this module stores. */
int zz_qfmt_valid(zz_qfmt f);
/* Bytes of a group of m elements of `bits` bits as laid out above: the 4-byte
 * header, then the values padded to an even byte count (host and CUDA code). */
#ifdef __CUDACC__
#define ZZ_Q_HD __host__ __device__
#else
#define ZZ_Q_HD
#endif
ZZ_Q_HD static inline int64_t zz_q_group_nbytes(int bits, int64_t m) { return 4 + ((m * bits + 7) / 8 + 1) / 2 * 2; }
/* Bytes of one row of len elements (groups with their headers). */
size_t zz_q_row_bytes(zz_qfmt f, int64_t len);
/* Bytes of a cache row: heads rows of hd elements each in dt (Q4: format f). */
size_t zz_kv_row_bytes(zz_dtype dt, zz_qfmt f, int64_t heads, int64_t hd);
/* dst (rows × zz_q_row_bytes(f, len) bytes) = the rows of x [rows, len]. */
void zz_q_quantize(zz_qfmt f, const float *x, int64_t rows, int64_t len, void *dst);
/* y [rows, len] = the rows stored at src. */
void zz_q_dequantize(zz_qfmt f, const void *src, int64_t rows, int64_t len, float *y);
/* Element e of a row stored at row, as zz_q_dequantize widens it. */
float zz_q_at(zz_qfmt f, const void *row, int64_t e);
/* The half-step error bound of element e of a row (what the round trip keeps
 * every element within): step / 2 of e's group. */
float zz_q_half_step(zz_qfmt f, const void *row, int64_t len, int64_t e);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_DTYPE_H */
