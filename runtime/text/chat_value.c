/*
 * chat_value.c — the values of a chat-template render (chat_impl.h): the arena and
 * its limits, Python's truth, equality and order, str() and repr() as {{ }} prints
 * them, transformers' tojson (json.dumps), JSON in, and strings as Python counts
 * them (code points, Unicode white space).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_impl.h"
#include "unicode_impl.h"
#include "utf8_impl.h"

/* ================================================================ arena, errors, steps */

struct zz_cj_block {
  zz_cj_block *next;
  size_t used, cap;
  _Alignas(16) char data[];
};

void *zz_cj_alloc(zz_cj *c, size_t n) {
  if (n >= 4096 && !zz_cj_step(c, NULL, (int64_t)(n >> 12))) return NULL; /* big copies count as work */
  n = (n + 15) & ~(size_t)15;
  zz_cj_block *b = c->blocks;
  if (!b || b->used + n > b->cap) {
    size_t cap = n > 65536 ? n : 65536;
    if (c->held + cap > c->lim.max_memory) {
      zz_cj_fail(c, NULL, "the template needs more than the memory limit of %zu bytes (max_memory)", c->lim.max_memory);
      return NULL;
    }
    zz_cj_block *nb = malloc(sizeof *nb + cap);
    if (!nb) {
      zz_cj_fail(c, NULL, "out of memory");
      return NULL;
    }
    c->held += cap;
    nb->used = 0, nb->cap = cap;
    if (b && n > 65536) { /* a big one goes behind the current block, which stays open */
      nb->next = b->next, b->next = nb;
    } else {
      nb->next = b, c->blocks = nb;
      b = nb;
    }
    if (b != nb) {
      nb->used = n;
      memset(nb->data, 0, n);
      return nb->data;
    }
  }
  void *p = b->data + b->used;
  b->used += n;
  memset(p, 0, n);
  return p;
}

void zz_cj_free(zz_cj *c) {
  while (c->blocks) {
    zz_cj_block *b = c->blocks;
    c->blocks = b->next;
    free(b);
  }
  c->held = 0;
}

char *zz_cj_strdup(zz_cj *c, const char *s, size_t n) {
  char *p = zz_cj_alloc(c, n + 1);
  if (p && n) memcpy(p, s, n);
  return p;
}

static int zz_cj_line(const zz_cj *c, const char *at) {
  int line = 1;
  for (const char *p = c->src; p && at && p < at && *p; p++) line += *p == '\n';
  return line;
}

bool zz_cj_fail(zz_cj *c, const char *at, const char *fmt, ...) {
  if (c->err[0]) return false;
  char msg[480];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (at && c->src && at >= c->src && at <= c->src + strlen(c->src))
    snprintf(c->err, sizeof c->err, "line %d of the template: %s", zz_cj_line(c, at), msg);
  else
    snprintf(c->err, sizeof c->err, "%s", msg);
  return false;
}

