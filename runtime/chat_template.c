/*
 * chat_template.c — the subset of Jinja that Hugging Face chat templates are
 * written in (zz_chat.h), rendered as transformers renders them: jinja2 with
 * trim_blocks and lstrip_blocks, the variables messages, bos_token, eos_token,
 * add_generation_prompt and the function raise_exception.
 *
 * The subset: text, {{ expr }}, {# comments #}, {% if / elif / else / endif %},
 * {% for x in expr %} ... {% endfor %} with loop.index, index0, first, last, length,
 * revindex, revindex0; {% set name = expr %} (scoped to the loop it is in, as
 * Jinja scopes it); whitespace control {%- -%} {{- -}}. Expressions: string, integer,
 * true / false / none literals, names, a.b, a['b'], a[i], a[i:j], calls of
 * raise_exception and of the string methods strip, lstrip, rstrip, upper, lower,
 * startswith, endswith; the filters trim, length, upper, lower, string; the tests
 * defined, undefined, none, string; + - * % ~, comparisons, in / not in, and, or,
 * not, parentheses. Anything else is an error naming it and its line.
 *
 * Everything of one render lives in one arena, freed at the end.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zz_chat.h"

/* ================================================================ arena and errors */

typedef struct zz_arena_blk {
  struct zz_arena_blk *next;
  size_t used, cap;
  char data[];
} zz_arena_blk;

typedef struct jctx {
  zz_arena_blk *blocks;
  char err[400];   /* the first error; rendering stops at it */
  bool raised;     /* the error is the template's raise_exception */
  const char *src; /* the template, for line numbers */
} jctx;

static void *jalloc(jctx *c, size_t n) {
  n = (n + 15) & ~(size_t)15;
  zz_arena_blk *b = c->blocks;
  if (!b || b->used + n > b->cap) {
    size_t cap = n > 65536 ? n : 65536;
    zz_arena_blk *nb = malloc(sizeof *nb + cap);
    if (!nb) return NULL;
    nb->next = b, nb->used = 0, nb->cap = cap;
    c->blocks = b = nb;
  }
  void *p = b->data + b->used;
  b->used += n;
  memset(p, 0, n);
  return p;
}

static int jline(const jctx *c, const char *at) {
  int line = 1;
  for (const char *p = c->src; p && at && p < at && *p; p++) line += *p == '\n';
  return line;
}

static bool jfail(jctx *c, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool jfail(jctx *c, const char *at, const char *fmt, ...) {
  if (c->err[0]) return false;
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (at) snprintf(c->err, sizeof c->err, "line %d of the template: %s", jline(c, at), msg);
  else
    snprintf(c->err, sizeof c->err, "%s", msg);
  return false;
}

/* ================================================================ values */

typedef enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_STR, V_LIST, V_MSG, V_LOOP } vkind;

typedef struct val {
  vkind k;
  long long i;             /* bool, int */
  const char *s;           /* str */
  size_t n;                /* str bytes */
  const struct val *items; /* list */
  size_t len;
  const zz_chat_msg *msg;
  long long idx, count; /* loop: index0 and length */
} val;

static const val VUNDEF = {.k = V_UNDEF};

static val vstr(const char *s, size_t n) { return (val){.k = V_STR, .s = s, .n = n}; }
static val vbool(bool b) { return (val){.k = V_BOOL, .i = b}; }
static val vint(long long i) { return (val){.k = V_INT, .i = i}; }

static bool vtrue(const val *v) {
  switch (v->k) {
    case V_BOOL:
    case V_INT: return v->i != 0;
    case V_STR: return v->n > 0;
    case V_LIST: return v->len > 0;
    case V_MSG:
    case V_LOOP: return true;
    default: return false;
  }
}

static const char *vkind_name(vkind k) {
  static const char *const n[] = {"undefined", "none", "bool", "integer", "string", "list", "message", "loop"};
  return n[k];
}

/* Python's str() of a value, as {{ }} prints it (undefined prints nothing) */
static bool vtext(jctx *c, const val *v, const char *at, const char **s, size_t *n) {
  static char buf[32];
  switch (v->k) {
    case V_UNDEF: *s = "", *n = 0; return true;
    case V_NONE: *s = "None", *n = 4; return true;
    case V_BOOL: *s = v->i ? "True" : "False", *n = strlen(*s); return true;
    case V_INT: {
      snprintf(buf, sizeof buf, "%lld", v->i);
      size_t k = strlen(buf);
      char *p = jalloc(c, k + 1);
      if (!p) return jfail(c, at, "out of memory");
      memcpy(p, buf, k + 1);
      *s = p, *n = k;
      return true;
    }
    case V_STR: *s = v->s, *n = v->n; return true;
    default: return jfail(c, at, "printing a %s is not supported", vkind_name(v->k));
  }
}

static bool veq(const val *a, const val *b) {
  bool an = a->k == V_BOOL || a->k == V_INT, bn = b->k == V_BOOL || b->k == V_INT;
  if (an && bn) return a->i == b->i; /* Python: True == 1 */
  if (a->k == V_STR && b->k == V_STR) return a->n == b->n && memcmp(a->s, b->s, a->n) == 0;
  if ((a->k == V_NONE || a->k == V_UNDEF) && a->k == b->k) return true;
  if (a->k == V_MSG && b->k == V_MSG) return a->msg == b->msg;
  return false;
}

static val vconcat(jctx *c, const char *s1, size_t n1, const char *s2, size_t n2) {
  char *p = jalloc(c, n1 + n2 + 1);
  if (!p) {
    jfail(c, NULL, "out of memory");
    return VUNDEF;
  }
  memcpy(p, s1, n1);
  memcpy(p + n1, s2, n2);
  return vstr(p, n1 + n2);
}

/* ================================================================ expressions */

