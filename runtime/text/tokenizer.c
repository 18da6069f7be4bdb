/*
 * tokenizer.c — byte-pair encoding as Hugging Face computes it, from either
 * vocab.json + merges.txt (GPT-2's byte-level BPE: GPT2Tokenizer /
 * GPT2TokenizerFast, add_prefix_space=False, no special tokens added) or
 * tokenizer.json (the tokenizers library's BPE model with its added tokens,
 * normalizer, pre-tokenizer and decoder; read by tokenizer_json.c, encoded here).
 * A directory with tokenizer.json is read from it, as AutoTokenizer does.
 *
 * encode: check the UTF-8 → cut it into pre-tokens with the GPT-2 pattern
 * (matched by hand below) → each pre-token's bytes become one-byte symbols →
 * merge adjacent symbols by merge rank, lowest first → the symbols' ids.
 * decode: the bytes of each id, concatenated.
 *
 * The files speak in "byte-mapped" text: every byte is shown as one printable code
 * point (a space is "Ġ"), so vocab.json keys and merges.txt tokens are UTF-8 of
 * those code points. Internally tokens are ids and text stays raw bytes; the
 * mapping is only needed to look the single bytes up and to decode.
 *
 * tokenizer.json encode: the text is cut at its added tokens (longest first at the
 * leftmost place, special or not, as the tokenizers library does); each piece
 * between them is normalized (Prepend, Replace), pre-tokenized (the GPT-2 or the
 * LLaMA-3 pattern, ByteLevel's byte mapping, Metaspace) into words, and each word
 * becomes symbols (its characters; unknown ones as <0xNN> byte tokens with
 * byte_fallback, else <unk>) that the merges join.
 *
 * Special tokens in the text: both kinds find them as transformers does; the
 * vocab.json kind takes them from tokenizer_config.json and special_tokens_map.json
 * (tokenizer_json.c, zz_tok_gpt2_specials), so "</s>" in a prompt of an OPT
 * directory is id 2, as AutoTokenizer gives it.
 *
 * decode gives the string Hugging Face's decode gives, always UTF-8: bytes that a
 * ByteLevel decoder leaves ill-formed become U+FFFD per maximal subpart
 * (from_utf8_lossy, Python's errors="replace"); a ByteFallback run of <0xNN>
 * tokens that is not UTF-8 becomes U+FFFD per token.
 *
 * A loaded tokenizer is never written to again, so threads may share it.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "unicode_impl.h"

/* ================================================================ byte mapping */

/* The highest code point the byte mapping uses: U+0100 + 67. */
#define ZZ_BYTE_CP_MAX 0x143

/* GPT-2 shows each byte as a printable code point: the printable Latin-1 bytes
 * stand for themselves, the other 68 take U+0100, U+0101, ... in byte order. */
static void zz_byte_map(uint32_t cp_of_byte[256], int16_t byte_of_cp[ZZ_BYTE_CP_MAX + 1]) {
  for (int c = 0; c <= ZZ_BYTE_CP_MAX; c++) byte_of_cp[c] = -1;
  uint32_t next = 256;
  for (int b = 0; b < 256; b++) {
    bool self = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    cp_of_byte[b] = self ? (uint32_t)b : next++;
    byte_of_cp[cp_of_byte[b]] = (int16_t)b;
  }
}

/* Writes cp (< 0x800, all the mapping needs) as UTF-8; returns the length. */
static size_t zz_utf8_put_small(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  out[0] = (char)(0xC0 | (cp >> 6));
  out[1] = (char)(0x80 | (cp & 0x3F));
  return 2;
}

/* The UTF-8 sequence at s[0..avail) (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF): *ok true, its code point in *cp and its length
 * returned; or *ok false and the length of its maximal ill-formed subpart (the
 * longest start of a well-formed sequence there, at least one byte), which is what
 * Unicode's "substitution of maximal subparts" replaces with one U+FFFD, as
 * Python's bytes.decode(errors="replace") and Rust's from_utf8_lossy do. */
