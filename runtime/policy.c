/*
 * policy.c — FlexGen's policy: GPU batch size, number of GPU batches, the
 * percentages of weights, KV cache and activations on the GPU and the CPU (disk
 * takes the rest), overlap, CPU attention, compression and sparsity. One line of
 * text prints and parses it, so a plan can be copied into --policy.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "zz_policy.h"

void zz_policy_default(zz_policy *p) {
  *p = (zz_policy){
      .gpu_batch_size = 8,
      .num_gpu_batches = 1,
      .w_gpu = 100,
      .c_gpu = 100,
      .a_gpu = 100,
      .overlap = true,
      .attn_sparsity = 1.0,
  };
}

static const zz_qfmt *zz_policy_fmt(bool on, zz_qfmt f, zz_qfmt *buf) {
  if (!on) return NULL;
  *buf = f.bits ? f : ZZ_QFMT_DEFAULT;
  return buf;
}

const zz_qfmt *zz_policy_wfmt(const zz_policy *p, zz_qfmt *buf) {
  return zz_policy_fmt(p->compress_weight, p->wq, buf);
}
const zz_qfmt *zz_policy_cfmt(const zz_policy *p, zz_qfmt *buf) { return zz_policy_fmt(p->compress_cache, p->cq, buf); }

/* "0", "1" (FlexGen's format) or "bits/group" for a format of one's own. */
static const char *zz_fmt_str(bool on, zz_qfmt f, char *buf, size_t len) {
  if (on && f.bits && (f.bits != 4 || f.group != 64)) snprintf(buf, len, "%d/%d", f.bits, f.group);
  else
    snprintf(buf, len, "%d", on);
  return buf;
}

/* The sparsity as the decimal of its billionths ("1", "0.1", "0.123456789"): what
 * zz_sparsity_parse reads back to the same billionths, so the kept counts agree. */
static const char *zz_sparsity_str(double keep, char *buf, size_t len) {
  int64_t u = zz_attn_keep_units(keep);
  if (u >= ZZ_KEEP_UNITS) {
    snprintf(buf, len, "1");
    return buf;
  }
  snprintf(buf, len, "0.%09lld", (long long)u);
  for (size_t n = strlen(buf); n > 2 && buf[n - 1] == '0';) buf[--n] = '\0';
  return buf;
}

