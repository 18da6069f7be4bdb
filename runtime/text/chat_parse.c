/*
 * chat_parse.c — the expressions of a chat template's tags parsed
 * as jinja2's parser reads them: its precedence (or, and, not,
 * comparisons, + -, ~, * / // %, **, unary, postfix . [] (), then | filters and
 * is-tests), literals of lists, tuples and dicts, keyword arguments, the inline
 * if, slices with a step. The statements (if, for, set, macro, call, filter,
 * break, continue, generation) are chat_stmt.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"

typedef zz_cj_lex lex;
typedef zz_cj_expr expr;

static expr *zz_cj_new_expr(lex *L, zz_cj_ekind k) {
  expr *e = zz_cj_alloc(L->c, sizeof *e);
  if (e) e->k = k, e->at = L->ts;
  return e;
}

static char *zz_cj_lex_name(lex *L) { return zz_cj_strdup(L->c, L->ts, L->tn); }

/* deeper nesting than the limit is refused (the C stack is the parser's) */
static bool zz_cj_enter(lex *L) {
  if (++L->nest > L->c->lim.max_depth * 4)
    return zz_cj_fail(L->c, L->ts, "an expression nested deeper than %d (max_depth)", L->c->lim.max_depth * 4);
  return true;
}

static expr *zz_cj_p_expr(lex *L);
static expr *zz_cj_p_or(lex *L);
static expr *zz_cj_p_unary(lex *L, bool with_filter);

/* e's argument list: ( [expr | name=expr] , ... ) from "(" */
static bool zz_cj_p_args(lex *L, expr *e) {
  expr *args[64];
  const char *kw[64];
  int n = 0;
  if (!zz_cj_lex_next(L)) return false;
  while (!zz_cj_lex_is(L, ")")) {
    if (n == 64) return zz_cj_fail(L->c, L->ts, "more than 64 arguments");
    if (zz_cj_lex_is(L, "*") || zz_cj_lex_is(L, "**"))
      return zz_cj_fail(L->c, L->ts, "*args and **kwargs in a call are not supported");
    kw[n] = NULL;
    if (L->k == ZZ_CJ_T_NAME) {
      lex peek = *L;
      if (!zz_cj_lex_next(&peek)) return false;
      if (zz_cj_lex_is(&peek, "=")) {
        if (!(kw[n] = zz_cj_lex_name(L))) return false;
        *L = peek;
        if (!zz_cj_lex_next(L)) return false;
      }
    }
    if (!kw[n])
      for (int i = 0; i < n; i++)
        if (kw[i]) return zz_cj_fail(L->c, L->ts, "a positional argument after a keyword argument");
    if (!(args[n++] = zz_cj_p_expr(L))) return false;
    if (zz_cj_lex_is(L, ",")) {
      if (!zz_cj_lex_next(L)) return false;
    } else if (!zz_cj_lex_is(L, ")")) {
      return zz_cj_fail(L->c, L->ts, "expected ',' or ')' in a call");
    }
  }
  e->nargs = n;
  e->args = zz_cj_alloc(L->c, (size_t)(n + 1) * sizeof *e->args);
  e->kw = zz_cj_alloc(L->c, (size_t)(n + 1) * sizeof *e->kw);
  if (!e->args || !e->kw) return false;
  memcpy(e->args, args, (size_t)n * sizeof *args);
  memcpy(e->kw, kw, (size_t)n * sizeof *kw);
  return zz_cj_lex_next(L);
}

/* f(args) */
static expr *zz_cj_p_call(lex *L, expr *f) {
  expr *x = zz_cj_new_expr(L, ZZ_CJ_E_CALL);
  if (!x) return NULL;
  x->a = f;
  return zz_cj_p_args(L, x) ? x : NULL;
}

