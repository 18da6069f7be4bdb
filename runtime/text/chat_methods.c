/*
 * chat_methods.c — the Python methods chat templates call on strings and dicts
 * (the sandbox lets through those that change nothing), and the globals of
 * transformers' environment: range, namespace, dict, raise_exception,
 * strftime_now. Case mapping is Python's for ASCII; a string with other letters
 * is refused rather than mapped differently.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_impl.h"

typedef zz_cj_val val;

/* ================================================================ string helpers */

static bool zz_cj_need_str(zz_cj *c, const val *v, const char *what, const char *at) {
  return v->k == ZZ_CJ_STR ? true : zz_cj_fail(c, at, "%s of a %s", what, zz_cj_kind_name(v->k));
}

/* chars: NULL or none (white space as Python's str.strip), else the code points to strip */
static bool zz_cj_strip_one(const val *chars, const char *s, size_t n, bool at_end, size_t *w) {
  if (!chars || chars->k == ZZ_CJ_NONE)
    return at_end ? (*w = zz_cj_space_before(s, n)) > 0 : zz_cj_is_space_at(s, n, w);
  size_t k = 1;
  if (at_end) {
    while (k < n && k < 4 && ((unsigned char)s[n - k] & 0xc0) == 0x80) k++;
    s += n - k;
  } else {
    while (k < n && ((unsigned char)s[k] & 0xc0) == 0x80) k++;
  }
  *w = k;
  for (size_t i = 0; i + k <= chars->n; i++)
    if (!memcmp(chars->s + i, s, k)) return true;
  return false;
}

bool zz_cj_strip(zz_cj *c, const val *v, const val *chars, bool left, bool right, const char *at, val *out) {
  if (v->k == ZZ_CJ_UNDEF) return *out = zz_cj_str("", 0), true; /* jinja2's trim of undefined */
  if (!zz_cj_need_str(c, v, "strip", at)) return false;
  if (chars && chars->k != ZZ_CJ_NONE && chars->k != ZZ_CJ_STR)
    return zz_cj_fail(c, at, "strip chars that are a %s", zz_cj_kind_name(chars->k));
  const char *p = v->s;
  size_t n = v->n, w;
  while (left && n && zz_cj_strip_one(chars, p, n, false, &w)) p += w, n -= w;
  while (right && n && zz_cj_strip_one(chars, p, n, true, &w)) n -= w;
  *out = zz_cj_str(p, n);
  return true;
}

