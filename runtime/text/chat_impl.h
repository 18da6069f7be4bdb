/*
 * chat_impl.h — the inside of the chat-template interpreter (zz_chat.h): Jinja as
 * Hugging Face's chat-template sandbox runs it. One render goes
 *
 *   source ─ chat_lex.c ─→ chunks (text / {{ }} / {% %}) and expression tokens
 *   ─ chat_parse.c, chat_stmt.c ─→ nodes and expressions ─ chat_eval.c, chat_render.c
 *   ─→ text, with chat_value.c's values, chat_filters.c's filters and tests,
 *   chat_methods.c's methods and globals.
 * One render's everything lives in one arena (zz_cj_alloc); every step counts
 * against the render's limits (zz_chat_limits). */
#ifndef ZZ_CHAT_IMPL_H
#define ZZ_CHAT_IMPL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zz_chat.h"

/* ================================================================ the render */

typedef struct zz_cj_block zz_cj_block;
typedef struct zz_cj {
  zz_cj_block *blocks; /* the arena */
  size_t held;         /* bytes the arena holds (limits.max_memory) */
  zz_chat_limits lim;  /* the limits of this render */
  int64_t steps;       /* evaluations, loop turns and calls so far (lim.max_steps) */
  int depth;           /* macro calls now nested (lim.max_depth) */
  double t0;           /* the start, seconds of CLOCK_MONOTONIC (lim.max_seconds) */
  int64_t now;         /* strftime_now's time */
  char err[600];       /* the first error; the render stops at it */
  bool raised;         /* the error is the template's raise_exception */
  const char *src;     /* the template (normalised), for line numbers */
} zz_cj;

void *zz_cj_alloc(zz_cj *c, size_t n); /* zeroed; NULL (with the error set) past the limit */
char *zz_cj_strdup(zz_cj *c, const char *s, size_t n);
void zz_cj_free(zz_cj *c); /* the whole arena */
/* Sets the render's first error: "line N of the template: ..." where at is in the
 * template; false, for `return zz_cj_fail(...)`. */
