/*
 * chat_filters.c — jinja2's filters and tests that chat templates use, as jinja2
 * 3.1 defines them (transformers' tojson in place of jinja2's: json.dumps with
 * ensure_ascii=False, indent, separators, sort_keys). A filter or test not here
 * is an error naming it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"

typedef zz_cj_val val;

/* item.attr, with jinja2's dotted attributes ("a.b") and integer parts */
static bool zz_cj_attr_path(zz_cj *c, const val *item, const val *attr, const char *at, val *out) {
  if (attr->k == ZZ_CJ_INT) {
    zz_cj_scope none = {0};
    zz_cj_expr e = {.k = ZZ_CJ_E_INDEX, .at = at};
    zz_cj_expr a = {.k = ZZ_CJ_E_LIT, .lit = *item, .at = at}, b = {.k = ZZ_CJ_E_LIT, .lit = *attr, .at = at};
    e.a = &a, e.b = &b;
    return zz_cj_eval(c, &none, &e, out);
  }
  if (attr->k != ZZ_CJ_STR) return zz_cj_fail(c, at, "an attribute name that is a %s", zz_cj_kind_name(attr->k));
  *out = *item;
  const char *p = attr->s, *end = attr->s + attr->n;
  while (p <= end) {
    const char *dot = memchr(p, '.', (size_t)(end - p));
    size_t n = dot ? (size_t)(dot - p) : (size_t)(end - p);
    val cur = *out;
    *out = zz_cj_undef;
    if (cur.k == ZZ_CJ_DICT || cur.k == ZZ_CJ_NS) zz_cj_dict_get(cur.d, p, n, out);
    else if (cur.k == ZZ_CJ_LIST && n && p[0] >= '0' && p[0] <= '9') {
      size_t i = (size_t)strtoull(p, NULL, 10);
      if (i < cur.l->n) *out = cur.l->v[i];
    } else if (cur.k == ZZ_CJ_UNDEF) {
      return true;
    }
    if (!dot) break;
    p = dot + 1;
  }
  return true;
}

/* select / reject / selectattr / rejectattr and map: the filter or test named by
 * the first argument, the rest its arguments */
static bool zz_cj_sub_args(zz_cj *c, const zz_cj_args *a, int skip, zz_cj_args *out) {
  out->n = a->n - skip;
  out->v = zz_cj_alloc(c, (size_t)(out->n + 1) * sizeof *out->v);
  out->kw = zz_cj_alloc(c, (size_t)(out->n + 1) * sizeof *out->kw);
  if (!out->v || !out->kw) return false;
  for (int i = 0; i < out->n; i++) out->v[i] = a->v[i + skip], out->kw[i] = a->kw[i + skip];
  return true;
}

static bool zz_cj_select(zz_cj *c, zz_cj_scope *s, const val *v, const zz_cj_args *a, bool attr, bool keep,
                         const char *at, val *out) {
  zz_cj_list *in;
  int skip = attr ? 2 : 1;
  const val *an = attr ? zz_cj_arg(a, 0, NULL) : NULL, *tn = zz_cj_arg(a, attr ? 1 : 0, NULL);
  if (attr && !an) return zz_cj_fail(c, at, "selectattr / rejectattr want an attribute name");
  if (tn && tn->k != ZZ_CJ_STR) return zz_cj_fail(c, at, "a test name that is a %s", zz_cj_kind_name(tn->k));
  zz_cj_args rest;
  if (!zz_cj_iterate(c, v, at, &in) || !zz_cj_sub_args(c, a, a->n < skip ? a->n : skip, &rest)) return false;
  *out = zz_cj_new_list(c, 0);
  if (out->k != ZZ_CJ_LIST) return false;
  for (size_t i = 0; i < in->n; i++) {
    val x = in->v[i];
    bool r;
    if (!zz_cj_step(c, at, 1) || (attr && !zz_cj_attr_path(c, &in->v[i], an, at, &x))) return false;
    if (tn) {
      char *name = zz_cj_strdup(c, tn->s, tn->n);
      if (!name || !zz_cj_test(c, s, name, &x, &rest, at, &r)) return false;
    } else {
      r = zz_cj_truthy(&x);
    }
    if (r == keep && !zz_cj_list_push(c, out->l, in->v[i])) return false;
  }
  return true;
}