bool zz_cj_case(zz_cj *c, const val *v, char how, const char *at, val *out) {
  val s;
  if (!zz_cj_to_str(c, v, false, at, &s)) return false;
  if (!zz_cj_ascii(s.s, s.n))
    return zz_cj_fail(c, at, "changing the case of non-ASCII text is not supported (Python maps all of Unicode)");
  char *p = zz_cj_alloc(c, s.n + 1);
  if (!p) return false;
  bool word = false; /* title: inside a word; capitalize: past the first character */
  for (size_t i = 0; i < s.n; i++) {
    char ch = s.s[i];
    bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
    bool up = how == 'u' || (how == 't' && alpha && !word) || (how == 'c' && i == 0);
    p[i] = up ? (ch >= 'a' && ch <= 'z' ? ch - 32 : ch) : how == 'u' ? ch : (ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
    if (how == 't') word = alpha; /* jinja2's title: a word starts after - space ( { [ < */
  }
  if (how == 't') { /* jinja2 splits at [-\s({\[<]+, not at every non-letter as Python's str.title */
    bool start = true;
    for (size_t i = 0; i < s.n; i++) {
      char ch = s.s[i];
      bool sep = ch == '-' || ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v' ||
                 ch == '(' || ch == '{' || ch == '[' || ch == '<';
      if (sep) {
        p[i] = ch, start = true;
        continue;
      }
      p[i] = start ? (ch >= 'a' && ch <= 'z' ? ch - 32 : ch) : (ch >= 'A' && ch <= 'Z' ? ch + 32 : ch);
      start = false;
    }
  }
  *out = zz_cj_str(p, s.n);
  return true;
}

bool zz_cj_replace(zz_cj *c, const val *v, const val *old, const val *nw, long long count, const char *at, val *out) {
  if (!zz_cj_need_str(c, v, "replace", at) || !zz_cj_need_str(c, old, "replace's old", at) ||
      !zz_cj_need_str(c, nw, "replace's new", at))
    return false;
  zz_cj_buf b = {.limit = c->lim.max_output};
  if (!zz_cj_buf_put(c, &b, "", 0)) return false;
  size_t i = 0;
  long long done = 0;
  if (old->n == 0) { /* Python: between every code point */
    if (!zz_cj_ascii(v->s, v->n)) return zz_cj_fail(c, at, "replace('') in non-ASCII text is not supported");
    for (; i <= v->n; i++) {
      if ((count < 0 || done < count) && (done++, !zz_cj_buf_put(c, &b, nw->s, nw->n))) return false;
      if (i < v->n && !zz_cj_buf_put(c, &b, v->s + i, 1)) return false;
    }
    return *out = zz_cj_str(b.s, b.n), true;
  }
  while (i < v->n) {
    if ((count < 0 || done < count) && i + old->n <= v->n && !memcmp(v->s + i, old->s, old->n)) {
      if (!zz_cj_buf_put(c, &b, nw->s, nw->n)) return false;
      i += old->n, done++;
    } else {
      const char *next = count >= 0 && done >= count ? NULL : memchr(v->s + i + 1, old->s[0], v->n - i - 1);
      size_t to = next ? (size_t)(next - v->s) : v->n;
      if (!zz_cj_buf_put(c, &b, v->s + i, to - i)) return false;
      i = to;
    }
  }
  return *out = zz_cj_str(b.s, b.n), true;
}

/* str.split(sep=None, maxsplit=-1) and rsplit's maxsplit refused */
static bool zz_cj_split(zz_cj *c, const val *v, const zz_cj_args *a, const char *at, val *out) {
  const val *sep = zz_cj_arg(a, 0, "sep"), *mx = zz_cj_arg(a, 1, "maxsplit");
  long long max = mx && mx->k == ZZ_CJ_INT ? mx->i : -1;
  *out = zz_cj_new_list(c, 0);
  if (out->k != ZZ_CJ_LIST) return false;
  const char *s = v->s, *end = v->s + v->n;
  if (!sep || sep->k == ZZ_CJ_NONE) { /* runs of white space, none at the ends */
    size_t w;
    for (;;) {
      while (s < end && zz_cj_is_space_at(s, (size_t)(end - s), &w)) s += w;
      if (s >= end) return true;
      if (max >= 0 && (long long)out->l->n >= max) {
        size_t n = (size_t)(end - s);
        while (n && (w = zz_cj_space_before(s, n))) n -= w;
        return zz_cj_list_push(c, out->l, zz_cj_str(s, n));
      }
      const char *t = s;
      while (t < end && !zz_cj_is_space_at(t, (size_t)(end - t), &w)) t += w;
      if (!zz_cj_step(c, at, 1) || !zz_cj_list_push(c, out->l, zz_cj_str(s, (size_t)(t - s)))) return false;
      s = t;
    }
  }
  if (!zz_cj_need_str(c, sep, "split's separator", at)) return false;
  if (!sep->n) return zz_cj_fail(c, at, "split with an empty separator (Python refuses it)");
  for (;;) {
    const char *hit = NULL;
    if (max < 0 || (long long)out->l->n < max) hit = zz_cj_find(s, (size_t)(end - s), sep->s, sep->n);
    if (!zz_cj_step(c, at, 1) || !zz_cj_list_push(c, out->l, zz_cj_str(s, hit ? (size_t)(hit - s) : (size_t)(end - s))))
      return false;
    if (!hit) return true;
    s = hit + sep->n;
  }
}

/* ================================================================ methods */

static bool zz_cj_str_method(zz_cj *c, const val *v, const char *m, const zz_cj_args *a, const char *at, bool *found,
                             val *out) {
  const val *a0 = zz_cj_arg(a, 0, NULL);
  *found = true;
  if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip"))
    return zz_cj_strip(c, v, a0, m[0] != 'r', m[0] != 'l', at, out);
  if (!strcmp(m, "upper") || !strcmp(m, "lower") || !strcmp(m, "title") || !strcmp(m, "capitalize")) {
    if (!strcmp(m, "title")) { /* Python's str.title: a word starts after any non-letter */
      if (!zz_cj_ascii(v->s, v->n)) return zz_cj_case(c, v, 't', at, out);
      char *p = zz_cj_alloc(c, v->n + 1);
      if (!p) return false;
      bool in = false;
      for (size_t i = 0; i < v->n; i++) {
        char ch = v->s[i];
        bool alpha = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
        p[i] = !alpha ? ch : !in ? (ch >= 'a' ? ch - 32 : ch) : (ch <= 'Z' ? ch + 32 : ch);
        in = alpha;
      }
      return *out = zz_cj_str(p, v->n), true;
    }
    return zz_cj_case(c, v, m[0] == 'c' ? 'c' : m[0] == 'u' ? 'u' : 'l', at, out);
  }
  if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
    if (!a0) return zz_cj_fail(c, at, "%s() wants an argument", m);
    if (a->n > 1) return zz_cj_fail(c, at, "%s() with start / end is not supported", m);
    size_t nt = a0->k == ZZ_CJ_LIST ? a0->l->n : 1;
    bool hit = false;
    for (size_t i = 0; i < nt && !hit; i++) {
      const val *t = a0->k == ZZ_CJ_LIST ? &a0->l->v[i] : a0;
      if (!zz_cj_need_str(c, t, m, at)) return false;
      hit = t->n <= v->n && !memcmp(m[0] == 's' ? v->s : v->s + v->n - t->n, t->s, t->n);
    }
    return *out = zz_cj_bool(hit), true;
  }
  if (!strcmp(m, "replace")) {
    const val *a1 = zz_cj_arg(a, 1, NULL), *a2 = zz_cj_arg(a, 2, NULL);
    if (!a0 || !a1) return zz_cj_fail(c, at, "replace() wants old and new");
    return zz_cj_replace(c, v, a0, a1, a2 && a2->k == ZZ_CJ_INT ? a2->i : -1, at, out);
  }
  if (!strcmp(m, "split")) return zz_cj_split(c, v, a, at, out);
  if (!strcmp(m, "join")) {
    if (!a0) return zz_cj_fail(c, at, "join() wants a list");
    zz_cj_args ja = {.v = (val *)v, .kw = (const char *[]){NULL}, .n = 1};
    const val *items = a0;
    for (size_t i = 0; items->k == ZZ_CJ_LIST && i < items->l->n; i++)
      if (items->l->v[i].k != ZZ_CJ_STR)
        return zz_cj_fail(c, at, "join() of a list holding a %s (Python refuses it)",
                          zz_cj_kind_name(items->l->v[i].k));
    zz_cj_scope none = {0};
    return zz_cj_filter(c, &none, "join", items, &ja, at, out);
  }
  if (!strcmp(m, "find") || !strcmp(m, "count")) {
    if (!a0 || !zz_cj_need_str(c, a0, m, at)) return zz_cj_fail(c, at, "%s() wants a string", m);
    if (a->n > 1 || !zz_cj_ascii(v->s, v->n))
      return zz_cj_fail(c, at, "%s() with start / end, or in non-ASCII text, is not supported", m);
    long long k = 0, first = -1;
    for (const char *p = v->s, *end = v->s + v->n; (p = zz_cj_find(p, (size_t)(end - p), a0->s, a0->n));) {
      if (first < 0) first = (long long)(p - v->s);
      k++;
      if (a0->n == 0 && p == end) break;
      p += a0->n ? a0->n : 1;
    }
    return *out = zz_cj_int(m[0] == 'f' ? first : k), true;
  }
  if (!strcmp(m, "isdigit") || !strcmp(m, "isspace") || !strcmp(m, "isalpha") || !strcmp(m, "isalnum")) {
    if (!zz_cj_ascii(v->s, v->n)) return zz_cj_fail(c, at, "%s() of non-ASCII text is not supported", m);
    bool r = v->n > 0;
    for (size_t i = 0; i < v->n && r; i++) {
      char ch = v->s[i];
      bool d = ch >= '0' && ch <= '9', al = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z');
      r = m[2] == 'd'             ? d
          : m[2] == 's'           ? (ch == ' ' || (ch >= 9 && ch <= 13) || (ch >= 0x1c && ch <= 0x1f))
          : !strcmp(m, "isalpha") ? al
                                  : (al || d);
    }
    return *out = zz_cj_bool(r), true;
  }
  *found = false;
  return true;
}

