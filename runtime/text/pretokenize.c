/*
 * pretokenize.c — the pre-tokenizer: a normalized piece of text cut into words.
 * ByteLevel's prefix space and Metaspace's replacement of spaces apply to the
 * whole piece first; then the piece is one word, or a new word starts before each
 * Metaspace replacement character, or the words are the matches of GPT-2's or
 * LLaMA-3's pattern (matched by hand below, on Unicode classes from
 * unicode_tables.c).
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "unicode_impl.h"

/* The classes the GPT-2 pattern distinguishes; every code point is exactly one. */
enum { ZZ_CLS_OTHER = 0, ZZ_CLS_LETTER, ZZ_CLS_NUMBER, ZZ_CLS_SPACE };

static uint8_t zz_cp_class(uint32_t cp) {
  if (cp < 0x80) {
    if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return ZZ_CLS_LETTER;
    if (cp >= '0' && cp <= '9') return ZZ_CLS_NUMBER;
    if (cp == ' ' || (cp >= '\t' && cp <= '\r')) return ZZ_CLS_SPACE;
    return ZZ_CLS_OTHER;
  }
  if (zz_unicode_is_letter(cp)) return ZZ_CLS_LETTER;
  if (zz_unicode_is_number(cp)) return ZZ_CLS_NUMBER;
  if (zz_unicode_is_space(cp)) return ZZ_CLS_SPACE;
  return ZZ_CLS_OTHER;
}

/*
 * The end (exclusive, in code points) of the pre-token starting at code point i of
 * the pattern
 *     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * where the regex engine takes the first alternative that matches, each greedily.
 * cp[k]: code point k of the text; cls[k]: its class; n: code points.
 */
