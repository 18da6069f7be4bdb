/*
 * tokenizer_config.c — the files beside the vocabulary that transformers reads
 * for its special tokens: tokenizer_config.json next to tokenizer.json (the BOS /
 * EOS rule of the LlamaTokenizer classes, added_tokens_decoder), and
 * tokenizer_config.json + special_tokens_map.json next to vocab.json (the special
 * tokens GPT2Tokenizer registers and finds in the text).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "zz_hf_json.h" /* zz_json_load_hf: the reading of Hugging Face's JSON files */

/* A token of the tokenizer (added tokens first) by its text. */
static const zz_tok_entry *zz_tok_find_any(const zz_tokenizer *tok, const char *s) {
  for (int i = 0; i < tok->n_added; i++)
    if (strcmp(tok->added[i].text, s) == 0) return zz_tok_by_id(tok, tok->added[i].id);
  return zz_tok_find(tok, s, strlen(s));
}

/* bos_token / eos_token: a string or {"content": ...}; absent: def; null: NULL
 * (the tokenizer has none). */
static const char *zz_config_token(const json_t *cfg, const char *key, const char *def) {
  json_t *v = json_object_get(cfg, key);
  if (!v) return def;
  if (json_is_object(v)) v = json_object_get(v, "content");
  return json_string_value(v);
}

/* added_tokens_decoder {"id": {"content": …, "special": …, …}}: transformers adds
 * an entry tokenizer.json lacks to the tokenizer it builds, so each one must be
 * that id of tokenizer.json already, or the ids would differ from transformers'. */
static zz_status zz_json_config_added(const zz_tokenizer *tok, const json_t *cfg, const char *path) {
  json_t *dec = json_object_get(cfg, "added_tokens_decoder");
  if (!dec || json_is_null(dec)) return ZZ_OK;
  if (!json_is_object(dec)) return zz_error(ZZ_ERR_FORMAT, "%s: \"added_tokens_decoder\" must be an object", path);
  const char *key;
  json_t *v;
  json_object_foreach((json_t *)dec, key, v) {
    char *end = NULL;
    long long id = strtoll(key, &end, 10);
    const char *content = json_string_value(json_object_get(v, "content"));
    if (!*key || *end || id < 0 || id > INT32_MAX || !content)
      return zz_error(ZZ_ERR_FORMAT, "%s: added_tokens_decoder \"%.40s\" must map an id to {\"content\": ...}", path,
                      key);
    const zz_tok_entry *e = zz_tok_by_id(tok, (int32_t)id);
    if (!e || strcmp(e->text, content) != 0)
      return zz_error(ZZ_ERR_UNSUPPORTED,
                      "%s: added_tokens_decoder %lld \"%.80s\" is not that id of tokenizer.json "
                      "(transformers would add it; zigzag reads tokenizer.json's tokens only)",
                      path, id, content);
  }
  return ZZ_OK;
}

/* What is read of tokenizer_config.json, and what is ignored on purpose:
 *   tokenizer_class, add_bos_token, add_eos_token, bos_token, eos_token: read (above)
 *   added_tokens_decoder: checked against tokenizer.json's tokens
 *   model_max_length (often the sentinel 1e30: no bound), chat_template, padding /
 *   truncation sides, clean_up_tokenization_spaces, legacy, unk / pad / mask tokens:
 *   ignored; zigzag neither truncates, pads by text nor renders chat templates, and
 *   tokenizer.json already fixes the encoding. */
