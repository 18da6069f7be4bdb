/*
 * tokenizer.c — GPT-2 byte-level BPE, computing what Hugging Face's
 * GPT2Tokenizer / GPT2TokenizerFast compute (add_prefix_space=False, no special
 * tokens added).
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
 * Two differences from Hugging Face, both on purpose:
 *  - Text that spells a special token ("</s>") is encoded as text. Hugging Face
 *    turns it into the special id when tokenizer_config.json registers it; we
 *    read no such file, and a prompt should not be able to inject an EOS.
 *  - decode returns the raw bytes, where Hugging Face replaces bytes that are not
 *    UTF-8 with U+FFFD; a caller printing tokens one by one needs the bytes of a
 *    character that is split across tokens.
 *
 * A loaded tokenizer is never written to again, so threads may share it.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "unicode_impl.h"
#include "zz_runtime.h"

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

/* Length of the well-formed UTF-8 sequence at s[0..avail) (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), its code point in *cp; 0 when
 * the bytes there are not one. */
static size_t zz_utf8_next(const uint8_t *s, size_t avail, uint32_t *cp) {
  uint8_t b0 = s[0];
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t n;
  uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;      /* overlong below U+0800 */
    else if (b0 == 0xED) hi = 0x9F; /* surrogates U+D800..U+DFFF */
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;      /* overlong below U+10000 */
    else if (b0 == 0xF4) hi = 0x8F; /* above U+10FFFF */
  } else {
    return 0; /* a continuation byte, C0/C1 (always overlong), or F5..FF */
  }
  if (avail < n || s[1] < lo || s[1] > hi) return 0;
  uint32_t v = b0 & (0x7F >> n);
  for (size_t k = 1; k < n; k++) {
    if (k > 1 && (s[k] & 0xC0) != 0x80) return 0;
    v = (v << 6) | (s[k] & 0x3F);
  }
  *cp = v;
  return n;
}

/* ================================================================ hash tables */

static uint64_t zz_hash_bytes(uint64_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001B3ull; /* FNV-1a */
  return h;
}
#define ZZ_HASH_SEED 0xCBF29CE484222325ull

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

/* Open addressing, uint64 key → two int32 values. Keys are ids or id pairs, which
 * are below 2^63, so all ones marks an empty slot. */
#define ZZ_U64_EMPTY UINT64_MAX
typedef struct zz_u64_slot {
  uint64_t key;
  int32_t a, b;
} zz_u64_slot;
typedef struct zz_u64_map {
  zz_u64_slot *slots; /* [mask + 1] */
  size_t mask;
} zz_u64_map;

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

static uint64_t zz_pair_key(int32_t left, int32_t right) {
  return ((uint64_t)(uint32_t)left << 32) | (uint32_t)right;
}

/* ================================================================ the tokenizer */

typedef struct zz_tok_entry {
  const char *text;   /* the vocab.json key (byte-mapped UTF-8), NUL terminated, in pool */
  const char *bytes;  /* what the token decodes to, in pool */
  uint32_t text_len;  /* bytes of text */
  uint32_t bytes_len; /* bytes of bytes */
  int32_t id;
  uint64_t hash; /* of text */
} zz_tok_entry;

struct zz_tokenizer {
  zz_tok_entry *entries; /* [n_entries], in vocab.json order */
  int64_t n_entries;
  char *pool;            /* every entry's text and bytes */
  uint32_t *by_text;     /* [text_mask + 1] open addressing: entry index + 1, 0 empty */
  size_t text_mask;
  zz_u64_map by_id;      /* id → (entry index, -) */
  zz_u64_map merges;     /* (left id, right id) → (rank, merged id) */
  int32_t byte_id[256];  /* id of the one-byte token of each byte */
  int64_t vocab_size;    /* largest id + 1 */
};

/* The entry whose text is a followed by b, or NULL; two parts so merges.txt lines
 * can be looked up without joining them. */
