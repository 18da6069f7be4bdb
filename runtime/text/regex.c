/*
 * regex.c — the regular expressions of the pre-tokenizer's Split (regex_impl.h).
 *
 * A pattern is compiled into a tree: an alternation of sequences, each item a set
 * of code points repeated {min, max} times, a group (an alternation, (?:...),
 * (...) or (?i:...)), or a lookahead ((?!...), (?=...)). Matching is Oniguruma's
 * backtracking order: the first alternative that leads to a match wins, and a
 * repeat takes as many as it can, then gives them back one at a time. Repeats are
 * allowed on sets only, so the recursion is as deep as the pattern, not the text.
 *
 * Understood: literals, \r \n \t \f \v and escaped punctuation, ., [...] and
 * [^...] with ranges, \s \S \p{L} \p{N} \P{L} \P{N} (also inside [...]), ? * +
 * {m} {m,} {m,n} (greedy), | ( ) (?: ) (?i: ) (?! ) (?= ). Case-insensitive
 * groups fold ASCII letters, U+017F (long s, 's') and U+212A (Kelvin, 'k') as
 * Unicode's simple case folding does. Refused by name: anchors, \d \w \b and the
 * other escapes, other \p{..} classes, lazy and possessive repeats, repeated
 * groups, lookbehind, back references, inline flags other than (?i:.
 */
#include <stdlib.h>
#include <string.h>

#include "regex_impl.h"
#include "unicode_impl.h"
#include "utf8_impl.h"

/* ================================================================ the tree */

typedef struct zz_re_alt zz_re_alt;

/* A set of code points: any of `classes`, any outside `not_classes`, any range;
 * then negated when `negate`. */
typedef struct zz_re_set {
  uint8_t classes, not_classes;
  bool negate;
  bool icase; /* a code point is also tried folded */
  uint32_t (*ranges)[2];
  int n_ranges, cap;
} zz_re_set;

enum { ZZ_RE_SET = 0, ZZ_RE_GROUP, ZZ_RE_NOT_AHEAD, ZZ_RE_AHEAD };

typedef struct zz_re_node {
  int kind;
  size_t min, max; /* ZZ_RE_SET repeats; max SIZE_MAX: no bound */
  zz_re_set set;
  zz_re_alt *alt; /* the other kinds */
} zz_re_node;

typedef struct zz_re_seq {
  zz_re_node *items;
  int n, cap;
} zz_re_seq;

struct zz_re_alt {
  zz_re_seq *seqs;
  int n, cap;
};

struct zz_regex {
  zz_re_alt *root;
};

static void zz_re_alt_free(zz_re_alt *a) {
  if (!a) return;
  for (int i = 0; i < a->n; i++) {
    for (int k = 0; k < a->seqs[i].n; k++) {
      free(a->seqs[i].items[k].set.ranges);
      zz_re_alt_free(a->seqs[i].items[k].alt);
    }
    free(a->seqs[i].items);
  }
  free(a->seqs);
  free(a);
}

void zz_regex_free(zz_regex *re) {
  if (!re) return;
  zz_re_alt_free(re->root);
  free(re);
}

/* Grows an array of *cap elements of `size` bytes to hold one more. */
static bool zz_re_grow(void **p, int *cap, int n, size_t size) {
  if (n < *cap) return true;
  int c = *cap ? 2 * *cap : 4;
  void *g = realloc(*p, (size_t)c * size);
  if (!g) return false;
  *p = g;
  *cap = c;
  return true;
}

/* ================================================================ classes */

uint8_t zz_regex_class(uint32_t cp) {
  if (cp < 0x80) {
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return ZZ_RE_LETTER;
    if (cp >= '0' && cp <= '9') return ZZ_RE_NUMBER;
    if (cp == ' ' || (cp >= '\t' && cp <= '\r')) return ZZ_RE_SPACE;
    return 0;
  }
  if (zz_unicode_is_letter(cp)) return ZZ_RE_LETTER;
  if (zz_unicode_is_number(cp)) return ZZ_RE_NUMBER;
  if (zz_unicode_is_space(cp)) return ZZ_RE_SPACE;
  return 0;
}

/* The simple case folding of the code points that fold to ASCII letters. */
static uint32_t zz_re_fold(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c == 0x17F) return 's';
  if (c == 0x212A) return 'k';
  return c;
}