bool zz_cj_method(zz_cj *c, const val *obj, const char *m, const zz_cj_args *a, const char *at, bool *found, val *out) {
  *found = false;
  if (!zz_cj_step(c, at, 1 + (obj->k == ZZ_CJ_STR ? (int64_t)(obj->n >> 6) : 0))) return false; /* a scan is work */
  if (obj->k == ZZ_CJ_STR) return zz_cj_str_method(c, obj, m, a, at, found, out);
  if (obj->k == ZZ_CJ_DICT) {
    *found = true;
    if (!strcmp(m, "get")) {
      const val *k = zz_cj_arg(a, 0, NULL), *d = zz_cj_arg(a, 1, NULL);
      if (!k) return zz_cj_fail(c, at, "get() wants a key");
      if (k->k != ZZ_CJ_STR || !zz_cj_dict_get(obj->d, k->s, k->n, out)) *out = d ? *d : zz_cj_none();
      return true;
    }
    bool items = !strcmp(m, "items"), keys = !strcmp(m, "keys"), vals = !strcmp(m, "values");
    if (items || keys || vals) {
      *out = zz_cj_new_list(c, obj->d->n);
      if (out->k != ZZ_CJ_LIST) return false;
      for (size_t i = 0; i < obj->d->n; i++) {
        val x = keys ? obj->d->keys[i] : obj->d->vals[i];
        if (items) {
          x = zz_cj_new_list(c, 2);
          if (x.k != ZZ_CJ_LIST) return false;
          x.tuple = true, x.l->n = 2;
          x.l->v[0] = obj->d->keys[i], x.l->v[1] = obj->d->vals[i];
        }
        out->l->v[out->l->n++] = x;
      }
      return true;
    }
    if (!strcmp(m, "update") || !strcmp(m, "pop") || !strcmp(m, "setdefault") || !strcmp(m, "clear"))
      return zz_cj_fail(c, at, "%s() changes a dict, which the sandbox refuses", m);
    *found = false;
    return true;
  }
  if (obj->k == ZZ_CJ_LIST &&
      (!strcmp(m, "append") || !strcmp(m, "pop") || !strcmp(m, "extend") || !strcmp(m, "insert") ||
       !strcmp(m, "remove") || !strcmp(m, "sort") || !strcmp(m, "reverse")))
    return zz_cj_fail(c, at, "%s() changes a list, which the sandbox refuses", m);
  if (obj->k == ZZ_CJ_LOOP && !strcmp(m, "cycle")) {
    *found = true;
    if (a->n == 0) return zz_cj_fail(c, at, "loop.cycle() wants values");
    *out = a->v[obj->lp->i % (size_t)a->n];
    return true;
  }
  return true;
}