static size_t zz_utf8_scan(const uint8_t *s, size_t avail, uint32_t *cp, bool *ok) {
  uint8_t b0 = s[0];
  *ok = false;
  if (b0 < 0x80) {
    *cp = b0;
    *ok = true;
    return 1;
  }
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0; /* overlong below U+0800 */
    else if (b0 == 0xED)
      hi = 0x9F; /* surrogates U+D800..U+DFFF */
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90; /* overlong below U+10000 */
    else if (b0 == 0xF4)
      hi = 0x8F; /* above U+10FFFF */
  } else {
    return 1; /* a continuation byte, C0/C1 (always overlong), or F5..FF */
  }
  uint32_t v = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; k++) {
    if (k >= avail || s[k] < (k == 1 ? lo : 0x80) || s[k] > (k == 1 ? hi : 0xBF)) return k;
    v = (v << 6) | (s[k] & 0x3F);
  }
  *cp = v;
  *ok = true;
  return n;
}

size_t zz_utf8_next(const uint8_t *s, size_t avail, uint32_t *cp) {
  bool ok;
  size_t n = zz_utf8_scan(s, avail, cp, &ok);
  return ok ? n : 0;
}

static bool zz_utf8_valid(const char *s, size_t len) {
  for (size_t i = 0, k; i < len; i += k) {
    uint32_t cp;
    if ((k = zz_utf8_next((const uint8_t *)s + i, len - i, &cp)) == 0) return false;
  }
  return true;
}

#define ZZ_UTF8_REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */

/* s with each maximal ill-formed subpart replaced by U+FFFD, in out (room for 3 *
 * len bytes); returns the length. */
static size_t zz_utf8_lossy(const char *s, size_t len, char *out) {
  size_t n = 0;
  for (size_t i = 0, k; i < len; i += k) {
    uint32_t cp;
    bool ok;
    k = zz_utf8_scan((const uint8_t *)s + i, len - i, &cp, &ok);
    if (ok) {
      memcpy(out + n, s + i, k);
      n += k;
    } else {
      memcpy(out + n, ZZ_UTF8_REPLACEMENT, 3);
      n += 3;
    }
  }
  return n;
}

/* ================================================================ hash tables */

uint64_t zz_tok_hash(const char *s, size_t n) { return zz_fnv1a(ZZ_FNV_BASIS, s, n); }

/* Ids and id pairs are dense small integers; mix them so that linear probing does
 * not meet long runs. */
static uint64_t zz_hash_u64(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7FB5D329728EA185ull;
  x ^= x >> 27;
  x *= 0x81DADEF4BC2DD44Dull;
  x ^= x >> 33;
  return x;
}

static size_t zz_table_cap(size_t n) {
  size_t cap = 16;
  while (cap < 2 * n) cap *= 2; /* load factor at most 1/2 */
  return cap;
}

/* Keys are ids or id pairs, which are below 2^63, so all ones marks an empty slot. */
#define ZZ_U64_EMPTY UINT64_MAX

static bool zz_u64_map_init(zz_u64_map *m, size_t n) {
  size_t cap = zz_table_cap(n);
  m->slots = malloc(cap * sizeof *m->slots);
  if (!m->slots) return false;
  m->mask = cap - 1;
  for (size_t i = 0; i < cap; i++) m->slots[i].key = ZZ_U64_EMPTY;
  return true;
}

/* The slot holding key, or the empty slot where it would go. */
static zz_u64_slot *zz_u64_map_slot(const zz_u64_map *m, uint64_t key) {
  size_t i = (size_t)zz_hash_u64(key) & m->mask;
  while (m->slots[i].key != key && m->slots[i].key != ZZ_U64_EMPTY) i = (i + 1) & m->mask;
  return &m->slots[i];
}

static const zz_u64_slot *zz_u64_map_find(const zz_u64_map *m, uint64_t key) {
  const zz_u64_slot *s = zz_u64_map_slot(m, key);
  return s->key == key ? s : NULL;
}

static uint64_t zz_pair_key(int32_t left, int32_t right) { return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right; }

/* ================================================================ the tokenizer */

/* The model's entry whose text is a followed by b, or NULL; two parts so merges
 * can be looked up without joining them. */
static const zz_tok_entry *zz_tok_find2(const zz_tokenizer *tok, const char *a, size_t a_len, const char *b,
                                        size_t b_len) {
  uint64_t h = zz_fnv1a(zz_fnv1a(ZZ_FNV_BASIS, a, a_len), b, b_len);
  for (size_t i = (size_t)h & tok->text_mask; tok->by_text[i]; i = (i + 1) & tok->text_mask) {
    const zz_tok_entry *e = &tok->entries[tok->by_text[i] - 1];
    if (e->hash == h && e->text_len == a_len + b_len && memcmp(e->text, a, a_len) == 0 &&
        memcmp(e->text + a_len, b, b_len) == 0)
      return e;
  }
  return NULL;
}