static bool zz_re_set_has(const zz_re_set *s, uint32_t c, uint8_t cls) {
  bool in = (s->classes & cls) || (s->not_classes & ~cls & (ZZ_RE_LETTER | ZZ_RE_NUMBER | ZZ_RE_SPACE));
  uint32_t f = s->icase ? zz_re_fold(c) : c;
  for (int i = 0; !in && i < s->n_ranges; i++)
    in = (c >= s->ranges[i][0] && c <= s->ranges[i][1]) || (f >= s->ranges[i][0] && f <= s->ranges[i][1]);
  return in != s->negate;
}

/* ================================================================ the parser */

typedef struct zz_re_parse {
  const char *pat, *p, *end;
  const char *where;
  bool icase;
  int depth;
} zz_re_parse;

#define ZZ_RE_MAX_DEPTH 32
/* The matcher recurses once per item on its way: a bound on the pattern bounds the stack. */
#define ZZ_RE_MAX_LEN 2048

static zz_status zz_re_refuse(const zz_re_parse *ps, const char *what) {
  int quote = ps->end - ps->p < 8 ? (int)(ps->end - ps->p) : 8; /* ending on a whole character */
  while (quote > 0 && ps->p + quote < ps->end && ((uint8_t)ps->p[quote] & 0xC0) == 0x80) quote--;
  return zz_error(ZZ_ERR_UNSUPPORTED, "%s pattern \"%.120s\": %s (\"%.*s\" at offset %d) is not supported", ps->where,
                  ps->pat, what, quote, ps->p, (int)(ps->p - ps->pat));
}

static zz_status zz_re_bad(const zz_re_parse *ps, const char *what) {
  return zz_error(ZZ_ERR_FORMAT, "%s pattern \"%.120s\": %s at offset %d", ps->where, ps->pat, what,
                  (int)(ps->p - ps->pat));
}

static zz_status zz_re_oom(const zz_re_parse *ps) {
  return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory compiling the pattern", ps->where);
}

/* The next code point of the pattern. */
static zz_status zz_re_next(zz_re_parse *ps, uint32_t *c) {
  size_t k = zz_utf8_next((const uint8_t *)ps->p, (size_t)(ps->end - ps->p), c);
  if (k == 0) return zz_re_bad(ps, "invalid UTF-8");
  ps->p += k;
  return ZZ_OK;
}

static zz_status zz_re_range(zz_re_parse *ps, zz_re_set *s, uint32_t lo, uint32_t hi) {
  if (!zz_re_grow((void **)&s->ranges, &s->cap, s->n_ranges, sizeof *s->ranges)) return zz_re_oom(ps);
  s->ranges[s->n_ranges][0] = lo;
  s->ranges[s->n_ranges][1] = hi;
  s->n_ranges++;
  if (!ps->icase) return ZZ_OK;
  s->icase = true;
  if (hi >= 0x80) return zz_re_refuse(ps, "a case-insensitive non-ASCII character");
  /* ranges are kept folded: an upper-case ASCII part is added lower-cased */
  uint32_t a = lo > 'A' ? lo : 'A', b = hi < 'Z' ? hi : 'Z';
  if (a <= b) return zz_re_range(ps, s, a + 32, b + 32);
  return ZZ_OK;
}

/* After a backslash: a class (\s \S \p{L} \p{N} \P{L} \P{N}) into s, or a single
 * code point into *c (returned with *is_char true). */
