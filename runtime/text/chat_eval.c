/*
 * chat_eval.c — a parsed chat template (chat_stmt.c) evaluated as jinja2 does:
 * names in scopes (a for body and a macro are scopes of their own, an if is not),
 * jinja2's undefined (printed as nothing, refused in arithmetic), Python's
 * operators on ints, floats, strings and lists, attribute and item lookup of
 * dicts, the loop variable, macros with caller(), and the statements.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"

/* ================================================================ scopes */

struct zz_cj_var {
  const char *name;
  zz_cj_val v;
  zz_cj_var *next;
};

bool zz_cj_scope_get(const zz_cj_scope *s, const char *name, zz_cj_val *out) {
  for (; s; s = s->up)
    for (const zz_cj_var *v = s->vars; v; v = v->next)
      if (strcmp(v->name, name) == 0) {
        *out = v->v;
        return true;
      }
  return false;
}

bool zz_cj_scope_set(zz_cj *c, zz_cj_scope *s, const char *name, zz_cj_val v) {
  for (zz_cj_var *x = s->vars; x; x = x->next)
    if (strcmp(x->name, name) == 0) {
      x->v = v;
      return true;
    }
  zz_cj_var *x = zz_cj_alloc(c, sizeof *x);
  if (!x) return false;
  x->name = name, x->v = v, x->next = s->vars;
  s->vars = x;
  return true;
}

/* ================================================================ arguments */

const zz_cj_val *zz_cj_arg(const zz_cj_args *a, int pos, const char *name) {
  int k = 0;
  for (int i = 0; i < a->n; i++) {
    if (a->kw[i] ? name && !strcmp(a->kw[i], name) : k++ == pos && pos >= 0) return &a->v[i];
  }
  return NULL;
}

bool zz_cj_args_check(zz_cj *c, const zz_cj_args *a, int max, const char *const *names, const char *what,
                      const char *at) {
  int pos = 0;
  for (int i = 0; i < a->n; i++) {
    if (!a->kw[i]) {
      if (++pos > max) return zz_cj_fail(c, at, "%s takes at most %d positional arguments", what, max);
      continue;
    }
    bool known = false;
    for (int k = 0; names && names[k]; k++) known |= !strcmp(names[k], a->kw[i]);
    if (!known) return zz_cj_fail(c, at, "%s has no argument '%s'", what, a->kw[i]);
  }
  return true;
}

static bool zz_cj_eval_args(zz_cj *c, zz_cj_scope *s, const zz_cj_expr *e, zz_cj_args *out) {
  out->n = e->nargs, out->kw = e->kw;
  out->v = zz_cj_alloc(c, (size_t)(e->nargs + 1) * sizeof *out->v);
  if (!out->v) return false;
  for (int i = 0; i < e->nargs; i++)
    if (!zz_cj_eval(c, s, e->args[i], &out->v[i])) return false;
  return true;
}

/* ================================================================ attributes and items */

/* jinja2's getattr / getitem on a value: dict keys, a string's or list's index,
 * the loop's fields; undefined where there is none */