typedef enum {
  E_LIT,
  E_NAME,
  E_ATTR,
  E_INDEX,
  E_SLICE,
  E_CALL,
  E_FILTER,
  E_TEST,
  E_NOT,
  E_NEG,
  E_BIN,
  E_AND,
  E_OR
} ekind;

typedef struct expr {
  ekind k;
  const char *at;   /* where in the template */
  val lit;          /* E_LIT */
  const char *name; /* E_NAME, E_ATTR, E_FILTER, E_TEST, E_CALL (method name or NULL) */
  int op;           /* E_BIN: '+', '-', '*', '%', '~', 'e' ==, 'n' !=, '<', '>', 'l' <=, 'g' >=, 'i' in, 'o' not in */
  bool negate;      /* E_TEST: is not */
  struct expr *a, *b, *c; /* operands; E_SLICE: a[b:c] (NULL: open) */
  struct expr *args[4];
  int nargs;
} expr;

/* ---- the expression lexer: one token at a time over [p, end) */

typedef enum { T_END, T_NAME, T_STR, T_INT, T_OP } tkind;

typedef struct lex {
  jctx *c;
  const char *p, *end;
  tkind k;
  const char *ts; /* token text */
  size_t tn;
  val sv; /* T_STR / T_INT value */
} lex;

static bool lnext(lex *L) {
  while (L->p < L->end && isspace((unsigned char)*L->p)) L->p++;
  L->ts = L->p;
  if (L->p >= L->end) {
    L->k = T_END, L->tn = 0;
    return true;
  }
  char ch = *L->p;
  if (isalpha((unsigned char)ch) || ch == '_') {
    while (L->p < L->end && (isalnum((unsigned char)*L->p) || *L->p == '_')) L->p++;
    L->k = T_NAME, L->tn = (size_t)(L->p - L->ts);
    return true;
  }
  if (isdigit((unsigned char)ch)) {
    long long v = 0;
    while (L->p < L->end && isdigit((unsigned char)*L->p)) {
      if (v > (INT64_MAX - 9) / 10) return jfail(L->c, L->ts, "an integer too large");
      v = v * 10 + (*L->p++ - '0');
    }
    if (L->p < L->end && *L->p == '.') return jfail(L->c, L->ts, "floating-point numbers are not supported");
    L->k = T_INT, L->tn = (size_t)(L->p - L->ts), L->sv = vint(v);
    return true;
  }
  if (ch == '\'' || ch == '"') { /* Python's escapes that templates use */
    const char *q = L->p + 1;
    char *out = jalloc(L->c, (size_t)(L->end - q) + 1);
    if (!out) return jfail(L->c, L->ts, "out of memory");
    size_t n = 0;
    while (q < L->end && *q != ch) {
      if (*q == '\\' && q + 1 < L->end) {
        q++;
        switch (*q) {
          case 'n': out[n++] = '\n'; break;
          case 't': out[n++] = '\t'; break;
          case 'r': out[n++] = '\r'; break;
          case '\\':
          case '\'':
          case '"': out[n++] = *q; break;
          default: out[n++] = '\\', out[n++] = *q; break; /* Python keeps an unknown escape */
        }
        q++;
      } else {
        out[n++] = *q++;
      }
    }
    if (q >= L->end) return jfail(L->c, L->ts, "a string that does not end");
    L->p = q + 1;
    L->k = T_STR, L->tn = (size_t)(L->p - L->ts), L->sv = vstr(out, n);
    return true;
  }
  static const char *const two[] = {"==", "!=", "<=", ">=", "//", "**"};
  for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
    if (L->end - L->p >= 2 && memcmp(L->p, two[i], 2) == 0) {
      L->p += 2;
      L->k = T_OP, L->tn = 2;
      return true;
    }
  if (strchr("+-*/%~()[].,:|<>=", ch)) {
    L->p++;
    L->k = T_OP, L->tn = 1;
    return true;
  }
  return jfail(L->c, L->ts, "unexpected character '%c' in an expression", ch);
}

static bool lis(const lex *L, const char *s) {
  return (L->k == T_OP || L->k == T_NAME) && L->tn == strlen(s) && memcmp(L->ts, s, L->tn) == 0;
}

static bool lexpect(lex *L, const char *s) {
  if (!lis(L, s))
    return jfail(L->c, L->ts, "expected '%s' here, found '%.*s'", s, (int)(L->tn ? L->tn : 3), L->tn ? L->ts : "end");
  return lnext(L);
}

static expr *enew(lex *L, ekind k) {
  expr *e = jalloc(L->c, sizeof *e);
  if (!e) {
    jfail(L->c, L->ts, "out of memory");
    return NULL;
  }
  e->k = k, e->at = L->ts;
  return e;
}

static char *lname(lex *L) {
  char *s = jalloc(L->c, L->tn + 1);
  if (s) memcpy(s, L->ts, L->tn);
  return s;
}

static expr *parse_expr(lex *L);

static expr *parse_primary(lex *L) {
  expr *e = NULL;
  if (L->k == T_STR || L->k == T_INT) {
    if (!(e = enew(L, E_LIT))) return NULL;
    e->lit = L->sv;
    /* adjacent string literals join, as in Python */
    if (!lnext(L)) return NULL;
    while (e->lit.k == V_STR && L->k == T_STR) {
      e->lit = vconcat(L->c, e->lit.s, e->lit.n, L->sv.s, L->sv.n);
      if (!lnext(L)) return NULL;
    }
    return e;
  }
  if (L->k == T_NAME) {
    if (lis(L, "true") || lis(L, "True") || lis(L, "false") || lis(L, "False") || lis(L, "none") || lis(L, "None")) {
      if (!(e = enew(L, E_LIT))) return NULL;
      e->lit = lis(L, "none") || lis(L, "None") ? (val){.k = V_NONE} : vbool(lis(L, "true") || lis(L, "True"));
    } else {
      if (!(e = enew(L, E_NAME)) || !(e->name = lname(L))) return NULL;
    }
    return lnext(L) ? e : NULL;
  }
  if (lis(L, "(")) {
    if (!lnext(L) || !(e = parse_expr(L)) || !lexpect(L, ")")) return NULL;
    return e;
  }
  if (lis(L, "[") || lis(L, "{")) jfail(L->c, L->ts, "list and dict literals are not supported");
  else
    jfail(L->c, L->ts, "expected a value, found '%.*s'", (int)(L->tn ? L->tn : 3), L->tn ? L->ts : "end");
  return NULL;
}