static double zz_cj_clock(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool zz_cj_step(zz_cj *c, const char *at, int64_t n) {
  if (c->err[0]) return false;
  int64_t before = c->steps;
  c->steps += n;
  if (c->steps > c->lim.max_steps)
    return zz_cj_fail(c, at, "the template takes more than the limit of %lld steps (loop turns, calls; max_steps)",
                      (long long)c->lim.max_steps);
  if ((before >> 12) != (c->steps >> 12)) { /* the clock every 4096 steps */
    if (c->t0 == 0) c->t0 = zz_cj_clock();
    else if (zz_cj_clock() - c->t0 > c->lim.max_seconds)
      return zz_cj_fail(c, at, "the template takes more than the time limit of %g s (max_seconds)", c->lim.max_seconds);
  }
  return true;
}

bool zz_cj_buf_put(zz_cj *c, zz_cj_buf *b, const char *s, size_t n) {
  if (c->err[0]) return false;
  if (b->n + n > b->limit)
    return zz_cj_fail(c, NULL, "the text grows past the output limit of %zu bytes (max_output)", b->limit);
  if (n >= 4096 && !zz_cj_step(c, NULL, (int64_t)(n >> 12))) return false;
  if (b->n + n + 1 > b->cap) {
    size_t cap = (b->n + n + 1) * 2;
    if (cap < 256) cap = 256;
    char *p = zz_cj_alloc(c, cap);
    if (!p) return false;
    if (b->n) memcpy(p, b->s, b->n);
    b->s = p, b->cap = cap;
  }
  if (n) memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
  return true;
}

/* ================================================================ values */

const zz_cj_val zz_cj_undef = {.k = ZZ_CJ_UNDEF};
zz_cj_val zz_cj_str(const char *s, size_t n) { return (zz_cj_val){.k = ZZ_CJ_STR, .s = s, .n = n}; }
zz_cj_val zz_cj_cstr(const char *s) { return zz_cj_str(s, strlen(s)); }
zz_cj_val zz_cj_int(long long i) { return (zz_cj_val){.k = ZZ_CJ_INT, .i = i}; }
zz_cj_val zz_cj_float(double f) { return (zz_cj_val){.k = ZZ_CJ_FLOAT, .f = f}; }
zz_cj_val zz_cj_bool(bool b) { return (zz_cj_val){.k = ZZ_CJ_BOOL, .i = b}; }
zz_cj_val zz_cj_none(void) { return (zz_cj_val){.k = ZZ_CJ_NONE}; }

zz_cj_val zz_cj_new_list(zz_cj *c, size_t cap) {
  zz_cj_list *l = zz_cj_alloc(c, sizeof *l);
  if (!l) return zz_cj_undef;
  if (cap && !(l->v = zz_cj_alloc(c, cap * sizeof *l->v))) return zz_cj_undef;
  l->cap = cap;
  return (zz_cj_val){.k = ZZ_CJ_LIST, .l = l};
}

zz_cj_val zz_cj_new_dict(zz_cj *c, zz_cj_kind k) {
  zz_cj_dict *d = zz_cj_alloc(c, sizeof *d);
  return d ? (zz_cj_val){.k = k, .d = d} : zz_cj_undef;
}

bool zz_cj_list_push(zz_cj *c, zz_cj_list *l, zz_cj_val v) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 8;
    zz_cj_val *nv = zz_cj_alloc(c, cap * sizeof *nv);
    if (!nv) return false;
    if (l->n) memcpy(nv, l->v, l->n * sizeof *nv);
    l->v = nv, l->cap = cap;
  }
  l->v[l->n++] = v;
  return true;
}

bool zz_cj_dict_get(const zz_cj_dict *d, const char *key, size_t n, zz_cj_val *out) {
  for (size_t i = 0; d && i < d->n; i++)
    if (d->keys[i].k == ZZ_CJ_STR && d->keys[i].n == n && memcmp(d->keys[i].s, key, n) == 0) {
      *out = d->vals[i];
      return true;
    }
  return false;
}

bool zz_cj_dict_get_val(const zz_cj_dict *d, const zz_cj_val *key, zz_cj_val *out) {
  if (key->k == ZZ_CJ_STR) return zz_cj_dict_get(d, key->s, key->n, out);
  for (size_t i = 0; d && i < d->n; i++)
    if (zz_cj_equal(&d->keys[i], key)) {
      *out = d->vals[i];
      return true;
    }
  return false;
}

bool zz_cj_dict_set(zz_cj *c, zz_cj_dict *d, zz_cj_val key, zz_cj_val v) {
  if (key.k != ZZ_CJ_STR && key.k != ZZ_CJ_INT && key.k != ZZ_CJ_BOOL && key.k != ZZ_CJ_FLOAT && key.k != ZZ_CJ_NONE)
    return zz_cj_fail(c, NULL, "a dict key that is a %s is not supported", zz_cj_kind_name(key.k));
  for (size_t i = 0; i < d->n; i++)
    if (key.k == ZZ_CJ_STR ? d->keys[i].k == ZZ_CJ_STR && d->keys[i].n == key.n && !memcmp(d->keys[i].s, key.s, key.n)
                           : zz_cj_equal(&d->keys[i], &key)) {
      d->vals[i] = v;
      return true;
    }
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 8;
    zz_cj_val *k = zz_cj_alloc(c, cap * sizeof *k), *v2 = zz_cj_alloc(c, cap * sizeof *v2);
    if (!k || !v2) return false;
    if (d->n) memcpy(k, d->keys, d->n * sizeof *k), memcpy(v2, d->vals, d->n * sizeof *v2);
    d->keys = k, d->vals = v2, d->cap = cap;
  }
  d->keys[d->n] = key, d->vals[d->n] = v;
  d->n++;
  return true;
}

