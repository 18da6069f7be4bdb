/*
 * decode.c — ids into text: each token's decoded bytes are worked out once when the
 * tokenizer is loaded (zz_tok_finish, by the decoder tokenizer.json names, or
 * GPT-2's byte mapping), and decode joins them.
 *
 * decode gives the string Hugging Face's decode gives, always UTF-8: bytes that a
 * ByteLevel decoder leaves ill-formed become U+FFFD per maximal subpart
 * (from_utf8_lossy, Python's errors="replace"); a ByteFallback run of <0xNN>
 * tokens that is not UTF-8 becomes U+FFFD per token.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

static int zz_tok_fallback_byte(const char *s, size_t len) {
  if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
  int v = 0;
  for (int k = 3; k < 5; k++) {
    char c = s[k];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* What the decoder makes of text (one token, not the first), in out (room for
 * zz_tok_decoded_room bytes); returns its length. */
static size_t zz_tok_decoded_room(const zz_tokenizer *tok, const char *text, size_t len) {
  (void)text;
  size_t room = len; /* each Replace makes at most to_len bytes of each byte */
  for (int i = 0; i < tok->n_dec_rep; i++) room *= tok->dec_rep[i].to_len > 1 ? tok->dec_rep[i].to_len : 1;
  return room + 1;
}

static size_t zz_tok_decoded(const zz_tokenizer *tok, const int16_t *byte_of_cp, const char *text, size_t len,
                             char *out, bool *byte_token) {
  *byte_token = false;
  switch (tok->decoder) {
    case ZZ_DEC_BYTE_LEVEL: {
      /* code points mapped back to bytes; a token with a code point outside the
     * mapping (an added token written as plain text) decodes to its own UTF-8, as
     * the fast tokenizer's ByteLevel decoder does */
      size_t n = 0;
      for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t k = zz_utf8_next((const uint8_t *)text + i, len - i, &cp);
        if (k == 0 || cp > ZZ_BYTE_CP_MAX || byte_of_cp[cp] < 0) {
          memcpy(out, text, len);
          return len;
        }
        out[n++] = (char)byte_of_cp[cp];
        i += k;
      }
      return n;
    }
    case ZZ_DEC_METASPACE: {
      zz_tok_replace r = {(char *)tok->meta_rep, " ", tok->meta_rep_len, 1};
      return zz_tok_replace_apply(&r, text, len, out);
    }
    case ZZ_DEC_PIECES: break;
  }
  memcpy(out, text, len);
  size_t n = len;
  for (int i = 0; i < tok->n_dec_rep; i++) {
    /* out holds the text so far; replace from a copy */
    char *copy = malloc(n + 1);
    if (!copy) return SIZE_MAX;
    memcpy(copy, out, n);
    n = zz_tok_replace_apply(&tok->dec_rep[i], copy, n, out);
    free(copy);
  }
  if (tok->dec_byte_fallback) {
    int b = zz_tok_fallback_byte(out, n);
    if (b >= 0) {
      out[0] = (char)b;
      n = 1;
      *byte_token = true;
    }
  }
  return n;
}

zz_status zz_tok_finish(zz_tokenizer *tok, const char *path) {
  uint32_t cp_of_byte[256];
  int16_t byte_of_cp[ZZ_BYTE_CP_MAX + 1];
  zz_byte_map(cp_of_byte, byte_of_cp);
  size_t total = 0;
  for (int64_t i = 0; i < tok->n_entries; i++)
    total += zz_tok_decoded_room(tok, tok->entries[i].text, tok->entries[i].text_len);
  free(tok->bytes_pool);
  tok->bytes_pool = malloc(total ? total : 1);
  if (!tok->bytes_pool) return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory for decoded tokens", path);
  char *p = tok->bytes_pool;
  for (int64_t i = 0; i < tok->n_entries; i++) {
    zz_tok_entry *e = &tok->entries[i];
    bool byte_token;
    size_t n = zz_tok_decoded(tok, byte_of_cp, e->text, e->text_len, p, &byte_token);
    if (n == SIZE_MAX) return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory for decoded tokens", path);
    p[n] = '\0';
    e->bytes = p;
    e->bytes_len = (uint32_t)n;
    e->byte_token = byte_token;
    p += n + 1;
  }
  return ZZ_OK;
}