static bool parse_args(lex *L, expr *e) {
  if (!lnext(L)) return false; /* past "(" */
  while (!lis(L, ")")) {
    if (e->nargs == 4) return jfail(L->c, L->ts, "more than 4 arguments");
    if (L->k == T_NAME) { /* f(a=1): not a comparison, a keyword */
      lex peek = *L;
      if (!lnext(&peek)) return false;
      if (lis(&peek, "=")) return jfail(L->c, L->ts, "keyword arguments (a=...) are not supported");
    }
    if (!(e->args[e->nargs++] = parse_expr(L))) return false;
    if (lis(L, ",") && !lnext(L)) return false;
    else if (!lis(L, ",") && !lis(L, ")"))
      return jfail(L->c, L->ts, "expected ',' or ')' in a call");
  }
  return lnext(L);
}

/* a.b, a[i], a[i:j], a(...), then filters |f and tests "is [not] t" */
static expr *parse_postfix(lex *L) {
  expr *e = parse_primary(L);
  while (e) {
    if (lis(L, ".")) {
      if (!lnext(L)) return NULL;
      if (L->k != T_NAME) return jfail(L->c, L->ts, "expected a name after '.'"), NULL;
      expr *x = enew(L, E_ATTR);
      if (!x || !(x->name = lname(L)) || !lnext(L)) return NULL;
      x->a = e, e = x;
    } else if (lis(L, "[")) {
      expr *x = enew(L, E_INDEX);
      if (!x || !lnext(L)) return NULL;
      x->a = e;
      if (!lis(L, ":") && !(x->b = parse_expr(L))) return NULL;
      if (lis(L, ":")) {
        x->k = E_SLICE;
        if (!lnext(L)) return NULL;
        if (!lis(L, "]") && !(x->c = parse_expr(L))) return NULL;
      }
      if (!lexpect(L, "]")) return NULL;
      e = x;
    } else if (lis(L, "(")) {
      expr *x = enew(L, E_CALL);
      if (!x) return NULL;
      x->a = e;
      if (!parse_args(L, x)) return NULL;
      e = x;
    } else if (lis(L, "|")) {
      if (!lnext(L)) return NULL;
      if (L->k != T_NAME) return jfail(L->c, L->ts, "expected a filter name after '|'"), NULL;
      expr *x = enew(L, E_FILTER);
      if (!x || !(x->name = lname(L)) || !lnext(L)) return NULL;
      x->a = e;
      if (lis(L, "(") && !parse_args(L, x)) return NULL;
      e = x;
    } else if (lis(L, "is")) {
      expr *x = enew(L, E_TEST);
      if (!x || !lnext(L)) return NULL;
      if (lis(L, "not")) {
        x->negate = true;
        if (!lnext(L)) return NULL;
      }
      if (L->k != T_NAME) return jfail(L->c, L->ts, "expected a test name after 'is'"), NULL;
      if (!(x->name = lname(L)) || !lnext(L)) return NULL;
      x->a = e, e = x;
    } else {
      break;
    }
  }
  return e;
}

static expr *parse_unary(lex *L) {
  if (lis(L, "-")) {
    expr *x = enew(L, E_NEG);
    if (!x || !lnext(L) || !(x->a = parse_unary(L))) return NULL;
    return x;
  }
  return parse_postfix(L);
}

static expr *ebin(lex *L, int op, expr *a, expr *b) {
  if (!a || !b) return NULL;
  expr *x = enew(L, E_BIN);
  if (!x) return NULL;
  x->op = op, x->a = a, x->b = b;
  return x;
}

static expr *parse_mul(lex *L) {
  expr *e = parse_unary(L);
  while (e && (lis(L, "*") || lis(L, "%") || lis(L, "/") || lis(L, "//"))) {
    if (lis(L, "/") || lis(L, "//")) return jfail(L->c, L->ts, "division is not supported"), NULL;
    int op = *L->ts;
    if (!lnext(L)) return NULL;
    e = ebin(L, op, e, parse_unary(L));
  }
  return e;
}

static expr *parse_concat(lex *L) {
  expr *e = parse_mul(L);
  while (e && lis(L, "~")) {
    if (!lnext(L)) return NULL;
    e = ebin(L, '~', e, parse_mul(L));
  }
  return e;
}

static expr *parse_add(lex *L) {
  expr *e = parse_concat(L);
  while (e && (lis(L, "+") || lis(L, "-"))) {
    int op = *L->ts;
    if (!lnext(L)) return NULL;
    e = ebin(L, op, e, parse_concat(L));
  }
  return e;
}

static expr *parse_compare(lex *L) {
  expr *e = parse_add(L);
  for (;;) {
    if (!e) return NULL;
    int op = lis(L, "==")   ? 'e'
             : lis(L, "!=") ? 'n'
             : lis(L, "<=") ? 'l'
             : lis(L, ">=") ? 'g'
             : lis(L, "<")  ? '<'
             : lis(L, ">")  ? '>'
             : lis(L, "in") ? 'i'
                            : 0;
    if (!op && lis(L, "not")) { /* "not in" */
      lex save = *L;
      if (!lnext(L)) return NULL;
      if (!lis(L, "in")) {
        *L = save;
        return e;
      }
      op = 'o';
    }
    if (!op) return e;
    if (!lnext(L)) return NULL;
    e = ebin(L, op, e, parse_add(L));
  }
}