static const zz_tok_entry *zz_tok_find2(const zz_tokenizer *tok, const char *a, size_t a_len,
                                        const char *b, size_t b_len) {
  uint64_t h = zz_hash_bytes(zz_hash_bytes(ZZ_HASH_SEED, a, a_len), b, b_len);
  for (size_t i = (size_t)h & tok->text_mask; tok->by_text[i]; i = (i + 1) & tok->text_mask) {
    const zz_tok_entry *e = &tok->entries[tok->by_text[i] - 1];
    if (e->hash == h && e->text_len == a_len + b_len && memcmp(e->text, a, a_len) == 0 &&
        memcmp(e->text + a_len, b, b_len) == 0)
      return e;
  }
  return NULL;
}

static const zz_tok_entry *zz_tok_find(const zz_tokenizer *tok, const char *s, size_t len) {
  return zz_tok_find2(tok, s, len, "", 0);
}

void zz_tokenizer_free(zz_tokenizer *tok) {
  if (!tok) return;
  free(tok->entries);
  free(tok->pool);
  free(tok->by_text);
  free(tok->by_id.slots);
  free(tok->merges.slots);
  free(tok);
}

int64_t zz_tokenizer_vocab_size(const zz_tokenizer *tok) { return tok ? tok->vocab_size : 0; }

/* ================================================================ loading */

static char *zz_path_join(const char *dir, const char *name) {
  size_t n = strlen(dir) + 1 + strlen(name) + 1;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

/* What a token decodes to: its code points mapped back to bytes. A token with a
 * code point outside the mapping (an added token written as plain text) decodes
 * to its own UTF-8, as the fast tokenizer's ByteLevel decoder does. */
static uint32_t zz_tok_decode_text(const char *text, uint32_t len, const int16_t *byte_of_cp,
                                   char *out) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < len;) {
    uint32_t cp = 0;
    size_t k = zz_utf8_next((const uint8_t *)text + i, len - i, &cp);
    if (k == 0 || cp > ZZ_BYTE_CP_MAX || byte_of_cp[cp] < 0) {
      memcpy(out, text, len);
      return len;
    }
    out[n++] = (char)byte_of_cp[cp];
    i += (uint32_t)k;
  }
  return n;
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
  size_t n = json_object_size(root);
  if (n == 0 || n > (size_t)INT32_MAX) {
    st = zz_error(ZZ_ERR_FORMAT, "%s: %s", path, n ? "too many tokens" : "no tokens");
    goto done;
  }
  size_t pool_bytes = 0;
  const char *key;
  json_t *val;
  json_object_foreach(root, key, val) {
    size_t len = strlen(key);
    if (len > UINT32_MAX / 2) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: a token of %zu bytes", path, len);
      goto done;
    }
    pool_bytes += 2 * (len + 1);
  }
  tok->entries = calloc(n, sizeof *tok->entries);
  tok->pool = malloc(pool_bytes);
  tok->text_mask = zz_table_cap(n) - 1;
  tok->by_text = calloc(tok->text_mask + 1, sizeof *tok->by_text);
  if (!tok->entries || !tok->pool || !tok->by_text || !zz_u64_map_init(&tok->by_id, n)) {
    st = zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory for %zu tokens", path, n);
    goto done;
  }

  uint32_t cp_of_byte[256];
  int16_t byte_of_cp[ZZ_BYTE_CP_MAX + 1];
  zz_byte_map(cp_of_byte, byte_of_cp);
  char *p = tok->pool;
  int64_t max_id = -1;
  json_object_foreach(root, key, val) {
    if (!json_is_integer(val) || json_integer_value(val) < 0 ||
        json_integer_value(val) > INT32_MAX) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: token \"%.80s\": the id must be an integer in [0, 2^31)",
                    path, key);
      goto done;
    }
    zz_tok_entry *e = &tok->entries[tok->n_entries];
    e->id = (int32_t)json_integer_value(val);
    e->text_len = (uint32_t)strlen(key);
    memcpy(p, key, e->text_len + 1);
    e->text = p;
    p += e->text_len + 1;
    e->bytes_len = zz_tok_decode_text(e->text, e->text_len, byte_of_cp, p);
    p[e->bytes_len] = '\0';
    e->bytes = p;
    p += e->bytes_len + 1;
    e->hash = zz_hash_bytes(ZZ_HASH_SEED, e->text, e->text_len);

    zz_u64_slot *s = zz_u64_map_slot(&tok->by_id, (uint64_t)e->id);
    if (s->key != ZZ_U64_EMPTY) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: tokens \"%.80s\" and \"%.80s\" both have id %d", path,
                    tok->entries[s->a].text, e->text, (int)e->id);
      goto done;
    }
    s->key = (uint64_t)e->id;
    s->a = (int32_t)tok->n_entries;
    s->b = 0;
    /* keys are unique (JSON_REJECT_DUPLICATES), so no lookup before the insert */
    size_t i = (size_t)e->hash & tok->text_mask;
    while (tok->by_text[i]) i = (i + 1) & tok->text_mask;
    tok->by_text[i] = (uint32_t)tok->n_entries + 1;
    if (e->id > max_id) max_id = e->id;
    tok->n_entries++;
  }
  tok->vocab_size = max_id + 1;

  /* Every pre-token starts as single bytes, so a vocabulary missing one cannot
   * encode arbitrary text. */
  for (int b = 0; b < 256; b++) {
    char s[2];
    size_t len = zz_utf8_put_small(cp_of_byte[b], s);
    const zz_tok_entry *e = zz_tok_find(tok, s, len);
    if (!e) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: no token for byte 0x%02X (\"%.*s\"); byte-level BPE needs "
                    "all 256", path, b, (int)len, s);
      goto done;
    }
    tok->byte_id[b] = e->id;
  }
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