const zz_tok_entry *zz_tok_find(const zz_tokenizer *tok, const char *s, size_t len) {
  return zz_tok_find2(tok, s, len, "", 0);
}

const zz_tok_entry *zz_tok_by_id(const zz_tokenizer *tok, int32_t id) {
  if (id < 0) return NULL;
  const zz_u64_slot *s = zz_u64_map_find(&tok->by_id, (uint64_t)id);
  return s ? &tok->entries[s->a] : NULL;
}

void zz_tokenizer_free(zz_tokenizer *tok) {
  if (!tok) return;
  free(tok->entries);
  free(tok->pool);
  free(tok->bytes_pool);
  free(tok->by_text);
  free(tok->by_id.slots);
  free(tok->merges.slots);
  for (int i = 0; i < tok->n_added; i++) free(tok->added[i].text);
  free(tok->added);
  for (int i = 0; i < tok->n_norm; i++) {
    free(tok->norm[i].from);
    free(tok->norm[i].to);
  }
  for (int i = 0; i < tok->n_dec_rep; i++) {
    free(tok->dec_rep[i].from);
    free(tok->dec_rep[i].to);
  }
  free(tok);
}

int64_t zz_tokenizer_vocab_size(const zz_tokenizer *tok) { return tok ? tok->vocab_size : 0; }

bool zz_tokenizer_specials(const zz_tokenizer *tok, int32_t *bos_out, int32_t *eos_out) {
  bool known = tok && tok->json;
  if (bos_out) *bos_out = known ? tok->bos_id : -1;
  if (eos_out) *eos_out = known ? tok->eos_id : -1;
  return known;
}

/* ================================================================ filling the tables */

zz_status zz_tok_vocab_alloc(zz_tokenizer *tok, size_t n, size_t pool_bytes, const char *path) {
  if (n == 0 || n > (size_t)INT32_MAX)
    return zz_error(ZZ_ERR_FORMAT, "%s: %s", path, n ? "too many tokens" : "no tokens");
  tok->entries = calloc(n, sizeof *tok->entries);
  tok->pool = malloc(pool_bytes ? pool_bytes : 1);
  tok->text_mask = zz_table_cap(n) - 1;
  tok->by_text = calloc(tok->text_mask + 1, sizeof *tok->by_text);
  if (!tok->entries || !tok->pool || !tok->by_text || !zz_u64_map_init(&tok->by_id, n))
    return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory for %zu tokens", path, n);
  tok->vocab_size = 0;
  return ZZ_OK;
}

zz_status zz_tok_vocab_add(zz_tokenizer *tok, const char *text, size_t len, int64_t id, bool in_model,
                           const char *path) {
  if (id < 0 || id > INT32_MAX)
    return zz_error(ZZ_ERR_FORMAT, "%s: token \"%.80s\": the id must be an integer in [0, 2^31)", path, text);
  if (len > UINT32_MAX / 4) return zz_error(ZZ_ERR_FORMAT, "%s: a token of %zu bytes", path, len);
  /* the pool holds the texts back to back; the caller sized it */
  char *p = tok->n_entries
                ? (char *)tok->entries[tok->n_entries - 1].text + tok->entries[tok->n_entries - 1].text_len + 1
                : tok->pool;
  zz_tok_entry *e = &tok->entries[tok->n_entries];
  e->id = (int32_t)id;
  e->text_len = (uint32_t)len;
  memcpy(p, text, len);
  p[len] = '\0';
  e->text = p;
  e->hash = zz_fnv1a(ZZ_FNV_BASIS, e->text, e->text_len);

  zz_u64_slot *s = zz_u64_map_slot(&tok->by_id, (uint64_t)e->id);
  if (s->key != ZZ_U64_EMPTY)
    return zz_error(ZZ_ERR_FORMAT, "%s: tokens \"%.80s\" and \"%.80s\" both have id %d", path, tok->entries[s->a].text,
                    e->text, (int)e->id);
  if (in_model) {
    if (zz_tok_find(tok, text, len))
      return zz_error(ZZ_ERR_FORMAT, "%s: token \"%.80s\" is in the vocabulary twice", path, text);
    size_t i = (size_t)e->hash & tok->text_mask;
    while (tok->by_text[i]) i = (i + 1) & tok->text_mask;
    tok->by_text[i] = (uint32_t)tok->n_entries + 1;
    tok->n_model = tok->n_entries + 1;
  }
  s->key = (uint64_t)e->id;
  s->a = (int32_t)tok->n_entries;
  s->b = 0;
  if (e->id >= tok->vocab_size) tok->vocab_size = (int64_t)e->id + 1;
  tok->n_entries++;
  return ZZ_OK;
}