static expr *parse_not(lex *L) {
  if (lis(L, "not")) {
    expr *x = enew(L, E_NOT);
    if (!x || !lnext(L) || !(x->a = parse_not(L))) return NULL;
    return x;
  }
  return parse_compare(L);
}

static expr *parse_and(lex *L) {
  expr *e = parse_not(L);
  while (e && lis(L, "and")) {
    expr *x = enew(L, E_AND);
    if (!x || !lnext(L)) return NULL;
    x->a = e;
    if (!(x->b = parse_not(L))) return NULL;
    e = x;
  }
  return e;
}

static expr *parse_expr(lex *L) {
  expr *e = parse_and(L);
  while (e && lis(L, "or")) {
    expr *x = enew(L, E_OR);
    if (!x || !lnext(L)) return NULL;
    x->a = e;
    if (!(x->b = parse_and(L))) return NULL;
    e = x;
  }
  if (e && lis(L, "if")) jfail(L->c, L->ts, "the inline 'x if c else y' is not supported");
  return L->c->err[0] ? NULL : e;
}

/* ================================================================ evaluation */

typedef struct var {
  const char *name;
  val v;
  struct var *next;
} var;

typedef struct scope {
  var *vars;
  struct scope *up;
} scope;

static bool scope_get(const scope *s, const char *name, val *out) {
  for (; s; s = s->up)
    for (const var *v = s->vars; v; v = v->next)
      if (strcmp(v->name, name) == 0) {
        *out = v->v;
        return true;
      }
  return false;
}

static bool scope_set(jctx *c, scope *s, const char *name, val v) {
  for (var *x = s->vars; x; x = x->next)
    if (strcmp(x->name, name) == 0) {
      x->v = v;
      return true;
    }
  var *x = jalloc(c, sizeof *x);
  if (!x) return jfail(c, NULL, "out of memory");
  x->name = name, x->v = v, x->next = s->vars;
  s->vars = x;
  return true;
}

static bool eval(jctx *c, scope *s, const expr *e, val *out);

static bool need_str(jctx *c, const val *v, const char *at, const char *what) {
  if (v->k == V_STR) return true;
  return jfail(c, at, "%s wants a string, not %s", what, vkind_name(v->k));
}

static bool str_strip(jctx *c, const val *v, const char *at, bool left, bool right, val *out) {
  if (!need_str(c, v, at, "strip")) return false;
  const char *p = v->s;
  size_t n = v->n;
  while (left && n && isspace((unsigned char)*p)) p++, n--;
  while (right && n && isspace((unsigned char)p[n - 1])) n--;
  *out = vstr(p, n);
  return true;
}

static bool str_case(jctx *c, const val *v, const char *at, bool up, val *out) {
  if (!need_str(c, v, at, up ? "upper" : "lower")) return false;
  char *p = jalloc(c, v->n + 1);
  if (!p) return jfail(c, at, "out of memory");
  for (size_t i = 0; i < v->n; i++)
    p[i] = (char)(up ? toupper((unsigned char)v->s[i]) : tolower((unsigned char)v->s[i]));
  *out = vstr(p, v->n);
  return true;
}

/* a.name: a message's role / content, the loop's fields; undefined otherwise */
static bool get_attr(jctx *c, const val *a, const char *name, const char *at, val *out) {
  *out = VUNDEF;
  if (a->k == V_MSG) {
    if (!strcmp(name, "role")) *out = vstr(a->msg->role, strlen(a->msg->role));
    if (!strcmp(name, "content")) *out = vstr(a->msg->content, strlen(a->msg->content));
  } else if (a->k == V_LOOP) {
    if (!strcmp(name, "index0")) *out = vint(a->idx);
    else if (!strcmp(name, "index"))
      *out = vint(a->idx + 1);
    else if (!strcmp(name, "first"))
      *out = vbool(a->idx == 0);
    else if (!strcmp(name, "last"))
      *out = vbool(a->idx == a->count - 1);
    else if (!strcmp(name, "length"))
      *out = vint(a->count);
    else if (!strcmp(name, "revindex"))
      *out = vint(a->count - a->idx);
    else if (!strcmp(name, "revindex0"))
      *out = vint(a->count - a->idx - 1);
    else
      return jfail(c, at, "loop.%s is not supported", name);
  } else if (a->k == V_UNDEF) {
    return jfail(c, at, "'%s' of an undefined value", name);
  }
  return true;
}

static long long pyindex(long long i, long long n) { return i < 0 ? i + n : i; }

static bool eval_call(jctx *c, scope *s, const expr *e, val *out) {
  val args[4];
  for (int i = 0; i < e->nargs; i++)
    if (!eval(c, s, e->args[i], &args[i])) return false;
  const expr *f = e->a;
  if (f->k == E_NAME && !strcmp(f->name, "raise_exception")) {
    const char *t = "";
    size_t n = 0;
    if (e->nargs >= 1 && !vtext(c, &args[0], e->at, &t, &n)) return false;
    c->raised = true;
    return jfail(c, NULL, "the template refused the messages: %.*s", (int)n, t);
  }
  if (f->k != E_ATTR) return jfail(c, e->at, "calling %s is not supported", f->k == E_NAME ? f->name : "this");
  val obj;
  if (!eval(c, s, f->a, &obj)) return false;
  const char *m = f->name;
  if (!strcmp(m, "strip") || !strcmp(m, "lstrip") || !strcmp(m, "rstrip")) {
    if (e->nargs) return jfail(c, e->at, "%s() with an argument is not supported", m);
    return str_strip(c, &obj, e->at, m[0] != 'r', m[0] != 'l', out);
  }
  if (!strcmp(m, "upper") || !strcmp(m, "lower")) return str_case(c, &obj, e->at, m[0] == 'u', out);
  if (!strcmp(m, "startswith") || !strcmp(m, "endswith")) {
    if (!need_str(c, &obj, e->at, m) || e->nargs != 1 || !need_str(c, &args[0], e->at, m)) return false;
    size_t k = args[0].n;
    bool hit = k <= obj.n && memcmp(m[0] == 's' ? obj.s : obj.s + obj.n - k, args[0].s, k) == 0;
    *out = vbool(hit);
    return true;
  }
  return jfail(c, e->at, "the method %s() is not supported", m);
}

