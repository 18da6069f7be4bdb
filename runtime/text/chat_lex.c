/*
 * chat_lex.c — a chat template cut into text and tags as jinja2's lexer cuts it
 * with trim_blocks and lstrip_blocks (transformers' settings): "{%-"/"-%}" strip the
 * white space beside them, "+" keeps it, a block or comment tag alone on its line
 * takes its indent and its newline with it, {% raw %} keeps its inside as text; and
 * the tokens of the expressions inside tags, with Python's string escapes.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"

/* ================================================================ cutting */

typedef struct zz_cj_cutter {
  zz_cj *c;
  zz_cj_chunk *v;
  size_t n, cap;
} zz_cj_cutter;

static bool zz_cj_cut_push(zz_cj_cutter *u, zz_cj_ckind k, const char *s, size_t n, const char *at) {
  if (u->n == u->cap) {
    size_t cap = u->cap ? u->cap * 2 : 64;
    zz_cj_chunk *v = zz_cj_alloc(u->c, cap * sizeof *v);
    if (!v) return false;
    if (u->n) memcpy(v, u->v, u->n * sizeof *v);
    u->v = v, u->cap = cap;
  }
  u->v[u->n++] = (zz_cj_chunk){.k = k, .s = s, .n = n, .at = at};
  return true;
}

/* past the white space at p (Python's \s*) */
static const char *zz_cj_skip_space(const char *p, const char *end) {
  size_t w;
  while (p < end && zz_cj_is_space_at(p, (size_t)(end - p), &w)) p += w;
  return p;
}

/* The end of a tag that opened at in: the close ("%}" / "}}"), skipping string
 * literals as jinja2's tokenizer does; NULL where it does not end. */
static const char *zz_cj_tag_end(const char *in, const char *close) {
  for (const char *p = in; *p; p++) {
    if (*p == '\'' || *p == '"') {
      char q = *p;
      for (p++; *p && *p != q; p++)
        if (*p == '\\' && p[1]) p++;
      if (!*p) return NULL;
    } else if (p[0] == close[0] && p[1] == close[1]) {
      return p;
    }
  }
  return NULL;
}

/* {% raw %}: the tag's inside is the word raw */
static bool zz_cj_is_word(const char *s, size_t n, const char *w) {
  while (n && isspace((unsigned char)*s)) s++, n--;
  while (n && isspace((unsigned char)s[n - 1])) n--;
  return n == strlen(w) && memcmp(s, w, n) == 0;
}

/* {%[-+]? endraw [-+]?%} from p: its start, with *inner_minus / *end the "-" before
 * endraw and the tag's close; NULL where there is none */
static const char *zz_cj_find_endraw(const char *p, bool *inner_minus, const char **close) {
  for (const char *t = strstr(p, "{%"); t; t = strstr(t + 2, "{%")) {
    const char *q = t + 2;
    *inner_minus = *q == '-';
    if (*q == '-' || *q == '+') q++;
    while (isspace((unsigned char)*q)) q++;
    if (strncmp(q, "endraw", 6)) continue;
    q += 6;
    while (isspace((unsigned char)*q)) q++;
    if (*q == '-' || *q == '+') q++;
    if (q[0] == '%' && q[1] == '}') {
      *close = q;
      return t;
    }
  }
  return NULL;
}