bool zz_cj_iterate(zz_cj *c, const zz_cj_val *v, const char *at, zz_cj_list **out) {
  zz_cj_val l = zz_cj_new_list(c, 0);
  if (l.k != ZZ_CJ_LIST) return false;
  *out = l.l;
  switch (v->k) {
    case ZZ_CJ_UNDEF: return true;
    case ZZ_CJ_LIST: *out = v->l; return true;
    case ZZ_CJ_DICT:
      for (size_t i = 0; i < v->d->n; i++)
        if (!zz_cj_list_push(c, l.l, v->d->keys[i])) return false;
      return true;
    case ZZ_CJ_STR:
      for (size_t i = 0; i < v->n;) {
        size_t w = 1;
        while (i + w < v->n && ((unsigned char)v->s[i + w] & 0xc0) == 0x80) w++;
        if (!zz_cj_list_push(c, l.l, zz_cj_str(v->s + i, w))) return false;
        i += w;
      }
      return true;
    default: return zz_cj_fail(c, at, "a %s is not iterable", zz_cj_kind_name(v->k));
  }
}

const char *zz_cj_kind_name(zz_cj_kind k) {
  static const char *const names[] = {"undefined", "none", "boolean",   "integer", "float", "string",
                                      "list",      "dict", "namespace", "loop",    "macro", "function"};
  return names[k];
}

bool zz_cj_truthy(const zz_cj_val *v) {
  switch (v->k) {
    case ZZ_CJ_UNDEF:
    case ZZ_CJ_NONE: return false;
    case ZZ_CJ_BOOL:
    case ZZ_CJ_INT: return v->i != 0;
    case ZZ_CJ_FLOAT: return v->f != 0;
    case ZZ_CJ_STR: return v->n > 0;
    case ZZ_CJ_LIST: return v->l->n > 0;
    case ZZ_CJ_DICT: return v->d->n > 0;
    default: return true;
  }
}

bool zz_cj_is_number(const zz_cj_val *v) { return v->k == ZZ_CJ_INT || v->k == ZZ_CJ_BOOL || v->k == ZZ_CJ_FLOAT; }
double zz_cj_num(const zz_cj_val *v) { return v->k == ZZ_CJ_FLOAT ? v->f : (double)v->i; }

bool zz_cj_equal(const zz_cj_val *a, const zz_cj_val *b) {
  if (zz_cj_is_number(a) && zz_cj_is_number(b)) {
    if (a->k != ZZ_CJ_FLOAT && b->k != ZZ_CJ_FLOAT) return a->i == b->i; /* True == 1 */
    return zz_cj_num(a) == zz_cj_num(b);
  }
  if (a->k != b->k) return false;
  switch (a->k) {
    case ZZ_CJ_UNDEF:
    case ZZ_CJ_NONE: return true;
    case ZZ_CJ_STR: return a->n == b->n && memcmp(a->s, b->s, a->n) == 0;
    case ZZ_CJ_LIST:
      if (a->tuple != b->tuple || a->l->n != b->l->n) return false;
      for (size_t i = 0; i < a->l->n; i++)
        if (!zz_cj_equal(&a->l->v[i], &b->l->v[i])) return false;
      return true;
    case ZZ_CJ_DICT:
      if (a->d->n != b->d->n) return false;
      for (size_t i = 0; i < a->d->n; i++) {
        zz_cj_val o;
        if (!zz_cj_dict_get_val(b->d, &a->d->keys[i], &o) || !zz_cj_equal(&a->d->vals[i], &o)) return false;
      }
      return true;
    case ZZ_CJ_NS: return a->d == b->d;
    case ZZ_CJ_LOOP: return a->lp == b->lp;
    case ZZ_CJ_MACRO: return a->m == b->m;
    case ZZ_CJ_FUNC: return a->s == b->s;
    default: return false;
  }
}