/* items of a list, tuple or dict literal up to close */
static bool zz_cj_p_items(lex *L, expr *e, const char *close, bool dict) {
  expr **v = NULL;
  int n = 0, cap = 0;
  while (!zz_cj_lex_is(L, close)) {
    if (n + 2 > cap) {
      cap = cap ? cap * 2 : 16;
      expr **nv = zz_cj_alloc(L->c, (size_t)cap * sizeof *nv);
      if (!nv) return false;
      if (n) memcpy(nv, v, (size_t)n * sizeof *nv);
      v = nv;
    }
    if (!(v[n++] = zz_cj_p_expr(L))) return false;
    if (dict && (!zz_cj_lex_expect(L, ":") || !(v[n++] = zz_cj_p_expr(L)))) return false;
    if (zz_cj_lex_is(L, ",")) {
      if (!zz_cj_lex_next(L)) return false;
      if (e->k == ZZ_CJ_E_LIST && !strcmp(close, ")")) e->k = ZZ_CJ_E_TUPLE;
    } else if (!zz_cj_lex_is(L, close)) {
      return zz_cj_fail(L->c, L->ts, "expected ',' or '%s'", close);
    }
  }
  e->args = v, e->nargs = n;
  return zz_cj_lex_next(L);
}

static expr *zz_cj_p_primary(lex *L) {
  expr *e = NULL;
  if (L->k == ZZ_CJ_T_STR || L->k == ZZ_CJ_T_INT || L->k == ZZ_CJ_T_FLOAT) {
    if (!(e = zz_cj_new_expr(L, ZZ_CJ_E_LIT))) return NULL;
    e->lit = L->v;
    if (!zz_cj_lex_next(L)) return NULL;
    while (e->lit.k == ZZ_CJ_STR && L->k == ZZ_CJ_T_STR) { /* adjacent strings join */
      char *s = zz_cj_alloc(L->c, e->lit.n + L->v.n + 1);
      if (!s) return NULL;
      memcpy(s, e->lit.s, e->lit.n);
      memcpy(s + e->lit.n, L->v.s, L->v.n);
      e->lit = zz_cj_str(s, e->lit.n + L->v.n);
      if (!zz_cj_lex_next(L)) return NULL;
    }
    return e;
  }
  if (L->k == ZZ_CJ_T_NAME) {
    static const char *const lits[] = {"true", "True", "false", "False", "none", "None"};
    for (int i = 0; i < 6; i++)
      if (zz_cj_lex_is(L, lits[i])) {
        if (!(e = zz_cj_new_expr(L, ZZ_CJ_E_LIT))) return NULL;
        e->lit = i < 4 ? zz_cj_bool(i < 2) : zz_cj_none();
      }
    if (!e && (!(e = zz_cj_new_expr(L, ZZ_CJ_E_NAME)) || !(e->name = zz_cj_lex_name(L)))) return NULL;
    return zz_cj_lex_next(L) ? e : NULL;
  }
  if (zz_cj_lex_is(L, "(")) { /* (e), or a tuple */
    if (!(e = zz_cj_new_expr(L, ZZ_CJ_E_LIST)) || !zz_cj_lex_next(L)) return NULL;
    if (zz_cj_lex_is(L, ")")) {
      e->k = ZZ_CJ_E_TUPLE;
      return zz_cj_lex_next(L) ? e : NULL;
    }
    if (!zz_cj_p_items(L, e, ")", false)) return NULL;
    return e->k == ZZ_CJ_E_TUPLE ? e : e->args[0];
  }
  if (zz_cj_lex_is(L, "[") || zz_cj_lex_is(L, "{")) {
    bool dict = zz_cj_lex_is(L, "{");
    if (!(e = zz_cj_new_expr(L, dict ? ZZ_CJ_E_DICT : ZZ_CJ_E_LIST)) || !zz_cj_lex_next(L)) return NULL;
    return zz_cj_p_items(L, e, dict ? "}" : "]", dict) ? e : NULL;
  }
  zz_cj_fail(L->c, L->ts, "expected a value, found '%.*s'", (int)(L->tn ? L->tn : 3), L->tn ? L->ts : "end");
  return NULL;
}