static bool zz_cj_map(zz_cj *c, zz_cj_scope *s, const val *v, const zz_cj_args *a, const char *at, val *out) {
  zz_cj_list *in;
  const val *attr = zz_cj_arg(a, -1, "attribute"), *def = zz_cj_arg(a, -1, "default"), *fn = zz_cj_arg(a, 0, NULL);
  if (!attr && !fn) return zz_cj_fail(c, at, "map wants a filter name or attribute=");
  if (!attr && fn->k != ZZ_CJ_STR) return zz_cj_fail(c, at, "map's filter name is a %s", zz_cj_kind_name(fn->k));
  zz_cj_args rest;
  if (!zz_cj_iterate(c, v, at, &in) || !zz_cj_sub_args(c, a, attr ? a->n : 1, &rest)) return false;
  *out = zz_cj_new_list(c, in->n);
  if (out->k != ZZ_CJ_LIST) return false;
  char *name = attr ? NULL : zz_cj_strdup(c, fn->s, fn->n);
  for (size_t i = 0; i < in->n; i++) {
    val x;
    if (!zz_cj_step(c, at, 1)) return false;
    if (attr) {
      if (!zz_cj_attr_path(c, &in->v[i], attr, at, &x)) return false;
      if (x.k == ZZ_CJ_UNDEF && def) x = *def;
    } else if (!name || !zz_cj_filter(c, s, name, &in->v[i], &rest, at, &x)) {
      return false;
    }
    out->l->v[out->l->n++] = x;
  }
  return true;
}

static bool zz_cj_join(zz_cj *c, const val *v, const zz_cj_args *a, const char *at, val *out) {
  zz_cj_list *in;
  const val *sep = zz_cj_arg(a, 0, "d"), *attr = zz_cj_arg(a, 1, "attribute");
  val sepv = zz_cj_str("", 0);
  if (sep && !zz_cj_to_str(c, sep, false, at, &sepv)) return false;
  if (!zz_cj_iterate(c, v, at, &in)) return false;
  zz_cj_buf b = {.limit = c->lim.max_output};
  if (!zz_cj_buf_put(c, &b, "", 0)) return false;
  for (size_t i = 0; i < in->n; i++) {
    val x = in->v[i], t;
    if (attr && !zz_cj_attr_path(c, &in->v[i], attr, at, &x)) return false;
    if ((i && !zz_cj_buf_put(c, &b, sepv.s, sepv.n)) || !zz_cj_to_str(c, &x, false, at, &t) ||
        !zz_cj_buf_put(c, &b, t.s, t.n))
      return false;
  }
  *out = zz_cj_str(b.s, b.n);
  return true;
}