zz_status zz_tok_load_config(zz_tokenizer *tok, const char *dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
  json_t *cfg;
  ZZ_CHECK(zz_json_load_hf(path, false, &cfg));
  if (!cfg) return ZZ_OK;
  zz_status st = zz_json_config_added(tok, cfg, path);
  const char *cls = json_string_value(json_object_get(cfg, "tokenizer_class"));
  if (st == ZZ_OK && cls && (strcmp(cls, "LlamaTokenizer") == 0 || strcmp(cls, "LlamaTokenizerFast") == 0)) {
    /* LlamaTokenizerFast rebuilds the post-processor from these two */
    bool add[2] = {false, false};
    const char *keys[2] = {"add_bos_token", "add_eos_token"};
    const char *tokens[2] = {"bos_token", "eos_token"};
    const char *names[2] = {zz_config_token(cfg, "bos_token", "<s>"), zz_config_token(cfg, "eos_token", "</s>")};
    int32_t *ids[2] = {&tok->bos_id, &tok->eos_id};
    for (int k = 0; k < 2 && st == ZZ_OK; k++) {
      st = zz_tok_json_bool(cfg, keys[k], k == 0, &add[k], path, "tokenizer_config");
      *ids[k] = -1;
      if (st != ZZ_OK || !add[k]) continue;
      const zz_tok_entry *e = names[k] ? zz_tok_find_any(tok, names[k]) : NULL;
      if (!names[k]) st = zz_error(ZZ_ERR_FORMAT, "%s: %s is true but %s is null", path, keys[k], tokens[k]);
      else if (!e)
        st = zz_error(ZZ_ERR_FORMAT, "%s: %s is true but \"%.80s\" is not a token of tokenizer.json", path, keys[k],
                      names[k]);
      else
        *ids[k] = e->id;
    }
  }
  json_decref(cfg);
  return st;
}

/* ================================================================ vocab.json's special tokens */

/* GPT2Tokenizer's special token attributes in transformers' order
 * (SPECIAL_TOKENS_ATTRIBUTES); the first three default to "<|endoftext|>". */
static const char *const zz_special_keys[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                              "pad_token", "cls_token", "mask_token"};
#define ZZ_GPT2_DEFAULT_SPECIAL "<|endoftext|>"

/* Appends the token v (a string or an AddedToken object {"content": ...}) to
 * tok->added, id -1 when it is to be found by its text, unless a token with that
 * text is there already (transformers keeps the first). */
static zz_status zz_added_push(zz_tokenizer *tok, const json_t *v, int64_t id, const char *path, const char *where) {
  if (json_is_object(v)) {
    static const char *const unsupported[] = {"lstrip", "rstrip", "single_word"};
    for (int k = 0; k < 3; k++) {
      bool flag = false;
      ZZ_CHECK(zz_tok_json_bool(v, unsupported[k], false, &flag, path, where));
      if (flag) return zz_error(ZZ_ERR_UNSUPPORTED, "%s: %s: %s true is not supported", path, where, unsupported[k]);
    }
    v = json_object_get(v, "content");
  }
  const char *text = json_string_value(v);
  size_t len = json_string_length(v);
  if (!text || !len || strlen(text) != len)
    return zz_error(ZZ_ERR_FORMAT, "%s: %s must be a token: a non-empty string or {\"content\": string}", path, where);
  if (id > INT32_MAX) return zz_error(ZZ_ERR_FORMAT, "%s: %s: id %lld is over 2^31", path, where, (long long)id);
  for (int i = 0; i < tok->n_added; i++)
    if (tok->added[i].len == len && memcmp(tok->added[i].text, text, len) == 0) return ZZ_OK;
  zz_tok_added *grown = realloc(tok->added, (size_t)(tok->n_added + 1) * sizeof *grown);
  if (!grown) return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory", path);
  tok->added = grown;
  zz_tok_added *a = &tok->added[tok->n_added];
  *a = (zz_tok_added){.text = strdup(text), .len = len, .id = (int32_t)id};
  if (!a->text) return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory", path);
  tok->n_added++;
  return ZZ_OK;
}