bool zz_cj_compare(zz_cj *c, const zz_cj_val *a, const zz_cj_val *b, const char *at, int *out) {
  if (zz_cj_is_number(a) && zz_cj_is_number(b)) {
    if (a->k != ZZ_CJ_FLOAT && b->k != ZZ_CJ_FLOAT) *out = (a->i > b->i) - (a->i < b->i);
    else
      *out = (zz_cj_num(a) > zz_cj_num(b)) - (zz_cj_num(a) < zz_cj_num(b));
    return true;
  }
  if (a->k == ZZ_CJ_STR && b->k == ZZ_CJ_STR) { /* UTF-8 bytes order as code points do */
    int r = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);
    *out = r ? (r > 0) - (r < 0) : (a->n > b->n) - (a->n < b->n);
    return true;
  }
  if (a->k == ZZ_CJ_LIST && b->k == ZZ_CJ_LIST && a->tuple == b->tuple) {
    for (size_t i = 0; i < a->l->n && i < b->l->n; i++) {
      if (zz_cj_equal(&a->l->v[i], &b->l->v[i])) continue;
      return zz_cj_compare(c, &a->l->v[i], &b->l->v[i], at, out);
    }
    *out = (a->l->n > b->l->n) - (a->l->n < b->l->n);
    return true;
  }
  return zz_cj_fail(c, at, "comparing a %s with a %s (Python refuses it)", zz_cj_kind_name(a->k),
                    zz_cj_kind_name(b->k));
}

/* ================================================================ strings */

/* One code point at s (the tree's one decoder, utf8.c); an ill-formed byte stands
 * for itself, as jinja2 never sees one (Python strings are decoded text) */
static size_t zz_cj_utf8_dec(const char *s, size_t n, uint32_t *cp) {
  size_t w = zz_utf8_next((const uint8_t *)s, n, cp);
  if (w) return w;
  *cp = (unsigned char)s[0];
  return 1;
}

size_t zz_cj_utf8_len(const char *s, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xc0) != 0x80;
  return k;
}

size_t zz_cj_utf8_off(const char *s, size_t n, size_t cp) {
  size_t i = 0;
  for (size_t k = 0; i < n; i++) {
    if (((unsigned char)s[i] & 0xc0) == 0x80) continue;
    if (k++ == cp) return i;
  }
  return n;
}

const char *zz_cj_find(const char *h, size_t hn, const char *w, size_t wn) {
  if (wn == 0) return h;
  for (const char *p = h, *end = h + hn; (size_t)(end - p) >= wn;) {
    p = memchr(p, w[0], (size_t)(end - p) - wn + 1);
    if (!p) return NULL;
    if (!memcmp(p, w, wn)) return p;
    p++;
  }
  return NULL;
}

bool zz_cj_ascii(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] >= 0x80) return false;
  return true;
}

/* Python's str.isspace: Unicode White_Space and the separators \x1c-\x1f */
static bool zz_cj_space_cp(uint32_t cp) { return (cp >= 0x1c && cp <= 0x1f) || zz_unicode_is_space(cp); }

bool zz_cj_is_space_at(const char *s, size_t n, size_t *w) {
  uint32_t cp;
  *w = zz_cj_utf8_dec(s, n, &cp);
  return zz_cj_space_cp(cp);
}

size_t zz_cj_space_before(const char *s, size_t n) {
  if (!n) return 0;
  size_t i = n - 1;
  while (i > 0 && ((unsigned char)s[i] & 0xc0) == 0x80 && n - i < 4) i--;
  uint32_t cp;
  size_t w = zz_cj_utf8_dec(s + i, n - i, &cp);
  return i + w == n && zz_cj_space_cp(cp) ? n - i : 0;
}

/* ================================================================ str() and repr() */

/* Python's repr of a float: the shortest digits that read back, fixed between
 * 1e-4 and 1e16, else d.ddde+XX */