zz_status zz_tok_merges_alloc(zz_tokenizer *tok, size_t n, const char *path) {
  if (!zz_u64_map_init(&tok->merges, n)) return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory for %zu merges", path, n);
  return ZZ_OK;
}

/* Quotes at most 80 bytes in a message. */
#define ZZ_CLIP(n) ((int)((n) < 80 ? (n) : 80))

zz_status zz_tok_merge_add(zz_tokenizer *tok, const char *a, size_t a_len, const char *b, size_t b_len,
                           const char *where) {
  const zz_tok_entry *ea = zz_tok_find(tok, a, a_len);
  const zz_tok_entry *eb = zz_tok_find(tok, b, b_len);
  const zz_tok_entry *ab = zz_tok_find2(tok, a, a_len, b, b_len);
  if (!ea || !eb) {
    const char *part = !ea ? a : b;
    size_t part_len = !ea ? a_len : b_len;
    return zz_error(ZZ_ERR_FORMAT, "%s: merge \"%.*s %.*s\": token \"%.*s\" is not in the vocabulary", where,
                    ZZ_CLIP(a_len), a, ZZ_CLIP(b_len), b, ZZ_CLIP(part_len), part);
  }
  if (!ab)
    return zz_error(ZZ_ERR_FORMAT, "%s: merge \"%.*s %.*s\": the merged token \"%.*s%.*s\" is not in the vocabulary",
                    where, ZZ_CLIP(a_len), a, ZZ_CLIP(b_len), b, ZZ_CLIP(a_len), a, ZZ_CLIP(b_len), b);
  if (tok->n_merges == INT32_MAX) return zz_error(ZZ_ERR_FORMAT, "%s: too many merges", where);
  /* A pair listed twice keeps its later rank, as both Hugging Face tokenizers do. */
  zz_u64_slot *s = zz_u64_map_slot(&tok->merges, zz_pair_key(ea->id, eb->id));
  s->key = zz_pair_key(ea->id, eb->id);
  s->a = tok->n_merges++;
  s->b = ab->id;
  return ZZ_OK;
}

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

/* The byte a ByteFallback decoder makes of "<0xNN>" (either case of hex), or -1. */
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

/* ================================================================ loading */

static char *zz_path_join(const char *dir, const char *name) {
  size_t n = strlen(dir) + 1 + strlen(name) + 1;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

static zz_status zz_tok_load_vocab(zz_tokenizer *tok, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return zz_error(ZZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  json_error_t jerr;
  json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &jerr);
  fclose(f);
  if (!root) return zz_error(ZZ_ERR_FORMAT, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);

  zz_status st = ZZ_OK;
  if (!json_is_object(root)) {
    st = zz_error(ZZ_ERR_FORMAT, "%s: expected a JSON object mapping tokens to ids", path);
    goto done;
  }
  size_t pool_bytes = 0;
  const char *key;
  json_t *val;
  json_object_foreach(root, key, val) pool_bytes += strlen(key) + 1;
  for (int i = 0; i < tok->n_added; i++) pool_bytes += tok->added[i].len + 1; /* room for new ones */
  ZZ_CHECK_GOTO(zz_tok_vocab_alloc(tok, json_object_size(root) + (size_t)tok->n_added, pool_bytes, path), st, done);
  json_object_foreach(root, key, val) {
    if (!json_is_integer(val)) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: token \"%.80s\": the id must be an integer in [0, 2^31)", path, key);
      goto done;
    }
    ZZ_CHECK_GOTO(zz_tok_vocab_add(tok, key, strlen(key), json_integer_value(val), true, path), st, done);
  }

  /* Every pre-token starts as single bytes, so a vocabulary missing one cannot
   * encode arbitrary text. */
  uint32_t cp_of_byte[256];
  int16_t byte_of_cp[ZZ_BYTE_CP_MAX + 1];
  zz_byte_map(cp_of_byte, byte_of_cp);
  for (int b = 0; b < 256; b++) {
    char s[2];
    size_t len = zz_utf8_put_small(cp_of_byte[b], s);
    const zz_tok_entry *e = zz_tok_find(tok, s, len);
    if (!e) {
      st = zz_error(ZZ_ERR_FORMAT,
                    "%s: no token for byte 0x%02X (\"%.*s\"); byte-level BPE needs "
                    "all 256",
                    path, b, (int)len, s);
      goto done;
    }
  }
  st = zz_tok_added_ids(tok, path);