/* jinja2's indent(width=4, first=False, blank=False): str.splitlines' line ends */
static bool zz_cj_indent(zz_cj *c, const val *v, const zz_cj_args *a, const char *at, val *out) {
  const val *w = zz_cj_arg(a, 0, "width"), *first = zz_cj_arg(a, 1, "first"), *blank = zz_cj_arg(a, 2, "blank");
  val s, ind = zz_cj_str("    ", 4);
  if (!zz_cj_to_str(c, v, false, at, &s)) return false;
  if (w && w->k == ZZ_CJ_STR) ind = *w;
  else if (w && (w->k == ZZ_CJ_INT || w->k == ZZ_CJ_BOOL)) {
    if (w->i < 0 || w->i > 256) return zz_cj_fail(c, at, "indent width %lld is out of 0..256", w->i);
    char *p = zz_cj_alloc(c, (size_t)w->i + 1);
    if (!p) return false;
    memset(p, ' ', (size_t)w->i);
    ind = zz_cj_str(p, (size_t)w->i);
  } else if (w) {
    return zz_cj_fail(c, at, "indent width that is a %s", zz_cj_kind_name(w->k));
  }
  for (size_t i = 0; i < s.n; i++) {
    unsigned char ch = (unsigned char)s.s[i];
    if (ch == '\r' || ch == '\v' || ch == '\f' || (ch >= 0x1c && ch <= 0x1e) || ch == 0xc2 || ch == 0xe2)
      if (ch < 0x80 || (ch == 0xc2 && i + 1 < s.n && (unsigned char)s.s[i + 1] == 0x85) ||
          (ch == 0xe2 && i + 2 < s.n && (unsigned char)s.s[i + 1] == 0x80 &&
           ((unsigned char)s.s[i + 2] & 0xfe) == 0xa8))
        return zz_cj_fail(c, at, "indent of text with line ends other than \\n is not supported");
  }
  zz_cj_buf b = {.limit = c->lim.max_output};
  bool bl = blank && zz_cj_truthy(blank);
  if (!zz_cj_buf_put(c, &b, "", 0)) return false;
  if (first && zz_cj_truthy(first) && !zz_cj_buf_put(c, &b, ind.s, ind.n)) return false;
  /* lines of s + "\n" (jinja2 adds it), without the last empty one */
  size_t start = 0;
  bool firstline = true;
  while (start <= s.n) {
    const char *nl = memchr(s.s + start, '\n', s.n - start);
    size_t end = nl ? (size_t)(nl - s.s) : s.n;
    if (!nl && end == start && !firstline) break; /* the "\n" jinja2 added */
    if (!firstline) {
      if (!zz_cj_buf_put(c, &b, "\n", 1)) return false;
      if ((bl || end > start) && !zz_cj_buf_put(c, &b, ind.s, ind.n)) return false;
    }
    if (!zz_cj_buf_put(c, &b, s.s + start, end - start)) return false;
    firstline = false;
    if (!nl) break;
    start = end + 1;
  }
  *out = zz_cj_str(b.s, b.n);
  return true;
}

static int zz_cj_sort_cmp_err;
static zz_cj *zz_cj_sort_ctx;
static int zz_cj_sort_cmp(const void *x, const void *y) {
  int r = 0;
  if (!zz_cj_compare(zz_cj_sort_ctx, x, y, NULL, &r)) zz_cj_sort_cmp_err = 1;
  return r;
}

static bool zz_cj_to_number(zz_cj *c, const val *v, bool as_int, const val *def, const char *at, val *out) {
  val d = def ? *def : as_int ? zz_cj_int(0) : zz_cj_float(0);
  if (v->k == ZZ_CJ_INT || v->k == ZZ_CJ_BOOL) return *out = as_int ? zz_cj_int(v->i) : zz_cj_float((double)v->i), true;
  if (v->k == ZZ_CJ_FLOAT) {
    if (as_int && !(fabs(v->f) < 9.2e18)) return zz_cj_fail(c, at, "int() of %g", v->f);
    return *out = as_int ? zz_cj_int((long long)v->f) : *v, true;
  }
  if (v->k != ZZ_CJ_STR) return *out = d, true;
  char buf[64];
  if (v->n >= sizeof buf) return *out = d, true;
  memcpy(buf, v->s, v->n);
  buf[v->n] = '\0';
  char *end;
  if (as_int) {
    long long i = strtoll(buf, &end, 10);
    while (*end == ' ' || *end == '\t' || *end == '\n') end++;
    if (end != buf && !*end) return *out = zz_cj_int(i), true;
  }
  double f = strtod(buf, &end);
  while (*end == ' ' || *end == '\t' || *end == '\n') end++;
  if (end == buf || *end) return *out = d, true;
  if (as_int && !(fabs(f) < 9.2e18)) return *out = d, true;
  return *out = as_int ? zz_cj_int((long long)f) : zz_cj_float(f), true;
}

/* jinja2 sorts strings case-folded: a string folding changes (upper case, or
 * beyond ASCII) would sort otherwise here, so it is refused */
static bool zz_cj_fold_same(zz_cj *c, const val *k, const char *what, const char *at) {
  for (size_t j = 0; k->k == ZZ_CJ_STR && j < k->n; j++)
    if ((k->s[j] >= 'A' && k->s[j] <= 'Z') || (unsigned char)k->s[j] >= 0x80)
      return zz_cj_fail(c, at, "%s of strings with upper-case or non-ASCII letters (case-folded) is not supported",
                        what);
  return true;
}

