/*
 * encode.c — text into ids as Hugging Face encodes it (no special tokens added):
 * the UTF-8 checked, the text cut at its added tokens (longest first at the
 * leftmost place, special or not, as the tokenizers library does), each piece
 * between them normalized (normalize.c) and pre-tokenized into words
 * (pretokenize.c), each word mapped to GPT-2's byte spelling when the vocabulary
 * is byte-level and through the BPE model (bpe.c).
 *
 * The byte-level files speak in "byte-mapped" text: every byte is shown as one
 * printable code point (a space is "Ġ"), so vocab.json keys and merges.txt tokens
 * are UTF-8 of those code points. Internally tokens are ids and text stays raw
 * bytes; the mapping is only needed to look the single bytes up and to decode.
 *
 * Special tokens in the text: both kinds of files find them as transformers does;
 * the vocab.json kind takes them from tokenizer_config.json and
 * special_tokens_map.json (tokenizer_config.c, zz_tok_gpt2_specials), so "</s>" in
 * a prompt of an OPT directory is id 2, as AutoTokenizer gives it.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

zz_status zz_enc_oom(size_t bytes) {
  return zz_error(ZZ_ERR_NO_MEMORY, "tokenizer encode: out of memory for a %zu-byte piece", bytes);
}

bool zz_enc_room(zz_enc *e, size_t more) {
  if (e->n + more <= e->cap) return true;
  size_t cap = e->cap ? e->cap : 64;
  while (cap < e->n + more) cap *= 2;
  int32_t *g = realloc(e->ids, cap * sizeof *g);
  if (!g) return false;
  e->ids = g;
  e->cap = cap;
  return true;
}

zz_status zz_enc_raw_word(zz_enc *e, const char *s, size_t m) {
  if (!e->tok->byte_level || m == 0) return zz_bpe_word(e, s, m);
  char *mapped = malloc(2 * m); /* each byte maps to a code point below U+0800 */
  if (!mapped) return zz_enc_oom(m);
  size_t n = 0;
  for (size_t i = 0; i < m; i++) n += zz_utf8_put(e->cp_of_byte[(uint8_t)s[i]], mapped + n);
  zz_status st = zz_bpe_word(e, mapped, n);
  free(mapped);
  return st;
}

/* A piece of text between added tokens: normalized, pre-tokenized into words, the
 * words through the model. first: the piece starts the text (Metaspace's "first"
 * prepend scheme). */
static zz_status zz_enc_piece(zz_enc *e, const char *p, size_t m, bool first) {
  size_t n = m;
  char *cur = malloc(m + 1);
  if (!cur) return zz_enc_oom(m);
  memcpy(cur, p, m);
  zz_status st = zz_tok_normalize(e->tok, &cur, &n);
  if (st == ZZ_OK) st = zz_pretok_words(e, &cur, &n, first);
  free(cur);
  return st;
}

/* The leftmost, then longest, added token in s[from, to) whose `normalized` flag is
 * the one asked for; its offset in *at. */
static const zz_tok_added *zz_added_find(const zz_tokenizer *tok, const char *s, size_t from, size_t to,
                                         bool normalized, size_t *at) {
  for (size_t i = from; i < to; i++)
    for (int k = 0; k < tok->n_added; k++) { /* longest first */
      const zz_tok_added *a = &tok->added[k];
      if (a->normalized == normalized && a->len <= to - i && a->text[0] == s[i] &&
          memcmp(a->text, s + i, a->len) == 0) {
        *at = i;
        return a;
      }
    }
  return NULL;
}

/* Text [from, to) cut at the added tokens of one kind: the tokens the library
 * leaves unnormalized first, then (in the pieces between) the normalized ones. */
static zz_status zz_enc_added(zz_enc *e, const char *s, size_t from, size_t to, bool normalized) {
  for (size_t i = from; i < to;) {
    size_t at = to;
    const zz_tok_added *a = zz_added_find(e->tok, s, i, to, normalized, &at);
    size_t end = a ? at : to, stop = a ? at + a->len : to;
    while (a && a->lstrip && end > i) { /* back over the whitespace before it, not before i */
      size_t k = end - 1;
      while (k > i && ((uint8_t)s[k] & 0xC0) == 0x80) k--; /* the start of the code point before end */
      uint32_t cp;
      if (zz_utf8_next((const uint8_t *)s + k, end - k, &cp) != end - k || zz_regex_class(cp) != ZZ_RE_SPACE) break;
      end = k;
    }
    for (size_t k; a && a->rstrip && stop < to; stop += k) {
      uint32_t cp;
      k = zz_utf8_next((const uint8_t *)s + stop, to - stop, &cp);
      if (k == 0 || zz_regex_class(cp) != ZZ_RE_SPACE) break;
    }
    if (end > i) {
      zz_status st = normalized ? zz_enc_piece(e, s + i, end - i, i == 0) : zz_enc_added(e, s, i, end, true);
      if (st != ZZ_OK) return st;
    }
    if (!a) break;
    if (!zz_enc_room(e, 1)) return zz_enc_oom(a->len);
    e->ids[e->n++] = a->id;
    i = stop;
  }
  return ZZ_OK;
}

zz_status zz_tokenizer_encode(const zz_tokenizer *tok, const char *text, size_t len, int32_t **ids_out,
                              int64_t *n_out) {
  if (!tok || (!text && len > 0) || !ids_out || !n_out)
    return zz_error(ZZ_ERR_INVALID_ARG, "tokenizer encode: NULL argument");
  if (len > (size_t)INT32_MAX)
    return zz_error(ZZ_ERR_INVALID_ARG, "tokenizer encode: %zu bytes of text is over the 2 GiB limit", len);
  const uint8_t *s = (const uint8_t *)text;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    size_t k = zz_utf8_next(s + i, len - i, &cp);
    if (k == 0)
      return zz_error(ZZ_ERR_INVALID_ARG,
                      "tokenizer encode: invalid UTF-8 at byte offset %zu "
                      "(byte 0x%02X)",
                      i, s[i]);
    i += k;
  }
  zz_enc e = {.tok = tok};
  int16_t byte_of_cp[ZZ_BYTE_CP_MAX + 1];
  zz_byte_map(e.cp_of_byte, byte_of_cp);
  zz_status st = zz_enc_room(&e, 1) ? zz_enc_added(&e, text, 0, len, false) : zz_enc_oom(len);
  zz_bpe_work_free(&e.w);
  if (st != ZZ_OK) {
    free(e.ids);
    return st;
  }
  *ids_out = e.ids;
  *n_out = (int64_t)e.n;
  return ZZ_OK;
}


zz_status zz_tokenizer_encode_file(const zz_tokenizer *tok, const char *path, int32_t **ids_out, int64_t *n_out) {
  char *text = NULL;
  size_t len = 0;
  ZZ_CHECK(zz_tok_read_file(path, &text, &len));
  zz_status st = zz_tokenizer_encode(tok, text, len, ids_out, n_out);
  free(text);
  return st;
}