static bool eval_bin(jctx *c, const expr *e, const val *a, const val *b, val *out) {
  int op = e->op;
  switch (op) {
    case 'e': *out = vbool(veq(a, b)); return true;
    case 'n': *out = vbool(!veq(a, b)); return true;
    case '~': {
      const char *s1, *s2;
      size_t n1, n2;
      if (!vtext(c, a, e->at, &s1, &n1) || !vtext(c, b, e->at, &s2, &n2)) return false;
      *out = vconcat(c, s1, n1, s2, n2);
      return !c->err[0];
    }
    case 'i':
    case 'o': {
      bool in = false;
      if (b->k == V_STR) {
        if (!need_str(c, a, e->at, "'in' a string")) return false;
        for (size_t k = 0; !in && a->n <= b->n && k + a->n <= b->n; k++) in = memcmp(b->s + k, a->s, a->n) == 0;
      } else if (b->k == V_LIST) {
        for (size_t k = 0; !in && k < b->len; k++) in = veq(a, &b->items[k]);
      } else {
        return jfail(c, e->at, "'in' a %s is not supported", vkind_name(b->k));
      }
      *out = vbool(op == 'i' ? in : !in);
      return true;
    }
  }
  if (op == '+' && a->k == V_STR && b->k == V_STR) {
    *out = vconcat(c, a->s, a->n, b->s, b->n);
    return !c->err[0];
  }
  if (op == '+' && a->k == V_LIST && b->k == V_LIST) {
    val *items = jalloc(c, (a->len + b->len + 1) * sizeof *items);
    if (!items) return jfail(c, e->at, "out of memory");
    memcpy(items, a->items, a->len * sizeof *items);
    memcpy(items + a->len, b->items, b->len * sizeof *items);
    *out = (val){.k = V_LIST, .items = items, .len = a->len + b->len};
    return true;
  }
  bool an = a->k == V_INT || a->k == V_BOOL, bn = b->k == V_INT || b->k == V_BOOL;
  if (op == '<' || op == '>' || op == 'l' || op == 'g') {
    int cmp;
    if (an && bn) cmp = (a->i > b->i) - (a->i < b->i);
    else if (a->k == V_STR && b->k == V_STR) {
      int r = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);
      cmp = r ? r : (a->n > b->n) - (a->n < b->n);
    } else
      return jfail(c, e->at, "comparing a %s with a %s", vkind_name(a->k), vkind_name(b->k));
    *out = vbool(op == '<' ? cmp < 0 : op == '>' ? cmp > 0 : op == 'l' ? cmp <= 0 : cmp >= 0);
    return true;
  }
  if (!an || !bn)
    return jfail(c, e->at, "'%c' between a %s and a %s is not supported", op, vkind_name(a->k), vkind_name(b->k));
  if (op == '%' && b->i == 0) return jfail(c, e->at, "modulo by zero");
  long long r = 0;
  bool over = false;
  if (op == '+') over = __builtin_add_overflow(a->i, b->i, &r);
  else if (op == '-')
    over = __builtin_sub_overflow(a->i, b->i, &r);
  else if (op == '*')
    over = __builtin_mul_overflow(a->i, b->i, &r);
  else if (b->i != -1) { /* Python's sign: the divisor's (r and b of opposite signs: no overflow) */
    r = a->i % b->i;
    if (r != 0 && (r < 0) != (b->i < 0)) r += b->i;
  }
  if (over) return jfail(c, e->at, "an integer overflow in '%c'", op);
  *out = vint(r);
  return true;
}