static bool zz_cj_get(zz_cj *c, const zz_cj_val *a, const zz_cj_val *key, const char *at, zz_cj_val *out) {
  *out = zz_cj_undef;
  if (a->k == ZZ_CJ_UNDEF) {
    zz_cj_val k;
    if (!zz_cj_to_str(c, key, false, at, &k)) return false;
    return zz_cj_fail(c, at, "'%.*s' of an undefined value (jinja2's UndefinedError)", (int)k.n, k.s);
  }
  if (a->k == ZZ_CJ_NONE) return zz_cj_fail(c, at, "an attribute or item of None (jinja2's UndefinedError)");
  if (a->k == ZZ_CJ_DICT || a->k == ZZ_CJ_NS) {
    zz_cj_dict_get_val(a->d, key, out);
    return true;
  }
  if (a->k == ZZ_CJ_LOOP && key->k == ZZ_CJ_STR) {
    const zz_cj_loop *lp = a->lp;
    long long i = (long long)lp->i, n = (long long)lp->items->n;
    static const char *const f[] = {"index",  "index0",   "revindex", "revindex0", "first",  "last",
                                    "length", "previtem", "nextitem", "depth",     "depth0", NULL};
    int k = 0;
    while (f[k] && (strlen(f[k]) != key->n || memcmp(f[k], key->s, key->n))) k++;
    switch (k) {
      case 0: *out = zz_cj_int(i + 1); break;
      case 1: *out = zz_cj_int(i); break;
      case 2: *out = zz_cj_int(n - i); break;
      case 3: *out = zz_cj_int(n - i - 1); break;
      case 4: *out = zz_cj_bool(i == 0); break;
      case 5: *out = zz_cj_bool(i == n - 1); break;
      case 6: *out = zz_cj_int(n); break;
      case 7: *out = i > 0 ? lp->items->v[i - 1] : zz_cj_undef; break;
      case 8: *out = i + 1 < n ? lp->items->v[i + 1] : zz_cj_undef; break;
      case 9: *out = zz_cj_int(1); break;
      case 10: *out = zz_cj_int(0); break;
      default: return zz_cj_fail(c, at, "loop.%.*s is not supported", (int)key->n, key->s);
    }
    return true;
  }
  if ((a->k == ZZ_CJ_LIST || a->k == ZZ_CJ_STR) && (key->k == ZZ_CJ_INT || key->k == ZZ_CJ_BOOL)) {
    bool ascii = a->k == ZZ_CJ_STR && zz_cj_ascii(a->s, a->n);
    long long n = a->k == ZZ_CJ_LIST ? (long long)a->l->n
                  : ascii            ? (long long)a->n
                                     : (long long)zz_cj_utf8_len(a->s, a->n);
    long long i = key->i < 0 ? key->i + n : key->i;
    if (i < 0 || i >= n) return true; /* past the end: undefined, as jinja2 has it */
    if (a->k == ZZ_CJ_LIST) {
      *out = a->l->v[i];
    } else {
      size_t off = ascii ? (size_t)i : zz_cj_utf8_off(a->s, a->n, (size_t)i);
      size_t end = ascii ? off + 1 : zz_cj_utf8_off(a->s, a->n, (size_t)i + 1);
      *out = zz_cj_str(a->s + off, end - off);
    }
    return true;
  }
  return true; /* jinja2: an attribute a value has not is undefined */
}

/* a[b:c:d] with Python's slice rules */
static bool zz_cj_slice(zz_cj *c, const zz_cj_val *a, const zz_cj_val *lo_v, const zz_cj_val *hi_v,
                        const zz_cj_val *st_v, const char *at, zz_cj_val *out) {
  if (a->k != ZZ_CJ_LIST && a->k != ZZ_CJ_STR) return zz_cj_fail(c, at, "slicing a %s", zz_cj_kind_name(a->k));
  const zz_cj_val *b[3] = {lo_v, hi_v, st_v};
  for (int i = 0; i < 3; i++)
    if (b[i] && b[i]->k != ZZ_CJ_INT && b[i]->k != ZZ_CJ_BOOL && b[i]->k != ZZ_CJ_NONE)
      return zz_cj_fail(c, at, "a slice bound that is a %s", zz_cj_kind_name(b[i]->k));
  long long step = st_v && st_v->k != ZZ_CJ_NONE ? st_v->i : 1;
  if (step == 0) return zz_cj_fail(c, at, "a slice step of zero");
  bool ascii = a->k == ZZ_CJ_LIST || zz_cj_ascii(a->s, a->n);
  long long n = a->k == ZZ_CJ_LIST ? (long long)a->l->n
                : ascii            ? (long long)a->n
                                   : (long long)zz_cj_utf8_len(a->s, a->n);
  long long lo, hi;
  if (!lo_v || lo_v->k == ZZ_CJ_NONE) lo = step > 0 ? 0 : n - 1;
  else {
    lo = lo_v->i < 0 ? lo_v->i + n : lo_v->i;
    lo = step > 0 ? (lo < 0 ? 0 : lo > n ? n : lo) : (lo < -1 ? -1 : lo > n - 1 ? n - 1 : lo);
  }
  if (!hi_v || hi_v->k == ZZ_CJ_NONE) hi = step > 0 ? n : -1;
  else {
    hi = hi_v->i < 0 ? hi_v->i + n : hi_v->i;
    hi = step > 0 ? (hi < 0 ? 0 : hi > n ? n : hi) : (hi < -1 ? -1 : hi > n - 1 ? n - 1 : hi);
  }
  if (a->k == ZZ_CJ_STR && ascii && step == 1)
    return *out = zz_cj_str(a->s + lo, hi > lo ? (size_t)(hi - lo) : 0), true;
  zz_cj_val l = zz_cj_new_list(c, 0);
  zz_cj_buf sb = {.limit = c->lim.max_output};
  if (l.k != ZZ_CJ_LIST || !zz_cj_buf_put(c, &sb, "", 0)) return false;
  for (long long i = lo; step > 0 ? i < hi : i > hi; i += step) {
    if (a->k == ZZ_CJ_LIST) {
      if (!zz_cj_list_push(c, l.l, a->l->v[i])) return false;
    } else {
      zz_cj_val ch, key = zz_cj_int(i);
      if (!zz_cj_get(c, a, &key, at, &ch) || !zz_cj_buf_put(c, &sb, ch.s, ch.n)) return false;
    }
  }
  *out = a->k == ZZ_CJ_LIST ? l : zz_cj_str(sb.s, sb.n);
  out->tuple = a->tuple;
  return true;
}