zz_status zz_tokenizer_decode(const zz_tokenizer *tok, const int32_t *ids, int64_t n, char **text_out,
                              size_t *len_out) {
  if (!tok || (!ids && n > 0) || n < 0 || !text_out || !len_out)
    return zz_error(ZZ_ERR_INVALID_ARG, "tokenizer decode: NULL argument or negative count");
  size_t total = 0;
  for (int64_t i = 0; i < n; i++) {
    const zz_tok_entry *e = zz_tok_by_id(tok, ids[i]);
    if (!e) {
      if (ids[i] < 0 || ids[i] >= tok->vocab_size)
        return zz_error(ZZ_ERR_INVALID_ARG, "tokenizer decode: id %d at position %lld is outside [0, %lld)",
                        (int)ids[i], (long long)i, (long long)tok->vocab_size);
      return zz_error(ZZ_ERR_INVALID_ARG, "tokenizer decode: id %d at position %lld is not in the vocabulary",
                      (int)ids[i], (long long)i);
    }
    total += i == 0 && tok->meta_dec_first ? e->text_len : e->bytes_len;
  }
  /* room for U+FFFD (3 bytes) in place of every byte */
  char *text = total <= SIZE_MAX / 3 - 1 ? malloc(3 * total + 1) : NULL;
  if (!text) return zz_error(ZZ_ERR_NO_MEMORY, "tokenizer decode: out of memory for %zu bytes", total);
  size_t at = 0, run = SIZE_MAX; /* run: where the current run of byte tokens starts */
  for (int64_t i = 0; i <= n; i++) {
    const zz_tok_entry *e = i < n ? zz_tok_by_id(tok, ids[i]) : NULL;
    if (run != SIZE_MAX && (!e || !e->byte_token)) {
      /* ByteFallback: a run of <0xNN> tokens is its bytes when they are UTF-8, else
       * one U+FFFD per token (not per ill-formed subpart) */
      if (!zz_utf8_valid(text + run, at - run)) {
        size_t k = at - run;
        for (at = run; k > 0; k--, at += 3) memcpy(text + at, ZZ_UTF8_REPLACEMENT, 3);
      }
      run = SIZE_MAX;
    }
    if (!e) break;
    if (e->byte_token && run == SIZE_MAX) run = at;
    if (i == 0 && tok->meta_dec_first) {
      /* Metaspace's decoder drops every replacement character of the first token */
      zz_tok_replace drop = {(char *)tok->meta_rep, "", tok->meta_rep_len, 0};
      at += zz_tok_replace_apply(&drop, e->text, e->text_len, text + at);
    } else {
      memcpy(text + at, e->bytes, e->bytes_len);
      at += e->bytes_len;
    }
  }
  if (tok->decoder == ZZ_DEC_BYTE_LEVEL) {
    /* ByteLevel: the bytes of all tokens as one String::from_utf8_lossy (GPT-2's
     * slow tokenizer: bytes.decode(errors="replace"), the same) */
    char *lossy = malloc(3 * at + 1);
    if (!lossy) {
      free(text);
      return zz_error(ZZ_ERR_NO_MEMORY, "tokenizer decode: out of memory for %zu bytes", 3 * at);
    }
    at = zz_utf8_lossy(text, at, lossy);
    free(text);
    text = lossy;
  }
  /* Strip (after Fuse): up to strip_start copies of its character at the start,
   * up to strip_stop at the end */
  size_t lo = 0, hi = at, c = tok->strip_len;
  for (int k = 0; c && k < tok->strip_start && hi - lo >= c && memcmp(text + lo, tok->strip, c) == 0; k++) lo += c;
  for (int k = 0; c && k < tok->strip_stop && hi - lo >= c && memcmp(text + hi - c, tok->strip, c) == 0; k++) hi -= c;
  memmove(text, text + lo, hi - lo);
  text[hi - lo] = '\0';
  *text_out = text;
  *len_out = hi - lo;
  return ZZ_OK;
}