static bool eval(jctx *c, scope *s, const expr *e, val *out) {
  val a, b;
  switch (e->k) {
    case E_LIT: *out = e->lit; return true;
    case E_NAME:
      if (!scope_get(s, e->name, out)) *out = VUNDEF;
      return true;
    case E_ATTR: return eval(c, s, e->a, &a) && get_attr(c, &a, e->name, e->at, out);
    case E_INDEX: {
      if (!eval(c, s, e->a, &a) || !eval(c, s, e->b, &b)) return false;
      if (a.k == V_MSG || a.k == V_LOOP) {
        if (b.k != V_STR) return jfail(c, e->at, "a %s is indexed by a string", vkind_name(a.k));
        char *key = jalloc(c, b.n + 1);
        if (!key) return jfail(c, e->at, "out of memory");
        memcpy(key, b.s, b.n);
        return get_attr(c, &a, key, e->at, out);
      }
      if (b.k != V_INT || (a.k != V_LIST && a.k != V_STR))
        return jfail(c, e->at, "indexing a %s by a %s is not supported", vkind_name(a.k), vkind_name(b.k));
      long long n = a.k == V_LIST ? (long long)a.len : (long long)a.n, i = pyindex(b.i, n);
      if (i < 0 || i >= n) {
        *out = VUNDEF; /* Jinja: an index past the end is undefined */
        return true;
      }
      *out = a.k == V_LIST ? a.items[i] : vstr(a.s + i, 1);
      return true;
    }
    case E_SLICE: {
      if (!eval(c, s, e->a, &a)) return false;
      if (a.k != V_LIST && a.k != V_STR) return jfail(c, e->at, "slicing a %s is not supported", vkind_name(a.k));
      long long n = a.k == V_LIST ? (long long)a.len : (long long)a.n, lo = 0, hi = n;
      if (e->b) {
        if (!eval(c, s, e->b, &b)) return false;
        if (b.k != V_INT) return jfail(c, e->at, "a slice bound must be an integer");
        lo = pyindex(b.i, n);
      }
      if (e->c) {
        if (!eval(c, s, e->c, &b)) return false;
        if (b.k != V_INT) return jfail(c, e->at, "a slice bound must be an integer");
        hi = pyindex(b.i, n);
      }
      lo = lo < 0 ? 0 : lo > n ? n : lo;
      hi = hi < lo ? lo : hi > n ? n : hi;
      if (a.k == V_LIST) *out = (val){.k = V_LIST, .items = a.items + lo, .len = (size_t)(hi - lo)};
      else
        *out = vstr(a.s + lo, (size_t)(hi - lo));
      return true;
    }
    case E_CALL: return eval_call(c, s, e, out);
    case E_FILTER: {
      if (!eval(c, s, e->a, &a)) return false;
      const char *f = e->name;
      if (e->nargs && strcmp(f, "default")) return jfail(c, e->at, "the filter %s with arguments is not supported", f);
      if (!strcmp(f, "trim")) return str_strip(c, &a, e->at, true, true, out);
      if (!strcmp(f, "upper") || !strcmp(f, "lower")) return str_case(c, &a, e->at, f[0] == 'u', out);
      if (!strcmp(f, "length") || !strcmp(f, "count")) {
        if (a.k != V_LIST && a.k != V_STR) return jfail(c, e->at, "length of a %s", vkind_name(a.k));
        *out = vint(a.k == V_LIST ? (long long)a.len : (long long)a.n);
        return true;
      }
      if (!strcmp(f, "string")) {
        const char *t;
        size_t n;
        if (!vtext(c, &a, e->at, &t, &n)) return false;
        *out = vstr(t, n);
        return true;
      }
      return jfail(c, e->at, "the filter '%s' is not supported", f);
    }
    case E_TEST: {
      if (!eval(c, s, e->a, &a)) return false;
      const char *t = e->name;
      bool r;
      if (!strcmp(t, "defined")) r = a.k != V_UNDEF;
      else if (!strcmp(t, "undefined"))
        r = a.k == V_UNDEF;
      else if (!strcmp(t, "none"))
        r = a.k == V_NONE;
      else if (!strcmp(t, "string"))
        r = a.k == V_STR;
      else
        return jfail(c, e->at, "the test '%s' is not supported", t);
      *out = vbool(r != e->negate);
      return true;
    }
    case E_NOT:
      if (!eval(c, s, e->a, &a)) return false;
      *out = vbool(!vtrue(&a));
      return true;
    case E_NEG:
      if (!eval(c, s, e->a, &a)) return false;
      if (a.k != V_INT && a.k != V_BOOL) return jfail(c, e->at, "'-' of a %s", vkind_name(a.k));
      if (a.i == INT64_MIN) return jfail(c, e->at, "an integer overflow in '-'");
      *out = vint(-a.i);
      return true;
    case E_AND: /* Python returns the deciding operand */
      if (!eval(c, s, e->a, &a)) return false;
      if (!vtrue(&a)) return *out = a, true;
      return eval(c, s, e->b, out);
    case E_OR:
      if (!eval(c, s, e->a, &a)) return false;
      if (vtrue(&a)) return *out = a, true;
      return eval(c, s, e->b, out);
    case E_BIN:
      if (!eval(c, s, e->a, &a) || !eval(c, s, e->b, &b)) return false;
      if ((a.k == V_UNDEF || b.k == V_UNDEF) && e->op != 'e' && e->op != 'n' && e->op != '~')
        return jfail(c, e->at, "an undefined value in '%c'", e->op == 'i' || e->op == 'o' ? 'i' : e->op);
      return eval_bin(c, e, &a, &b, out);
  }
  return jfail(c, e->at, "internal: unknown expression");
}

/* ================================================================ the template */

typedef enum { N_TEXT, N_OUT, N_IF, N_FOR, N_SET } nkind;

typedef struct node {
  nkind k;
  const char *at;
  const char *text; /* N_TEXT */
  size_t n;
  expr *e;                   /* N_OUT, N_IF (condition), N_FOR (iterable), N_SET */
  const char *name;          /* N_FOR, N_SET */
  struct node *body, *other; /* N_IF: then, else (an elif is an N_IF there); N_FOR: body, else */
  struct node *next;
} node;

/* ---- cutting the source into text and tags, with Jinja's whitespace rules */

typedef enum { K_TEXT, K_EXPR, K_STMT, K_END } ckind;

typedef struct chunk {
  ckind k;
  const char *s; /* text, or the inside of a tag */
  size_t n;
  const char *at;
} chunk;

typedef struct cutter {
  jctx *c;
  const char *p;
  chunk *v;
  size_t n, cap;
} cutter;

static bool cut_push(cutter *u, ckind k, const char *s, size_t n, const char *at) {
  if (u->n == u->cap) {
    size_t cap = u->cap ? u->cap * 2 : 64;
    chunk *v = jalloc(u->c, cap * sizeof *v);
    if (!v) return jfail(u->c, at, "out of memory");
    if (u->n) memcpy(v, u->v, u->n * sizeof *v);
    u->v = v, u->cap = cap;
  }
  u->v[u->n++] = (chunk){.k = k, .s = s, .n = n, .at = at};
  return true;
}