/* ================================================================ operators */

static bool zz_cj_arith(zz_cj *c, int op, const zz_cj_val *a, const zz_cj_val *b, const char *at, zz_cj_val *out) {
  if (a->k != ZZ_CJ_FLOAT && b->k != ZZ_CJ_FLOAT && op != '/') {
    long long x = a->i, y = b->i, r = 0;
    bool over = false;
    switch (op) {
      case '+': over = __builtin_add_overflow(x, y, &r); break;
      case '-': over = __builtin_sub_overflow(x, y, &r); break;
      case '*': over = __builtin_mul_overflow(x, y, &r); break;
      case '%':
      case 'f':
        if (y == 0) return zz_cj_fail(c, at, "integer division or modulo by zero");
        if (x == INT64_MIN && y == -1) over = true;
        else {
          r = op == '%' ? x % y : x / y;
          if (op == '%' && r != 0 && (r < 0) != (y < 0)) r += y;         /* Python's sign: the divisor's */
          if (op == 'f' && (x % y != 0) && ((x < 0) != (y < 0))) r -= 1; /* floor */
        }
        break;
      case 'p':
        if (y < 0) return *out = zz_cj_float(pow((double)x, (double)y)), true;
        r = 1;
        for (long long k = 0; k < y && !over; k++) {
          over = __builtin_mul_overflow(r, x, &r);
          if (!zz_cj_step(c, at, 1)) return false;
          if (r == 0 || r == 1) break;
        }
        if (x == -1 && !over) r = y % 2 ? -1 : 1;
        break;
    }
    if (over) return zz_cj_fail(c, at, "an integer past 64 bits (Python's would grow; not supported)");
    *out = zz_cj_int(r);
    return true;
  }
  double x = zz_cj_num(a), y = zz_cj_num(b), r;
  switch (op) {
    case '+': r = x + y; break;
    case '-': r = x - y; break;
    case '*': r = x * y; break;
    case '/':
      if (y == 0) return zz_cj_fail(c, at, "division by zero");
      r = x / y;
      break;
    case 'f':
    case '%':
      if (y == 0) return zz_cj_fail(c, at, "float division or modulo by zero");
      r = op == 'f' ? floor(x / y) : fmod(x, y);
      if (op == '%' && r != 0 && (r < 0) != (y < 0)) r += y;
      break;
    default: r = pow(x, y); break;
  }
  *out = zz_cj_float(r);
  return true;
}

/* s * k or list * k: the size checked before it is made */
static bool zz_cj_repeat(zz_cj *c, const zz_cj_val *s, long long k, const char *at, zz_cj_val *out) {
  size_t unit = s->k == ZZ_CJ_STR ? s->n : s->l->n * sizeof(zz_cj_val);
  if (k <= 0 || unit == 0) return *out = s->k == ZZ_CJ_STR ? zz_cj_str("", 0) : zz_cj_new_list(c, 0), true;
  if ((unsigned long long)k > c->lim.max_output / unit)
    return zz_cj_fail(c, at, "a repeat past the output limit of %zu bytes (max_output)", c->lim.max_output);
  if (s->k == ZZ_CJ_STR) { /* the copy counts as work in zz_cj_alloc */
    char *p = zz_cj_alloc(c, s->n * (size_t)k + 1);
    if (!p) return false;
    for (long long i = 0; i < k; i++) memcpy(p + (size_t)i * s->n, s->s, s->n);
    return *out = zz_cj_str(p, s->n * (size_t)k), true;
  }
  *out = zz_cj_new_list(c, s->l->n * (size_t)k);
  if (out->k != ZZ_CJ_LIST) return false;
  for (long long i = 0; i < k; i++) memcpy(out->l->v + (size_t)i * s->l->n, s->l->v, s->l->n * sizeof *s->l->v);
  out->l->n = s->l->n * (size_t)k;
  return true;
}