done:
  json_decref(root);
  return st;
}

/* Reads a whole file; *len_out excludes the NUL appended after it. */
static zz_status zz_read_file(const char *path, char **data_out, size_t *len_out) {
  FILE *f = fopen(path, "rb");
  if (!f) return zz_error(ZZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  zz_status st = ZZ_OK;
  for (;;) {
    if (!buf) {
      st = zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory reading it", path);
      break;
    }
    len += fread(buf + len, 1, cap - len - 1, f);
    if (ferror(f)) {
      st = zz_error(ZZ_ERR_IO, "%s: read failed: %s", path, strerror(errno));
      break;
    }
    if (feof(f)) break;
    char *grown = realloc(buf, cap * 2);
    if (!grown) free(buf);
    buf = grown;
    cap *= 2;
  }
  fclose(f);
  if (st != ZZ_OK) {
    free(buf);
    return st;
  }
  buf[len] = '\0';
  *data_out = buf;
  *len_out = len;
  return ZZ_OK;
}

zz_status zz_tokenizer_encode_file(const zz_tokenizer *tok, const char *path, int32_t **ids_out, int64_t *n_out) {
  char *text = NULL;
  size_t len = 0;
  ZZ_CHECK(zz_read_file(path, &text, &len));
  zz_status st = zz_tokenizer_encode(tok, text, len, ids_out, n_out);
  free(text);
  return st;
}

static zz_status zz_tok_load_merges(zz_tokenizer *tok, const char *path) {
  char *data = NULL;
  size_t len = 0;
  ZZ_CHECK(zz_read_file(path, &data, &len));
  size_t n_lines = 1;
  for (size_t i = 0; i < len; i++) n_lines += data[i] == '\n';
  zz_status st = zz_tok_merges_alloc(tok, n_lines, path);
  if (st != ZZ_OK) {
    free(data);
    return st;
  }
  long line_no = 0;
  for (char *line = data; line < data + len;) {
    char *eol = memchr(line, '\n', (size_t)(data + len - line));
    if (!eol) eol = data + len;
    char *next = eol + 1;
    line_no++;
    if (eol > line && eol[-1] == '\r') eol--;
    size_t n = (size_t)(eol - line);
    if (n == 0 || (line_no == 1 && n >= 8 && memcmp(line, "#version", 8) == 0)) {
      line = next;
      continue;
    }
    char *sp = memchr(line, ' ', n);
    if (!sp || sp == line || sp + 1 == eol || memchr(sp + 1, ' ', (size_t)(eol - sp - 1))) {
      st = zz_error(ZZ_ERR_FORMAT, "%s:%ld: expected two tokens separated by one space, got \"%.*s\"", path, line_no,
                    ZZ_CLIP(n), line);
      break;
    }
    size_t a_len = (size_t)(sp - line), b_len = (size_t)(eol - sp - 1);
    char where[4200];
    snprintf(where, sizeof where, "%.4000s:%ld", path, line_no);
    st = zz_tok_merge_add(tok, line, a_len, sp + 1, b_len, where);
    if (st != ZZ_OK) break;
    line = next;
  }
  free(data);
  return st;
}

zz_status zz_tokenizer_load(const char *dir, zz_tokenizer **out) {
  if (!dir || !out) return zz_error(ZZ_ERR_INVALID_ARG, "tokenizer: NULL directory or output");
  if (zz_tokenizer_has_json(dir)) {
    zz_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) return zz_error(ZZ_ERR_NO_MEMORY, "tokenizer %s: out of memory", dir);
    zz_status st = zz_tok_load_json(tok, dir);
    if (st != ZZ_OK) {
      zz_tokenizer_free(tok);
      return st;
    }
    *out = tok;
    return ZZ_OK;
  }
  char *vocab_path = zz_path_join(dir, "vocab.json");
  char *merges_path = zz_path_join(dir, "merges.txt");
  zz_tokenizer *tok = calloc(1, sizeof *tok);
  zz_status st = ZZ_OK;
  if (!vocab_path || !merges_path || !tok) {
    st = zz_error(ZZ_ERR_NO_MEMORY, "tokenizer %s: out of memory", dir);
    goto fail;
  }
  ZZ_CHECK_GOTO(zz_tok_gpt2_specials(tok, dir), st, fail);
  ZZ_CHECK_GOTO(zz_tok_load_vocab(tok, vocab_path), st, fail);
  ZZ_CHECK_GOTO(zz_tok_load_merges(tok, merges_path), st, fail);
  ZZ_CHECK_GOTO(zz_tok_finish(tok, vocab_path), st, fail);
  /* GPT-2: its regex, byte-level words, nothing else */
  tok->split = ZZ_SPLIT_GPT2;
  tok->byte_level = true;
  tok->unk_id = tok->bos_id = tok->eos_id = -1;
  free(vocab_path);
  free(merges_path);
  *out = tok;
  return ZZ_OK;
fail:
  free(vocab_path);
  free(merges_path);
  zz_tokenizer_free(tok);
  return st;
}