bool zz_cj_html_escape(zz_cj *c, const val *v, const char *at, val *out) {
  zz_cj_buf b = {.limit = c->lim.max_output};
  if (!zz_cj_buf_put(c, &b, "", 0)) return false;
  for (size_t i = 0; i < v->n; i++) {
    char ch = v->s[i];
    const char *t = ch == '&'    ? "&amp;"
                    : ch == '<'  ? "&lt;"
                    : ch == '>'  ? "&gt;"
                    : ch == '"'  ? "&#34;"
                    : ch == '\'' ? "&#39;"
                                 : NULL;
    if (!zz_cj_buf_put(c, &b, t ? t : &v->s[i], t ? strlen(t) : 1)) return false;
  }
  (void)at;
  *out = zz_cj_str(b.s, b.n);
  return true;
}

bool zz_cj_filter(zz_cj *c, zz_cj_scope *s, const char *f, const val *v, const zz_cj_args *a, const char *at,
                  val *out) {
#define ZZ_IS(name) (!strcmp(f, name))
  const val *a0 = zz_cj_arg(a, 0, NULL);
  static const char *const bare[] = {"safe",   "string",  "upper",  "lower", "title", "capitalize",
                                     "length", "count",   "first",  "last",  "items", "abs",
                                     "list",   "reverse", "unique", "sort",  NULL}; /* as zigzag has them: no arguments */
  for (int i = 0; bare[i]; i++)
    if (a->n && ZZ_IS(bare[i])) return zz_cj_fail(c, at, "the filter '%s' with arguments is not supported", f);
  static const char *const num_kw[] = {"default", NULL};
  if ((ZZ_IS("int") || ZZ_IS("float")) && !zz_cj_args_check(c, a, 1, num_kw, f, at)) return false;
  if (ZZ_IS("tojson")) {
    static const char *const kw[] = {"ensure_ascii", "indent", "separators", "sort_keys", NULL};
    if (!zz_cj_args_check(c, a, 4, kw, "tojson", at)) return false;
    const val *ea = zz_cj_arg(a, 0, "ensure_ascii"), *sk = zz_cj_arg(a, 3, "sort_keys"),
              *sep = zz_cj_arg(a, 2, "separators");
    zz_cj_json_opts o = {.ensure_ascii = ea && zz_cj_truthy(ea),
                         .sort_keys = sk && zz_cj_truthy(sk),
                         .indent = zz_cj_arg(a, 1, "indent")};
    if (sep && sep->k != ZZ_CJ_NONE) {
      if (sep->k != ZZ_CJ_LIST || sep->l->n != 2 || sep->l->v[0].k != ZZ_CJ_STR || sep->l->v[1].k != ZZ_CJ_STR)
        return zz_cj_fail(c, at, "tojson separators want two strings");
      o.item_sep = &sep->l->v[0], o.key_sep = &sep->l->v[1];
    }
    return zz_cj_to_json(c, v, &o, at, out);
  }
  if (ZZ_IS("safe")) { /* markupsafe's Markup: a str that + escapes the other side of */
    if (!zz_cj_to_str(c, v, false, at, out)) return false;
    out->tuple = true;
    return true;
  }
  if (ZZ_IS("list") && v->k == ZZ_CJ_LIST && !v->tuple) return *out = *v, true;
  if ((ZZ_IS("map") || ZZ_IS("select") || ZZ_IS("reject") || ZZ_IS("selectattr") || ZZ_IS("rejectattr")) &&
      !zz_cj_truthy(v)) /* jinja2 walks them only "if value" */
    return *out = zz_cj_new_list(c, 0), out->k == ZZ_CJ_LIST;
  if (ZZ_IS("string")) return zz_cj_to_str(c, v, false, at, out);
  if (ZZ_IS("trim")) return zz_cj_strip(c, v, a0, true, true, at, out);
  if (ZZ_IS("upper") || ZZ_IS("lower") || ZZ_IS("title") || ZZ_IS("capitalize"))
    return zz_cj_case(c, v, f[0] == 'c' ? 'c' : f[0] == 't' ? 't' : f[0] == 'u' ? 'u' : 'l', at, out);
  if (ZZ_IS("replace")) {
    const val *old = zz_cj_arg(a, 0, "old"), *nw = zz_cj_arg(a, 1, "new"), *cnt = zz_cj_arg(a, 2, "count");
    val sv;
    if (!old || !nw) return zz_cj_fail(c, at, "replace wants old and new");
    if (!zz_cj_to_str(c, v, false, at, &sv)) return false;
    return zz_cj_replace(c, &sv, old, nw, cnt && cnt->k == ZZ_CJ_INT ? cnt->i : -1, at, out);
  }
  if (ZZ_IS("length") || ZZ_IS("count")) {
    if (v->k == ZZ_CJ_STR) return *out = zz_cj_int((long long)zz_cj_utf8_len(v->s, v->n)), true;
    if (v->k == ZZ_CJ_LIST) return *out = zz_cj_int((long long)v->l->n), true;
    if (v->k == ZZ_CJ_DICT || v->k == ZZ_CJ_NS) return *out = zz_cj_int((long long)v->d->n), true;
    if (v->k == ZZ_CJ_UNDEF) return *out = zz_cj_int(0), true;
    return zz_cj_fail(c, at, "length of a %s", zz_cj_kind_name(v->k));
  }
  if (ZZ_IS("default") || ZZ_IS("d")) {
    const val *bo = zz_cj_arg(a, 1, "boolean");
    bool use = bo && zz_cj_truthy(bo) ? !zz_cj_truthy(v) : v->k == ZZ_CJ_UNDEF;
    return *out = use ? (a0 ? *a0 : zz_cj_str("", 0)) : *v, true;
  }
  if (ZZ_IS("first") || ZZ_IS("last")) {
    zz_cj_list *l;
    if (!zz_cj_iterate(c, v, at, &l)) return false;
    *out = l->n ? l->v[f[0] == 'f' ? 0 : l->n - 1] : zz_cj_undef;
    return true;
  }
  if (ZZ_IS("join")) return zz_cj_join(c, v, a, at, out);
  if (ZZ_IS("map")) return zz_cj_map(c, s, v, a, at, out);
  if (ZZ_IS("select") || ZZ_IS("reject")) return zz_cj_select(c, s, v, a, false, f[0] == 's', at, out);
  if (ZZ_IS("selectattr") || ZZ_IS("rejectattr")) return zz_cj_select(c, s, v, a, true, f[0] == 's', at, out);
  if (ZZ_IS("list") || ZZ_IS("reverse") || ZZ_IS("unique") || ZZ_IS("sort")) {
    zz_cj_list *l;
    if (v->k == ZZ_CJ_STR && ZZ_IS("reverse")) {
      zz_cj_list *chars;
      if (!zz_cj_iterate(c, v, at, &chars)) return false;
      zz_cj_buf b = {.limit = c->lim.max_output};
      if (!zz_cj_buf_put(c, &b, "", 0)) return false;
      for (size_t i = chars->n; i-- > 0;)
        if (!zz_cj_buf_put(c, &b, chars->v[i].s, chars->v[i].n)) return false;
      return *out = zz_cj_str(b.s, b.n), true;
    }
    if (!zz_cj_iterate(c, v, at, &l)) return false;
    *out = zz_cj_new_list(c, l->n);
    if (out->k != ZZ_CJ_LIST) return false;
    for (size_t i = 0; i < l->n; i++) {
      bool dup = false;
      if (ZZ_IS("unique") &&
          (!zz_cj_step(c, at, (int64_t)(out->l->n >> 4) + 1) || !zz_cj_fold_same(c, &l->v[i], "unique", at)))
        return false;
      for (size_t k = 0; ZZ_IS("unique") && !dup && k < out->l->n; k++) dup = zz_cj_equal(&out->l->v[k], &l->v[i]);
      if (!dup) out->l->v[out->l->n++] = ZZ_IS("reverse") ? l->v[l->n - 1 - i] : l->v[i];
    }
    if (ZZ_IS("sort")) {
      if (!zz_cj_step(c, at, (int64_t)out->l->n * 2)) return false; /* n log n compares */
      zz_cj_sort_cmp_err = 0, zz_cj_sort_ctx = c;
      qsort(out->l->v, out->l->n, sizeof *out->l->v, zz_cj_sort_cmp);
      if (zz_cj_sort_cmp_err) return false;
      for (size_t i = 0; i < out->l->n; i++)
        if (!zz_cj_fold_same(c, &out->l->v[i], "sort", at)) return false;
    }
    return true;
  }
  if (ZZ_IS("items") || ZZ_IS("dictsort")) {
    if (v->k == ZZ_CJ_UNDEF) return *out = zz_cj_new_list(c, 0), out->k == ZZ_CJ_LIST;
    if (v->k != ZZ_CJ_DICT) return zz_cj_fail(c, at, "%s of a %s", f, zz_cj_kind_name(v->k));
    zz_cj_args none = {0};
    bool found;
    if (!zz_cj_method(c, v, "items", &none, at, &found, out) || ZZ_IS("items")) return !c->err[0];
    /* dictsort(case_sensitive=False, by='key', reverse=False): insertion sort, Python's order */
    static const char *const kw[] = {"case_sensitive", "by", "reverse", NULL};
    if (!zz_cj_args_check(c, a, 3, kw, "dictsort", at)) return false;
    const val *cs = zz_cj_arg(a, 0, "case_sensitive"), *by = zz_cj_arg(a, 1, "by"), *rev = zz_cj_arg(a, 2, "reverse");
    int col = by && by->k == ZZ_CJ_STR && by->n == 5 && !memcmp(by->s, "value", 5) ? 1 : 0;
    bool down = rev && zz_cj_truthy(rev);
    zz_cj_val *it = out->l->v;
    for (size_t i = 0; i < out->l->n; i++)
      if (!(cs && zz_cj_truthy(cs)) && !zz_cj_fold_same(c, &it[i].l->v[col], "dictsort", at)) return false;
    for (size_t i = 1; i < out->l->n; i++)
      for (size_t j = i; j > 0 && zz_cj_step(c, at, 1); j--) {
        int r;
        if (!zz_cj_compare(c, &it[j - 1].l->v[col], &it[j].l->v[col], at, &r)) return false;
        if (down ? r >= 0 : r <= 0) break;
        val t = it[j];
        it[j] = it[j - 1], it[j - 1] = t;
      }
    return !c->err[0];
  }
  if (ZZ_IS("int") || ZZ_IS("float")) return zz_cj_to_number(c, v, f[0] == 'i', zz_cj_arg(a, 0, "default"), at, out);
  if (ZZ_IS("abs")) {
    if (!zz_cj_is_number(v)) return zz_cj_fail(c, at, "abs of a %s", zz_cj_kind_name(v->k));
    if (v->k == ZZ_CJ_FLOAT) return *out = zz_cj_float(fabs(v->f)), true;
    if (v->i == INT64_MIN) return zz_cj_fail(c, at, "abs past 64 bits");
    return *out = zz_cj_int(v->i < 0 ? -v->i : v->i), true;
  }
  if (ZZ_IS("indent")) return zz_cj_indent(c, v, a, at, out);
  if (ZZ_IS("center") || ZZ_IS("wordwrap") || ZZ_IS("truncate") || ZZ_IS("format") || ZZ_IS("escape") || ZZ_IS("e"))
    return zz_cj_fail(c, at, "the filter '%s' is not supported", f);
  return zz_cj_fail(c, at, "the filter '%s' is not supported", f);
#undef ZZ_IS
}