static bool zz_cj_contains(zz_cj *c, const zz_cj_val *x, const zz_cj_val *in, const char *at, bool *out) {
  *out = false;
  /* a scan is work: a step per 16 items or 64 bytes */
  if (!zz_cj_step(c, at,
                  in->k == ZZ_CJ_LIST  ? (int64_t)(in->l->n >> 4)
                  : in->k == ZZ_CJ_STR ? (int64_t)(in->n >> 6)
                                       : 0))
    return false;
  if (in->k == ZZ_CJ_STR) {
    if (x->k != ZZ_CJ_STR) return zz_cj_fail(c, at, "'in <string>' wants a string, not a %s", zz_cj_kind_name(x->k));
    *out = zz_cj_find(in->s, in->n, x->s, x->n) != NULL;
  } else if (in->k == ZZ_CJ_LIST) {
    for (size_t k = 0; !*out && k < in->l->n; k++) *out = zz_cj_equal(x, &in->l->v[k]);
  } else if (in->k == ZZ_CJ_DICT || in->k == ZZ_CJ_NS) {
    zz_cj_val v;
    *out = zz_cj_dict_get_val(in->d, x, &v);
  } else if (in->k != ZZ_CJ_UNDEF) { /* in undefined: jinja2's Undefined iterates as nothing */
    return zz_cj_fail(c, at, "'in' a %s", zz_cj_kind_name(in->k));
  }
  return true;
}

static bool zz_cj_binary(zz_cj *c, const zz_cj_expr *e, const zz_cj_val *a, const zz_cj_val *b, zz_cj_val *out) {
  int op = e->op;
  zz_cj_val x, y;
  if (op == '~') {
    if (!zz_cj_to_str(c, a, false, e->at, &x) || !zz_cj_to_str(c, b, false, e->at, &y)) return false;
    x.tuple = y.tuple = false; /* jinja2 joins as plain str */
    a = &x, b = &y, op = '+';
  }
  if (op == 'i' || op == 'o') {
    bool in;
    if (!zz_cj_contains(c, a, b, e->at, &in)) return false;
    return *out = zz_cj_bool(op == 'i' ? in : !in), true;
  }
  if (a->k == ZZ_CJ_UNDEF || b->k == ZZ_CJ_UNDEF)
    return zz_cj_fail(c, e->at, "an undefined value in arithmetic (jinja2's UndefinedError)");
  if (zz_cj_is_number(a) && zz_cj_is_number(b)) return zz_cj_arith(c, op, a, b, e->at, out);
  if (op == '+' && a->k == ZZ_CJ_STR && b->k == ZZ_CJ_STR && a->tuple != b->tuple) { /* Markup + str escapes it */
    zz_cj_val esc;
    if (!zz_cj_html_escape(c, a->tuple ? b : a, e->at, &esc)) return false;
    if (a->tuple) y = esc, b = &y;
    else
      x = esc, a = &x;
    x = *a, y = *b;
    x.tuple = y.tuple = true;
    a = &x, b = &y;
  }
  if (op == '+' && a->k == ZZ_CJ_STR && b->k == ZZ_CJ_STR) {
    bool markup = a->tuple;
    if (a->n + b->n > c->lim.max_output)
      return zz_cj_fail(c, e->at, "a string longer than the output limit of %zu bytes (max_output)", c->lim.max_output);
    char *p = zz_cj_alloc(c, a->n + b->n + 1);
    if (!p) return false;
    memcpy(p, a->s, a->n);
    memcpy(p + a->n, b->s, b->n);
    *out = zz_cj_str(p, a->n + b->n);
    out->tuple = markup;
    return true;
  }
  if (op == '+' && a->k == ZZ_CJ_LIST && b->k == ZZ_CJ_LIST && a->tuple == b->tuple) {
    *out = zz_cj_new_list(c, a->l->n + b->l->n);
    if (out->k != ZZ_CJ_LIST) return false;
    memcpy(out->l->v, a->l->v, a->l->n * sizeof *a->l->v);
    memcpy(out->l->v + a->l->n, b->l->v, b->l->n * sizeof *b->l->v);
    out->l->n = a->l->n + b->l->n, out->tuple = a->tuple;
    return true;
  }
  if (op == '*' && (a->k == ZZ_CJ_STR || a->k == ZZ_CJ_LIST) && (b->k == ZZ_CJ_INT || b->k == ZZ_CJ_BOOL))
    return zz_cj_repeat(c, a, b->i, e->at, out);
  if (op == '*' && (b->k == ZZ_CJ_STR || b->k == ZZ_CJ_LIST) && (a->k == ZZ_CJ_INT || a->k == ZZ_CJ_BOOL))
    return zz_cj_repeat(c, b, a->i, e->at, out);
  if (op == '%' && a->k == ZZ_CJ_STR) return zz_cj_fail(c, e->at, "string formatting with '%%' is not supported");
  static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**"};
  const char *nm = strchr("+-*/f%p", op) ? names[strchr("+-*/f%p", op) - "+-*/f%p"] : "?";
  return zz_cj_fail(c, e->at, "'%s' between a %s and a %s (Python refuses it)", nm, zz_cj_kind_name(a->k),
                    zz_cj_kind_name(b->k));
}