static zz_status zz_re_escape(zz_re_parse *ps, zz_re_set *s, uint32_t *c, bool *is_char) {
  *is_char = false;
  if (ps->p >= ps->end) return zz_re_bad(ps, "a trailing backslash");
  char e = *ps->p++;
  switch (e) {
    case 's': s->classes |= ZZ_RE_SPACE; return ZZ_OK;
    case 'S': s->not_classes |= ZZ_RE_SPACE; return ZZ_OK;
    case 'p':
    case 'P': {
      const char *close = memchr(ps->p, '}', (size_t)(ps->end - ps->p));
      uint8_t cls = 0;
      if (ps->p < ps->end && *ps->p == '{' && close) {
        size_t len = (size_t)(close - ps->p - 1);
        if (len == 1 && ps->p[1] == 'L') cls = ZZ_RE_LETTER;
        else if (len == 1 && ps->p[1] == 'N')
          cls = ZZ_RE_NUMBER;
      }
      if (!cls) {
        ps->p -= 2; /* at the backslash */
        return zz_re_refuse(ps, "a Unicode class other than \\p{L} and \\p{N}");
      }
      ps->p = close + 1;
      if (e == 'p') s->classes |= cls;
      else
        s->not_classes |= cls;
      return ZZ_OK;
    }
    case 'r': *c = '\r'; break;
    case 'n': *c = '\n'; break;
    case 't': *c = '\t'; break;
    case 'f': *c = '\f'; break;
    case 'v': *c = '\v'; break;
    default:
      if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '0' && e <= '9') || (unsigned char)e >= 0x80) {
        ps->p -= 2; /* at the backslash */
        return zz_re_refuse(ps, "an escape other than \\s \\S \\p{L} \\p{N} \\P{L} \\P{N} \\r \\n \\t \\f \\v");
      }
      *c = (uint32_t)e;
  }
  *is_char = true;
  return ZZ_OK;
}

/* [...] after its '['. */
static zz_status zz_re_class(zz_re_parse *ps, zz_re_set *s) {
  if (ps->p < ps->end && *ps->p == '^') {
    s->negate = true;
    ps->p++;
  }
  bool first = true;
  for (;;) {
    if (ps->p >= ps->end) return zz_re_bad(ps, "an unterminated [");
    if (*ps->p == ']' && !first) {
      ps->p++;
      return ZZ_OK;
    }
    first = false;
    if (*ps->p == '[') return zz_re_refuse(ps, "a nested [ class");
    if (*ps->p == '&' && ps->p + 1 < ps->end && ps->p[1] == '&') return zz_re_refuse(ps, "a class intersection &&");
    uint32_t lo = 0;
    bool is_char = true;
    if (*ps->p == '\\') {
      ps->p++;
      ZZ_CHECK(zz_re_escape(ps, s, &lo, &is_char));
      if (!is_char) continue;
    } else {
      ZZ_CHECK(zz_re_next(ps, &lo));
    }
    uint32_t hi = lo;
    if (ps->p + 1 < ps->end && *ps->p == '-' && ps->p[1] != ']') {
      ps->p++;
      if (*ps->p == '\\') {
        ps->p++;
        ZZ_CHECK(zz_re_escape(ps, s, &hi, &is_char));
        if (!is_char) return zz_re_refuse(ps, "a range ending in a class");
      } else {
        ZZ_CHECK(zz_re_next(ps, &hi));
      }
      if (hi < lo) return zz_re_bad(ps, "a range out of order");
    }
    ZZ_CHECK(zz_re_range(ps, s, lo, hi));
  }
}

static zz_status zz_re_alt_parse(zz_re_parse *ps, zz_re_alt **out);

/* A decimal number of at most 6 digits at ps->p, or -1. */
static long zz_re_number(zz_re_parse *ps) {
  long v = -1;
  for (int k = 0; ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9'; k++, ps->p++) {
    if (k == 6) return -1;
    v = (v < 0 ? 0 : v * 10) + (*ps->p - '0');
  }
  return v;
}

/* {m}, {m,}, {m,n}, {,n} (Oniguruma's {0,n}) after its '{' into *min, *max; false
 * (ps->p back where it was) when the brace does not start one ({,} neither), which
 * Oniguruma then reads as a literal. */
static bool zz_re_braces(zz_re_parse *ps, size_t *min, size_t *max) {
  const char *at = ps->p;
  bool no_min = ps->p < ps->end && *ps->p == ',';
  long m = no_min ? 0 : zz_re_number(ps), n = m;
  if (m >= 0 && ps->p < ps->end && *ps->p == ',') {
    ps->p++;
    n = ps->p < ps->end && *ps->p == '}' ? -2 : zz_re_number(ps);
  }
  if (m < 0 || n == -1 || (no_min && n == -2) || ps->p >= ps->end || *ps->p != '}' || (n >= 0 && n < m)) {
    ps->p = at;
    return false;
  }
  ps->p++;
  *min = (size_t)m;
  *max = n == -2 ? SIZE_MAX : (size_t)n;
  return true;
}

