/*
 * checkpoint.c — Hugging Face safetensors checkpoints, one file or sharded
 * (model.safetensors.index.json), and deterministic dummy weights.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of JSON
 * {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then
 * the data; offsets count from the end of the header. Every header is checked
 * against its file's size before any data is read, so a truncated or lying file
 * is refused with the tensor and the offsets named.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "zz_policy.h" /* sizes */
#include "zz_weights.h"

#define ZZ_ST_MAX_HEADER (256u << 20) /* larger headers are lies, not checkpoints */

typedef struct zz_ck_entry {
  char name[ZZ_NAME_LEN];
  zz_dtype dtype; /* ZZ_DTYPE_COUNT: a dtype we cannot convert (named in st_dtype) */
  char st_dtype[8];
  int ndim;
  int64_t shape[ZZ_MAX_DIMS];
  int file;
  int64_t offset; /* absolute byte offset in the file */
  int64_t nbytes;
} zz_ck_entry;

typedef struct zz_ck_file {
  char path[4096];
  int fd;
} zz_ck_file;

struct zz_checkpoint {
  zz_ck_file *files;
  int n_files;
  zz_ck_entry *entries; /* sorted by name */
  int64_t n_entries;
};

static int zz_entry_cmp(const void *a, const void *b) {
  return strcmp(((const zz_ck_entry *)a)->name, ((const zz_ck_entry *)b)->name);
}

