/*
 * vocab.c — the tokenizer's tables: its tokens found by text (open addressing on
 * the FNV-1a hash) and by id, its merges by the pair of ids they join, filled by
 * the readers of vocab.json + merges.txt (vocab_files.c) and tokenizer.json
 * (tokenizer_json.c); and the tokenizer's lifetime. A loaded tokenizer is never
 * written to again, so threads may share it.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

uint64_t zz_tok_hash(const char *s, size_t n) { return zz_fnv1a(ZZ_FNV_BASIS, s, n); }

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
  zz_regex_free(tok->split_re);
  for (int i = 0; i < tok->n_added; i++) free(tok->added[i].text);
  free(tok->added);
  for (int i = 0; i < tok->n_norm; i++) {
    free(tok->norm[i].replace.from);
    free(tok->norm[i].replace.to);
  }
  for (int i = 0; i < tok->n_dec_rep; i++) {
    free(tok->dec_rep[i].from);
    free(tok->dec_rep[i].to);
  }
  free(tok);
}

int64_t zz_tokenizer_vocab_size(const zz_tokenizer *tok) { return tok ? tok->vocab_size : 0; }

/* Whether every character of a word becomes at least one symbol of the BPE model
 * (zz_bpe_word): its own token, its <0xNN> bytes or its own <unk>. */
static bool zz_tok_keeps_chars(const zz_tokenizer *tok) {
  bool fallback = tok->byte_fallback;
  for (int b = 0; fallback && b < 256; b++) fallback = tok->fallback_id[b] >= 0;
  if (fallback || (tok->unk_id >= 0 && !tok->fuse_unk)) return true;
  /* byte-level words are mapped bytes: each byte's character must be a token */
  return tok->byte_level && zz_tok_missing_byte(tok, NULL, NULL) < 0;
}

int zz_tok_missing_byte(const zz_tokenizer *tok, char ch[4], size_t *len) {
  uint32_t cp_of_byte[256];
  int16_t byte_of_cp[ZZ_BYTE_CP_MAX + 1];
  zz_byte_map(cp_of_byte, byte_of_cp);
  for (int b = 0; b < 256; b++) {
    char c[4];
    size_t n = zz_utf8_put(cp_of_byte[b], c);
    if (zz_tok_find(tok, c, n)) continue;
    if (ch) memcpy(ch, c, n), *len = n;
    return b;
  }
  return -1;
}

/* A token stands for at most as many bytes of the normalized text as its spelling
 * has (a byte-level token's mapped characters, Metaspace's 3-byte replacement for a
 * space and a "<0xNN>" for one byte are longer than what they stand for; an <unk>
 * for one character, at most 4); the normalizer shrinks the text at most by its
 * steps' factors: NFC composes at most 4 code points of at most 4 bytes into one
 * character of at least 2 (8), a Replace from / to; Prepend only adds. */
size_t zz_tokenizer_text_bound(const zz_tokenizer *tok, int64_t n_tokens) {
  if (!tok || n_tokens < 0 || !zz_tok_keeps_chars(tok)) return SIZE_MAX;
  for (int i = 0; i < tok->n_added; i++)
    if (tok->added[i].lstrip || tok->added[i].rstrip) return SIZE_MAX;
  double per = 4;
  for (int64_t i = 0; i < tok->n_entries; i++)
    if (tok->entries[i].text_len > per) per = tok->entries[i].text_len;
  for (int i = 0; i < tok->n_norm; i++) {
    const zz_tok_norm *s = &tok->norm[i];
    if (s->nfc) per *= 8;
    else if (s->replace.from && s->replace.from_len > s->replace.to_len) {
      if (s->replace.to_len == 0) return SIZE_MAX;
      per *= (double)s->replace.from_len / (double)s->replace.to_len;
    }
  }
  double most = per * (double)n_tokens;
  return most >= (double)SIZE_MAX ? SIZE_MAX : (size_t)most;
}

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

static int zz_added_cmp(const void *pa, const void *pb) {
  const zz_tok_added *a = pa, *b = pb;
  if (a->len != b->len) return a->len > b->len ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

void zz_tok_added_sort(zz_tokenizer *tok) { qsort(tok->added, (size_t)tok->n_added, sizeof *tok->added, zz_added_cmp); }
