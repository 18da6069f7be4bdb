/*
 * pretokenize.c — the pre-tokenizer: a normalized piece of text cut into words.
 * ByteLevel's prefix space and Metaspace's replacement of spaces apply to the
 * whole piece first; then the piece is one word, or a new word starts before each
 * Metaspace replacement character, or the words are the matches of a Split
 * pattern (GPT-2's, LLaMA-3's, Qwen2's, ... read from the file; regex.c) and the
 * text between them.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

/* GPT-2's pattern: ByteLevel's use_regex, and vocab.json + merges.txt. */
static const char zz_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

zz_status zz_tok_set_split(zz_tokenizer *tok, const char *pattern, const char *where) {
  zz_regex *re;
  ZZ_CHECK(zz_regex_compile(pattern ? pattern : zz_gpt2_pattern, where, &re));
  zz_regex_free(tok->split_re);
  tok->split_re = re;
  tok->split = ZZ_SPLIT_REGEX;
  return ZZ_OK;
}

/* The steps the matcher may take over a piece of n code points: the patterns
 * tokenizers ship take a few per code point (a run is scanned by each alternative
 * that starts like it, then given back at most once). */
static size_t zz_pretok_budget(size_t n) { return ((size_t)1 << 20) + 256 * n; }

/* The words of cur[0, n): each match of the Split pattern, and each stretch of
 * text between matches (the library's "Isolated" behaviour; empty ones dropped). */
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
    cls[ncp] = zz_regex_class(cp[ncp]);
    off[ncp++] = (uint32_t)i;
    i += k;
  }
  off[ncp] = (uint32_t)n;
  /* Oniguruma's find_iter: the leftmost match from `from` on; an empty one where the
   * last match ended is passed over (the search moves one character on), so text
   * that only empty matches meet falls into pieces of one character */
  size_t budget = zz_pretok_budget(ncp), gap = 0, from = 0, last_end = SIZE_MAX;
  while (from <= ncp && st == ZZ_OK) {
    size_t i = from, j = 0;
    while (i <= ncp && !zz_regex_match(e->tok->split_re, cp, cls, ncp, i, &j, &budget) && budget > 0) i++;
    if (budget == 0) {
      st = zz_error(ZZ_ERR_UNSUPPORTED,
                    "tokenizer encode: the pre-tokenizer's Split pattern backtracks too much on a piece of %zu "
                    "characters (over %zu steps)",
                    ncp, zz_pretok_budget(ncp));
      break;
    }
    if (i > ncp) break; /* no match from here on */
    if (j == i && i == last_end) {
      from = i + 1;
      continue;
    }
    if (gap < i) st = zz_enc_raw_word(e, cur + off[gap], off[i] - off[gap]);
    if (st == ZZ_OK && j > i) st = zz_enc_raw_word(e, cur + off[i], off[j] - off[i]);
    gap = from = last_end = j;
  }
  if (st == ZZ_OK && gap < ncp) st = zz_enc_raw_word(e, cur + off[gap], off[ncp] - off[gap]);
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
    case ZZ_SPLIT_REGEX: st = zz_pretok_regex_words(e, cur, *n); break;
  }
  return st;
}