static void zz_cj_float_repr(double f, char *buf, size_t len) {
  if (isnan(f)) {
    snprintf(buf, len, "nan");
    return;
  }
  if (isinf(f)) {
    snprintf(buf, len, f < 0 ? "-inf" : "inf");
    return;
  }
  char e[40];
  for (int p = 0; p < 17; p++) {
    snprintf(e, sizeof e, "%.*e", p, f);
    if (strtod(e, NULL) == f) break;
  }
  char digits[24] = {0};
  size_t nd = 0;
  const char *q = e;
  bool neg = *q == '-';
  if (neg) q++;
  for (; *q && *q != 'e'; q++)
    if (*q != '.') digits[nd++] = *q;
  int exp = atoi(q + 1);
  char *o = buf;
  size_t room = len;
#define ZZ_CJ_PUT(...) (o += snprintf(o, room - (size_t)(o - buf), __VA_ARGS__))
  if (neg) ZZ_CJ_PUT("-");
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      ZZ_CJ_PUT("0.");
      for (int i = -1; i > exp; i--) ZZ_CJ_PUT("0");
      ZZ_CJ_PUT("%s", digits);
    } else {
      for (int i = 0; i <= exp; i++) ZZ_CJ_PUT("%c", i < (int)nd ? digits[i] : '0');
      ZZ_CJ_PUT(".");
      if ((int)nd > exp + 1) ZZ_CJ_PUT("%s", digits + exp + 1);
      else
        ZZ_CJ_PUT("0");
    }
  } else {
    ZZ_CJ_PUT("%c", digits[0]);
    if (nd > 1) ZZ_CJ_PUT(".%s", digits + 1);
    ZZ_CJ_PUT("e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  }
#undef ZZ_CJ_PUT
}

/* Python's repr of a string: quotes it does not hold, control bytes escaped; code
 * points Python would escape beyond ASCII are refused rather than guessed */
static bool zz_cj_repr_str(zz_cj *c, zz_cj_buf *b, const char *s, size_t n, const char *at) {
  bool sq = memchr(s, '\'', n) != NULL, dq = memchr(s, '"', n) != NULL;
  char q = sq && !dq ? '"' : '\'';
  if (!zz_cj_buf_put(c, b, &q, 1)) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    char esc[8];
    const char *t = NULL;
    if (ch == '\\') t = "\\\\";
    else if (ch == (unsigned char)q)
      t = q == '\'' ? "\\'" : "\\\"";
    else if (ch == '\n')
      t = "\\n";
    else if (ch == '\r')
      t = "\\r";
    else if (ch == '\t')
      t = "\\t";
    else if (ch < 0x20 || ch == 0x7f) {
      snprintf(esc, sizeof esc, "\\x%02x", ch);
      t = esc;
    } else if (ch >= 0x80) {
      uint32_t cp;
      size_t w = zz_cj_utf8_dec(s + i, n - i, &cp);
      if (cp <= 0xa0 || cp == 0xad || zz_cj_space_cp(cp) || (cp >= 0x200b && cp <= 0x200f) ||
          (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x206f) || cp == 0xfeff || cp >= 0xe000)
        return zz_cj_fail(c, at, "printing a string holding U+%04X inside a list or dict is not supported", cp);
      if (!zz_cj_buf_put(c, b, s + i, w)) return false;
      i += w - 1;
      continue;
    }
    if (!zz_cj_buf_put(c, b, t ? t : (const char *)&s[i], t ? strlen(t) : 1)) return false;
  }
  return zz_cj_buf_put(c, b, &q, 1);
}

