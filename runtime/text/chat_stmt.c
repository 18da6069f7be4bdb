/*
 * chat_stmt.c — a chat template's chunks (chat_lex.c) parsed into nodes: text,
 * {{ }} and the statements of jinja2 with the loopcontrols extension that
 * transformers enables: if / elif / else, for (several names, an if filter, else),
 * set (a name, several, ns.attr, a block), macro, call, filter, break, continue,
 * and transformers' {% generation %}. Any other statement is an error naming it
 * and its line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"

typedef struct zz_cj_parser {
  zz_cj *c;
  zz_cj_chunk *v;
  size_t n, i;
  int depth; /* blocks now open (lim.max_depth) */
  int loops; /* for-loops now open (break / continue need one) */
} zz_cj_parser;

/* the first word of a statement and a lexer set after it */
static bool zz_cj_stmt_word(zz_cj *c, const zz_cj_chunk *ch, zz_cj_lex *L, char *word, size_t len) {
  *L = (zz_cj_lex){.c = c, .p = ch->s, .end = ch->s + ch->n};
  if (!zz_cj_lex_next(L)) return false;
  if (L->k != ZZ_CJ_T_NAME) return zz_cj_fail(c, ch->at, "a statement without a name");
  snprintf(word, len, "%.*s", (int)L->tn, L->ts);
  return zz_cj_lex_next(L);
}

static bool zz_cj_at_end(zz_cj_lex *L, const char *what) {
  if (L->k == ZZ_CJ_T_END) return true;
  return zz_cj_fail(L->c, L->ts, "unexpected '%.*s' in %s", (int)L->tn, L->ts, what);
}

static zz_cj_expr *zz_cj_whole(zz_cj_lex *L, const char *what) {
  zz_cj_expr *e = zz_cj_parse_expr(L, true);
  return e && zz_cj_at_end(L, what) ? e : NULL;
}

/* NAME (, NAME)* into nd->names, up to a word or operator that is not a name */
static bool zz_cj_targets(zz_cj_lex *L, zz_cj_node *nd) {
  const char *names[16];
  int n = 0;
  bool paren = zz_cj_lex_is(L, "(");
  if (paren && !zz_cj_lex_next(L)) return false;
  for (;;) {
    if (L->k != ZZ_CJ_T_NAME) return zz_cj_fail(L->c, L->ts, "expected a name to assign");
    if (n == 16) return zz_cj_fail(L->c, L->ts, "more than 16 names to assign");
    if (!(names[n++] = zz_cj_strdup(L->c, L->ts, L->tn)) || !zz_cj_lex_next(L)) return false;
    if (!zz_cj_lex_is(L, ",")) break;
    if (!zz_cj_lex_next(L)) return false;
  }
  if (paren && !zz_cj_lex_expect(L, ")")) return false;
  if (!(nd->names = zz_cj_alloc(L->c, (size_t)n * sizeof *nd->names))) return false;
  memcpy(nd->names, names, (size_t)n * sizeof *names);
  nd->nnames = n;
  return true;
}

static bool zz_cj_parse_block(zz_cj_parser *P, const char *stop, char *got, size_t got_len, zz_cj_node **head_out);

/* the body of a block statement up to one of stop (space separated), which must come */
static bool zz_cj_body(zz_cj_parser *P, const zz_cj_node *nd, const char *stop, char *got, size_t len,
                       zz_cj_node **out) {
  P->i++;
  if (!zz_cj_parse_block(P, stop, got, len, out)) return false;
  if (!got[0]) return zz_cj_fail(P->c, nd->at, "a block without its end (%s)", stop);
  return true;
}

static bool zz_cj_p_if(zz_cj_parser *P, zz_cj_node *nd, zz_cj_lex *L) {
  nd->k = ZZ_CJ_N_IF;
  if (!(nd->e = zz_cj_whole(L, "{% if %}"))) return false;
  for (zz_cj_node *cur = nd;;) {
    char got[32];
    if (!zz_cj_body(P, nd, "elif else endif", got, sizeof got, &cur->body)) return false;
    if (!strcmp(got, "endif")) return true;
    if (!strcmp(got, "else")) return zz_cj_body(P, nd, "endif", got, sizeof got, &cur->other);
    zz_cj_chunk *ch = &P->v[P->i];
    zz_cj_node *el = zz_cj_alloc(P->c, sizeof *el);
    zz_cj_lex L2;
    char w[32];
    if (!el || !zz_cj_stmt_word(P->c, ch, &L2, w, sizeof w)) return false;
    el->k = ZZ_CJ_N_IF, el->at = ch->at;
    if (!(el->e = zz_cj_whole(&L2, "{% elif %}"))) return false;
    cur->other = el, cur = el;
  }
}

