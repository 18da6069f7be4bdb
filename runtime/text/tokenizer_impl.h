/*
 * tokenizer_impl.h — what the tokenizer's files share: its fields, its tables and
 * the functions each file offers the others. Internal to runtime/text/.
 *
 *   vocab.c           the vocabulary and merges tables, filled and looked up
 *   vocab_files.c     GPT-2's vocab.json + merges.txt; zz_tokenizer_load
 *   tokenizer_json.c  tokenizer.json
 *   tokenizer_config.c  tokenizer_config.json, special_tokens_map.json
 *   normalize.c       a piece of text normalized (NFC, Prepend, Replace)
 *   nfc.c             Unicode NFC (nfc_impl.h; tables nfc_tables.c, generated)
 *   pretokenize.c     a normalized piece cut into words
 *   regex.c           the Split patterns (regex_impl.h)
 *   bpe.c             a word into ids by the BPE model
 *   encode.c          text into ids: added tokens, then the steps above
 *   decode.c          ids into text; each token's decoded bytes
 *   utf8.c, map.c     the UTF-8 codec and the hash map (utf8_impl.h, map_impl.h)
 *
 *     zz_tokenizer *tok = calloc(1, sizeof *tok);
 *     zz_tok_vocab_alloc(tok, n, pool_bytes, path);  // then zz_tok_vocab_add per token
 *     zz_tok_merges_alloc(tok, n, path);             // then zz_tok_merge_add per merge
 *     zz_tok_finish(tok, path);                      // decoded bytes of every token
 */
#ifndef ZZ_TOKENIZER_IMPL_H
#define ZZ_TOKENIZER_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "map_impl.h"
#include "regex_impl.h"
#include "utf8_impl.h"
#include "zz_text.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zz_tok_entry {
  const char *text;   /* the token as the file spells it, NUL terminated, in pool */
  const char *bytes;  /* what the decoder makes of it, in bytes_pool (zz_tok_finish) */
  uint32_t text_len;  /* bytes of text */
  uint32_t bytes_len; /* bytes of bytes */
  int32_t id;
  bool byte_token; /* a ByteFallback decoder's "<0xNN>": bytes is that one byte */
  uint64_t hash;   /* of text */
} zz_tok_entry;

/* A string replaced by another everywhere (normalizer or decoder "Replace" with a
 * String pattern). */
typedef struct zz_tok_replace {
  char *from, *to; /* NUL terminated */
  size_t from_len, to_len;
} zz_tok_replace;

/* A normalizer step: Unicode NFC (nfc.c), or else `replace`. */
typedef struct zz_tok_norm {
  bool nfc;
  zz_tok_replace replace;
} zz_tok_norm;

/* An entry of tokenizer.json's added_tokens, matched in the text before anything
 * else (longest first at the leftmost place). */
typedef struct zz_tok_added {
  char *text; /* content */
  size_t len;
  int32_t id;
  bool normalized;     /* matched in the normalized text (only without a normalizer here) */
  bool lstrip, rstrip; /* the whitespace before / after it is part of the match */
} zz_tok_added;

/* How the pieces between added tokens are cut into words. */
typedef enum zz_tok_split {
  ZZ_SPLIT_NONE = 0, /* the whole piece is one word */
  ZZ_SPLIT_REGEX,    /* the matches of split_re and the text between them (Split, Isolated) */
  ZZ_SPLIT_META,     /* Metaspace split: a new word before each replacement char */
} zz_tok_split;

typedef enum zz_tok_prepend { ZZ_PREPEND_NEVER = 0, ZZ_PREPEND_FIRST, ZZ_PREPEND_ALWAYS } zz_tok_prepend;

typedef enum zz_tok_decoder {
  ZZ_DEC_BYTE_LEVEL = 0, /* code points back to bytes (GPT-2's mapping) */
  ZZ_DEC_PIECES,         /* Replace*, ByteFallback?, Fuse?, Strip? */
  ZZ_DEC_METASPACE,      /* replacement → space; dropped from the first token */
} zz_tok_decoder;

#define ZZ_TOK_MAX_STEPS 8