static bool zz_cj_chain(zz_cj *c, zz_cj_scope *s, const zz_cj_expr *e, zz_cj_val *out) {
  zz_cj_val a, b;
  if (!zz_cj_eval(c, s, e->args[0], &a)) return false;
  for (int i = 0; i + 1 < e->nargs; i++, a = b) {
    if (!zz_cj_eval(c, s, e->args[i + 1], &b)) return false;
    int op = e->ops[i], cmp = 0;
    bool r;
    if (op == 'e' || op == 'n') {
      r = zz_cj_equal(&a, &b) == (op == 'e');
    } else {
      if (!zz_cj_compare(c, &a, &b, e->args[i + 1]->at, &cmp)) return false;
      r = op == '<' ? cmp < 0 : op == '>' ? cmp > 0 : op == 'l' ? cmp <= 0 : cmp >= 0;
    }
    if (!r) return *out = zz_cj_bool(false), true;
  }
  return *out = zz_cj_bool(true), true;
}

/* ================================================================ calls */

static bool zz_cj_call(zz_cj *c, zz_cj_scope *s, const zz_cj_expr *e, zz_cj_val *out) {
  zz_cj_args a;
  const zz_cj_expr *f = e->a;
  if (f->k == ZZ_CJ_E_ATTR) { /* obj.method(...) on any expression */
    zz_cj_val obj;
    bool found = false;
    if (!zz_cj_eval(c, s, f->a, &obj) || !zz_cj_eval_args(c, s, e, &a)) return false;
    if (!zz_cj_method(c, &obj, f->name, &a, e->at, &found, out)) return false;
    if (found) return true;
    zz_cj_val key = zz_cj_cstr(f->name), fn;
    if (!zz_cj_get(c, &obj, &key, f->at, &fn)) return false;
    if (fn.k == ZZ_CJ_MACRO) return zz_cj_call_macro(c, &fn, a.v, a.kw, a.n, e->at, out);
    if (obj.k == ZZ_CJ_UNDEF || fn.k == ZZ_CJ_UNDEF)
      return zz_cj_fail(c, e->at, "calling %s(), which a %s has not", f->name, zz_cj_kind_name(obj.k));
    return zz_cj_fail(c, e->at, "the method %s() of a %s is not supported", f->name, zz_cj_kind_name(obj.k));
  }
  zz_cj_val fn;
  if (!zz_cj_eval(c, s, f, &fn) || !zz_cj_eval_args(c, s, e, &a)) return false;
  if (fn.k == ZZ_CJ_MACRO) return zz_cj_call_macro(c, &fn, a.v, a.kw, a.n, e->at, out);
  if (fn.k == ZZ_CJ_FUNC) return zz_cj_call_global(c, fn.s, &a, e->at, out);
  if (f->k == ZZ_CJ_E_NAME) return zz_cj_fail(c, e->at, "calling '%s', which is %s", f->name, zz_cj_kind_name(fn.k));
  return zz_cj_fail(c, e->at, "calling a %s", zz_cj_kind_name(fn.k));
}

