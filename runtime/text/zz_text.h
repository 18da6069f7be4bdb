/*
 * zz_text.h — text to token ids and back: byte-pair encoding read from a model
 * directory's tokenizer.json, or GPT-2's vocab.json + merges.txt, with the special
 * tokens Hugging Face adds (runtime/text/: encode.c, decode.c, tokenizer_json.c, ...;
 * tokenizer_impl.h lists the files).
 *
 * Usage:
 *     zz_tokenizer *tok;  int32_t *ids;  int64_t n;  char *text;  size_t len;
 *     ZZ_CHECK(zz_tokenizer_load(dir, &tok));
 *     ZZ_CHECK(zz_tokenizer_encode(tok, "Hello", 5, &ids, &n));
 *     ZZ_CHECK(zz_tokenizer_decode(tok, ids, n, &text, &len));
 *     free(ids); free(text); zz_tokenizer_free(tok);
 */
#ifndef ZZ_TEXT_H
#define ZZ_TEXT_H

#include "zz_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ tokenizer */

/* Byte-pair encoding from a model directory: tokenizer.json when it has one (as
 * AutoTokenizer prefers it; LLaMA-3 and Qwen2/2.5/3 byte-level, LLaMA-1/2, Mistral and
 * Phi-3 SentencePiece-style, GPT-2 style; see docs/llama.md), else GPT-2's vocab.json +
 * merges.txt. */
typedef struct zz_tokenizer zz_tokenizer;

zz_status zz_tokenizer_load(const char *dir, zz_tokenizer **out);
/* Whether dir holds a tokenizer.json (zz_tokenizer_load then reads it). */
bool zz_tokenizer_has_json(const char *dir);
/* The special ids a prompt's text gets (HF's add_special_tokens=True): BOS first
 * and EOS last, -1 where none; for tokenizer.json from its post-processor, or
 * add_bos_token / add_eos_token of tokenizer_config.json for the LlamaTokenizer
 * classes. False for vocab.json + merges.txt, which say nothing (OPT's BOS comes
 * from config.json). */
bool zz_tokenizer_specials(const zz_tokenizer *tok, int32_t *bos_out, int32_t *eos_out);
void zz_tokenizer_free(zz_tokenizer *tok);
int64_t zz_tokenizer_vocab_size(const zz_tokenizer *tok);
/* The most bytes of text whose encoding has at most n_tokens ids (special tokens
 * aside), so a longer text is refused before it is tokenized; SIZE_MAX when this
 * tokenizer gives no such bound (a character may vanish or fuse with others: no
 * <unk> nor byte fallback, fuse_unk, whitespace taken by an added token's
 * lstrip/rstrip, a normalizer Replace to nothing). */
size_t zz_tokenizer_text_bound(const zz_tokenizer *tok, int64_t n_tokens);
/* text (len bytes of UTF-8, need not be NUL terminated) → *ids_out (malloc'd,
 * caller frees), *n_out ids. No special tokens are added (tokenizer.json's added
 * tokens spelled in the text are found, as Hugging Face does; so are those that
 * tokenizer_config.json / special_tokens_map.json register beside vocab.json). Invalid UTF-8 is an
 * error naming the byte offset. */
zz_status zz_tokenizer_encode(const zz_tokenizer *tok, const char *text, size_t len, int32_t **ids_out, int64_t *n_out);
/* The same over the whole of a text file (an error names the file). */
zz_status zz_tokenizer_encode_file(const zz_tokenizer *tok, const char *path, int32_t **ids_out, int64_t *n_out);
/* ids → *text_out (malloc'd, NUL terminated), *len_out bytes, by the decoder
 * (tokenizer.json's, or GPT-2's byte mapping): the string Hugging Face's decode
 * gives, always UTF-8 (U+FFFD where the tokens' bytes are not; see decode.c).
 * Ids out of range are an error; special tokens decode to their text. */
zz_status zz_tokenizer_decode(const zz_tokenizer *tok, const int32_t *ids, int64_t n, char **text_out, size_t *len_out);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_TEXT_H */