/* ================================================================ pre-tokenizer */

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

/* ================================================================ BPE */

/* A possible merge of symbol pos with its right neighbour, valid while both still
 * hold the ids it was made for. */
typedef struct zz_bpe_cand {
  int32_t rank, pos; /* heap order: lowest rank, then leftmost */
  int32_t right;     /* symbol index of the right neighbour */
  int32_t left_id, right_id, new_id;
} zz_bpe_cand;

/* Scratch of one encode call, grown to the longest pre-token. */
typedef struct zz_bpe_work {
  int32_t *sym;      /* [cap] token id of each symbol; -1 once merged into its left */
  int32_t *next;     /* [cap] next live symbol, -1 at the end */
  int32_t *prev;     /* [cap] previous live symbol, -1 at the start */
  zz_bpe_cand *heap; /* [3 * cap]: m - 1 pairs at first, and each merge adds <= 2 */
  size_t cap, heap_n;
} zz_bpe_work;

static void zz_bpe_work_free(zz_bpe_work *w) {
  free(w->sym);
  free(w->next);
  free(w->prev);
  free(w->heap);
}

static bool zz_bpe_work_reserve(zz_bpe_work *w, size_t m) {
  if (m <= w->cap) return true;
  size_t cap = w->cap ? w->cap : 64;
  while (cap < m) cap *= 2;
  zz_bpe_work g = {0};
  g.sym = malloc(cap * sizeof *g.sym);
  g.next = malloc(cap * sizeof *g.next);
  g.prev = malloc(cap * sizeof *g.prev);
  g.heap = malloc(3 * cap * sizeof *g.heap);
  if (!g.sym || !g.next || !g.prev || !g.heap) {
    zz_bpe_work_free(&g);
    return false;
  }
  zz_bpe_work_free(w);
  g.cap = cap;
  *w = g;
  return true;
}

static bool zz_cand_before(const zz_bpe_cand *a, const zz_bpe_cand *b) {
  return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

/* Queues the merge of symbols l and r if merges.txt has one for their pair. */
static void zz_bpe_push(zz_bpe_work *w, const zz_tokenizer *tok, int32_t l, int32_t r) {
  const zz_u64_slot *m = zz_u64_map_find(&tok->merges, zz_pair_key(w->sym[l], w->sym[r]));
  if (!m) return;
  zz_bpe_cand c = {m->a, l, r, w->sym[l], w->sym[r], m->b};
  size_t i = w->heap_n++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!zz_cand_before(&c, &w->heap[parent])) break;
    w->heap[i] = w->heap[parent];
    i = parent;
  }
  w->heap[i] = c;
}

static zz_bpe_cand zz_bpe_pop(zz_bpe_work *w) {
  zz_bpe_cand top = w->heap[0];
  zz_bpe_cand last = w->heap[--w->heap_n];
  size_t i = 0, n = w->heap_n;
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && zz_cand_before(&w->heap[child + 1], &w->heap[child])) child++;
    if (!zz_cand_before(&w->heap[child], &last)) break;
    w->heap[i] = w->heap[child];
    i = child;
  }
  if (n > 0) w->heap[i] = last;
  return top;
}

/*
 * Applies the merges to the m symbols in w->sym and appends the resulting ids to
 * ids. Merging the lowest-ranked pair first, leftmost on ties, one at a time, is
 * what the fast tokenizer does, and gives the same result as the slow one's
 * "merge every occurrence of the best pair" (a merge never recreates its own pair).
 * O(m log m) with a heap whose stale entries are skipped when popped.
 */