static bool zz_cj_str_into(zz_cj *c, zz_cj_buf *b, const zz_cj_val *v, bool repr, const char *at, int depth) {
  char num[40];
  if (depth > c->lim.max_depth) return zz_cj_fail(c, at, "a value nested deeper than %d (max_depth)", c->lim.max_depth);
  switch (v->k) {
    case ZZ_CJ_UNDEF: return repr ? zz_cj_fail(c, at, "printing an undefined value inside a list or dict") : true;
    case ZZ_CJ_NONE: return zz_cj_buf_put(c, b, "None", 4);
    case ZZ_CJ_BOOL: return zz_cj_buf_put(c, b, v->i ? "True" : "False", v->i ? 4 : 5);
    case ZZ_CJ_INT: snprintf(num, sizeof num, "%lld", v->i); return zz_cj_buf_put(c, b, num, strlen(num));
    case ZZ_CJ_FLOAT: zz_cj_float_repr(v->f, num, sizeof num); return zz_cj_buf_put(c, b, num, strlen(num));
    case ZZ_CJ_STR: return repr ? zz_cj_repr_str(c, b, v->s, v->n, at) : zz_cj_buf_put(c, b, v->s, v->n);
    case ZZ_CJ_LIST: {
      if (!zz_cj_buf_put(c, b, v->tuple ? "(" : "[", 1)) return false;
      for (size_t i = 0; i < v->l->n; i++)
        if ((i && !zz_cj_buf_put(c, b, ", ", 2)) || !zz_cj_str_into(c, b, &v->l->v[i], true, at, depth + 1))
          return false;
      if (v->tuple && v->l->n == 1 && !zz_cj_buf_put(c, b, ",", 1)) return false;
      return zz_cj_buf_put(c, b, v->tuple ? ")" : "]", 1);
    }
    case ZZ_CJ_DICT: {
      if (!zz_cj_buf_put(c, b, "{", 1)) return false;
      for (size_t i = 0; i < v->d->n; i++)
        if ((i && !zz_cj_buf_put(c, b, ", ", 2)) || !zz_cj_str_into(c, b, &v->d->keys[i], true, at, depth + 1) ||
            !zz_cj_buf_put(c, b, ": ", 2) || !zz_cj_str_into(c, b, &v->d->vals[i], true, at, depth + 1))
          return false;
      return zz_cj_buf_put(c, b, "}", 1);
    }
    default: return zz_cj_fail(c, at, "printing a %s is not supported", zz_cj_kind_name(v->k));
  }
}

bool zz_cj_to_str(zz_cj *c, const zz_cj_val *v, bool repr, const char *at, zz_cj_val *out) {
  if (v->k == ZZ_CJ_STR && !repr) return *out = *v, true;
  if (v->k == ZZ_CJ_UNDEF && !repr) return *out = zz_cj_str("", 0), true;
  zz_cj_buf b = {.limit = c->lim.max_output};
  if (!zz_cj_buf_put(c, &b, "", 0) || !zz_cj_str_into(c, &b, v, repr, at, 0)) return false;
  *out = zz_cj_str(b.s, b.n);
  return true;
}

/* ================================================================ tojson */

static bool zz_cj_json_str(zz_cj *c, zz_cj_buf *b, const char *s, size_t n, bool ascii) {
  if (!zz_cj_buf_put(c, b, "\"", 1)) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    char esc[16];
    const char *t = NULL;
    size_t w = 1;
    switch (ch) {
      case '"': t = "\\\""; break;
      case '\\': t = "\\\\"; break;
      case '\n': t = "\\n"; break;
      case '\r': t = "\\r"; break;
      case '\t': t = "\\t"; break;
      case '\b': t = "\\b"; break;
      case '\f': t = "\\f"; break;
      default:
        if (ch < 0x20 || (ascii && ch == 0x7f)) {
          snprintf(esc, sizeof esc, "\\u%04x", ch);
          t = esc;
        } else if (ascii && ch >= 0x80) {
          uint32_t cp;
          w = zz_cj_utf8_dec(s + i, n - i, &cp);
          if (cp >= 0x10000)
            snprintf(esc, sizeof esc, "\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10),
                     0xdc00 + ((cp - 0x10000) & 0x3ff));
          else
            snprintf(esc, sizeof esc, "\\u%04x", cp);
          t = esc;
        }
    }
    if (!zz_cj_buf_put(c, b, t ? t : s + i, t ? strlen(t) : 1)) return false;
    i += w - 1;
  }
  return zz_cj_buf_put(c, b, "\"", 1);
}

typedef struct zz_cj_json_ctx {
  const zz_cj_json_opts *o;
  const char *ind; /* the indent string, NULL: none */
  size_t ind_n;
  const char *isep, *ksep;
  size_t isep_n, ksep_n;
  const char *at;
} zz_cj_json_ctx;

static bool zz_cj_json_nl(zz_cj *c, zz_cj_buf *b, const zz_cj_json_ctx *x, int level) {
  if (!x->ind) return true;
  if (!zz_cj_buf_put(c, b, "\n", 1)) return false;
  for (int i = 0; i < level; i++)
    if (!zz_cj_buf_put(c, b, x->ind, x->ind_n)) return false;
  return true;
}