static bool zz_cj_p_for(zz_cj_parser *P, zz_cj_node *nd, zz_cj_lex *L) {
  nd->k = ZZ_CJ_N_FOR;
  if (!zz_cj_targets(L, nd) || !zz_cj_lex_expect(L, "in") || !(nd->e = zz_cj_parse_expr(L, false))) return false;
  if (zz_cj_lex_is(L, "if") && (!zz_cj_lex_next(L) || !(nd->cond = zz_cj_parse_expr(L, false)))) return false;
  if (zz_cj_lex_is(L, "recursive")) return zz_cj_fail(P->c, L->ts, "a recursive for is not supported");
  if (!zz_cj_at_end(L, "{% for %}")) return false;
  char got[32];
  P->loops++;
  bool ok = zz_cj_body(P, nd, "else endfor", got, sizeof got, &nd->body);
  P->loops--;
  if (ok && !strcmp(got, "else")) ok = zz_cj_body(P, nd, "endfor", got, sizeof got, &nd->other);
  return ok;
}

static bool zz_cj_p_set(zz_cj_parser *P, zz_cj_node *nd, zz_cj_lex *L) {
  nd->k = ZZ_CJ_N_SET;
  if (!zz_cj_targets(L, nd)) return false;
  if (nd->nnames == 1 && zz_cj_lex_is(L, ".")) { /* ns.attr */
    if (!zz_cj_lex_next(L)) return false;
    if (L->k != ZZ_CJ_T_NAME) return zz_cj_fail(P->c, L->ts, "expected a name after '.'");
    if (!(nd->attr = zz_cj_strdup(P->c, L->ts, L->tn)) || !zz_cj_lex_next(L)) return false;
  }
  if (L->k == ZZ_CJ_T_END && nd->nnames == 1 && !nd->attr) { /* {% set x %}...{% endset %} */
    char got[32];
    nd->k = ZZ_CJ_N_SETBLOCK;
    return zz_cj_body(P, nd, "endset", got, sizeof got, &nd->body);
  }
  if (zz_cj_lex_is(L, "|")) return zz_cj_fail(P->c, L->ts, "a filtered {%% set %%} block is not supported");
  if (!zz_cj_lex_expect(L, "=")) return false;
  if (!(nd->e = zz_cj_parse_expr(L, true))) return false;
  if (zz_cj_lex_is(L, ","))
    return zz_cj_fail(P->c, L->ts, "{%% set x = a, b %%} (a tuple without parentheses) is not supported");
  return zz_cj_at_end(L, "{% set %}");
}

/* {% macro name(a, b=default) %}body{% endmacro %}: names[0] the name */
static bool zz_cj_p_macro(zz_cj_parser *P, zz_cj_node *nd, zz_cj_lex *L) {
  const char *names[33];
  zz_cj_expr *defs[33] = {0};
  int n = 0;
  nd->k = ZZ_CJ_N_MACRO;
  if (L->k != ZZ_CJ_T_NAME) return zz_cj_fail(P->c, L->ts, "{%% macro NAME(...) %%}");
  if (!(names[n++] = zz_cj_strdup(P->c, L->ts, L->tn)) || !zz_cj_lex_next(L) || !zz_cj_lex_expect(L, "(")) return false;
  while (!zz_cj_lex_is(L, ")")) {
    if (L->k != ZZ_CJ_T_NAME) return zz_cj_fail(P->c, L->ts, "expected a parameter name");
    if (n == 33) return zz_cj_fail(P->c, L->ts, "a macro of more than 32 parameters");
    if (!(names[n] = zz_cj_strdup(P->c, L->ts, L->tn)) || !zz_cj_lex_next(L)) return false;
    if (zz_cj_lex_is(L, "=") && (!zz_cj_lex_next(L) || !(defs[n] = zz_cj_parse_expr(L, true)))) return false;
    n++;
    if (zz_cj_lex_is(L, ",")) {
      if (!zz_cj_lex_next(L)) return false;
    } else if (!zz_cj_lex_is(L, ")")) {
      return zz_cj_fail(P->c, L->ts, "expected ',' or ')' in the parameters");
    }
  }
  if (!zz_cj_lex_next(L) || !zz_cj_at_end(L, "{% macro %}")) return false;
  nd->names = zz_cj_alloc(P->c, (size_t)n * sizeof *nd->names);
  nd->defaults = zz_cj_alloc(P->c, (size_t)n * sizeof *nd->defaults);
  if (!nd->names || !nd->defaults) return false;
  memcpy(nd->names, names, (size_t)n * sizeof *names);
  memcpy(nd->defaults, defs, (size_t)n * sizeof *defs);
  nd->nnames = n;
  char got[32];
  int loops = P->loops;
  P->loops = 0; /* a loop outside does not reach into the macro */
  bool ok = zz_cj_body(P, nd, "endmacro", got, sizeof got, &nd->body);
  P->loops = loops;
  return ok;
}