static bool cut_template(jctx *c, const char *src, cutter *u) {
  const char *p = src;
  bool strip_next = false, trim_next = false; /* "-%}" / trim_blocks after a block tag */
  while (*p) {
    const char *t = strstr(p, "{");
    while (t && t[1] != '{' && t[1] != '%' && t[1] != '#') t = strstr(t + 1, "{");
    const char *text_end = t ? t : p + strlen(p);
    const char *ts = p;
    if (trim_next && ts < text_end && *ts == '\n') ts++; /* trim_blocks: the newline after a block */
    if (strip_next)
      while (ts < text_end && isspace((unsigned char)*ts)) ts++;
    const char *te = text_end;
    if (t) {
      bool minus = t[2] == '-', plus = t[2] == '+';
      if (minus) {
        while (te > ts && isspace((unsigned char)te[-1])) te--;
      } else if ((t[1] == '%' || t[1] == '#') && !plus) {
        /* lstrip_blocks: the blanks before a tag alone at the start of its line */
        const char *q = te;
        while (q > ts && (q[-1] == ' ' || q[-1] == '\t')) q--;
        if (q == src || q[-1] == '\n') te = q;
      }
    }
    if (te > ts && !cut_push(u, K_TEXT, ts, (size_t)(te - ts), ts)) return false;
    if (!t) break;
    char kind = t[1];
    const char *close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    const char *in = t + 2 + (t[2] == '-' || t[2] == '+');
    const char *e = strstr(in, close);
    if (!e) return jfail(c, t, "a tag that does not end ('%s' missing)", close);
    const char *ie = e;
    bool minus_after = ie > in && ie[-1] == '-';
    if (minus_after) ie--;
    if (kind != '#' && !cut_push(u, kind == '{' ? K_EXPR : K_STMT, in, (size_t)(ie - in), t)) return false;
    strip_next = minus_after;
    trim_next = kind != '{';
    p = e + 2;
  }
  return cut_push(u, K_END, "", 0, p);
}

/* ---- parsing the chunks into nodes */

typedef struct parser {
  jctx *c;
  chunk *v;
  size_t n, i;
} parser;

/* The first word of a statement and a lexer set after it. */
static bool stmt_word(jctx *c, const chunk *ch, lex *L, char *word, size_t len) {
  *L = (lex){.c = c, .p = ch->s, .end = ch->s + ch->n};
  if (!lnext(L)) return false;
  if (L->k != T_NAME) return jfail(c, ch->at, "a statement without a name");
  snprintf(word, len, "%.*s", (int)L->tn, L->ts);
  return lnext(L);
}

static expr *parse_whole(jctx *c, lex *L, const char *at) {
  expr *e = parse_expr(L);
  if (e && L->k != T_END) {
    jfail(c, at, "unexpected '%.*s' after an expression", (int)L->tn, L->ts);
    return NULL;
  }
  return e;
}

/* Nodes into *head_out (NULL: none) until a statement whose word is one of stop
 * (space separated); stop_out: that word, "" at the end of the template. */
static bool parse_block(parser *P, const char *stop, char *stop_out, size_t stop_len, node **head_out) {
  jctx *c = P->c;
  node *head = NULL, **tail = &head;
  *head_out = NULL;
  for (; P->i < P->n; P->i++) {
    chunk *ch = &P->v[P->i];
    if (ch->k == K_END) break;
    node *nd = jalloc(c, sizeof *nd);
    if (!nd) return jfail(c, ch->at, "out of memory");
    nd->at = ch->at;
    if (ch->k == K_TEXT) {
      nd->k = N_TEXT, nd->text = ch->s, nd->n = ch->n;
    } else if (ch->k == K_EXPR) {
      lex L = {.c = c, .p = ch->s, .end = ch->s + ch->n};
      nd->k = N_OUT;
      if (!lnext(&L) || !(nd->e = parse_whole(c, &L, ch->at))) return false;
    } else {
      char w[32];
      lex L;
      if (!stmt_word(c, ch, &L, w, sizeof w)) return false;
      char padded[40];
      snprintf(padded, sizeof padded, " %s ", w);
      char stops[128];
      snprintf(stops, sizeof stops, " %s ", stop ? stop : "");
      if (stop && strstr(stops, padded)) {
        snprintf(stop_out, stop_len, "%s", w);
        *head_out = head;
        return true;
      }
      if (!strcmp(w, "if")) {
        nd->k = N_IF;
        if (!(nd->e = parse_whole(c, &L, ch->at))) return false;
        node *cur = nd;
        for (;;) {
          char got[32] = "";
          P->i++;
          if (!parse_block(P, "elif else endif", got, sizeof got, &cur->body)) return false;
          if (!got[0]) return jfail(c, nd->at, "{%% if %%} without {%% endif %%}");
          if (!strcmp(got, "endif")) break;
          chunk *at = &P->v[P->i];
          if (!strcmp(got, "elif")) {
            node *el = jalloc(c, sizeof *el);
            lex L2;
            char w2[32];
            if (!el || !stmt_word(c, at, &L2, w2, sizeof w2)) return false;
            el->k = N_IF, el->at = at->at;
            if (!(el->e = parse_whole(c, &L2, at->at))) return false;
            cur->other = el;
            cur = el;
          } else { /* else */
            P->i++;
            char got2[32] = "";
            if (!parse_block(P, "endif", got2, sizeof got2, &cur->other)) return false;
            if (!got2[0]) return jfail(c, nd->at, "{%% if %%} without {%% endif %%}");
            break;
          }
        }
      } else if (!strcmp(w, "for")) {
        nd->k = N_FOR;
        if (L.k != T_NAME) return jfail(c, ch->at, "{%% for NAME in ... %%}");
        if (!(nd->name = lname(&L)) || !lnext(&L)) return false;
        if (lis(&L, ",")) return jfail(c, ch->at, "a for over several names is not supported");
        if (!lexpect(&L, "in")) return false;
        if (!(nd->e = parse_expr(&L))) return false;
        if (L.k != T_END) return jfail(c, ch->at, "for ... if / recursive is not supported");
        char got[32] = "";
        P->i++;
        if (!parse_block(P, "else endfor", got, sizeof got, &nd->body)) return false;
        if (!got[0]) return jfail(c, nd->at, "{%% for %%} without {%% endfor %%}");
        if (!strcmp(got, "else")) {
          P->i++;
          char got2[32] = "";
          if (!parse_block(P, "endfor", got2, sizeof got2, &nd->other)) return false;
          if (!got2[0]) return jfail(c, nd->at, "{%% for %%} without {%% endfor %%}");
        }
      } else if (!strcmp(w, "set")) {
        nd->k = N_SET;
        if (L.k != T_NAME) return jfail(c, ch->at, "{%% set NAME = ... %%}");
        if (!(nd->name = lname(&L)) || !lnext(&L)) return false;
        if (lis(&L, ".")) return jfail(c, ch->at, "setting an attribute (namespace) is not supported");
        if (!lexpect(&L, "=")) return false;
        if (!(nd->e = parse_whole(c, &L, ch->at))) return false;
      } else {
        return jfail(c, ch->at, "the statement {%% %s %%} is not supported", w);
      }
    }
    *tail = nd;
    tail = &nd->next;
  }
  if (stop) stop_out[0] = '\0';
  *head_out = head;
  return !c->err[0];
}