struct zz_tokenizer {
  /* ---- the vocabulary (both kinds) */
  zz_tok_entry *entries;      /* [n_entries]: the model's vocabulary, then added tokens not in it */
  int64_t n_entries, n_model; /* entries [0, n_model) are the model's, found by text */
  char *pool;                 /* every entry's text */
  char *bytes_pool;           /* every entry's decoded bytes */
  uint32_t *by_text;          /* [text_mask + 1] open addressing: entry index + 1, 0 empty */
  size_t text_mask;
  zz_u64_map by_id;  /* id → (entry index, -) */
  zz_u64_map merges; /* (left id, right id) → (rank, merged id) */
  int32_t n_merges;
  int64_t vocab_size; /* largest id + 1 */

  /* ---- tokenizer.json only (json false: vocab.json + merges.txt, GPT-2) */
  bool json;
  zz_tok_added *added; /* [n_added], longest first */
  int n_added;
  /* normalizer steps in order: NFC, Prepend (replace.from NULL, replace.to the
   * prefix) or Replace */
  zz_tok_norm norm[ZZ_TOK_MAX_STEPS];
  int n_norm;
  zz_tok_split split;
  zz_regex *split_re; /* ZZ_SPLIT_REGEX: GPT-2's pattern, or the Split's */
  bool byte_level;    /* ByteLevel pre-tokenizer: words become mapped bytes */
  bool prefix_space;  /* ByteLevel add_prefix_space */
  bool metaspace;     /* Metaspace pre-tokenizer */
  char meta_rep[5];   /* its replacement character (UTF-8), also the decoder's */
  size_t meta_rep_len;
  zz_tok_prepend meta_prepend;
  /* the BPE model */
  bool byte_fallback, fuse_unk, ignore_merges;
  int32_t unk_id;           /* -1: none */
  int32_t fallback_id[256]; /* id of "<0xNN>", -1 when absent */
  /* the decoder */
  zz_tok_decoder decoder;
  zz_tok_replace dec_rep[ZZ_TOK_MAX_STEPS];
  int n_dec_rep;
  bool dec_byte_fallback;
  char strip[5]; /* Strip's content character (UTF-8), empty when no Strip */
  size_t strip_len;
  int strip_start, strip_stop;
  bool meta_dec_first; /* Metaspace decoder: drop the replacement from the first token */
  /* the special tokens a prompt gets (post-processor or tokenizer_config.json) */
  int32_t bos_id, eos_id; /* -1: none */
};

/* Quotes at most 80 bytes in a message. */
#define ZZ_CLIP(n) ((int)((n) < 80 ? (n) : 80))

/* ================================================================ vocab.c */

uint64_t zz_tok_hash(const char *s, size_t n);
const zz_tok_entry *zz_tok_find(const zz_tokenizer *tok, const char *s, size_t len);
const zz_tok_entry *zz_tok_by_id(const zz_tokenizer *tok, int32_t id);
/* The first byte whose byte-level character (zz_byte_map) is no token, that
 * character's UTF-8 in ch[0..*len) (ch may be NULL); -1 when each of the 256 is one
 * (byte-level BPE can then encode any text). */
int zz_tok_missing_byte(const zz_tokenizer *tok, char ch[4], size_t *len);

/* Room for n tokens whose texts take at most pool_bytes (NULs included). */
zz_status zz_tok_vocab_alloc(zz_tokenizer *tok, size_t n, size_t pool_bytes, const char *path);
/* Adds a token; in_model: found by its text (merges, words), else only by id (an
 * added token that is not in the model's vocabulary). Model tokens come first. */
zz_status zz_tok_vocab_add(zz_tokenizer *tok, const char *text, size_t len, int64_t id, bool in_model,
                           const char *path);
zz_status zz_tok_merges_alloc(zz_tokenizer *tok, size_t n, const char *path);
/* The next merge (rank = merges so far) of the tokens a and b; `where` names it in
 * messages ("merges.txt:12", "tokenizer.json: model.merges[11]"). */
zz_status zz_tok_merge_add(zz_tokenizer *tok, const char *a, size_t a_len, const char *b, size_t b_len,
                           const char *where);
/* tok->added in the order they are matched: longest first, then by id. */
void zz_tok_added_sort(zz_tokenizer *tok);

/* ================================================================ vocab_files.c */

/* Reads a whole file; *len_out excludes the NUL appended after it. */
zz_status zz_tok_read_file(const char *path, char **data_out, size_t *len_out);

