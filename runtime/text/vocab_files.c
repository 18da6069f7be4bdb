/*
 * vocab_files.c — GPT-2's vocab.json + merges.txt (byte-level BPE: GPT2Tokenizer /
 * GPT2TokenizerFast, add_prefix_space=False), and zz_tokenizer_load, which reads a
 * directory's tokenizer.json instead when it has one, as AutoTokenizer does.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"

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
  char ch[4];
  size_t len = 0;
  int b = zz_tok_missing_byte(tok, ch, &len);
  if (b >= 0) {
    st = zz_error(ZZ_ERR_FORMAT, "%s: no token for byte 0x%02X (\"%.*s\"); byte-level BPE needs all 256", path, b,
                  (int)len, ch);
    goto done;
  }
  st = zz_tok_added_ids(tok, path);
done:
  json_decref(root);
  return st;
}

zz_status zz_tok_read_file(const char *path, char **data_out, size_t *len_out) {
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

static zz_status zz_tok_load_merges(zz_tokenizer *tok, const char *path) {
  char *data = NULL;
  size_t len = 0;
  ZZ_CHECK(zz_tok_read_file(path, &data, &len));
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
  ZZ_CHECK_GOTO(zz_tok_set_split(tok, NULL, vocab_path), st, fail);
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