bool zz_cj_cut(zz_cj *c, const char *src, zz_cj_chunk **out, size_t *n_out) {
  zz_cj_cutter u = {.c = c};
  const char *p = src, *end = src + strlen(src);
  bool line_start = true; /* jinja2's line_starting: the last tag ended a line */
  while (p < end) {
    const char *t = strchr(p, '{');
    while (t && t[1] != '{' && t[1] != '%' && t[1] != '#') t = strchr(t + 1, '{');
    const char *te = t ? t : end;
    if (t && t[2] == '-') {
      size_t w;
      while (te > p && (w = zz_cj_space_before(p, (size_t)(te - p)))) te -= w;
    } else if (t && t[1] != '{' && t[2] != '+') { /* lstrip_blocks */
      const char *q = te;
      size_t w;
      while (q > p && q[-1] != '\n' && (w = zz_cj_space_before(p, (size_t)(q - p)))) q -= w;
      if (q < te && (q > p ? q[-1] == '\n' : line_start)) te = q;
    }
    if (te > p && !zz_cj_cut_push(&u, ZZ_CJ_C_TEXT, p, (size_t)(te - p), p)) return false;
    if (!t) break;
    char kind = t[1];
    const char *in = t + 2 + (t[2] == '-' || t[2] == '+');
    const char *close = kind == '#' ? strstr(in, "#}") : zz_cj_tag_end(in, kind == '{' ? "}}" : "%}");
    if (!close)
      return zz_cj_fail(c, t, "a tag that does not end ('%s' missing)", kind == '{' ? "}}" : kind == '#' ? "#}" : "%}");
    const char *ie = close;
    char mark = ie > in ? ie[-1] : 0; /* "-" or "+" before the close */
    if (mark == '-' || mark == '+') ie--;
    if (kind == '%' && zz_cj_is_word(in, (size_t)(ie - in), "raw")) { /* {% raw %}...{% endraw %} */
      bool inner_minus;
      const char *rclose, *r = zz_cj_find_endraw(close + 2, &inner_minus, &rclose);
      if (!r) return zz_cj_fail(c, t, "{%% raw %%} without {%% endraw %%}");
      const char *rs = close + 2, *re = r;
      if (mark == '-') rs = zz_cj_skip_space(rs, re);
      size_t w;
      if (inner_minus)
        while (re > rs && (w = zz_cj_space_before(rs, (size_t)(re - rs)))) re -= w;
      if (re > rs && !zz_cj_cut_push(&u, ZZ_CJ_C_TEXT, rs, (size_t)(re - rs), rs)) return false;
      close = rclose, mark = rclose[-1];
      kind = '%';
    } else if (kind != '#' &&
               !zz_cj_cut_push(&u, kind == '{' ? ZZ_CJ_C_EXPR : ZZ_CJ_C_STMT, in, (size_t)(ie - in), t)) {
      return false;
    }
    p = close + 2;
    if (mark == '-') p = zz_cj_skip_space(p, end);
    else if (mark != '+' && kind != '{' && *p == '\n') /* trim_blocks */
      p++;
    line_start = p > src && p[-1] == '\n';
  }
  if (!zz_cj_cut_push(&u, ZZ_CJ_C_END, "", 0, end)) return false;
  *out = u.v, *n_out = u.n;
  return true;
}

/* ================================================================ tokens */

static int zz_cj_hex(char ch) {
  return ch >= '0' && ch <= '9'   ? ch - '0'
         : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
         : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                  : -1;
}