zz_status zz_sparsity_parse(const char *text, const char *what, double *out) {
  const char *c = text;
  uint64_t digits = 0;   /* the significant digits, at most 18 of them */
  int nd = 0, exp10 = 0; /* value = digits * 10^exp10 */
  bool any = false, dot = false;
  for (;; c++) {
    if (*c >= '0' && *c <= '9') {
      any = true;
      if (nd == 18) { /* beyond 18 digits only zeros, which change nothing after the dot */
        if (*c != '0') break;
        if (!dot) exp10++;
        continue;
      }
      if (digits == 0 && *c == '0') {
        if (dot) exp10--;
        continue;
      }
      digits = digits * 10 + (uint64_t)(*c - '0');
      nd++;
      if (dot) exp10--;
    } else if (*c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (any && (*c == 'e' || *c == 'E')) {
    const char *e = c + 1;
    int sign = *e == '-' ? -1 : 1, ev = 0;
    if (*e == '-' || *e == '+') e++;
    if (*e < '0' || *e > '9') any = false;
    for (; *e >= '0' && *e <= '9'; e++)
      if (ev < 1000) ev = ev * 10 + (*e - '0');
    exp10 += sign * ev;
    c = e;
  }
  if (!any || *c)
    return zz_error(ZZ_ERR_INVALID_ARG, "%s%.40s: want a decimal in (0, 1] (at most 9 places)", what, text);
  while (digits && digits % 10 == 0) digits /= 10, exp10++;
  int width = 0; /* digits of digits: the value is below 10^(width + exp10) */
  for (uint64_t d = digits; d; d /= 10) width++;
  bool above_one = width + exp10 > 1 || (width + exp10 == 1 && !(digits == 1 && exp10 == 0));
  if (digits && !above_one && exp10 + 9 < 0)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "%s%.40s: at most 9 decimal places (the kept count is computed exactly "
                    "from them)",
                    what, text);
  uint64_t units = digits;
  for (int i = 0; units && i < exp10 + 9 && units <= (uint64_t)ZZ_KEEP_UNITS; i++) units *= 10;
  if (units == 0 || units > (uint64_t)ZZ_KEEP_UNITS)
    return zz_error(ZZ_ERR_INVALID_ARG, "%s%.40s: want a decimal in (0, 1] (at most 9 places)", what, text);
  *out = (double)units / (double)ZZ_KEEP_UNITS;
  return ZZ_OK;
}

const char *zz_policy_str(const zz_policy *p, char *buf, size_t len) {
  char cw[24], cc[24], sp[24];
  snprintf(buf, len, "gbs=%d num_gb=%d w=%g,%g c=%g,%g a=%g,%g overlap=%d cpu_attn=%d cw=%s cc=%s sparsity=%s",
           p->gpu_batch_size, p->num_gpu_batches, p->w_gpu, p->w_cpu, p->c_gpu, p->c_cpu, p->a_gpu, p->a_cpu,
           p->overlap, p->cpu_attention, zz_fmt_str(p->compress_weight, p->wq, cw, sizeof cw),
           zz_fmt_str(p->compress_cache, p->cq, cc, sizeof cc), zz_sparsity_str(p->attn_sparsity, sp, sizeof sp));
  return buf;
}

zz_status zz_policy_check(const zz_policy *p) {
  if (p->gpu_batch_size < 1 || p->gpu_batch_size > ZZ_POLICY_MAX_GBS)
    return zz_error(ZZ_ERR_INVALID_ARG, "policy: gpu batch size (gbs, --gpu-batch-size) %d is outside [1, %d]",
                    p->gpu_batch_size, ZZ_POLICY_MAX_GBS);
  if (p->num_gpu_batches < 1 || p->num_gpu_batches > ZZ_POLICY_MAX_NUM_GB)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "policy: number of gpu batches (num_gb, --num-gpu-batches) %d is outside [1, %d]",
                    p->num_gpu_batches, ZZ_POLICY_MAX_NUM_GB);
  const double pairs[3][2] = {{p->w_gpu, p->w_cpu}, {p->c_gpu, p->c_cpu}, {p->a_gpu, p->a_cpu}};
  static const char *const what[3] = {"weights", "cache", "activations"};
  /* written so that NaN fails every comparison and is refused */
  for (int i = 0; i < 3; i++)
    if (!(pairs[i][0] >= 0 && pairs[i][0] <= 100 && pairs[i][1] >= 0 && pairs[i][1] <= 100 &&
          pairs[i][0] + pairs[i][1] <= 100 + 1e-9))
      return zz_error(ZZ_ERR_INVALID_ARG,
                      "policy: %s percentages %g (gpu) + %g (cpu) must be in [0, 100] and sum to at most 100", what[i],
                      pairs[i][0], pairs[i][1]);
  const zz_qfmt *f[2] = {&p->wq, &p->cq};
  for (int i = 0; i < 2; i++)
    if (f[i]->bits && !zz_qfmt_valid(*f[i]))
      return zz_error(ZZ_ERR_INVALID_ARG,
                      "policy: %s compression format %d bits, groups of %d: want 2, 4 or 8 bits "
                      "and an even group of %d to %d",
                      i ? "cache" : "weight", f[i]->bits, f[i]->group, ZZ_QGROUP_MIN, ZZ_QGROUP_MAX);
  if (!(p->attn_sparsity > 0 && p->attn_sparsity <= 1))
    return zz_error(ZZ_ERR_INVALID_ARG, "policy: attention sparsity %g must be in (0, 1]", p->attn_sparsity);
  /* the line zz_policy_str prints must stand for exactly this policy */
  if ((double)zz_attn_keep_units(p->attn_sparsity) / (double)ZZ_KEEP_UNITS != p->attn_sparsity)
    return zz_error(ZZ_ERR_INVALID_ARG, "policy: attention sparsity %.17g has more than 9 decimal places",
                    p->attn_sparsity);
  return ZZ_OK;
}