bool zz_cj_test(zz_cj *c, zz_cj_scope *s, const char *t, const val *v, const zz_cj_args *a, const char *at, bool *out) {
  (void)s;
#define ZZ_IS(name) (!strcmp(t, name))
  const val *a0 = zz_cj_arg(a, 0, NULL);
  zz_cj_kind k = v->k;
  if (ZZ_IS("defined")) *out = k != ZZ_CJ_UNDEF;
  else if (ZZ_IS("undefined"))
    *out = k == ZZ_CJ_UNDEF;
  else if (ZZ_IS("none"))
    *out = k == ZZ_CJ_NONE;
  else if (ZZ_IS("boolean"))
    *out = k == ZZ_CJ_BOOL;
  else if (ZZ_IS("true") || ZZ_IS("false"))
    *out = k == ZZ_CJ_BOOL && v->i == (t[0] == 't');
  else if (ZZ_IS("integer"))
    *out = k == ZZ_CJ_INT;
  else if (ZZ_IS("float"))
    *out = k == ZZ_CJ_FLOAT;
  else if (ZZ_IS("number"))
    *out = zz_cj_is_number(v);
  else if (ZZ_IS("string"))
    *out = k == ZZ_CJ_STR;
  else if (ZZ_IS("mapping"))
    *out = k == ZZ_CJ_DICT;
  else if (ZZ_IS("iterable"))
    *out = k == ZZ_CJ_STR || k == ZZ_CJ_LIST || k == ZZ_CJ_DICT;
  else if (ZZ_IS("sequence"))
    *out = k == ZZ_CJ_STR || k == ZZ_CJ_LIST || k == ZZ_CJ_DICT;
  else if (ZZ_IS("callable"))
    *out = k == ZZ_CJ_MACRO || k == ZZ_CJ_FUNC;
  else if (ZZ_IS("lower") || ZZ_IS("upper")) {
    if (k != ZZ_CJ_STR) return zz_cj_fail(c, at, "the test '%s' of a %s", t, zz_cj_kind_name(k));
    val x;
    if (!zz_cj_case(c, v, t[0], at, &x)) return false;
    bool cased = false;
    for (size_t i = 0; i < v->n; i++) cased |= (v->s[i] >= 'a' && v->s[i] <= 'z') || (v->s[i] >= 'A' && v->s[i] <= 'Z');
    *out = cased && zz_cj_equal(&x, v);
  } else if (ZZ_IS("odd") || ZZ_IS("even") || ZZ_IS("divisibleby")) {
    if (k != ZZ_CJ_INT && k != ZZ_CJ_BOOL) return zz_cj_fail(c, at, "the test '%s' of a %s", t, zz_cj_kind_name(k));
    long long d = ZZ_IS("divisibleby") ? (a0 && a0->k == ZZ_CJ_INT ? a0->i : 0) : 2;
    if (d == 0) return zz_cj_fail(c, at, "divisibleby wants a non-zero integer");
    long long r = v->i % d;
    *out = ZZ_IS("odd") ? r != 0 : r == 0;
  } else if (ZZ_IS("eq") || ZZ_IS("equalto") || ZZ_IS("==") || ZZ_IS("ne") || ZZ_IS("!=") || ZZ_IS("sameas")) {
    if (!a0) return zz_cj_fail(c, at, "the test '%s' wants a value", t);
    *out = zz_cj_equal(v, a0) == !ZZ_IS("ne");
    if (ZZ_IS("sameas") && (k == ZZ_CJ_STR || k == ZZ_CJ_LIST || k == ZZ_CJ_DICT))
      return zz_cj_fail(c, at, "sameas (Python's is) of a %s is not supported", zz_cj_kind_name(k));
  } else if (ZZ_IS("lt") || ZZ_IS("le") || ZZ_IS("gt") || ZZ_IS("ge") || ZZ_IS("lessthan") || ZZ_IS("greaterthan")) {
    int r;
    if (!a0) return zz_cj_fail(c, at, "the test '%s' wants a value", t);
    if (!zz_cj_compare(c, v, a0, at, &r)) return false;
    *out = t[0] == 'l' ? (t[1] == 'e' ? r <= 0 : r < 0) : (t[1] == 'e' ? r >= 0 : r > 0);
  } else if (ZZ_IS("in")) {
    if (!a0) return zz_cj_fail(c, at, "the test 'in' wants a value");
    zz_cj_expr e = {.k = ZZ_CJ_E_BIN, .op = 'i', .at = at};
    zz_cj_expr x = {.k = ZZ_CJ_E_LIT, .lit = *v, .at = at}, y = {.k = ZZ_CJ_E_LIT, .lit = *a0, .at = at};
    zz_cj_scope none = {0};
    val r;
    e.a = &x, e.b = &y;
    if (!zz_cj_eval(c, &none, &e, &r)) return false;
    *out = r.i != 0;
  } else {
    return zz_cj_fail(c, at, "the test '%s' is not supported", t);
  }
  return true;
#undef ZZ_IS
}