static int zz_cj_key_cmp(const void *a, const void *b) {
  const zz_cj_val *const *x = a, *const *y = b;
  int r = memcmp((*x)->s, (*y)->s, (*x)->n < (*y)->n ? (*x)->n : (*y)->n);
  return r ? r : ((*x)->n > (*y)->n) - ((*x)->n < (*y)->n);
}

static bool zz_cj_json_into(zz_cj *c, zz_cj_buf *b, const zz_cj_val *v, const zz_cj_json_ctx *x, int level) {
  char num[40];
  if (level > c->lim.max_depth)
    return zz_cj_fail(c, x->at, "tojson of a value nested deeper than %d (max_depth)", c->lim.max_depth);
  switch (v->k) {
    case ZZ_CJ_NONE: return zz_cj_buf_put(c, b, "null", 4);
    case ZZ_CJ_BOOL: return zz_cj_buf_put(c, b, v->i ? "true" : "false", v->i ? 4 : 5);
    case ZZ_CJ_INT: snprintf(num, sizeof num, "%lld", v->i); return zz_cj_buf_put(c, b, num, strlen(num));
    case ZZ_CJ_FLOAT:
      if (isnan(v->f)) return zz_cj_buf_put(c, b, "NaN", 3);
      if (isinf(v->f)) return zz_cj_buf_put(c, b, v->f < 0 ? "-Infinity" : "Infinity", v->f < 0 ? 9 : 8);
      zz_cj_float_repr(v->f, num, sizeof num);
      return zz_cj_buf_put(c, b, num, strlen(num));
    case ZZ_CJ_STR: return zz_cj_json_str(c, b, v->s, v->n, x->o->ensure_ascii);
    case ZZ_CJ_LIST: {
      if (!v->l->n) return zz_cj_buf_put(c, b, "[]", 2);
      if (!zz_cj_buf_put(c, b, "[", 1) || !zz_cj_json_nl(c, b, x, level + 1)) return false;
      for (size_t i = 0; i < v->l->n; i++) {
        if (i && (!zz_cj_buf_put(c, b, x->isep, x->isep_n) || !zz_cj_json_nl(c, b, x, level + 1))) return false;
        if (!zz_cj_json_into(c, b, &v->l->v[i], x, level + 1)) return false;
      }
      return zz_cj_json_nl(c, b, x, level) && zz_cj_buf_put(c, b, "]", 1);
    }
    case ZZ_CJ_DICT: {
      size_t n = v->d->n;
      if (!n) return zz_cj_buf_put(c, b, "{}", 2);
      const zz_cj_val **keys = zz_cj_alloc(c, n * sizeof *keys);
      if (!keys) return false;
      for (size_t i = 0; i < n; i++) keys[i] = &v->d->keys[i];
      for (size_t i = 0; x->o->sort_keys && i < n; i++)
        if (keys[i]->k != ZZ_CJ_STR) return zz_cj_fail(c, x->at, "tojson sort_keys over keys that are not all strings");
      if (x->o->sort_keys) qsort(keys, n, sizeof *keys, zz_cj_key_cmp);
      if (!zz_cj_buf_put(c, b, "{", 1) || !zz_cj_json_nl(c, b, x, level + 1)) return false;
      for (size_t i = 0; i < n; i++) {
        zz_cj_val val, ks = *keys[i];
        zz_cj_dict_get_val(v->d, keys[i], &val);
        if (i && (!zz_cj_buf_put(c, b, x->isep, x->isep_n) || !zz_cj_json_nl(c, b, x, level + 1))) return false;
        if (ks.k != ZZ_CJ_STR) { /* json.dumps writes 1, true, null keys as strings */
          zz_cj_buf kb = {.limit = c->lim.max_output};
          if (!zz_cj_buf_put(c, &kb, "", 0) || !zz_cj_json_into(c, &kb, keys[i], x, level + 1)) return false;
          ks = zz_cj_str(kb.s, kb.n);
        }
        if (!zz_cj_json_str(c, b, ks.s, ks.n, x->o->ensure_ascii) || !zz_cj_buf_put(c, b, x->ksep, x->ksep_n) ||
            !zz_cj_json_into(c, b, &val, x, level + 1))
          return false;
      }
      return zz_cj_json_nl(c, b, x, level) && zz_cj_buf_put(c, b, "}", 1);
    }
    default:
      return zz_cj_fail(c, x->at, "tojson of a %s (json.dumps refuses it: Object of type %s is not JSON serializable)",
                        zz_cj_kind_name(v->k), v->k == ZZ_CJ_UNDEF ? "Undefined" : zz_cj_kind_name(v->k));
  }
}