static size_t zz_bpe(const zz_tokenizer *tok, zz_bpe_work *w, size_t m, int32_t *ids) {
  if (m == 1) {
    ids[0] = w->sym[0];
    return 1;
  }
  for (size_t i = 0; i < m; i++) {
    w->prev[i] = (int32_t)i - 1;
    w->next[i] = i + 1 < m ? (int32_t)i + 1 : -1;
  }
  w->heap_n = 0;
  for (size_t i = 0; i + 1 < m; i++) zz_bpe_push(w, tok, (int32_t)i, (int32_t)i + 1);
  while (w->heap_n > 0) {
    zz_bpe_cand c = zz_bpe_pop(w);
    if (w->sym[c.pos] != c.left_id || w->next[c.pos] != c.right || w->sym[c.right] != c.right_id)
      continue; /* one of the two has merged since */
    w->sym[c.pos] = c.new_id;
    w->sym[c.right] = -1;
    int32_t after = w->next[c.right];
    w->next[c.pos] = after;
    if (after >= 0) w->prev[after] = c.pos;
    if (w->prev[c.pos] >= 0) zz_bpe_push(w, tok, w->prev[c.pos], c.pos);
    if (after >= 0) zz_bpe_push(w, tok, c.pos, after);
  }
  size_t n = 0;
  for (int32_t i = 0; i >= 0; i = w->next[i]) ids[n++] = w->sym[i];
  return n;
}

/* ================================================================ encode */

/* Scratch and output of one encode call. */
typedef struct zz_enc {
  const zz_tokenizer *tok;
  zz_bpe_work w;
  int32_t *ids; /* [cap] */
  size_t n, cap;
  uint32_t cp_of_byte[256];
} zz_enc;

static zz_status zz_enc_oom(size_t bytes) {
  return zz_error(ZZ_ERR_NO_MEMORY, "tokenizer encode: out of memory for a %zu-byte piece", bytes);
}

static bool zz_enc_room(zz_enc *e, size_t more) {
  if (e->n + more <= e->cap) return true;
  size_t cap = e->cap ? e->cap : 64;
  while (cap < e->n + more) cap *= 2;
  int32_t *g = realloc(e->ids, cap * sizeof *g);
  if (!g) return false;
  e->ids = g;
  e->cap = cap;
  return true;
}

/*
 * One word (a pre-token, in the vocabulary's spelling) through the BPE model, as
 * the tokenizers library's BPE does it: with ignore_merges a word that is a token
 * is that token; else each character is a symbol, a character not in the
 * vocabulary becomes its <0xNN> byte tokens (byte_fallback, when all exist) or
 * <unk> (consecutive ones fused with fuse_unk) or nothing; then the merges.
 */
static zz_status zz_enc_word(zz_enc *e, const char *s, size_t m) {
  const zz_tokenizer *tok = e->tok;
  if (m == 0) return ZZ_OK;
  if (tok->ignore_merges) {
    const zz_tok_entry *t = zz_tok_find(tok, s, m);
    if (t) {
      if (!zz_enc_room(e, 1)) return zz_enc_oom(m);
      e->ids[e->n++] = t->id;
      return ZZ_OK;
    }
  }
  if (!zz_bpe_work_reserve(&e->w, m) || !zz_enc_room(e, m)) return zz_enc_oom(m);
  int32_t *sym = e->w.sym;
  size_t k = 0;     /* symbols: at most one per byte */
  int32_t unk = -1; /* a pending <unk> */
  for (size_t i = 0; i < m;) {
    uint32_t cp = 0;
    size_t len = zz_utf8_next((const uint8_t *)s + i, m - i, &cp);
    if (len == 0) len = 1; /* words are valid UTF-8; a stray byte stays one symbol */
    const zz_tok_entry *t = zz_tok_find(tok, s + i, len);
    if (t) {
      if (unk >= 0) sym[k++] = unk;
      unk = -1;
      sym[k++] = t->id;
    } else {
      bool bytes = tok->byte_fallback;
      for (size_t b = 0; bytes && b < len; b++) bytes = tok->fallback_id[(uint8_t)s[i + b]] >= 0;
      if (bytes) {
        for (size_t b = 0; b < len; b++) sym[k++] = tok->fallback_id[(uint8_t)s[i + b]];
      } else if (tok->unk_id >= 0) {
        if (unk >= 0 && !tok->fuse_unk) sym[k++] = unk;
        unk = tok->unk_id;
      }
    }
    i += len;
  }
  if (unk >= 0) sym[k++] = unk;
  if (k > 0) e->n += zz_bpe(tok, &e->w, k, e->ids + e->n);
  return ZZ_OK;
}