/* ================================================================ globals */

bool zz_cj_is_global(const char *name) {
  return !strcmp(name, "range") || !strcmp(name, "namespace") || !strcmp(name, "dict") ||
         !strcmp(name, "raise_exception") || !strcmp(name, "strftime_now");
}

bool zz_cj_call_global(zz_cj *c, const char *name, const zz_cj_args *a, const char *at, val *out) {
  if (!strcmp(name, "raise_exception")) {
    val msg = zz_cj_str("", 0);
    const val *a0 = zz_cj_arg(a, 0, "message");
    if (a0 && !zz_cj_to_str(c, a0, false, at, &msg)) return false;
    c->raised = true;
    return zz_cj_fail(c, NULL, "the template refused the messages: %.*s", (int)(msg.n > 400 ? 400 : msg.n), msg.s);
  }
  if (!strcmp(name, "range")) {
    long long v[3] = {0, 0, 1};
    int np = 0;
    for (int i = 0; i < a->n; i++) {
      if (a->kw[i] || np == 3) return zz_cj_fail(c, at, "range() takes 1 to 3 integers");
      if (a->v[i].k != ZZ_CJ_INT && a->v[i].k != ZZ_CJ_BOOL)
        return zz_cj_fail(c, at, "range() of a %s", zz_cj_kind_name(a->v[i].k));
      v[np++] = a->v[i].i;
    }
    if (np == 0) return zz_cj_fail(c, at, "range() takes 1 to 3 integers");
    if (np == 1) v[1] = v[0], v[0] = 0;
    if (v[2] == 0) return zz_cj_fail(c, at, "range() step must not be zero");
    double count = v[2] > 0 ? ((double)v[1] - (double)v[0]) / (double)v[2]
                            : ((double)v[0] - (double)v[1]) / (double)-v[2];
    count = count <= 0 ? 0 : (double)(long long)(count + 0.999999);
    if (count > (double)(c->lim.max_steps - c->steps) || count > 1e8)
      return zz_cj_fail(c, at, "range() of %.0f numbers is more than the limit of %lld steps (max_steps)", count,
                        (long long)c->lim.max_steps);
    if (!zz_cj_step(c, at, (int64_t)count)) return false;
    *out = zz_cj_new_list(c, (size_t)count);
    if (out->k != ZZ_CJ_LIST) return false;
    for (long long x = v[0]; v[2] > 0 ? x < v[1] : x > v[1]; x += v[2]) {
      out->l->v[out->l->n++] = zz_cj_int(x);
      if (out->l->n == (size_t)count) break;
    }
    return true;
  }
  if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
    *out = zz_cj_new_dict(c, name[0] == 'n' ? ZZ_CJ_NS : ZZ_CJ_DICT);
    if (out->k == ZZ_CJ_UNDEF) return false;
    for (int i = 0; i < a->n; i++) {
      if (!a->kw[i]) {
        if (a->v[i].k != ZZ_CJ_DICT) return zz_cj_fail(c, at, "%s() of a %s", name, zz_cj_kind_name(a->v[i].k));
        for (size_t k = 0; k < a->v[i].d->n; k++)
          if (!zz_cj_dict_set(c, out->d, a->v[i].d->keys[k], a->v[i].d->vals[k])) return false;
        continue;
      }
      if (name[0] == 'n' && a->kw[i][0] == '_')
        return zz_cj_fail(c, at, "a namespace attribute starting with '_' (transformers refuses it)");
      if (!zz_cj_dict_set(c, out->d, zz_cj_cstr(a->kw[i]), a->v[i])) return false;
    }
    return true;
  }
  if (!strcmp(name, "strftime_now")) {
    const val *f = zz_cj_arg(a, 0, "format");
    if (!f || f->k != ZZ_CJ_STR) return zz_cj_fail(c, at, "strftime_now() wants a format string");
    char fmt[128], buf[512];
    if (f->n >= sizeof fmt) return zz_cj_fail(c, at, "strftime_now() format longer than 127 bytes");
    memcpy(fmt, f->s, f->n);
    fmt[f->n] = '\0';
    time_t t = c->now ? (time_t)c->now : time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    size_t n = strftime(buf, sizeof buf, fmt, &tm);
    char *p = zz_cj_strdup(c, buf, n);
    if (!p) return false;
    return *out = zz_cj_str(p, n), true;
  }
  return zz_cj_fail(c, at, "the function %s() is not supported", name);
}