bool zz_cj_fail(zz_cj *c, const char *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* One step of work; false with the error set past max_steps or max_seconds. */
bool zz_cj_step(zz_cj *c, const char *at, int64_t n);

/* ================================================================ values */

typedef enum {
  ZZ_CJ_UNDEF, /* jinja2's Undefined: prints as "", iterates as nothing */
  ZZ_CJ_NONE,
  ZZ_CJ_BOOL,
  ZZ_CJ_INT,
  ZZ_CJ_FLOAT,
  ZZ_CJ_STR,   /* UTF-8 bytes s[0..n) */
  ZZ_CJ_LIST,  /* list, or a tuple (tuple set) */
  ZZ_CJ_DICT,  /* string keys in insertion order */
  ZZ_CJ_NS,    /* namespace(): a dict that {% set ns.x %} changes */
  ZZ_CJ_LOOP,  /* the loop variable of a for */
  ZZ_CJ_MACRO, /* a macro, or a call block's caller */
  ZZ_CJ_FUNC,  /* a global function: range, namespace, dict, raise_exception, strftime_now */
} zz_cj_kind;

typedef struct zz_cj_list zz_cj_list;
typedef struct zz_cj_dict zz_cj_dict;
typedef struct zz_cj_loop zz_cj_loop;
typedef struct zz_cj_macro zz_cj_macro;

typedef struct zz_cj_val {
  zz_cj_kind k;
  bool tuple;    /* LIST: a Python tuple; STR: markupsafe's Markup (the safe filter) */
  union {        /* by k: */
    long long i; /* BOOL, INT */
    double f;    /* FLOAT */
    struct {     /* STR: UTF-8 bytes s[0..n); FUNC: its name in s */
      const char *s;
      size_t n;
    };
    zz_cj_list *l;  /* LIST */
    zz_cj_dict *d;  /* DICT, NS */
    zz_cj_loop *lp; /* LOOP */
    zz_cj_macro *m; /* MACRO */
  };
} zz_cj_val;

struct zz_cj_list {
  zz_cj_val *v;
  size_t n, cap;
};
struct zz_cj_dict {
  zz_cj_val *keys; /* strings */
  zz_cj_val *vals;
  size_t n, cap;
};

struct zz_cj_macro {
  const struct zz_cj_node *def;         /* names[0] the name, names[1..] the parameters */
  struct zz_cj_scope *scope;            /* where it was made */
  const struct zz_cj_node *caller_body; /* a call block's body: caller() inside */
  struct zz_cj_scope *caller_scope;
  bool is_caller; /* this is caller(): renders caller_body */
};

struct zz_cj_loop {
  zz_cj_list *items; /* what the loop goes over (after its if) */
  size_t i;          /* index0 */
};

extern const zz_cj_val zz_cj_undef;
zz_cj_val zz_cj_str(const char *s, size_t n), zz_cj_cstr(const char *s), zz_cj_none(void);
zz_cj_val zz_cj_int(long long i), zz_cj_float(double f), zz_cj_bool(bool b);
zz_cj_val zz_cj_new_list(zz_cj *c, size_t cap), zz_cj_new_dict(zz_cj *c, zz_cj_kind k); /* k UNDEF: no memory */
bool zz_cj_list_push(zz_cj *c, zz_cj_list *l, zz_cj_val v);
bool zz_cj_dict_set(zz_cj *c, zz_cj_dict *d, zz_cj_val key, zz_cj_val v);
/* d[key] (a string key; _val: any): true and *out where d has it */
bool zz_cj_dict_get(const zz_cj_dict *d, const char *key, size_t n, zz_cj_val *out);
bool zz_cj_dict_get_val(const zz_cj_dict *d, const zz_cj_val *key, zz_cj_val *out);

/* a for's items: a list, a dict's keys, a string's code points; none for undefined */
bool zz_cj_iterate(zz_cj *c, const zz_cj_val *v, const char *at, zz_cj_list **out);
const char *zz_cj_kind_name(zz_cj_kind k);
bool zz_cj_truthy(const zz_cj_val *v);
bool zz_cj_equal(const zz_cj_val *a, const zz_cj_val *b); /* Python's == */
bool zz_cj_is_number(const zz_cj_val *v);                 /* int, float, bool */
double zz_cj_num(const zz_cj_val *v);
/* Python's <, as -1 / 0 / 1 (numbers, strings, lists); false (error set) otherwise */
bool zz_cj_compare(zz_cj *c, const zz_cj_val *a, const zz_cj_val *b, const char *at, int *out);

/* Python's str() (repr: repr()) of v as {{ }} prints it; the bytes in the arena. */
bool zz_cj_to_str(zz_cj *c, const zz_cj_val *v, bool repr, const char *at, zz_cj_val *out);
/* transformers' tojson: json.dumps(v, ensure_ascii, indent, separators, sort_keys);
 * indent NULL (none), or an int or a string value; item_sep / key_sep NULL: json's. */
typedef struct zz_cj_json_opts {
  bool ensure_ascii, sort_keys;
  const zz_cj_val *indent;
  const zz_cj_val *item_sep, *key_sep;
} zz_cj_json_opts;
bool zz_cj_to_json(zz_cj *c, const zz_cj_val *v, const zz_cj_json_opts *o, const char *at, zz_cj_val *out);
bool zz_cj_from_json(zz_cj *c, json_t *j, zz_cj_val *out); /* a JSON value (jansson) as a template value */

/* strings as Python sees them: code points, Unicode white space */
size_t zz_cj_utf8_len(const char *s, size_t n);             /* code points */
size_t zz_cj_utf8_off(const char *s, size_t n, size_t cp);  /* byte offset of code point cp (n past the end) */
bool zz_cj_is_space_at(const char *s, size_t n, size_t *w); /* a Python-space code point at s: its bytes in *w */
size_t zz_cj_space_before(const char *s, size_t n);         /* bytes of the space code point ending at s + n, or 0 */
bool zz_cj_ascii(const char *s, size_t n);
const char *zz_cj_find(const char *h, size_t hn, const char *w, size_t wn); /* w in h[0..hn), or NULL */

/* A growing string in the arena (the output, a macro's text, a join). */
typedef struct zz_cj_buf {
  char *s;
  size_t n, cap;
  size_t limit; /* the most bytes (lim.max_output) */
} zz_cj_buf;
bool zz_cj_buf_put(zz_cj *c, zz_cj_buf *b, const char *s, size_t n);

/* ================================================================ the parsed template */

/* clang-format off */
typedef enum {
  ZZ_CJ_E_LIT, ZZ_CJ_E_NAME,
  ZZ_CJ_E_ATTR,   /* a.name */
  ZZ_CJ_E_INDEX,  /* a[b] */
  ZZ_CJ_E_SLICE,  /* a[b:c:d], each may be NULL */
  ZZ_CJ_E_CALL,   /* a(args) */
  ZZ_CJ_E_FILTER, /* a | name(args) */
  ZZ_CJ_E_TEST,   /* a is [not] name(args) */
  ZZ_CJ_E_NOT, ZZ_CJ_E_NEG, ZZ_CJ_E_POS,
  ZZ_CJ_E_BIN, /* a op b: + - * / // % ** ~ in, "not in" as op 'o' */
  ZZ_CJ_E_CMP, /* args[0] ops[0] args[1] ops[1] ...: a chain of == != < > <= >= */
  ZZ_CJ_E_AND, ZZ_CJ_E_OR,
  ZZ_CJ_E_COND, /* b if a else c */
  ZZ_CJ_E_LIST, ZZ_CJ_E_TUPLE,
  ZZ_CJ_E_DICT, /* args: key, value, key, value ... */
} zz_cj_ekind;
/* clang-format on */
typedef struct zz_cj_expr zz_cj_expr;
struct zz_cj_expr {
  zz_cj_ekind k;
  const char *at; /* where in the template */
  zz_cj_val lit;
  const char *name; /* NAME, ATTR, FILTER, TEST */
  int op;           /* BIN: '+', '-', '*', '/', 'f' (//), '%', 'p' (**), '~', 'i' (in), 'o' (not in) */
  bool negate;      /* TEST: is not */
  zz_cj_expr *a, *b, *c, *d;
  zz_cj_expr **args; /* CALL, FILTER, TEST, LIST, TUPLE, DICT, CMP */
  const char **kw;   /* the keyword of each argument, NULL where positional */
  int *ops;          /* CMP: 'e' ==, 'n' !=, '<', '>', 'l' <=, 'g' >= */
  int nargs;
};

typedef enum {
  ZZ_CJ_N_TEXT,
  ZZ_CJ_N_OUT,      /* {{ e }} */
  ZZ_CJ_N_IF,       /* e: condition; body; other: else (an elif is an IF there) */
  ZZ_CJ_N_FOR,      /* names in e [if cond]: body, other (else) */
  ZZ_CJ_N_SET,      /* names = e; or attr of names[0] = e (namespace) */
  ZZ_CJ_N_SETBLOCK, /* {% set name %}body{% endset %} */
  ZZ_CJ_N_MACRO,    /* names[0](names[1..]) with defaults: body */
  ZZ_CJ_N_CALL,     /* {% call e %}body{% endcall %}: e called with caller() = body */
  ZZ_CJ_N_FILTER,   /* {% filter e %}: e a filter chain over a placeholder */
  ZZ_CJ_N_BREAK,
  ZZ_CJ_N_CONTINUE,
  ZZ_CJ_N_BLOCK, /* {% generation %}: its body as it is */
} zz_cj_nkind;

typedef struct zz_cj_node zz_cj_node;
struct zz_cj_node {
  zz_cj_nkind k;
  const char *at;
  const char *text; /* TEXT */
  size_t n;
  zz_cj_expr *e, *cond;
  const char **names;    /* FOR, SET targets; MACRO name then parameters */
  zz_cj_expr **defaults; /* MACRO: each parameter's default, NULL where none */
  int nnames;
  const char *attr; /* SET ns.attr */
  zz_cj_node *body, *other, *next;
};

/* chat_lex.c: the template cut into chunks with Jinja's whitespace rules
 * (trim_blocks, lstrip_blocks, - and +), and the expression tokens. */
typedef enum { ZZ_CJ_C_TEXT, ZZ_CJ_C_EXPR, ZZ_CJ_C_STMT, ZZ_CJ_C_END } zz_cj_ckind;
typedef struct zz_cj_chunk {
  zz_cj_ckind k;
  const char *s; /* the text, or the inside of a tag */
  size_t n;
  const char *at;
} zz_cj_chunk;
bool zz_cj_cut(zz_cj *c, const char *src, zz_cj_chunk **out, size_t *n_out);

typedef enum { ZZ_CJ_T_END, ZZ_CJ_T_NAME, ZZ_CJ_T_STR, ZZ_CJ_T_INT, ZZ_CJ_T_FLOAT, ZZ_CJ_T_OP } zz_cj_tkind;
typedef struct zz_cj_lex {
  zz_cj *c;
  const char *p, *end;
  zz_cj_tkind k;
  const char *ts; /* the token's text */
  size_t tn;
  zz_cj_val v; /* STR, INT, FLOAT */
  int nest;    /* parser nesting (lim.max_depth) */
} zz_cj_lex;
bool zz_cj_lex_next(zz_cj_lex *L);
bool zz_cj_lex_is(const zz_cj_lex *L, const char *s); /* the token is the operator or name s */
bool zz_cj_lex_expect(zz_cj_lex *L, const char *s);

/* chat_parse.c: one expression from L (with_if: the inline "x if c else y" too);
 * chat_stmt.c: the whole template (NULL with the error set when it cannot be) */
zz_cj_expr *zz_cj_parse_expr(zz_cj_lex *L, bool with_if);
zz_cj_node *zz_cj_parse(zz_cj *c, const char *src);

/* ================================================================ evaluation */

typedef struct zz_cj_var zz_cj_var;
typedef struct zz_cj_scope {
  zz_cj_var *vars;
  struct zz_cj_scope *up;
} zz_cj_scope;
bool zz_cj_scope_set(zz_cj *c, zz_cj_scope *s, const char *name, zz_cj_val v);
bool zz_cj_scope_get(const zz_cj_scope *s, const char *name, zz_cj_val *out);

/* chat_eval.c */
bool zz_cj_eval(zz_cj *c, zz_cj_scope *s, const zz_cj_expr *e, zz_cj_val *out);
bool zz_cj_render(zz_cj *c, zz_cj_scope *s, const zz_cj_node *nd, zz_cj_buf *o);
/* a macro (or caller) called with evaluated arguments */
bool zz_cj_call_macro(zz_cj *c, const zz_cj_val *m, const zz_cj_val *args, const char **kw, int n, const char *at,
                      zz_cj_val *out);

/* Evaluated arguments of a call, a filter or a test: positional, then keyword. */
typedef struct zz_cj_args {
  zz_cj_val *v;
  const char **kw;
  int n;
} zz_cj_args;
/* the argument named name, or the pos-th positional one (pos < 0: keyword only);
 * NULL where not given */
const zz_cj_val *zz_cj_arg(const zz_cj_args *a, int pos, const char *name);
/* refuses keywords outside names (NULL-terminated) and more than max positional */
bool zz_cj_args_check(zz_cj *c, const zz_cj_args *a, int max, const char *const *names, const char *what,
                      const char *at);

/* chat_filters.c (html_escape: markupsafe's, for Markup + str) */
bool zz_cj_html_escape(zz_cj *c, const zz_cj_val *v, const char *at, zz_cj_val *out);
bool zz_cj_filter(zz_cj *c, zz_cj_scope *s, const char *name, const zz_cj_val *v, const zz_cj_args *a, const char *at,
                  zz_cj_val *out);
bool zz_cj_test(zz_cj *c, zz_cj_scope *s, const char *name, const zz_cj_val *v, const zz_cj_args *a, const char *at,
                bool *out);

/* chat_methods.c: obj.name(args) (*found false where obj has no such method) and
 * the global functions */
bool zz_cj_method(zz_cj *c, const zz_cj_val *obj, const char *name, const zz_cj_args *a, const char *at, bool *found,
                  zz_cj_val *out);
bool zz_cj_is_global(const char *name);
bool zz_cj_call_global(zz_cj *c, const char *name, const zz_cj_args *a, const char *at, zz_cj_val *out);
/* the string ops filters and methods share */
bool zz_cj_strip(zz_cj *c, const zz_cj_val *v, const zz_cj_val *chars, bool left, bool right, const char *at,
                 zz_cj_val *out);
bool zz_cj_case(zz_cj *c, const zz_cj_val *v, char how, const char *at, zz_cj_val *out); /* u l t(itle) c(apitalize) */
bool zz_cj_replace(zz_cj *c, const zz_cj_val *v, const zz_cj_val *old, const zz_cj_val *new_, long long count,
                   const char *at, zz_cj_val *out);

#endif /* ZZ_CHAT_IMPL_H */