/* A word of raw text: byte-mapped first when the vocabulary is byte-level. */
static zz_status zz_enc_raw_word(zz_enc *e, const char *s, size_t m) {
  if (!e->tok->byte_level || m == 0) return zz_enc_word(e, s, m);
  char *mapped = malloc(2 * m); /* each byte maps to a code point below U+0800 */
  if (!mapped) return zz_enc_oom(m);
  size_t n = 0;
  for (size_t i = 0; i < m; i++) n += zz_utf8_put_small(e->cp_of_byte[(uint8_t)s[i]], mapped + n);
  zz_status st = zz_enc_word(e, mapped, n);
  free(mapped);
  return st;
}

/* Replaces *buf (length *n, malloc'd) with r applied to it. */
static zz_status zz_enc_replace(const zz_tok_replace *r, char **buf, size_t *n) {
  size_t size = zz_tok_replace_size(r, *buf, *n);
  char *out = malloc(size + 1);
  if (!out) return zz_enc_oom(size);
  *n = zz_tok_replace_apply(r, *buf, *n, out);
  free(*buf);
  *buf = out;
  return ZZ_OK;
}

/* The words of cur[0, n) by the regex pattern of `split`. */
static zz_status zz_enc_regex_words(zz_enc *e, const char *cur, size_t n) {
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

/*
 * A piece of text between added tokens: normalized, pre-tokenized into words, the
 * words through the model. first: the piece starts the text (Metaspace's "first"
 * prepend scheme).
 */
static zz_status zz_enc_piece(zz_enc *e, const char *p, size_t m, bool first) {
  const zz_tokenizer *tok = e->tok;
  size_t n = m;
  char *cur = malloc(m + 1);
  if (!cur) return zz_enc_oom(m);
  memcpy(cur, p, m);
  zz_status st = ZZ_OK;
  for (int i = 0; i < tok->n_norm && st == ZZ_OK; i++) st = zz_enc_replace(&tok->norm[i], &cur, &n);
  if (st == ZZ_OK && tok->byte_level && tok->prefix_space && n > 0 && cur[0] != ' ') {
    zz_tok_replace space = {NULL, " ", 0, 1};
    st = zz_enc_replace(&space, &cur, &n);
  }
  if (st == ZZ_OK && tok->metaspace) {
    zz_tok_replace spaces = {" ", (char *)tok->meta_rep, 1, tok->meta_rep_len};
    st = zz_enc_replace(&spaces, &cur, &n);
    bool marked = n >= tok->meta_rep_len && memcmp(cur, tok->meta_rep, tok->meta_rep_len) == 0;
    bool prepend = tok->meta_prepend == ZZ_PREPEND_ALWAYS || (tok->meta_prepend == ZZ_PREPEND_FIRST && first);
    if (st == ZZ_OK && n > 0 && !marked && prepend) {
      zz_tok_replace pre = {NULL, (char *)tok->meta_rep, 0, tok->meta_rep_len};
      st = zz_enc_replace(&pre, &cur, &n);
    }
  }
  if (st != ZZ_OK) goto done;
  switch (tok->split) {
    case ZZ_SPLIT_NONE: st = zz_enc_raw_word(e, cur, n); break;
    case ZZ_SPLIT_META: { /* a new word before each replacement character */
      size_t start = 0, r = tok->meta_rep_len;
      for (size_t i = 1; i + r <= n && st == ZZ_OK; i++)
        if (memcmp(cur + i, tok->meta_rep, r) == 0) {
          st = zz_enc_raw_word(e, cur + start, i - start);
          start = i;
        }
      if (st == ZZ_OK) st = zz_enc_raw_word(e, cur + start, n - start);
      break;
    }
    case ZZ_SPLIT_GPT2:
    case ZZ_SPLIT_LLAMA3: st = zz_enc_regex_words(e, cur, n); break;
  }
done:
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
    size_t end = a ? at : to;
    if (end > i) {
      zz_status st = normalized ? zz_enc_piece(e, s + i, end - i, i == 0) : zz_enc_added(e, s, i, end, true);
      if (st != ZZ_OK) return st;
    }
    if (!a) break;
    if (!zz_enc_room(e, 1)) return zz_enc_oom(a->len);
    e->ids[e->n++] = a->id;
    i = at + a->len;
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

/* ================================================================ decode */

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