static zz_status zz_policy_pair(const char *key, const char *v, double *a, double *b) {
  char *end;
  *a = strtod(v, &end);
  if (end == v || *end != ',' || !isfinite(*a))
    return zz_error(ZZ_ERR_INVALID_ARG, "policy: %s=%.40s: want GPU,CPU percentages, each in [0, 100]", key, v);
  const char *w = end + 1;
  *b = strtod(w, &end);
  if (end == w || (*end && *end != ' ') || !isfinite(*b))
    return zz_error(ZZ_ERR_INVALID_ARG, "policy: %s=%.40s: want GPU,CPU percentages, each in [0, 100]", key, v);
  return ZZ_OK;
}

static zz_status zz_policy_int(const char *key, const char *v, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long x = strtol(v, &end, 10);
  if (end == v || (*end && *end != ' ') || errno || x < lo || x > hi)
    return zz_error(ZZ_ERR_INVALID_ARG, "policy: %s=%.40s: want an integer in [%ld, %ld]", key, v, lo, hi);
  *out = x;
  return ZZ_OK;
}

zz_status zz_policy_parse(const char *text, zz_policy *out) {
  zz_policy p;
  zz_policy_default(&p);
  char *copy = strdup(text ? text : "");
  if (!copy) return zz_error(ZZ_ERR_NO_MEMORY, "policy: out of memory");
  zz_status st = ZZ_OK;
  char *save = NULL;
  for (char *tok = strtok_r(copy, " \t\n", &save); tok && st == ZZ_OK; tok = strtok_r(NULL, " \t\n", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq) {
      st = zz_error(ZZ_ERR_INVALID_ARG, "policy: '%s' is not key=value", tok);
      break;
    }
    *eq = '\0';
    const char *k = tok, *v = eq + 1;
    long x = 0;
    if (strcmp(k, "gbs") == 0) {
      if ((st = zz_policy_int(k, v, 1, ZZ_POLICY_MAX_GBS, &x)) == ZZ_OK) p.gpu_batch_size = (int)x;
    } else if (strcmp(k, "num_gb") == 0) {
      if ((st = zz_policy_int(k, v, 1, ZZ_POLICY_MAX_NUM_GB, &x)) == ZZ_OK) p.num_gpu_batches = (int)x;
    } else if (strcmp(k, "w") == 0) {
      st = zz_policy_pair(k, v, &p.w_gpu, &p.w_cpu);
    } else if (strcmp(k, "c") == 0) {
      st = zz_policy_pair(k, v, &p.c_gpu, &p.c_cpu);
    } else if (strcmp(k, "a") == 0) {
      st = zz_policy_pair(k, v, &p.a_gpu, &p.a_cpu);
    } else if ((strcmp(k, "cw") == 0 || strcmp(k, "cc") == 0) && strchr(v, '/')) {
      /* bits/group: compressed in a format of one's own (experiments) */
      long bits = 0, group = 0;
      char *slash = strchr(v, '/');
      *slash = '\0';
      if ((st = zz_policy_int(k, v, 1, 64, &bits)) == ZZ_OK &&
          (st = zz_policy_int(k, slash + 1, 1, 4096, &group)) == ZZ_OK) {
        zz_qfmt f = {(int)bits, (int)group};
        if (k[1] == 'w') p.compress_weight = true, p.wq = f;
        else
          p.compress_cache = true, p.cq = f;
      }
    } else if (strcmp(k, "overlap") == 0 || strcmp(k, "cpu_attn") == 0 || strcmp(k, "cw") == 0 ||
               strcmp(k, "cc") == 0) {
      if ((st = zz_policy_int(k, v, 0, 1, &x)) == ZZ_OK) {
        bool b = x != 0;
        if (strcmp(k, "overlap") == 0) p.overlap = b;
        else if (strcmp(k, "cpu_attn") == 0)
          p.cpu_attention = b;
        else if (strcmp(k, "cw") == 0)
          p.compress_weight = b;
        else
          p.compress_cache = b;
      }
    } else if (strcmp(k, "sparsity") == 0) {
      st = zz_sparsity_parse(v, "policy: sparsity=", &p.attn_sparsity);
    } else {
      st = zz_error(ZZ_ERR_INVALID_ARG, "policy: unknown key '%s'", k);
    }
  }
  free(copy);
  if (st == ZZ_OK) st = zz_policy_check(&p);
  if (st == ZZ_OK) *out = p;
  return st;
}
