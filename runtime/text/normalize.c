/*
 * normalize.c — the normalizer: the steps tokenizer.json's "normalizer" lists
 * (NFC, Prepend, Replace with a String pattern), applied in order to each piece of text
 * between added tokens before it is pre-tokenized. Replace is also the decoder's.
 */
#include <stdlib.h>
#include <string.h>

#include "nfc_impl.h"
#include "tokenizer_impl.h"

size_t zz_tok_replace_size(const zz_tok_replace *r, const char *s, size_t len) {
  if (!r->from) return len ? r->to_len + len : 0;
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    if (len - i >= r->from_len && memcmp(s + i, r->from, r->from_len) == 0) {
      n += r->to_len;
      i += r->from_len;
    } else {
      n++;
      i++;
    }
  }
  return n;
}

size_t zz_tok_replace_apply(const zz_tok_replace *r, const char *s, size_t len, char *out) {
  if (!r->from) { /* Prepend: only to a non-empty text */
    if (!len) return 0;
    memcpy(out, r->to, r->to_len);
    memmove(out + r->to_len, s, len);
    return r->to_len + len;
  }
  size_t n = 0;
  for (size_t i = 0; i < len;) {
    if (len - i >= r->from_len && memcmp(s + i, r->from, r->from_len) == 0) {
      memcpy(out + n, r->to, r->to_len);
      n += r->to_len;
      i += r->from_len;
    } else {
      out[n++] = s[i++];
    }
  }
  return n;
}


zz_status zz_tok_replace_in(const zz_tok_replace *r, char **buf, size_t *n) {
  size_t size = zz_tok_replace_size(r, *buf, *n);
  char *out = malloc(size + 1);
  if (!out) return zz_enc_oom(size);
  *n = zz_tok_replace_apply(r, *buf, *n, out);
  free(*buf);
  *buf = out;
  return ZZ_OK;
}

/* Replaces *buf (length *n, malloc'd) with its NFC. */
static zz_status zz_tok_nfc_in(char **buf, size_t *n) {
  char *out;
  ZZ_CHECK(zz_nfc(*buf, *n, &out, n));
  free(*buf);
  *buf = out;
  return ZZ_OK;
}

zz_status zz_tok_normalize(const zz_tokenizer *tok, char **buf, size_t *n) {
  zz_status st = ZZ_OK;
  for (int i = 0; i < tok->n_norm && st == ZZ_OK; i++)
    st = tok->norm[i].nfc ? zz_tok_nfc_in(buf, n) : zz_tok_replace_in(&tok->norm[i].replace, buf, n);
  return st;
}