/* One item of a sequence and its repeat. */
static zz_status zz_re_item(zz_re_parse *ps, zz_re_node *node) {
  *node = (zz_re_node){.kind = ZZ_RE_SET, .min = 1, .max = 1};
  char c = *ps->p;
  if (c == '(') {
    ps->p++;
    bool icase = ps->icase;
    node->kind = ZZ_RE_GROUP;
    if (ps->p < ps->end && *ps->p == '?') {
      const char *q = ps->p + 1;
      if (q < ps->end && *q == ':') ps->p += 2;
      else if (q < ps->end && (*q == '!' || *q == '=')) {
        node->kind = *q == '!' ? ZZ_RE_NOT_AHEAD : ZZ_RE_AHEAD;
        ps->p += 2;
      } else if (q + 1 < ps->end && q[0] == 'i' && q[1] == ':') {
        ps->icase = true;
        ps->p += 3;
      } else {
        return zz_re_refuse(ps, "a (? group other than (?: (?i: (?! (?=");
      }
    }
    if (++ps->depth > ZZ_RE_MAX_DEPTH) return zz_re_refuse(ps, "groups nested this deep");
    ZZ_CHECK(zz_re_alt_parse(ps, &node->alt));
    ps->depth--;
    ps->icase = icase;
    if (ps->p >= ps->end || *ps->p != ')') return zz_re_bad(ps, "an unclosed (");
    ps->p++;
  } else if (c == '[') {
    ps->p++;
    ZZ_CHECK(zz_re_class(ps, &node->set));
  } else if (c == '\\') {
    ps->p++;
    uint32_t cp = 0;
    bool is_char = false;
    ZZ_CHECK(zz_re_escape(ps, &node->set, &cp, &is_char));
    if (is_char) ZZ_CHECK(zz_re_range(ps, &node->set, cp, cp));
  } else if (c == '.') {
    ps->p++;
    node->set.negate = true; /* Oniguruma's . is anything but a newline */
    ZZ_CHECK(zz_re_range(ps, &node->set, '\n', '\n'));
  } else if (c == '^' || c == '$') {
    return zz_re_refuse(ps, "an anchor (^ or $)");
  } else if (c == '*' || c == '+' || c == '?') {
    return zz_re_bad(ps, "a repeat of nothing");
  } else {
    uint32_t cp;
    ZZ_CHECK(zz_re_next(ps, &cp));
    ZZ_CHECK(zz_re_range(ps, &node->set, cp, cp));
  }
  /* the repeat */
  if (ps->p >= ps->end) return ZZ_OK;
  const char *repeat = ps->p;
  size_t min = 1, max = 1;
  c = *ps->p;
  if (c == '?' || c == '*' || c == '+') {
    ps->p++;
    min = c == '+' ? 1 : 0;
    max = c == '?' ? 1 : SIZE_MAX;
  } else if (c == '{') {
    ps->p++;
    if (!zz_re_braces(ps, &min, &max)) {
      ps->p--;
      return ZZ_OK;
    }
  } else {
    return ZZ_OK;
  }
  if (node->kind != ZZ_RE_SET) {
    ps->p = repeat;
    return zz_re_refuse(ps, "a repeated group");
  }
  if (ps->p < ps->end && (*ps->p == '?' || *ps->p == '+')) return zz_re_refuse(ps, "a lazy or possessive repeat");
  node->min = min;
  node->max = max;
  return ZZ_OK;
}

static zz_status zz_re_alt_parse(zz_re_parse *ps, zz_re_alt **out) {
  zz_re_alt *a = calloc(1, sizeof *a);
  *out = a;
  if (!a) return zz_re_oom(ps);
  for (;;) {
    if (!zz_re_grow((void **)&a->seqs, &a->cap, a->n, sizeof *a->seqs)) return zz_re_oom(ps);
    zz_re_seq *s = &a->seqs[a->n++];
    *s = (zz_re_seq){0};
    while (ps->p < ps->end && *ps->p != '|' && *ps->p != ')') {
      if (!zz_re_grow((void **)&s->items, &s->cap, s->n, sizeof *s->items)) return zz_re_oom(ps);
      zz_re_node *node = &s->items[s->n++];
      *node = (zz_re_node){0};
      ZZ_CHECK(zz_re_item(ps, node));
    }
    if (ps->p >= ps->end || *ps->p != '|') return ZZ_OK;
    ps->p++;
  }
}