static zz_status zz_st_dtype(const char *s, zz_dtype *dt, int64_t *esize) {
  static const struct {
    const char *name;
    zz_dtype dt;
    int64_t size;
  } known[] = {{"F32", ZZ_DTYPE_F32, 4},   {"F16", ZZ_DTYPE_F16, 2},   {"BF16", ZZ_DTYPE_BF16, 2},
               {"F64", ZZ_DTYPE_COUNT, 8}, {"I64", ZZ_DTYPE_COUNT, 8}, {"I32", ZZ_DTYPE_COUNT, 4},
               {"I16", ZZ_DTYPE_COUNT, 2}, {"I8", ZZ_DTYPE_COUNT, 1},  {"U8", ZZ_DTYPE_COUNT, 1},
               {"BOOL", ZZ_DTYPE_COUNT, 1}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
    if (strcmp(s, known[i].name) == 0) {
      *dt = known[i].dt;
      *esize = known[i].size;
      return ZZ_OK;
    }
  return ZZ_ERR_FORMAT;
}

/* Parses one file's header and appends its entries. */
static zz_status zz_ck_add_file(zz_checkpoint *ck, const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return zz_error(ZZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  zz_ck_file *nf = realloc(ck->files, (size_t)(ck->n_files + 1) * sizeof *nf);
  if (!nf) {
    close(fd);
    return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory", path);
  }
  ck->files = nf;
  int fi = ck->n_files++;
  snprintf(ck->files[fi].path, sizeof ck->files[fi].path, "%s", path);
  ck->files[fi].fd = fd;

  struct stat sb;
  if (fstat(fd, &sb) != 0) return zz_error(ZZ_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
  if (!S_ISREG(sb.st_mode)) return zz_error(ZZ_ERR_IO, "%s: not a regular file", path);
  int64_t fsize = sb.st_size;
  unsigned char lenbuf[8];
  if (fsize < 8 || pread(fd, lenbuf, 8, 0) != 8)
    return zz_error(ZZ_ERR_FORMAT, "%s: truncated: %lld bytes, not even a header length", path, (long long)fsize);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | lenbuf[i];
  if (hlen > ZZ_ST_MAX_HEADER || hlen > (uint64_t)(fsize - 8))
    return zz_error(ZZ_ERR_FORMAT, "%s: header length %llu does not fit in a file of %lld bytes", path,
                    (unsigned long long)hlen, (long long)fsize);
  char *hdr = malloc(hlen + 1);
  if (!hdr) return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory for the header", path);
  if (pread(fd, hdr, hlen, 8) != (ssize_t)hlen) {
    free(hdr);
    return zz_error(ZZ_ERR_IO, "%s: cannot read the %llu-byte header", path, (unsigned long long)hlen);
  }
  hdr[hlen] = '\0';
  json_error_t jerr;
  json_t *root = json_loadb(hdr, hlen, JSON_REJECT_DUPLICATES, &jerr);
  free(hdr);
  if (!root) return zz_error(ZZ_ERR_FORMAT, "%s: header is not JSON: %s (at byte %d)", path, jerr.text, jerr.position);
  zz_status st = ZZ_OK;
  if (!json_is_object(root)) {
    st = zz_error(ZZ_ERR_FORMAT, "%s: header is not a JSON object", path);
    goto done;
  }
  int64_t data_start = 8 + (int64_t)hlen, data_size = fsize - data_start;
  size_t count = json_object_size(root);
  zz_ck_entry *ne = realloc(ck->entries, (size_t)(ck->n_entries + (int64_t)count) * sizeof *ne);
  if (!ne && count) {
    st = zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory", path);
    goto done;
  }
  if (ne) ck->entries = ne;
  const char *key;
  json_t *val;
  json_object_foreach(root, key, val) {
    if (strcmp(key, "__metadata__") == 0) continue;
    zz_ck_entry e = {.file = fi};
    if (strlen(key) >= sizeof e.name) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: tensor name too long: %.60s...", path, key);
      goto done;
    }
    strcpy(e.name, key);
    json_t *jdt = json_object_get(val, "dtype"), *jshape = json_object_get(val, "shape"),
           *joff = json_object_get(val, "data_offsets");
    if (!json_is_object(val) || !json_is_string(jdt) || !json_is_array(jshape) || !json_is_array(joff) ||
        json_array_size(joff) != 2) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: tensor %s: entry needs dtype, shape and data_offsets [begin, end]", path, key);
      goto done;
    }
    int64_t esize;
    snprintf(e.st_dtype, sizeof e.st_dtype, "%s", json_string_value(jdt));
    if (zz_st_dtype(json_string_value(jdt), &e.dtype, &esize) != ZZ_OK) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: tensor %s: unknown dtype \"%s\"", path, key, json_string_value(jdt));
      goto done;
    }
    size_t nd = json_array_size(jshape);
    if (nd > ZZ_MAX_DIMS) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: tensor %s: %zu dimensions (at most %d)", path, key, nd, ZZ_MAX_DIMS);
      goto done;
    }
    e.ndim = (int)nd;
    int64_t numel = 1;
    for (size_t d = 0; d < nd; d++) {
      json_t *x = json_array_get(jshape, d);
      if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > (1ll << 40)) {
        st = zz_error(ZZ_ERR_FORMAT, "%s: tensor %s: bad shape entry %zu", path, key, d);
        goto done;
      }
      e.shape[d] = json_integer_value(x);
      /* checked before it can wrap: each entry is at most 2^40 */
      if (e.shape[d] && numel > (1ll << 42) / e.shape[d]) {
        st = zz_error(ZZ_ERR_FORMAT, "%s: tensor %s: shape is impossibly large", path, key);
        goto done;
      }
      numel *= e.shape[d];
    }
    json_t *jb = json_array_get(joff, 0), *je = json_array_get(joff, 1);
    if (!json_is_integer(jb) || !json_is_integer(je)) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: tensor %s: data_offsets must be integers", path, key);
      goto done;
    }
    int64_t b = json_integer_value(jb), en = json_integer_value(je);
    if (b < 0 || en < b || en > data_size) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: tensor %s: data_offsets [%lld, %lld] outside the %lld data bytes of the file",
                    path, key, (long long)b, (long long)en, (long long)data_size);
      goto done;
    }
    if (en - b != numel * esize) {
      char sh[96];
      st = zz_error(ZZ_ERR_FORMAT, "%s: tensor %s: %lld bytes for shape %s of %s (expected %lld)", path, key,
                    (long long)(en - b), zz_shape_str(e.ndim, e.shape, sh, sizeof sh), e.st_dtype,
                    (long long)(numel * esize));
      goto done;
    }
    e.offset = data_start + b;
    e.nbytes = en - b;
    ck->entries[ck->n_entries++] = e;
  }
done:
  json_decref(root);
  return st;
}

