/*
 * status.c — status names, per-thread error messages, fatal invariants, and the
 * small parsing/formatting helpers every module uses.
 */
#include <ctype.h>
#include <signal.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zz_base.h"
#include "zz_limits.h"

static _Thread_local char zz_error_buf[1024];
static void (*zz_fatal_hook)(void);

const char *zz_status_str(zz_status st) {
  static const char *const names[ZZ_STATUS_COUNT] = {
      [ZZ_OK] = "ok",
      [ZZ_ERR_INVALID_ARG] = "invalid argument",
      [ZZ_ERR_IO] = "I/O error",
      [ZZ_ERR_FORMAT] = "malformed input",
      [ZZ_ERR_NO_MEMORY] = "out of memory",
      [ZZ_ERR_INFEASIBLE] = "infeasible policy",
      [ZZ_ERR_UNSUPPORTED] = "unsupported",
      [ZZ_ERR_DEVICE] = "device error",
      [ZZ_ERR_MPI] = "communication error",
      [ZZ_ERR_INTERRUPTED] = "interrupted",
  };
  if ((int)st < 0 || st >= ZZ_STATUS_COUNT) return "unknown status";
  return names[st];
}

zz_status zz_error(zz_status st, const char *fmt, ...) {
  /* formatted aside first: an argument may be zz_error_message() itself (a caller
   * adding context), and vsnprintf into the buffer it reads from garbles both */
  char tmp[sizeof zz_error_buf];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  memcpy(zz_error_buf, tmp, sizeof tmp);
  return st;
}

const char *zz_error_message(void) { return zz_error_buf; }

static volatile sig_atomic_t zz_stop_sig;
void zz_request_stop(int sig) { zz_stop_sig = sig; }
int zz_stop_requested(void) { return zz_stop_sig; }
zz_status zz_check_stop(void) {
  int sig = zz_stop_sig;
  if (!sig) return ZZ_OK;
  return zz_error(ZZ_ERR_INTERRUPTED, "stopped by %s",
                  sig == SIGINT    ? "SIGINT"
                  : sig == SIGTERM ? "SIGTERM"
                                   : "request");
}
void zz_error_clear(void) { zz_error_buf[0] = '\0'; }

void zz_set_fatal_hook(void (*hook)(void)) { zz_fatal_hook = hook; }

void zz_fatal(const char *file, int line, const char *what) {
  fprintf(stderr, "zigzag: internal error at %s:%d: %s\n", file, line, what);
  fflush(stderr);
  if (zz_fatal_hook) zz_fatal_hook();
  abort();
}

zz_status zz_parse_bytes(const char *text, size_t *out) {
  if (!text || !*text) return zz_error(ZZ_ERR_INVALID_ARG, "empty size");
  errno = 0;
  char *end = NULL;
  double v = strtod(text, &end);
  if (end == text || errno != 0 || !isfinite(v) || v < 0)
    return zz_error(ZZ_ERR_INVALID_ARG, "'%s' is not a size (try 16G, 512M, 1000)", text);
  while (*end == ' ') end++;
  double mult = 1;
  switch (toupper((unsigned char)*end)) {
    case '\0': break;
    case 'B': break;
    case 'K': mult = 1024.0; break;
    case 'M': mult = 1024.0 * 1024; break;
    case 'G': mult = 1024.0 * 1024 * 1024; break;
    case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
    default: return zz_error(ZZ_ERR_INVALID_ARG, "'%s': unknown size unit", text);
  }
  if (*end) {
    const char *suffix = end + 1; /* accept K, KB, KiB, ... */
    if (*suffix && strcasecmp(suffix, "B") != 0 && strcasecmp(suffix, "iB") != 0)
      return zz_error(ZZ_ERR_INVALID_ARG, "'%s': unknown size unit", text);
  }
  double bytes = v * mult;
  if (bytes > 1.8e19) return zz_error(ZZ_ERR_INVALID_ARG, "'%s' is too large", text);
  *out = (size_t)bytes;
  return ZZ_OK;
}

const char *zz_format_bytes(size_t bytes, char *buf, size_t len) {
  static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    u++;
  }
  if (u == 0) snprintf(buf, len, "%zu B", bytes);
  else
    snprintf(buf, len, "%.2f %s", v, units[u]);
  return buf;
}

size_t zz_host_memory_bytes(void) { return zz_limits_here()->mem; }

double zz_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *zz_tier_name(zz_tier t) {
  static const char *const n[ZZ_TIER_COUNT] = {"gpu", "cpu", "disk"};
  return (int)t >= 0 && t < ZZ_TIER_COUNT ? n[t] : "?";
}

const char *zz_purpose_name(zz_purpose p) {
  static const char *const n[ZZ_PURPOSE_COUNT] = {"weights", "cache", "activations", "staging", "workspace"};
  return (int)p >= 0 && p < ZZ_PURPOSE_COUNT ? n[p] : "?";
}

const char *zz_shape_str(int ndim, const int64_t *shape, char *buf, size_t len) {
  size_t off = 0;
  off += (size_t)snprintf(buf + off, len - off, "[");
  for (int i = 0; i < ndim && off < len; i++)
    off += (size_t)snprintf(buf + off, len - off, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (off < len) snprintf(buf + off, len - off, "]");
  return buf;
}

zz_status zz_arena_take(zz_arena *a, size_t bytes, size_t align, void **ptr_out, size_t *offset_out) {
  size_t start = zz_align_up(a->used, align);
  if (start > a->cap || bytes > a->cap - start) {
    char need[32], cap[32];
    return zz_error(ZZ_ERR_NO_MEMORY, "%s arena for %s is full: %s more wanted, %s reserved", zz_tier_name(a->tier),
                    zz_purpose_name(a->purpose), zz_format_bytes(bytes, need, sizeof need),
                    zz_format_bytes(a->cap, cap, sizeof cap));
  }
  a->used = start + bytes;
  if (a->used > a->peak) a->peak = a->used;
  if (ptr_out) *ptr_out = a->base ? a->base + start : NULL;
  if (offset_out) *offset_out = start;
  return ZZ_OK;
}