static size_t zz_pretoken_end(const uint32_t *cp, const uint8_t *cls, size_t n, size_t i) {
  uint32_t c = cp[i];
  if (c == '\'' && i + 1 < n) { /* case-sensitive, as the GPT-2 pattern is */
    uint32_t c1 = cp[i + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if (i + 2 < n) {
      uint32_t c2 = cp[i + 2];
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return i + 3;
    }
  }
  /* " ?X+" for X = letters, numbers, other: one space may lead any such run */
  size_t k = (c == ' ' && i + 1 < n && cls[i + 1] != ZZ_CLS_SPACE) ? i + 1 : i;
  size_t j = k + 1;
  if (cls[k] != ZZ_CLS_SPACE) {
    while (j < n && cls[j] == cls[k]) j++;
    return j;
  }
  while (j < n && cls[j] == ZZ_CLS_SPACE) j++;
  /* \s+(?!\S): at the end of the text, the whole run; before a non-space, all but
   * the last space, which then leads the next run (or stands alone, \s+). */
  if (j == n || j - 1 == i) return j;
  return j - 1;
}

/* A code point as the LLaMA-3 pattern's (?i:...) compares it with s t r e v m l d:
 * ASCII lower case, and U+017F (long s), which Unicode case folding makes 's'. */
static uint32_t zz_fold_contraction(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  return c == 0x17F ? 's' : c;
}

static bool zz_is_newline(uint32_t c) { return c == '\r' || c == '\n'; }

/*
 * The same for LLaMA-3's pattern
 *     (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *      ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 * (first alternative that matches, each greedy with backtracking).
 */
static size_t zz_pretoken_end_llama3(const uint32_t *cp, const uint8_t *cls, size_t n, size_t i) {
  uint32_t c = cp[i];
  if (c == '\'' && i + 1 < n) {
    uint32_t c1 = zz_fold_contraction(cp[i + 1]);
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if (i + 2 < n) {
      uint32_t c2 = zz_fold_contraction(cp[i + 2]);
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return i + 3;
    }
  }
  size_t j;
  /* [^\r\n\p{L}\p{N}]?\p{L}+ */
  size_t k = i;
  if (cls[i] != ZZ_CLS_LETTER && cls[i] != ZZ_CLS_NUMBER && !zz_is_newline(c) && i + 1 < n &&
      cls[i + 1] == ZZ_CLS_LETTER)
    k = i + 1;
  if (cls[k] == ZZ_CLS_LETTER) {
    for (j = k + 1; j < n && cls[j] == ZZ_CLS_LETTER;) j++;
    return j;
  }
  /* \p{N}{1,3} */
  if (cls[i] == ZZ_CLS_NUMBER) {
    for (j = i + 1; j < n && j < i + 3 && cls[j] == ZZ_CLS_NUMBER;) j++;
    return j;
  }
  /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
  k = (c == ' ' && i + 1 < n && cls[i + 1] == ZZ_CLS_OTHER) ? i + 1 : i;
  if (cls[k] == ZZ_CLS_OTHER) {
    for (j = k + 1; j < n && cls[j] == ZZ_CLS_OTHER;) j++;
    while (j < n && zz_is_newline(cp[j])) j++;
    return j;
  }
  /* a whitespace run [i, j) */
  for (j = i + 1; j < n && cls[j] == ZZ_CLS_SPACE;) j++;
  /* \s*[\r\n]+: up to the run's last newline */
  for (size_t p = j; p > i; p--)
    if (zz_is_newline(cp[p - 1])) return p;
  /* \s+(?!\S) then \s+, as in GPT-2's pattern */
  if (j == n || j - 1 == i) return j;
  return j - 1;
}

/* The words of cur[0, n) by the regex pattern of `split`. */
static zz_status zz_pretok_regex_words(zz_enc *e, const char *cur, size_t n) {
  uint32_t *cp = malloc((n + 1) * sizeof *cp);
  uint8_t *cls = malloc(n + 1);
  uint32_t *off = malloc((n + 1) * sizeof *off);
  zz_status st = ZZ_OK;
  if (!cp || !cls || !off) {
    st = zz_enc_oom(n);
    goto done;
  }
  size_t ncp = 0;
  for (size_t i = 0; i < n;) {
    size_t k = zz_utf8_next((const uint8_t *)cur + i, n - i, &cp[ncp]);
    if (k == 0) { /* only after a Replace made a stray byte; keep it as other */
      cp[ncp] = 0xFFFD;
      k = 1;
    }
    cls[ncp] = zz_cp_class(cp[ncp]);
    off[ncp++] = (uint32_t)i;
    i += k;
  }
  off[ncp] = (uint32_t)n;
  for (size_t i = 0; i < ncp && st == ZZ_OK;) {
    size_t j = e->tok->split == ZZ_SPLIT_LLAMA3 ? zz_pretoken_end_llama3(cp, cls, ncp, i)
                                                : zz_pretoken_end(cp, cls, ncp, i);
    st = zz_enc_raw_word(e, cur + off[i], off[j] - off[i]);
    i = j;
  }
done:
  free(cp);
  free(cls);
  free(off);
  return st;
}

zz_status zz_pretok_words(zz_enc *e, char **buf, size_t *n, bool first) {
  const zz_tokenizer *tok = e->tok;
  zz_status st = ZZ_OK;
  if (tok->byte_level && tok->prefix_space && *n > 0 && (*buf)[0] != ' ') {
    zz_tok_replace space = {NULL, " ", 0, 1};
    st = zz_tok_replace_in(&space, buf, n);
  }
  if (st == ZZ_OK && tok->metaspace) {
    zz_tok_replace spaces = {" ", (char *)tok->meta_rep, 1, tok->meta_rep_len};
    st = zz_tok_replace_in(&spaces, buf, n);
    bool marked = *n >= tok->meta_rep_len && memcmp(*buf, tok->meta_rep, tok->meta_rep_len) == 0;
    bool prepend = tok->meta_prepend == ZZ_PREPEND_ALWAYS || (tok->meta_prepend == ZZ_PREPEND_FIRST && first);
    if (st == ZZ_OK && *n > 0 && !marked && prepend) {
      zz_tok_replace pre = {NULL, (char *)tok->meta_rep, 0, tok->meta_rep_len};
      st = zz_tok_replace_in(&pre, buf, n);
    }
  }
  if (st != ZZ_OK) return st;
  const char *cur = *buf;
  switch (tok->split) {
    case ZZ_SPLIT_NONE: st = zz_enc_raw_word(e, cur, *n); break;
    case ZZ_SPLIT_META: { /* a new word before each replacement character */
      size_t start = 0, r = tok->meta_rep_len;
      for (size_t i = 1; i + r <= *n && st == ZZ_OK; i++)
        if (memcmp(cur + i, tok->meta_rep, r) == 0) {
          st = zz_enc_raw_word(e, cur + start, i - start);
          start = i;
        }
      if (st == ZZ_OK) st = zz_enc_raw_word(e, cur + start, *n - start);
      break;
    }
    case ZZ_SPLIT_GPT2:
    case ZZ_SPLIT_LLAMA3: st = zz_pretok_regex_words(e, cur, *n); break;
  }
  return st;
}