/* ---- rendering */

typedef struct outbuf {
  char *s;
  size_t n, cap;
} outbuf;

static bool out_put(jctx *c, outbuf *o, const char *s, size_t n) {
  if (o->n + n + 1 > o->cap) {
    size_t cap = (o->n + n + 1) * 2;
    char *p = realloc(o->s, cap);
    if (!p) return jfail(c, NULL, "out of memory");
    o->s = p, o->cap = cap;
  }
  memcpy(o->s + o->n, s, n);
  o->n += n;
  o->s[o->n] = '\0';
  return true;
}

static bool render(jctx *c, scope *s, const node *nd, outbuf *o) {
  for (; nd; nd = nd->next) {
    val v;
    switch (nd->k) {
      case N_TEXT:
        if (!out_put(c, o, nd->text, nd->n)) return false;
        break;
      case N_OUT: {
        const char *t;
        size_t n;
        if (!eval(c, s, nd->e, &v) || !vtext(c, &v, nd->at, &t, &n) || !out_put(c, o, t, n)) return false;
        break;
      }
      case N_IF:
        if (!eval(c, s, nd->e, &v)) return false;
        if (!render(c, s, vtrue(&v) ? nd->body : nd->other, o)) return false;
        break;
      case N_SET:
        if (!eval(c, s, nd->e, &v) || !scope_set(c, s, nd->name, v)) return false;
        break;
      case N_FOR: {
        if (!eval(c, s, nd->e, &v)) return false;
        if (v.k != V_LIST) return jfail(c, nd->at, "for over a %s is not supported", vkind_name(v.k));
        if (v.len == 0 && !render(c, s, nd->other, o)) return false;
        for (size_t i = 0; i < v.len; i++) {
          scope inner = {.up = s}; /* a set inside the loop stays inside it, as in Jinja */
          val lp = {.k = V_LOOP, .idx = (long long)i, .count = (long long)v.len};
          if (!scope_set(c, &inner, nd->name, v.items[i]) || !scope_set(c, &inner, "loop", lp) ||
              !render(c, &inner, nd->body, o))
            return false;
        }
        break;
      }
    }
  }
  return true;
}

zz_status zz_chat_template_render(const char *tmpl, const zz_chat_msg *m, int n, const char *bos, const char *eos,
                                  bool add_generation_prompt, char **out) {
  jctx c = {.src = tmpl};
  outbuf o = {0};
  cutter u = {.c = &c};
  scope top = {0};
  bool good = cut_template(&c, tmpl, &u);
  parser P = {.c = &c, .v = u.v, .n = u.n};
  node *root = NULL;
  if (good) {
    char none[4];
    good = parse_block(&P, NULL, none, sizeof none, &root);
    if (good && P.i < P.n && P.v[P.i].k != K_END) good = jfail(&c, P.v[P.i].at, "an end tag without its start");
  }
  if (good) {
    val *items = jalloc(&c, (size_t)(n > 0 ? n : 1) * sizeof *items);
    good = items != NULL;
    for (int i = 0; good && i < n; i++) items[i] = (val){.k = V_MSG, .msg = &m[i]};
    good = good && scope_set(&c, &top, "messages", (val){.k = V_LIST, .items = items, .len = (size_t)n}) &&
           scope_set(&c, &top, "add_generation_prompt", vbool(add_generation_prompt)) &&
           (!bos || scope_set(&c, &top, "bos_token", vstr(bos, strlen(bos)))) &&
           (!eos || scope_set(&c, &top, "eos_token", vstr(eos, strlen(eos))));
    good = good && out_put(&c, &o, "", 0) && render(&c, &top, root, &o);
  }
  zz_status st = ZZ_OK;
  if (!good || c.err[0])
    st = zz_error(c.raised ? ZZ_ERR_INVALID_ARG : ZZ_ERR_FORMAT, "%s", c.err[0] ? c.err : "out of memory");
  while (c.blocks) {
    zz_arena_blk *b = c.blocks;
    c.blocks = b->next;
    free(b);
  }
  if (st != ZZ_OK) {
    free(o.s);
    return st;
  }
  *out = o.s;
  return ZZ_OK;
}