/* Quotes at most 80 bytes of a line in a message. */
#define ZZ_CLIP(n) ((int)((n) < 80 ? (n) : 80))

static zz_status zz_tok_load_merges(zz_tokenizer *tok, const char *path) {
  char *data = NULL;
  size_t len = 0;
  ZZ_CHECK(zz_read_file(path, &data, &len));
  size_t n_lines = 1;
  for (size_t i = 0; i < len; i++) n_lines += data[i] == '\n';
  if (!zz_u64_map_init(&tok->merges, n_lines)) {
    free(data);
    return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory for %zu merges", path, n_lines);
  }

  zz_status st = ZZ_OK;
  int32_t rank = 0;
  long line_no = 0;
  for (char *line = data; line < data + len; ) {
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
      st = zz_error(ZZ_ERR_FORMAT, "%s:%ld: expected two tokens separated by one space, got \"%.*s\"",
                    path, line_no, ZZ_CLIP(n), line);
      break;
    }
    size_t a_len = (size_t)(sp - line), b_len = (size_t)(eol - sp - 1);
    const zz_tok_entry *a = zz_tok_find(tok, line, a_len);
    const zz_tok_entry *b = zz_tok_find(tok, sp + 1, b_len);
    const zz_tok_entry *ab = zz_tok_find2(tok, line, a_len, sp + 1, b_len);
    if (!a || !b) {
      const char *part = !a ? line : sp + 1;
      size_t part_len = !a ? a_len : b_len;
      st = zz_error(ZZ_ERR_FORMAT, "%s:%ld: merge \"%.*s\": token \"%.*s\" is not in vocab.json",
                    path, line_no, ZZ_CLIP(n), line, ZZ_CLIP(part_len), part);
      break;
    }
    if (!ab) {
      st = zz_error(ZZ_ERR_FORMAT,
                    "%s:%ld: merge \"%.*s\": the merged token \"%.*s%.*s\" is not in vocab.json",
                    path, line_no, ZZ_CLIP(n), line, ZZ_CLIP(a_len), line, ZZ_CLIP(b_len), sp + 1);
      break;
    }
    /* A pair listed twice keeps its later rank, as both Hugging Face tokenizers do. */
    zz_u64_slot *s = zz_u64_map_slot(&tok->merges, zz_pair_key(a->id, b->id));
    s->key = zz_pair_key(a->id, b->id);
    s->a = rank++;
    s->b = ab->id;
    line = next;
  }
  free(data);
  return st;
}