static zz_status zz_ck_open_index(zz_checkpoint *ck, const char *dir, const char *index) {
  json_error_t jerr;
  json_t *root = json_load_file(index, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) return zz_error(ZZ_ERR_FORMAT, "%s:%d:%d: %s", index, jerr.line, jerr.column, jerr.text);
  zz_status st = ZZ_OK;
  json_t *map = json_object_get(root, "weight_map");
  if (!json_is_object(map)) {
    st = zz_error(ZZ_ERR_FORMAT, "%s: no \"weight_map\" object", index);
    goto done;
  }
  /* open each distinct shard once, in order of first mention */
  const char **seen = calloc(json_object_size(map) + 1, sizeof *seen);
  size_t n_seen = 0;
  const char *key;
  json_t *val;
  json_object_foreach(map, key, val) {
    const char *file = json_string_value(val);
    /* a file beside the index: "", "." and ".." would open a directory */
    if (!file || !*file || strchr(file, '/') || strcmp(file, ".") == 0 || strcmp(file, "..") == 0) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: tensor %s: shard name \"%s\" must be a plain file name", index, key,
                    file ? file : "(not a string)");
      break;
    }
    size_t k = 0;
    while (k < n_seen && strcmp(seen[k], file) != 0) k++;
    if (k < n_seen) continue;
    seen[n_seen++] = file;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    if ((st = zz_ck_add_file(ck, path)) != ZZ_OK) break;
  }
  free(seen);
  if (st == ZZ_OK) {
    /* every tensor the index names must be in the shard it names */
    if (ck->n_entries > 1) qsort(ck->entries, (size_t)ck->n_entries, sizeof *ck->entries, zz_entry_cmp);
    json_object_foreach(map, key, val) {
      zz_ck_entry probe;
      snprintf(probe.name, sizeof probe.name, "%s", key);
      zz_ck_entry *e = ck->n_entries ? bsearch(&probe, ck->entries, (size_t)ck->n_entries, sizeof probe, zz_entry_cmp)
                                     : NULL;
      const char *file = json_string_value(val);
      const char *base = e ? strrchr(ck->files[e->file].path, '/') + 1 : NULL;
      if (!e || strcmp(base, file) != 0) {
        st = zz_error(ZZ_ERR_FORMAT, "%s: tensor %s is not in shard %s", index, key, file);
        break;
      }
    }
  }
done:
  json_decref(root);
  return st;
}

zz_status zz_checkpoint_open(const char *dir, zz_checkpoint **out) {
  zz_checkpoint *ck = calloc(1, sizeof *ck);
  if (!ck) return zz_error(ZZ_ERR_NO_MEMORY, "checkpoint: out of memory");
  char single[4096], index[4096];
  snprintf(single, sizeof single, "%s/model.safetensors", dir);
  snprintf(index, sizeof index, "%s/model.safetensors.index.json", dir);
  struct stat sb;
  zz_status st;
  if (stat(single, &sb) == 0) st = zz_ck_add_file(ck, single);
  else if (stat(index, &sb) == 0)
    st = zz_ck_open_index(ck, dir, index);
  else
    st = zz_error(ZZ_ERR_IO, "%s: no model.safetensors or model.safetensors.index.json", dir);
  if (st == ZZ_OK) {
    if (ck->n_entries > 1) qsort(ck->entries, (size_t)ck->n_entries, sizeof *ck->entries, zz_entry_cmp);
    for (int64_t i = 1; i < ck->n_entries; i++)
      if (strcmp(ck->entries[i - 1].name, ck->entries[i].name) == 0) {
        st = zz_error(ZZ_ERR_FORMAT, "%s: tensor %s appears in two shards", dir, ck->entries[i].name);
        break;
      }
  }
  if (st != ZZ_OK) {
    zz_checkpoint_close(ck);
    return st;
  }
  *out = ck;
  return ZZ_OK;
}

void zz_checkpoint_close(zz_checkpoint *ck) {
  if (!ck) return;
  for (int i = 0; i < ck->n_files; i++) close(ck->files[i].fd);
  free(ck->files);
  free(ck->entries);
  free(ck);
}