bool zz_cj_to_json(zz_cj *c, const zz_cj_val *v, const zz_cj_json_opts *o, const char *at, zz_cj_val *out) {
  zz_cj_json_ctx x = {.o = o, .at = at};
  char *spaces = NULL;
  if (o->indent && o->indent->k == ZZ_CJ_STR) {
    x.ind = o->indent->s, x.ind_n = o->indent->n;
  } else if (o->indent && (o->indent->k == ZZ_CJ_INT || o->indent->k == ZZ_CJ_BOOL)) {
    long long k = o->indent->i < 0 ? 0 : o->indent->i;
    if (k > 256) return zz_cj_fail(c, at, "tojson indent %lld is more than 256 (not supported)", k);
    if (!(spaces = zz_cj_alloc(c, (size_t)k + 1))) return false;
    memset(spaces, ' ', (size_t)k);
    x.ind = spaces, x.ind_n = (size_t)k;
  } else if (o->indent && o->indent->k != ZZ_CJ_NONE) {
    return zz_cj_fail(c, at, "tojson indent of a %s", zz_cj_kind_name(o->indent->k));
  }
  x.isep = x.ind ? "," : ", ", x.ksep = ": ";
  if (o->item_sep) x.isep = o->item_sep->s;
  if (o->key_sep) x.ksep = o->key_sep->s;
  x.isep_n = o->item_sep ? o->item_sep->n : strlen(x.isep);
  x.ksep_n = o->key_sep ? o->key_sep->n : strlen(x.ksep);
  zz_cj_buf b = {.limit = c->lim.max_output};
  if (!zz_cj_buf_put(c, &b, "", 0) || !zz_cj_json_into(c, &b, v, &x, 0)) return false;
  *out = zz_cj_str(b.s, b.n);
  return true;
}

/* ================================================================ JSON in */

static bool zz_cj_from_json_at(zz_cj *c, json_t *j, zz_cj_val *out, int depth) {
  if (depth > 256) return zz_cj_fail(c, NULL, "a JSON value nested deeper than 256");
  switch (json_typeof(j)) {
    case JSON_NULL: *out = zz_cj_none(); return true;
    case JSON_TRUE: *out = zz_cj_bool(true); return true;
    case JSON_FALSE: *out = zz_cj_bool(false); return true;
    case JSON_INTEGER: *out = zz_cj_int((long long)json_integer_value(j)); return true;
    case JSON_REAL: *out = zz_cj_float(json_real_value(j)); return true;
    case JSON_STRING: {
      size_t n = json_string_length(j);
      char *s = zz_cj_strdup(c, json_string_value(j), n);
      if (!s) return false;
      *out = zz_cj_str(s, n);
      return true;
    }
    case JSON_ARRAY: {
      *out = zz_cj_new_list(c, json_array_size(j));
      if (out->k != ZZ_CJ_LIST) return false;
      size_t i;
      json_t *x;
      json_array_foreach(j, i, x) {
        if (!zz_cj_from_json_at(c, x, &out->l->v[i], depth + 1)) return false;
        out->l->n++;
      }
      return true;
    }
    case JSON_OBJECT: {
      *out = zz_cj_new_dict(c, ZZ_CJ_DICT);
      if (out->k != ZZ_CJ_DICT) return false;
      const char *key;
      json_t *x;
      json_object_foreach(j, key, x) {
        zz_cj_val v;
        char *k = zz_cj_strdup(c, key, strlen(key));
        if (!k || !zz_cj_from_json_at(c, x, &v, depth + 1) || !zz_cj_dict_set(c, out->d, zz_cj_cstr(k), v))
          return false;
      }
      return true;
    }
  }
  return zz_cj_fail(c, NULL, "internal: a JSON value of no known type");
}

bool zz_cj_from_json(zz_cj *c, json_t *j, zz_cj_val *out) { return zz_cj_from_json_at(c, j, out, 0); }