bool zz_cj_call_macro(zz_cj *c, const zz_cj_val *mv, const zz_cj_val *args, const char **kw, int n, const char *at,
                      zz_cj_val *out) {
  const zz_cj_macro *m = mv->m;
  if (!zz_cj_step(c, at, 1)) return false;
  if (++c->depth > c->lim.max_depth)
    return zz_cj_fail(c, at, "macro calls nested deeper than %d (max_depth)", c->lim.max_depth);
  zz_cj_scope inner = {.up = m->is_caller ? m->caller_scope : m->scope};
  const zz_cj_node *def = m->def;
  const zz_cj_node *body = m->is_caller ? m->caller_body : def->body;
  if (m->is_caller) {
    if (n) return zz_cj_fail(c, at, "caller() with arguments is not supported");
  } else {
    int np = def->nnames - 1, pos = 0;
    zz_cj_val *vals = zz_cj_alloc(c, (size_t)(np + 1) * sizeof *vals);
    bool *set = zz_cj_alloc(c, (size_t)(np + 1));
    if (!vals || !set) return false;
    for (int i = 0; i < n; i++) {
      int k = -1;
      if (!kw[i]) k = pos++;
      else
        for (int p = 0; p < np; p++)
          if (!strcmp(def->names[p + 1], kw[i])) k = p;
      if (k < 0 && kw[i]) return zz_cj_fail(c, at, "macro '%s' has no parameter '%s'", def->names[0], kw[i]);
      if (k < 0 || k >= np) return zz_cj_fail(c, at, "macro '%s' takes %d arguments at most", def->names[0], np);
      vals[k] = args[i], set[k] = true;
    }
    for (int p = 0; p < np; p++) {
      if (!set[p] && def->defaults[p + 1] && !zz_cj_eval(c, &inner, def->defaults[p + 1], &vals[p])) return false;
      if (!zz_cj_scope_set(c, &inner, def->names[p + 1], set[p] || def->defaults[p + 1] ? vals[p] : zz_cj_undef))
        return false;
    }
    if (m->caller_body) {
      zz_cj_macro *cm = zz_cj_alloc(c, sizeof *cm);
      if (!cm) return false;
      *cm = (zz_cj_macro){.caller_body = m->caller_body, .caller_scope = m->caller_scope, .is_caller = true};
      if (!zz_cj_scope_set(c, &inner, "caller", (zz_cj_val){.k = ZZ_CJ_MACRO, .m = cm})) return false;
    }
  }
  zz_cj_buf b = {.limit = c->lim.max_output};
  if (!zz_cj_buf_put(c, &b, "", 0) || !zz_cj_render(c, &inner, body, &b)) return false;
  c->depth--;
  *out = zz_cj_str(b.s, b.n);
  return true;
}

/* ================================================================ expressions */