int64_t zz_checkpoint_count(const zz_checkpoint *ck) { return ck->n_entries; }

/* Canonical names start with "model."; published OPT checkpoints use both. */
static const zz_ck_entry *zz_ck_find(const zz_checkpoint *ck, const char *name) {
  zz_ck_entry probe;
  if (!ck->n_entries) return NULL; /* entries may be NULL: bsearch wants an array */
  snprintf(probe.name, sizeof probe.name, "%s", name);
  const zz_ck_entry *e = bsearch(&probe, ck->entries, (size_t)ck->n_entries, sizeof probe, zz_entry_cmp);
  if (!e && strncmp(name, "model.", 6) == 0) {
    snprintf(probe.name, sizeof probe.name, "%s", name + 6);
    e = bsearch(&probe, ck->entries, (size_t)ck->n_entries, sizeof probe, zz_entry_cmp);
  }
  if (!e && strcmp(name, "model.decoder.embed_tokens.weight") == 0)
    e = bsearch(&(zz_ck_entry){.name = "lm_head.weight"}, ck->entries, (size_t)ck->n_entries, sizeof probe,
                zz_entry_cmp);
  return e;
}

/* The entry of tensor `name`, refused when it is missing or not of a float type. */
static zz_status zz_ck_float(const zz_checkpoint *ck, const char *name, const zz_ck_entry **out) {
  const zz_ck_entry *e = zz_ck_find(ck, name);
  if (!e) return zz_error(ZZ_ERR_FORMAT, "checkpoint: tensor %s is missing", name);
  if (e->dtype == ZZ_DTYPE_COUNT)
    return zz_error(ZZ_ERR_FORMAT, "%s: tensor %s: dtype %s is not a float type", ck->files[e->file].path, e->name,
                    e->st_dtype);
  *out = e;
  return ZZ_OK;
}

zz_status zz_checkpoint_check(const zz_checkpoint *ck, const char *name, int ndim, const int64_t *shape) {
  const zz_ck_entry *e = NULL;
  ZZ_CHECK(zz_ck_float(ck, name, &e));
  const char *path = ck->files[e->file].path;
  bool same = e->ndim == ndim;
  for (int d = 0; same && d < ndim; d++) same = e->shape[d] == shape[d];
  if (!same) {
    char a[96], b[96];
    return zz_error(ZZ_ERR_FORMAT, "%s: tensor %s has shape %s, the config needs %s", path, e->name,
                    zz_shape_str(e->ndim, e->shape, a, sizeof a), zz_shape_str(ndim, shape, b, sizeof b));
  }
  return ZZ_OK;
}

zz_status zz_checkpoint_read(const zz_checkpoint *ck, const char *name, zz_dtype dst_dt, void *dst, int64_t numel) {
  const zz_ck_entry *e = NULL;
  ZZ_CHECK(zz_ck_float(ck, name, &e));
  const char *path = ck->files[e->file].path;
  if ((int64_t)zz_dtype_nbytes(e->dtype, numel) != e->nbytes)
    return zz_error(ZZ_ERR_FORMAT, "%s: tensor %s holds %lld bytes, %lld elements wanted", path, e->name,
                    (long long)e->nbytes, (long long)numel);
  void *buf = e->dtype == dst_dt ? dst : malloc((size_t)e->nbytes);
  if (!buf) return zz_error(ZZ_ERR_NO_MEMORY, "%s: tensor %s: out of memory", path, e->name);
  int64_t done = 0;
  while (done < e->nbytes) {
    ssize_t r = pread(ck->files[e->file].fd, (char *)buf + done, (size_t)(e->nbytes - done), e->offset + done);
    if (r <= 0) {
      if (buf != dst) free(buf);
      return zz_error(ZZ_ERR_IO, "%s: tensor %s: read failed at byte %lld: %s", path, e->name,
                      (long long)(e->offset + done), r < 0 ? strerror(errno) : "unexpected end of file");
    }
    done += r;
  }
  if (buf != dst) {
    zz_convert(e->dtype, buf, dst_dt, dst, numel);
    free(buf);
  }
  return ZZ_OK;
}