/* one statement chunk into nd (a block statement takes its body) */
static bool zz_cj_stmt(zz_cj_parser *P, zz_cj_node *nd, const char *w, zz_cj_lex *L) {
  zz_cj *c = P->c;
  char got[32];
  if (!strcmp(w, "if")) return zz_cj_p_if(P, nd, L);
  if (!strcmp(w, "for")) return zz_cj_p_for(P, nd, L);
  if (!strcmp(w, "set")) return zz_cj_p_set(P, nd, L);
  if (!strcmp(w, "macro")) return zz_cj_p_macro(P, nd, L);
  if (!strcmp(w, "call")) {
    nd->k = ZZ_CJ_N_CALL;
    if (zz_cj_lex_is(L, "(")) return zz_cj_fail(c, L->ts, "a {%% call %%} with parameters is not supported");
    if (!(nd->e = zz_cj_whole(L, "{% call %}"))) return false;
    if (nd->e->k != ZZ_CJ_E_CALL) return zz_cj_fail(c, nd->at, "{%% call %%} wants a macro call");
    return zz_cj_body(P, nd, "endcall", got, sizeof got, &nd->body);
  }
  if (!strcmp(w, "filter")) { /* the filters over a placeholder name, the body's text */
    nd->k = ZZ_CJ_N_FILTER;
    static const char hole[] = "__zz_filter_body__";
    zz_cj_expr *x = zz_cj_alloc(c, sizeof *x);
    if (!x) return false;
    x->k = ZZ_CJ_E_NAME, x->at = L->ts, x->name = hole;
    char *text = zz_cj_alloc(c, sizeof hole + 3 + (size_t)(L->end - L->ts));
    if (!text) return false;
    sprintf(text, "%s | %.*s", hole, (int)(L->end - L->ts), L->ts);
    zz_cj_lex F = {.c = c, .p = text, .end = text + strlen(text)};
    if (!zz_cj_lex_next(&F) || !(nd->e = zz_cj_whole(&F, "{% filter %}"))) return false;
    return zz_cj_body(P, nd, "endfilter", got, sizeof got, &nd->body);
  }
  if (!strcmp(w, "generation")) {
    nd->k = ZZ_CJ_N_BLOCK;
    return zz_cj_at_end(L, "{% generation %}") && zz_cj_body(P, nd, "endgeneration", got, sizeof got, &nd->body);
  }
  if (!strcmp(w, "break") || !strcmp(w, "continue")) {
    nd->k = w[0] == 'b' ? ZZ_CJ_N_BREAK : ZZ_CJ_N_CONTINUE;
    if (!P->loops) return zz_cj_fail(c, nd->at, "{%% %s %%} outside a for loop", w);
    return zz_cj_at_end(L, w);
  }
  return zz_cj_fail(c, nd->at, "the statement {%% %s %%} is not supported", w);
}

/* Nodes into *head_out until a statement whose word is one of stop (space
 * separated); got: that word, "" at the end of the template. */
static bool zz_cj_parse_block(zz_cj_parser *P, const char *stop, char *got, size_t got_len, zz_cj_node **head_out) {
  zz_cj *c = P->c;
  zz_cj_node *head = NULL, **tail = &head;
  *head_out = NULL;
  if (++P->depth > c->lim.max_depth)
    return zz_cj_fail(c, P->i < P->n ? P->v[P->i].at : NULL, "blocks nested deeper than %d (max_depth)",
                      c->lim.max_depth);
  for (; P->i < P->n && P->v[P->i].k != ZZ_CJ_C_END; P->i++) {
    zz_cj_chunk *ch = &P->v[P->i];
    zz_cj_node *nd = zz_cj_alloc(c, sizeof *nd);
    if (!nd) return false;
    nd->at = ch->at;
    if (ch->k == ZZ_CJ_C_TEXT) {
      nd->k = ZZ_CJ_N_TEXT, nd->text = ch->s, nd->n = ch->n;
    } else if (ch->k == ZZ_CJ_C_EXPR) {
      zz_cj_lex L = {.c = c, .p = ch->s, .end = ch->s + ch->n};
      nd->k = ZZ_CJ_N_OUT;
      if (!zz_cj_lex_next(&L) || !(nd->e = zz_cj_whole(&L, "{{ }}"))) return false;
    } else {
      char w[32], padded[40], stops[160];
      zz_cj_lex L;
      if (!zz_cj_stmt_word(c, ch, &L, w, sizeof w)) return false;
      snprintf(padded, sizeof padded, " %s ", w);
      snprintf(stops, sizeof stops, " %s ", stop ? stop : "");
      if (stop && strstr(stops, padded)) {
        snprintf(got, got_len, "%s", w);
        *head_out = head;
        P->depth--;
        return true;
      }
      if (!strncmp(w, "end", 3) || !strcmp(w, "else") || !strcmp(w, "elif"))
        return zz_cj_fail(c, ch->at, "{%% %s %%} without its start", w);
      if (!zz_cj_stmt(P, nd, w, &L)) return false;
    }
    *tail = nd;
    tail = &nd->next;
  }
  if (got) got[0] = '\0';
  *head_out = head;
  P->depth--;
  return !c->err[0];
}

zz_cj_node *zz_cj_parse(zz_cj *c, const char *src) {
  zz_cj_parser P = {.c = c};
  zz_cj_node *root = NULL;
  char got[32];
  if (!zz_cj_cut(c, src, &P.v, &P.n) || !zz_cj_parse_block(&P, NULL, got, sizeof got, &root)) return NULL;
  return root;
}