zz_status zz_tok_gpt2_specials(zz_tokenizer *tok, const char *dir) {
  static const char *const names[2] = {"tokenizer_config.json", "special_tokens_map.json"};
  char path[2][4200];
  json_t *file[2] = {NULL, NULL};
  zz_status st = ZZ_OK;
  for (int f = 0; f < 2 && st == ZZ_OK; f++) {
    snprintf(path[f], sizeof path[f], "%s/%s", dir, names[f]);
    st = zz_json_load_hf(path[f], false, &file[f]);
  }
  /* tokenizer_config.json's added_tokens_decoder: tokens with their ids */
  json_t *fixed = file[0] ? json_object_get(file[0], "added_tokens_decoder") : NULL;
  if (st == ZZ_OK && fixed && !json_is_null(fixed) && !json_is_object(fixed))
    st = zz_error(ZZ_ERR_FORMAT, "%s: added_tokens_decoder must be an object of id: token", path[0]);
  const char *key;
  json_t *v;
  json_object_foreach(fixed, key, v) {
    if (st != ZZ_OK) break;
    char where[96], *end = NULL;
    snprintf(where, sizeof where, "added_tokens_decoder[\"%.40s\"]", key);
    long long id = strtoll(key, &end, 10);
    if (end == key || *end || id < 0)
      st = zz_error(ZZ_ERR_FORMAT, "%s: %s: the key must be an id >= 0", path[0], where);
    else
      st = zz_added_push(tok, v, id, path[0], where);
  }
  /* the named special tokens: special_tokens_map.json's over tokenizer_config.json's
   * (transformers' from_pretrained), GPT2Tokenizer's defaults where neither names
   * one, none where one says null */
  for (size_t k = 0; k <= sizeof zz_special_keys / sizeof zz_special_keys[0] && st == ZZ_OK; k++) {
    const char *name = k < sizeof zz_special_keys / sizeof zz_special_keys[0] ? zz_special_keys[k]
                                                                              : "additional_special_tokens";
    int f = file[1] && json_object_get(file[1], name) ? 1 : 0;
    v = file[f] ? json_object_get(file[f], name) : NULL;
    if (!v) {
      if (k < 3) {
        json_t *def = json_string(ZZ_GPT2_DEFAULT_SPECIAL);
        st = def ? zz_added_push(tok, def, -1, dir, name) : zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory", dir);
        json_decref(def);
      }
      continue;
    }
    if (json_is_null(v)) continue;
    if (strcmp(name, "additional_special_tokens") != 0) {
      st = zz_added_push(tok, v, -1, path[f], name);
      continue;
    }
    if (!json_is_array(v)) {
      st = zz_error(ZZ_ERR_FORMAT, "%s: additional_special_tokens must be an array", path[f]);
      continue;
    }
    size_t i;
    json_t *t;
    json_array_foreach(v, i, t) {
      char where[64];
      snprintf(where, sizeof where, "additional_special_tokens[%zu]", i);
      if (st == ZZ_OK) st = zz_added_push(tok, t, -1, path[f], where);
    }
  }
  json_decref(file[0]);
  json_decref(file[1]);
  return st;
}

zz_status zz_tok_added_ids(zz_tokenizer *tok, const char *path) {
  /* tokens with ids first, which may lie past the vocabulary; then each new one
   * takes the next id, as transformers' _add_tokens gives them */
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < tok->n_added; i++) {
      zz_tok_added *a = &tok->added[i];
      if ((a->id >= 0) != (pass == 0)) continue;
      const zz_tok_entry *e = zz_tok_find(tok, a->text, a->len);
      if (e && a->id >= 0 && e->id != a->id)
        return zz_error(ZZ_ERR_FORMAT, "%s: added token \"%.80s\" has id %d but the vocabulary gives it %d", path,
                        a->text, (int)a->id, (int)e->id);
      if (e) {
        a->id = e->id;
        continue;
      }
      if (a->id < 0) {
        if (tok->vocab_size >= INT32_MAX) return zz_error(ZZ_ERR_FORMAT, "%s: too many tokens", path);
        a->id = (int32_t)tok->vocab_size;
      }
      ZZ_CHECK(zz_tok_vocab_add(tok, a->text, a->len, a->id, false, path));
    }
  zz_tok_added_sort(tok);
  return ZZ_OK;
}