/* a[...]: an index or a slice a[b:c:d] */
static expr *zz_cj_p_subscript(lex *L, expr *a) {
  expr *x = zz_cj_new_expr(L, ZZ_CJ_E_INDEX);
  if (!x || !zz_cj_lex_next(L)) return NULL;
  x->a = a;
  if (!zz_cj_lex_is(L, ":") && !(x->b = zz_cj_p_expr(L))) return NULL;
  if (zz_cj_lex_is(L, ":")) {
    x->k = ZZ_CJ_E_SLICE;
    if (!zz_cj_lex_next(L)) return NULL;
    if (!zz_cj_lex_is(L, "]") && !zz_cj_lex_is(L, ":") && !(x->c = zz_cj_p_expr(L))) return NULL;
    if (zz_cj_lex_is(L, ":")) {
      if (!zz_cj_lex_next(L)) return NULL;
      if (!zz_cj_lex_is(L, "]") && !(x->d = zz_cj_p_expr(L))) return NULL;
    }
  }
  return zz_cj_lex_expect(L, "]") ? x : NULL;
}

static expr *zz_cj_p_postfix(lex *L, expr *e) {
  while (e) {
    if (zz_cj_lex_is(L, ".")) {
      if (!zz_cj_lex_next(L)) return NULL;
      if (L->k == ZZ_CJ_T_INT) { /* a.0 is a[0] */
        expr *x = zz_cj_new_expr(L, ZZ_CJ_E_INDEX), *i = zz_cj_new_expr(L, ZZ_CJ_E_LIT);
        if (!x || !i) return NULL;
        i->lit = L->v, x->a = e, x->b = i, e = x;
        if (!zz_cj_lex_next(L)) return NULL;
        continue;
      }
      if (L->k != ZZ_CJ_T_NAME) return zz_cj_fail(L->c, L->ts, "expected a name after '.'"), NULL;
      expr *x = zz_cj_new_expr(L, ZZ_CJ_E_ATTR);
      if (!x || !(x->name = zz_cj_lex_name(L)) || !zz_cj_lex_next(L)) return NULL;
      x->a = e, e = x;
    } else if (zz_cj_lex_is(L, "[")) {
      e = zz_cj_p_subscript(L, e);
    } else if (zz_cj_lex_is(L, "(")) {
      e = zz_cj_p_call(L, e);
    } else {
      break;
    }
  }
  return e;
}

/* "|" filters, "is" tests and calls after them */
static expr *zz_cj_p_filters(lex *L, expr *e) {
  while (e) {
    if (zz_cj_lex_is(L, "|") || zz_cj_lex_is(L, "is")) {
      bool filter = zz_cj_lex_is(L, "|");
      expr *x = zz_cj_new_expr(L, filter ? ZZ_CJ_E_FILTER : ZZ_CJ_E_TEST);
      if (!x || !zz_cj_lex_next(L)) return NULL;
      if (!filter && zz_cj_lex_is(L, "not")) {
        x->negate = true;
        if (!zz_cj_lex_next(L)) return NULL;
      }
      if (L->k != ZZ_CJ_T_NAME) return zz_cj_fail(L->c, L->ts, "expected a %s name", filter ? "filter" : "test"), NULL;
      if (!(x->name = zz_cj_lex_name(L)) || !zz_cj_lex_next(L)) return NULL;
      x->a = e, e = x;
      if (zz_cj_lex_is(L, ".")) return zz_cj_fail(L->c, L->ts, "a dotted filter or test name is not supported"), NULL;
      if (zz_cj_lex_is(L, "(")) {
        if (!zz_cj_p_args(L, x)) return NULL;
      } else if (!filter &&
                 (L->k == ZZ_CJ_T_NAME || L->k == ZZ_CJ_T_STR || L->k == ZZ_CJ_T_INT || L->k == ZZ_CJ_T_FLOAT ||
                  zz_cj_lex_is(L, "[") || zz_cj_lex_is(L, "{")) &&
                 !zz_cj_lex_is(L, "else") && !zz_cj_lex_is(L, "or") && !zz_cj_lex_is(L, "and")) {
        /* "is divisibleby 3": one argument without parentheses */
        x->args = zz_cj_alloc(L->c, sizeof *x->args);
        x->kw = zz_cj_alloc(L->c, sizeof *x->kw);
        if (!x->args || !x->kw || !(x->args[0] = zz_cj_p_postfix(L, zz_cj_p_primary(L)))) return NULL;
        x->nargs = 1;
      }
    } else if (zz_cj_lex_is(L, "(")) {
      e = zz_cj_p_call(L, e);
    } else {
      break;
    }
  }
  return e;
}