/* ================================================================ tokenizer_json.c */

/* tokenizer.json (+ tokenizer_config.json beside it) in dir into a zeroed tok. */
zz_status zz_tok_load_json(zz_tokenizer *tok, const char *dir);
/* A bool member of a JSON object: absent or null gives def; another type is an
 * error naming path and where. */
zz_status zz_tok_json_bool(const json_t *o, const char *key, bool def, bool *out, const char *path, const char *where);

/* ================================================================ tokenizer_config.c */

/* tokenizer_config.json beside tokenizer.json, when there is one: the BOS / EOS of
 * the LlamaTokenizer classes, added_tokens_decoder checked against tok. */
zz_status zz_tok_load_config(zz_tokenizer *tok, const char *dir);
/* vocab.json + merges.txt: the tokens transformers' GPT2Tokenizer registers from
 * tokenizer_config.json (added_tokens_decoder, bos_token, ...) and
 * special_tokens_map.json in dir (GPT-2's "<|endoftext|>" where neither names a
 * bos, eos or unk token) into tok->added, id -1 where the files give none. Before
 * the vocabulary, which needs room for them. */
zz_status zz_tok_gpt2_specials(zz_tokenizer *tok, const char *dir);
/* Then, the vocabulary read: each one's id (its vocabulary id, or the next after
 * the largest, as transformers adds it), added to the vocabulary where not in it. */
zz_status zz_tok_added_ids(zz_tokenizer *tok, const char *path);

/* ================================================================ normalize.c */

/* s with every r->from replaced by r->to (the Prepend form when from is NULL), in
 * out (room for zz_tok_replace_size bytes); returns the length. The normalizer's
 * and the decoder's Replace. */
size_t zz_tok_replace_size(const zz_tok_replace *r, const char *s, size_t len);
size_t zz_tok_replace_apply(const zz_tok_replace *r, const char *s, size_t len, char *out);

/* ================================================================ bpe.c */

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

void zz_bpe_work_free(zz_bpe_work *w);

/* ================================================================ encode.c */

/* Scratch and output of one encode call. */
typedef struct zz_enc {
  const zz_tokenizer *tok;
  zz_bpe_work w;
  int32_t *ids; /* [cap] */
  size_t n, cap;
  uint32_t cp_of_byte[256];
} zz_enc;

/* The error of an allocation failing for a piece of `bytes` bytes. */
zz_status zz_enc_oom(size_t bytes);
/* Room in e->ids for `more` ids after e->n; false when out of memory. */
bool zz_enc_room(zz_enc *e, size_t more);
/* A word of raw text (a pre-token) through the model: byte-mapped first when the
 * vocabulary is byte-level. */
zz_status zz_enc_raw_word(zz_enc *e, const char *s, size_t m);
/* One word in the vocabulary's spelling through the BPE model (bpe.c). */
zz_status zz_bpe_word(zz_enc *e, const char *s, size_t m);
/* *buf (malloc'd, length *n), a normalized piece, through the pre-tokenizer: its
 * whole-piece steps (ByteLevel's prefix space, Metaspace's replacement) applied in
 * place, then cut into words by tok->split, each through zz_enc_raw_word; first:
 * the piece starts the text (pretokenize.c). */
zz_status zz_pretok_words(zz_enc *e, char **buf, size_t *n, bool first);
/* tok->split becomes ZZ_SPLIT_REGEX with pattern (NULL: GPT-2's, as ByteLevel's
 * use_regex and vocab.json + merges.txt have it); `where` names it in errors
 * (pretokenize.c). */
zz_status zz_tok_set_split(zz_tokenizer *tok, const char *pattern, const char *where);
/* *buf (malloc'd, length *n), a piece between added tokens, replaced by its text
 * after the normalizer's steps (normalize.c). */
zz_status zz_tok_normalize(const zz_tokenizer *tok, char **buf, size_t *n);
/* *buf (malloc'd, length *n) replaced by r applied to it (normalize.c). */
zz_status zz_tok_replace_in(const zz_tok_replace *r, char **buf, size_t *n);

/* ================================================================ decode.c */

/* Decoded bytes of every entry, by tok->decoder. */
zz_status zz_tok_finish(zz_tokenizer *tok, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_TOKENIZER_IMPL_H */