/* Expert e's tensor of a stacked spec: its name with e in place of the '*'. */
static void zz_ck_expert_name(const zz_weight_spec *w, int64_t e, char *out, size_t len) {
  const char *star = strchr(w->name, '*');
  ZZ_ASSERT(star);
  snprintf(out, len, "%.*s%lld%s", (int)(star - w->name), w->name, (long long)e, star + 1);
}

zz_status zz_checkpoint_check_weight(const zz_checkpoint *ck, const zz_weight_spec *w) {
  if (!w->experts) return zz_checkpoint_check(ck, w->name, w->ndim, w->shape);
  const int64_t part[2] = {w->shape[0] / w->experts, w->shape[1]};
  char name[ZZ_NAME_LEN + 24];
  for (int64_t e = 0; e < w->experts; e++) {
    zz_ck_expert_name(w, e, name, sizeof name);
    ZZ_CHECK(zz_checkpoint_check(ck, name, 2, part));
  }
  return ZZ_OK;
}

zz_status zz_checkpoint_read_weight(const zz_checkpoint *ck, const zz_weight_spec *w, zz_dtype dst_dt, void *dst) {
  int64_t n = zz_weight_numel(w);
  if (!w->experts) return zz_checkpoint_read(ck, w->name, dst_dt, dst, n);
  char name[ZZ_NAME_LEN + 24];
  int64_t each = n / w->experts;
  for (int64_t e = 0; e < w->experts; e++) {
    zz_ck_expert_name(w, e, name, sizeof name);
    ZZ_CHECK(zz_checkpoint_read(ck, name, dst_dt, (char *)dst + zz_dtype_nbytes(dst_dt, e * each), each));
  }
  return ZZ_OK;
}

zz_status zz_checkpoint_check_model(const zz_checkpoint *ck, const zz_model *m) {
  for (int i = 0; i < m->n_layers; i++)
    for (int k = 0; k < m->layers[i].n_weights; k++) {
      const zz_weight_spec *w = &m->layers[i].weights[k];
      if (w->ndim) ZZ_CHECK(zz_checkpoint_check_weight(ck, w));
    }
  return ZZ_OK;
}

/* ---------------------------------------------------------------- dummy weights */

/* Element i of a dummy weight is a pure function of (name, i): a counter-based
 * generator, so any thread may fill any range and every run, thread count and
 * device gets the same values, at the speed of a few integer operations per
 * element (OPT-30B's 30 billion in seconds, not minutes). */


/* A 32-bit integer hash with full avalanche (Wellons' "lowbias32" constants):
 * 32-bit multiplies, so the element loop vectorises (8 lanes with AVX2). */
static inline uint32_t zz_hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/* Elements per task; a task never crosses a 2^32 boundary of the index, so the
 * index's high half is one key per task. */
#define ZZ_DUMMY_TASK ((int64_t)1 << 16)

typedef struct zz_dummy_job {
  uint64_t seed;
  uint32_t stride; /* odd: element i hashes i * stride + key, so two weights are
                      not shifted copies of one stream (their strides differ) */
  int64_t n;
  float center, scale;
  zz_dtype dt;
  char *dst;
} zz_dummy_job;

/* m values from counter c on. Integer hashing, one int -> float conversion and
 * one multiply and add: exact in every instruction set (no FMA is enabled, so
 * nothing is contracted), so each clone below gives the same bits. */
static inline __attribute__((always_inline)) void zz_dummy_fill(float *out, int m, uint32_t c, uint32_t stride,
                                                                float center, float scale) {
  for (int k = 0; k < m; k++) {
    uint32_t r = zz_hash32(c + (uint32_t)k * stride);
    /* two 16-bit uniforms summed: a triangle on [-2^16+1, 2^16-1], std 2^16/sqrt(6) */
    out[k] = center + (float)((int32_t)(r & 0xffff) + (int32_t)(r >> 16) - 65535) * scale;
  }
}

static void zz_dummy_fill_portable(float *out, int m, uint32_t c, uint32_t stride, float center, float scale) {
  zz_dummy_fill(out, m, c, stride, center, scale);
}