static expr *zz_cj_p_unary(lex *L, bool with_filter) {
  expr *e;
  if (!zz_cj_enter(L)) return NULL;
  if (zz_cj_lex_is(L, "-") || zz_cj_lex_is(L, "+")) {
    if (!(e = zz_cj_new_expr(L, zz_cj_lex_is(L, "-") ? ZZ_CJ_E_NEG : ZZ_CJ_E_POS)) || !zz_cj_lex_next(L) ||
        !(e->a = zz_cj_p_unary(L, false)))
      return NULL;
  } else {
    e = zz_cj_p_primary(L);
  }
  e = zz_cj_p_postfix(L, e);
  if (with_filter) e = zz_cj_p_filters(L, e);
  L->nest--;
  return e;
}

static expr *zz_cj_bin(lex *L, int op, const char *at, expr *a, expr *b) {
  if (!a || !b) return NULL;
  expr *x = zz_cj_new_expr(L, ZZ_CJ_E_BIN);
  if (!x) return NULL;
  x->op = op, x->a = a, x->b = b, x->at = at;
  return x;
}

static expr *zz_cj_p_pow(lex *L) {
  expr *e = zz_cj_p_unary(L, true);
  while (e && zz_cj_lex_is(L, "**")) {
    const char *at = L->ts;
    if (!zz_cj_lex_next(L)) return NULL;
    e = zz_cj_bin(L, 'p', at, e, zz_cj_p_unary(L, true));
  }
  return e;
}

static expr *zz_cj_p_mul(lex *L) {
  expr *e = zz_cj_p_pow(L);
  while (e && (zz_cj_lex_is(L, "*") || zz_cj_lex_is(L, "/") || zz_cj_lex_is(L, "//") || zz_cj_lex_is(L, "%"))) {
    int op = zz_cj_lex_is(L, "//") ? 'f' : *L->ts;
    const char *at = L->ts;
    if (!zz_cj_lex_next(L)) return NULL;
    e = zz_cj_bin(L, op, at, e, zz_cj_p_pow(L));
  }
  return e;
}

static expr *zz_cj_p_concat(lex *L) {
  expr *e = zz_cj_p_mul(L);
  while (e && zz_cj_lex_is(L, "~")) {
    const char *at = L->ts;
    if (!zz_cj_lex_next(L)) return NULL;
    e = zz_cj_bin(L, '~', at, e, zz_cj_p_mul(L));
  }
  return e;
}

static expr *zz_cj_p_add(lex *L) {
  expr *e = zz_cj_p_concat(L);
  while (e && (zz_cj_lex_is(L, "+") || zz_cj_lex_is(L, "-"))) {
    int op = *L->ts;
    const char *at = L->ts;
    if (!zz_cj_lex_next(L)) return NULL;
    e = zz_cj_bin(L, op, at, e, zz_cj_p_concat(L));
  }
  return e;
}