bool zz_cj_eval(zz_cj *c, zz_cj_scope *s, const zz_cj_expr *e, zz_cj_val *out) {
  zz_cj_val a, b;
  if (!zz_cj_step(c, e->at, 1)) return false;
  switch (e->k) {
    case ZZ_CJ_E_LIT: *out = e->lit; return true;
    case ZZ_CJ_E_NAME:
      if (zz_cj_scope_get(s, e->name, out)) return true;
      *out = zz_cj_is_global(e->name) ? (zz_cj_val){.k = ZZ_CJ_FUNC, .s = e->name} : zz_cj_undef;
      return true;
    case ZZ_CJ_E_ATTR: b = zz_cj_cstr(e->name); return zz_cj_eval(c, s, e->a, &a) && zz_cj_get(c, &a, &b, e->at, out);
    case ZZ_CJ_E_INDEX:
      return zz_cj_eval(c, s, e->a, &a) && zz_cj_eval(c, s, e->b, &b) && zz_cj_get(c, &a, &b, e->at, out);
    case ZZ_CJ_E_SLICE: {
      zz_cj_val lo = zz_cj_none(), hi = zz_cj_none(), st = zz_cj_none();
      if (!zz_cj_eval(c, s, e->a, &a) || (e->b && !zz_cj_eval(c, s, e->b, &lo)) ||
          (e->c && !zz_cj_eval(c, s, e->c, &hi)) || (e->d && !zz_cj_eval(c, s, e->d, &st)))
        return false;
      return zz_cj_slice(c, &a, &lo, &hi, &st, e->at, out);
    }
    case ZZ_CJ_E_CALL: return zz_cj_call(c, s, e, out);
    case ZZ_CJ_E_FILTER:
    case ZZ_CJ_E_TEST: {
      zz_cj_args args;
      if (!zz_cj_eval(c, s, e->a, &a) || !zz_cj_eval_args(c, s, e, &args)) return false;
      if (e->k == ZZ_CJ_E_FILTER) return zz_cj_filter(c, s, e->name, &a, &args, e->at, out);
      bool r;
      if (!zz_cj_test(c, s, e->name, &a, &args, e->at, &r)) return false;
      return *out = zz_cj_bool(r != e->negate), true;
    }
    case ZZ_CJ_E_NOT:
      if (!zz_cj_eval(c, s, e->a, &a)) return false;
      return *out = zz_cj_bool(!zz_cj_truthy(&a)), true;
    case ZZ_CJ_E_NEG:
    case ZZ_CJ_E_POS:
      if (!zz_cj_eval(c, s, e->a, &a)) return false;
      if (!zz_cj_is_number(&a))
        return zz_cj_fail(c, e->at, "unary '%c' of a %s", e->k == ZZ_CJ_E_NEG ? '-' : '+', zz_cj_kind_name(a.k));
      if (e->k == ZZ_CJ_E_POS) return *out = a.k == ZZ_CJ_BOOL ? zz_cj_int(a.i) : a, true;
      if (a.k == ZZ_CJ_FLOAT) return *out = zz_cj_float(-a.f), true;
      if (a.i == INT64_MIN) return zz_cj_fail(c, e->at, "an integer past 64 bits (Python's would grow; not supported)");
      return *out = zz_cj_int(-a.i), true;
    case ZZ_CJ_E_AND: /* Python returns the deciding operand */
      if (!zz_cj_eval(c, s, e->a, &a)) return false;
      if (!zz_cj_truthy(&a)) return *out = a, true;
      return zz_cj_eval(c, s, e->b, out);
    case ZZ_CJ_E_OR:
      if (!zz_cj_eval(c, s, e->a, &a)) return false;
      if (zz_cj_truthy(&a)) return *out = a, true;
      return zz_cj_eval(c, s, e->b, out);
    case ZZ_CJ_E_COND:
      if (!zz_cj_eval(c, s, e->a, &a)) return false;
      if (zz_cj_truthy(&a)) return zz_cj_eval(c, s, e->b, out);
      if (!e->c) return *out = zz_cj_undef, true;
      return zz_cj_eval(c, s, e->c, out);
    case ZZ_CJ_E_BIN:
      return zz_cj_eval(c, s, e->a, &a) && zz_cj_eval(c, s, e->b, &b) && zz_cj_binary(c, e, &a, &b, out);
    case ZZ_CJ_E_CMP: return zz_cj_chain(c, s, e, out);
    case ZZ_CJ_E_LIST:
    case ZZ_CJ_E_TUPLE:
      *out = zz_cj_new_list(c, (size_t)e->nargs);
      if (out->k != ZZ_CJ_LIST) return false;
      out->tuple = e->k == ZZ_CJ_E_TUPLE;
      for (int i = 0; i < e->nargs; i++, out->l->n++)
        if (!zz_cj_eval(c, s, e->args[i], &out->l->v[i])) return false;
      return true;
    case ZZ_CJ_E_DICT:
      *out = zz_cj_new_dict(c, ZZ_CJ_DICT);
      if (out->k != ZZ_CJ_DICT) return false;
      for (int i = 0; i + 1 < e->nargs; i += 2)
        if (!zz_cj_eval(c, s, e->args[i], &a) || !zz_cj_eval(c, s, e->args[i + 1], &b) ||
            !zz_cj_dict_set(c, out->d, a, b))
          return false;
      return true;
  }
  return zz_cj_fail(c, e->at, "internal: an unknown expression");
}