#if defined(__x86_64__)
/* 8 lanes of 32-bit multiplies; SSE2 (the portable build) has none */
__attribute__((target("avx2"))) static void zz_dummy_fill_avx2(float *out, int m, uint32_t c, uint32_t stride,
                                                               float center, float scale) {
  zz_dummy_fill(out, m, c, stride, center, scale);
}

/* f16 weights (the common store dtype) in one pass: 64 values into registers and
 * straight out as halves, instead of a second pass over a float buffer (that pass
 * was 37% of OPT-6.7B's fill). The values are finite, so the F16C rounding equals
 * zz_f32_to_f16's (kernels/cpu/dtype.c, tested bit-equal). m % 64 == 0. */
__attribute__((target("avx2,f16c"))) static void zz_dummy_fill_f16_avx2(uint16_t *out, int m, uint32_t c,
                                                                        uint32_t stride, float center, float scale) {
  for (int k0 = 0; k0 < m; k0 += 64) {
    float t[64];
    zz_dummy_fill(t, 64, c + (uint32_t)k0 * stride, stride, center, scale);
    for (int k = 0; k < 64; k += 8)
      _mm_storeu_si128((__m128i *)(out + k0 + k),
                       _mm256_cvtps_ph(_mm256_loadu_ps(t + k), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
}
#endif

static void zz_dummy_task(void *arg, int64_t t) {
  const zz_dummy_job *j = arg;
  int64_t i0 = t * ZZ_DUMMY_TASK, end = i0 + ZZ_DUMMY_TASK < j->n ? i0 + ZZ_DUMMY_TASK : j->n;
  uint32_t key = zz_hash32((uint32_t)j->seed ^ zz_hash32((uint32_t)(j->seed >> 32) ^ (uint32_t)((uint64_t)i0 >> 32)));
  void (*fill)(float *, int, uint32_t, uint32_t, float, float) = zz_dummy_fill_portable;
#if defined(__x86_64__)
  if (zz_cpu_isa_get() != ZZ_CPU_ISA_PORTABLE) fill = zz_dummy_fill_avx2;
#endif
  float tmp[4096];
  for (int64_t i = i0; i < end; i += 4096) {
    int m = (int)(end - i < 4096 ? end - i : 4096);
#if defined(__x86_64__)
    if (j->dt == ZZ_DTYPE_F16 && fill == zz_dummy_fill_avx2 && m % 64 == 0) {
      zz_dummy_fill_f16_avx2((uint16_t *)j->dst + i, m, (uint32_t)i * j->stride + key, j->stride, j->center, j->scale);
      continue;
    }
#endif
    float *out = j->dt == ZZ_DTYPE_F32 ? (float *)(j->dst + (size_t)i * sizeof(float)) : tmp;
    fill(out, m, (uint32_t)i * j->stride + key, j->stride, j->center, j->scale);
    if (out == tmp) zz_convert(ZZ_DTYPE_F32, tmp, j->dt, j->dst + zz_dtype_nbytes(j->dt, i), m);
  }
}

void zz_weights_dummy(const zz_weight_spec *spec, zz_dtype dt, void *dst, zz_pool *pool) {
  static const float std_of[] = {
      [ZZ_INIT_MATRIX] = 0.02f, [ZZ_INIT_BIAS] = 0.01f, [ZZ_INIT_NORM_GAIN] = 0.05f, [ZZ_INIT_NORM_BIAS] = 0.05f};
  uint64_t seed = zz_fnv1a(ZZ_FNV_BASIS, spec->name, strlen(spec->name));
  zz_dummy_job j = {.seed = seed,
                    .stride = zz_hash32((uint32_t)(seed >> 32) + 0x9e3779b9U) | 1U,
                    .n = zz_weight_numel(spec),
                    .center = spec->init == ZZ_INIT_NORM_GAIN ? 1.0f : 0.0f,
                    .scale = std_of[spec->init] * 2.4494897f / 65536.0f, /* sqrt(6) / 2^16 */
                    .dt = dt,
                    .dst = dst};
  zz_pool_run(pool, zz_dummy_task, &j, (j.n + ZZ_DUMMY_TASK - 1) / ZZ_DUMMY_TASK);
}