static size_t zz_cj_utf8_put(char *o, unsigned cp) {
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000)
    return o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 0x3f)), o[2] = (char)(0x80 | (cp & 0x3f)), 3;
  o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
  o[2] = (char)(0x80 | (cp >> 6 & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* A string literal from L->p (its quote): Python's escapes (unicode-escape, as
 * jinja2 decodes them). */
static bool zz_cj_lex_string(zz_cj_lex *L) {
  char q = *L->p;
  const char *s = L->p + 1;
  char *out = zz_cj_alloc(L->c, (size_t)(L->end - s) + 1);
  if (!out) return false;
  size_t n = 0;
  while (s < L->end && *s != q) {
    if (*s != '\\' || s + 1 >= L->end) {
      out[n++] = *s++;
      continue;
    }
    char e = s[1];
    s += 2;
    const char *simple = strchr("nrtabfv\\'\"\n", e);
    if (simple && e) {
      static const char from[] = "nrtabfv\\'\"\n", to[] = "\n\r\t\a\b\f\v\\'\"";
      if (e != '\n') out[n++] = to[strchr(from, e) - from]; /* backslash-newline: nothing */
    } else if (e == 'x' || e == 'u' || e == 'U') {
      int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
      unsigned cp = 0;
      for (int i = 0; i < digits; i++, s++) {
        int h = s < L->end ? zz_cj_hex(*s) : -1;
        if (h < 0) return zz_cj_fail(L->c, L->ts, "a bad \\%c escape in a string", e);
        cp = cp * 16 + (unsigned)h;
      }
      if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return zz_cj_fail(L->c, L->ts, "the escape \\%c%0*x is not a code point UTF-8 can hold", e, digits, cp);
      n += zz_cj_utf8_put(out + n, cp);
    } else if (e >= '0' && e <= '7') {
      unsigned cp = (unsigned)(e - '0');
      for (int i = 0; i < 2 && s < L->end && *s >= '0' && *s <= '7'; i++) cp = cp * 8 + (unsigned)(*s++ - '0');
      n += zz_cj_utf8_put(out + n, cp);
    } else if (e == 'N') {
      return zz_cj_fail(L->c, L->ts, "the escape \\N{...} is not supported");
    } else { /* Python keeps an unknown escape */
      out[n++] = '\\', s--;
    }
  }
  if (s >= L->end) return zz_cj_fail(L->c, L->ts, "a string that does not end");
  L->p = s + 1;
  L->k = ZZ_CJ_T_STR, L->tn = (size_t)(L->p - L->ts), L->v = zz_cj_str(out, n);
  return true;
}

static bool zz_cj_lex_number(zz_cj_lex *L) {
  const char *s = L->p;
  while (s < L->end && (isdigit((unsigned char)*s) || *s == '_')) s++;
  bool real = false;
  if (s + 1 < L->end && *s == '.' && isdigit((unsigned char)s[1])) {
    real = true;
    for (s++; s < L->end && (isdigit((unsigned char)*s) || *s == '_'); s++) {}
  }
  if (s < L->end && (*s == 'e' || *s == 'E')) {
    const char *x = s + 1;
    if (x < L->end && (*x == '+' || *x == '-')) x++;
    if (x < L->end && isdigit((unsigned char)*x)) {
      real = true;
      for (s = x; s < L->end && isdigit((unsigned char)*s); s++) {}
    }
  }
  char buf[64];
  size_t k = 0;
  for (const char *q = L->p; q < s; q++)
    if (*q != '_') {
      if (k + 1 >= sizeof buf) return zz_cj_fail(L->c, L->ts, "a number too long");
      buf[k++] = *q;
    }
  buf[k] = '\0';
  L->p = s;
  L->tn = (size_t)(s - L->ts);
  if (real) {
    L->k = ZZ_CJ_T_FLOAT, L->v = zz_cj_float(strtod(buf, NULL));
    return true;
  }
  long long v = 0;
  for (size_t i = 0; i < k; i++) {
    if (v > (INT64_MAX - 9) / 10) return zz_cj_fail(L->c, L->ts, "an integer too large (more than 64 bits)");
    v = v * 10 + (buf[i] - '0');
  }
  L->k = ZZ_CJ_T_INT, L->v = zz_cj_int(v);
  return true;
}

bool zz_cj_lex_next(zz_cj_lex *L) {
  if (L->c->err[0]) return false;
  while (L->p < L->end && isspace((unsigned char)*L->p)) L->p++;
  L->ts = L->p;
  if (L->p >= L->end) {
    L->k = ZZ_CJ_T_END, L->tn = 0;
    return true;
  }
  char ch = *L->p;
  if (isalpha((unsigned char)ch) || ch == '_') {
    while (L->p < L->end && (isalnum((unsigned char)*L->p) || *L->p == '_')) L->p++;
    L->k = ZZ_CJ_T_NAME, L->tn = (size_t)(L->p - L->ts);
    return true;
  }
  if (isdigit((unsigned char)ch)) return zz_cj_lex_number(L);
  if (ch == '\'' || ch == '"') return zz_cj_lex_string(L);
  static const char *const two[] = {"==", "!=", "<=", ">=", "//", "**"};
  for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
    if (L->end - L->p >= 2 && memcmp(L->p, two[i], 2) == 0) {
      L->p += 2;
      L->k = ZZ_CJ_T_OP, L->tn = 2;
      return true;
    }
  if (strchr("+-*/%~()[]{}.,:|<>=", ch)) {
    L->p++;
    L->k = ZZ_CJ_T_OP, L->tn = 1;
    return true;
  }
  return zz_cj_fail(L->c, L->ts, "unexpected character '%c' in an expression", ch);
}

bool zz_cj_lex_is(const zz_cj_lex *L, const char *s) {
  return (L->k == ZZ_CJ_T_OP || L->k == ZZ_CJ_T_NAME) && L->tn == strlen(s) && memcmp(L->ts, s, L->tn) == 0;
}

bool zz_cj_lex_expect(zz_cj_lex *L, const char *s) {
  if (!zz_cj_lex_is(L, s))
    return zz_cj_fail(L->c, L->ts, "expected '%s' here, found '%.*s'", s, (int)(L->tn ? L->tn : 3),
                      L->tn ? L->ts : "end");
  return zz_cj_lex_next(L);
}