zz_status zz_tokenizer_load(const char *dir, zz_tokenizer **out) {
  if (!dir || !out) return zz_error(ZZ_ERR_INVALID_ARG, "tokenizer: NULL directory or output");
  char *vocab_path = zz_path_join(dir, "vocab.json");
  char *merges_path = zz_path_join(dir, "merges.txt");
  zz_tokenizer *tok = calloc(1, sizeof *tok);
  zz_status st = ZZ_OK;
  if (!vocab_path || !merges_path || !tok) {
    st = zz_error(ZZ_ERR_NO_MEMORY, "tokenizer %s: out of memory", dir);
    goto fail;
  }
  ZZ_CHECK_GOTO(zz_tok_load_vocab(tok, vocab_path), st, fail);
  ZZ_CHECK_GOTO(zz_tok_load_merges(tok, merges_path), st, fail);
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
 * s: the text; first[k]: its byte at code point k's start (the whole code point
 * when ASCII); cls[k]: the class of code point k; n: code points.
 */
static size_t zz_pretoken_end(const uint8_t *first, const uint8_t *cls, size_t n, size_t i) {
  uint8_t c = first[i];
  if (c == '\'' && i + 1 < n) { /* case-sensitive, as the GPT-2 pattern is */
    uint8_t c1 = first[i + 1];
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
    if (i + 2 < n) {
      uint8_t c2 = first[i + 2];
      if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l'))
        return i + 3;
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

/* ================================================================ BPE */

/* A possible merge of symbol pos with its right neighbour, valid while both still
 * hold the ids it was made for. */
typedef struct zz_bpe_cand {
  int32_t rank, pos;      /* heap order: lowest rank, then leftmost */
  int32_t right;          /* symbol index of the right neighbour */
  int32_t left_id, right_id, new_id;
} zz_bpe_cand;

/* Scratch of one encode call, grown to the longest pre-token. */
typedef struct zz_bpe_work {
  int32_t *sym;        /* [cap] token id of each symbol; -1 once merged into its left */
  int32_t *next;       /* [cap] next live symbol, -1 at the end */
  int32_t *prev;       /* [cap] previous live symbol, -1 at the start */
  zz_bpe_cand *heap;   /* [3 * cap]: m - 1 pairs at first, and each merge adds <= 2 */
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
 * Applies the merges to the m bytes of one pre-token and appends the resulting ids
 * to ids. Merging the lowest-ranked pair first, leftmost on ties, one at a time, is
 * what the fast tokenizer does, and gives the same result as the slow one's
 * "merge every occurrence of the best pair" (a merge never recreates its own pair).
 * O(m log m) with a heap whose stale entries are skipped when popped.
 */
static size_t zz_bpe(const zz_tokenizer *tok, zz_bpe_work *w, const uint8_t *bytes, size_t m,
                     int32_t *ids) {
  if (m == 1) {
    ids[0] = tok->byte_id[bytes[0]];
    return 1;
  }
  for (size_t i = 0; i < m; i++) {
    w->sym[i] = tok->byte_id[bytes[i]];
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

/* ================================================================ encode / decode */

zz_status zz_tokenizer_encode(const zz_tokenizer *tok, const char *text, size_t len,
                              int32_t **ids_out, int64_t *n_out) {
  if (!tok || (!text && len > 0) || !ids_out || !n_out)
    return zz_error(ZZ_ERR_INVALID_ARG, "tokenizer encode: NULL argument");
  if (len > (size_t)INT32_MAX)
    return zz_error(ZZ_ERR_INVALID_ARG, "tokenizer encode: %zu bytes of text is over the 2 GiB limit",
                    len);
  const uint8_t *s = (const uint8_t *)text;
  /* per code point: its first byte and class, and where it starts; one more
   * offset for the end */
  uint8_t *first = malloc(len + 1);
  uint8_t *cls = malloc(len + 1);
  uint32_t *off = malloc((len + 1) * sizeof *off);
  int32_t *ids = malloc((len + 1) * sizeof *ids); /* at most one id per byte */
  zz_bpe_work w = {0};
  zz_status st = ZZ_OK;
  if (!first || !cls || !off || !ids) {
    st = zz_error(ZZ_ERR_NO_MEMORY, "tokenizer encode: out of memory for %zu bytes", len);
    goto done;
  }

  size_t n = 0;
  for (size_t i = 0; i < len;) {
    uint32_t cp;
    size_t k = zz_utf8_next(s + i, len - i, &cp);
    if (k == 0) {
      st = zz_error(ZZ_ERR_INVALID_ARG, "tokenizer encode: invalid UTF-8 at byte offset %zu "
                    "(byte 0x%02X)", i, s[i]);
      goto done;
    }
    first[n] = s[i];
    cls[n] = zz_cp_class(cp);
    off[n++] = (uint32_t)i;
    i += k;
  }
  off[n] = (uint32_t)len;

  size_t n_ids = 0;
  for (size_t i = 0; i < n;) {
    size_t j = zz_pretoken_end(first, cls, n, i);
    size_t m = off[j] - off[i];
    if (!zz_bpe_work_reserve(&w, m)) {
      st = zz_error(ZZ_ERR_NO_MEMORY, "tokenizer encode: out of memory for a %zu-byte word", m);
      goto done;
    }
    n_ids += zz_bpe(tok, &w, s + off[i], m, ids + n_ids);
    i = j;
  }
  int32_t *fit = realloc(ids, (n_ids ? n_ids : 1) * sizeof *ids);
  if (fit) ids = fit;
  *ids_out = ids;
  *n_out = (int64_t)n_ids;
  ids = NULL;
done:
  free(first);
  free(cls);
  free(off);
  free(ids);
  zz_bpe_work_free(&w);
  return st;
}

static const zz_tok_entry *zz_tok_by_id(const zz_tokenizer *tok, int32_t id) {
  if (id < 0) return NULL;
  const zz_u64_slot *s = zz_u64_map_find(&tok->by_id, (uint64_t)id);
  return s ? &tok->entries[s->a] : NULL;
}

zz_status zz_tokenizer_decode(const zz_tokenizer *tok, const int32_t *ids, int64_t n,
                              char **text_out, size_t *len_out) {
  if (!tok || (!ids && n > 0) || n < 0 || !text_out || !len_out)
    return zz_error(ZZ_ERR_INVALID_ARG, "tokenizer decode: NULL argument or negative count");
  size_t total = 0;
  for (int64_t i = 0; i < n; i++) {
    const zz_tok_entry *e = zz_tok_by_id(tok, ids[i]);
    if (!e) {
      if (ids[i] < 0 || ids[i] >= tok->vocab_size)
        return zz_error(ZZ_ERR_INVALID_ARG,
                        "tokenizer decode: id %d at position %lld is outside [0, %lld)", (int)ids[i],
                        (long long)i, (long long)tok->vocab_size);
      return zz_error(ZZ_ERR_INVALID_ARG,
                      "tokenizer decode: id %d at position %lld is not in the vocabulary",
                      (int)ids[i], (long long)i);
    }
    total += e->bytes_len;
  }
  char *text = malloc(total + 1);
  if (!text) return zz_error(ZZ_ERR_NO_MEMORY, "tokenizer decode: out of memory for %zu bytes", total);
  size_t at = 0;
  for (int64_t i = 0; i < n; i++) {
    const zz_tok_entry *e = zz_tok_by_id(tok, ids[i]);
    memcpy(text + at, e->bytes, e->bytes_len);
    at += e->bytes_len;
  }
  text[at] = '\0';
  *text_out = text;
  *len_out = at;
  return ZZ_OK;
}