zz_status zz_regex_compile(const char *pattern, const char *where, zz_regex **out) {
  *out = NULL;
  zz_regex *re = calloc(1, sizeof *re);
  zz_re_parse ps = {.pat = pattern, .p = pattern, .end = pattern + strlen(pattern), .where = where};
  if (!re) return zz_re_oom(&ps);
  if (ps.end - ps.p > ZZ_RE_MAX_LEN) {
    free(re);
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: a pattern of %zu bytes is not supported (at most %d)", where,
                    (size_t)(ps.end - ps.p), ZZ_RE_MAX_LEN);
  }
  zz_status st = zz_re_alt_parse(&ps, &re->root);
  if (st == ZZ_OK && ps.p < ps.end) st = zz_re_bad(&ps, "an unmatched )");
  if (st != ZZ_OK) {
    zz_regex_free(re);
    return st;
  }
  *out = re;
  return ZZ_OK;
}

/* ================================================================ matching */

typedef struct zz_re_text {
  const uint32_t *cp;
  const uint8_t *cls;
  size_t n;
  size_t *budget;
} zz_re_text;

/* What is left to match after a group: the rest of an outer sequence, and so on. */
typedef struct zz_re_cont {
  const zz_re_seq *seq;
  int idx;
  const struct zz_re_cont *next;
} zz_re_cont;

static bool zz_re_alt_at(const zz_re_text *t, const zz_re_alt *a, size_t pos, const zz_re_cont *k, size_t *end);

/* Items idx.. of seq from pos, then k; the end of the whole match in *end. */
static bool zz_re_seq_at(const zz_re_text *t, const zz_re_seq *seq, int idx, size_t pos, const zz_re_cont *k,
                         size_t *end) {
  if (*t->budget == 0) return false;
  --*t->budget;
  if (idx == seq->n) {
    if (!k) {
      *end = pos;
      return true;
    }
    return zz_re_seq_at(t, k->seq, k->idx, pos, k->next, end);
  }
  const zz_re_node *node = &seq->items[idx];
  switch (node->kind) {
    case ZZ_RE_SET: {
      size_t most = 0;
      while (most < node->max && pos + most < t->n && zz_re_set_has(&node->set, t->cp[pos + most], t->cls[pos + most]))
        most++;
      *t->budget -= most < *t->budget ? most : *t->budget;
      for (size_t r = most + 1; r-- > node->min;)
        if (zz_re_seq_at(t, seq, idx + 1, pos + r, k, end)) return true;
      return false;
    }
    case ZZ_RE_GROUP: {
      zz_re_cont after = {seq, idx + 1, k};
      return zz_re_alt_at(t, node->alt, pos, &after, end);
    }
    default: { /* a lookahead: matched on its own, then the rest from the same place */
      size_t ignored;
      bool found = zz_re_alt_at(t, node->alt, pos, NULL, &ignored);
      if (found != (node->kind == ZZ_RE_AHEAD)) return false;
      return zz_re_seq_at(t, seq, idx + 1, pos, k, end);
    }
  }
}

/* Whether seq cannot start at pos: its first item is a set that must match once
 * and the code point there is not in it (a shortcut; seq_at would fail alike). */
static bool zz_re_cannot_start(const zz_re_text *t, const zz_re_seq *seq, size_t pos) {
  if (seq->n == 0 || seq->items[0].kind != ZZ_RE_SET || seq->items[0].min == 0) return false;
  return pos >= t->n || !zz_re_set_has(&seq->items[0].set, t->cp[pos], t->cls[pos]);
}

static bool zz_re_alt_at(const zz_re_text *t, const zz_re_alt *a, size_t pos, const zz_re_cont *k, size_t *end) {
  for (int i = 0; i < a->n; i++)
    if (!zz_re_cannot_start(t, &a->seqs[i], pos) && zz_re_seq_at(t, &a->seqs[i], 0, pos, k, end)) return true;
  return false;
}

bool zz_regex_match(const zz_regex *re, const uint32_t *cp, const uint8_t *cls, size_t n, size_t i, size_t *end,
                    size_t *budget) {
  zz_re_text t = {.cp = cp, .cls = cls, .n = n, .budget = budget};
  return zz_re_alt_at(&t, re->root, i, NULL, end);
}