/* a chain of comparisons (one CMP node), and in / not in (BIN) */
static expr *zz_cj_p_compare(lex *L) {
  expr *e = zz_cj_p_add(L), *chain = NULL;
  expr *ops_e[32];
  int ops[32], n = 0;
  for (;;) {
    if (!e) return NULL;
    const char *at = L->ts;
    int op = zz_cj_lex_is(L, "==")   ? 'e'
             : zz_cj_lex_is(L, "!=") ? 'n'
             : zz_cj_lex_is(L, "<=") ? 'l'
             : zz_cj_lex_is(L, ">=") ? 'g'
             : zz_cj_lex_is(L, "<")  ? '<'
             : zz_cj_lex_is(L, ">")  ? '>'
                                     : 0;
    if (op) {
      if (n == 31) return zz_cj_fail(L->c, at, "a chain of more than 31 comparisons"), NULL;
      if (!n) ops_e[n] = e;
      if (!zz_cj_lex_next(L) || !(ops_e[n + 1] = zz_cj_p_add(L))) return NULL;
      ops[n++] = op;
      continue;
    }
    if (n) { /* the chain ends: one node */
      if (!(chain = zz_cj_new_expr(L, ZZ_CJ_E_CMP))) return NULL;
      chain->at = ops_e[0]->at;
      chain->nargs = n + 1;
      chain->args = zz_cj_alloc(L->c, (size_t)(n + 1) * sizeof *chain->args);
      chain->ops = zz_cj_alloc(L->c, (size_t)n * sizeof *chain->ops);
      if (!chain->args || !chain->ops) return NULL;
      memcpy(chain->args, ops_e, (size_t)(n + 1) * sizeof *ops_e);
      memcpy(chain->ops, ops, (size_t)n * sizeof *ops);
      e = chain, n = 0;
    }
    if (zz_cj_lex_is(L, "in")) {
      if (!zz_cj_lex_next(L)) return NULL;
      e = zz_cj_bin(L, 'i', at, e, zz_cj_p_add(L));
      continue;
    }
    if (zz_cj_lex_is(L, "not")) {
      lex save = *L;
      if (!zz_cj_lex_next(L)) return NULL;
      if (zz_cj_lex_is(L, "in")) {
        if (!zz_cj_lex_next(L)) return NULL;
        e = zz_cj_bin(L, 'o', at, e, zz_cj_p_add(L));
        continue;
      }
      *L = save;
    }
    return e;
  }
}

static expr *zz_cj_p_not(lex *L) {
  if (zz_cj_lex_is(L, "not")) {
    expr *x = zz_cj_new_expr(L, ZZ_CJ_E_NOT);
    if (!x || !zz_cj_enter(L) || !zz_cj_lex_next(L) || !(x->a = zz_cj_p_not(L))) return NULL;
    L->nest--;
    return x;
  }
  return zz_cj_p_compare(L);
}

static expr *zz_cj_p_logic(lex *L, bool or) {
  expr *e = or ? zz_cj_p_logic(L, false) : zz_cj_p_not(L);
  while (e && zz_cj_lex_is(L, or ? "or" : "and")) {
    expr *x = zz_cj_new_expr(L, or ? ZZ_CJ_E_OR : ZZ_CJ_E_AND);
    if (!x || !zz_cj_lex_next(L)) return NULL;
    x->a = e;
    if (!(x->b = or ? zz_cj_p_logic(L, false) : zz_cj_p_not(L))) return NULL;
    e = x;
  }
  return e;
}

static expr *zz_cj_p_or(lex *L) { return zz_cj_p_logic(L, true); }

/* or-expressions with the inline "x if c else y" */
static expr *zz_cj_p_expr(lex *L) {
  if (!zz_cj_enter(L)) return NULL;
  expr *e = zz_cj_p_or(L);
  while (e && zz_cj_lex_is(L, "if")) {
    expr *x = zz_cj_new_expr(L, ZZ_CJ_E_COND);
    if (!x || !zz_cj_lex_next(L) || !(x->a = zz_cj_p_or(L))) return NULL;
    x->b = e;
    if (zz_cj_lex_is(L, "else") && (!zz_cj_lex_next(L) || !(x->c = zz_cj_p_expr(L)))) return NULL;
    e = x;
  }
  L->nest--;
  return L->c->err[0] ? NULL : e;
}

zz_cj_expr *zz_cj_parse_expr(zz_cj_lex *L, bool with_if) { return with_if ? zz_cj_p_expr(L) : zz_cj_p_or(L); }
