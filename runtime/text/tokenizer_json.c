/*
 * tokenizer_json.c — reads a Hugging Face tokenizer.json (the tokenizers library's
 * serialization) and the tokenizer_config.json beside it into a zz_tokenizer that
 * tokenizer.c encodes and decodes.
 *
 * What is understood (everything else is refused, naming the field and the file):
 *   model           BPE: vocab, merges ("a b" strings or [a, b] pairs), unk_token,
 *                   fuse_unk, byte_fallback, ignore_merges; no dropout, no
 *                   continuing_subword_prefix / end_of_word_suffix
 *   added_tokens    matched in the text before anything else; no lstrip, rstrip,
 *                   single_word; "normalized" ones only without a normalizer
 *   normalizer      null, Prepend, Replace (String pattern), Sequence of them
 *   pre_tokenizer   null; ByteLevel (use_regex: GPT-2's pattern; add_prefix_space);
 *                   Sequence [Split (GPT-2's or LLaMA-3's pattern, Isolated), ByteLevel
 *                   (use_regex false)]; Metaspace (prepend_scheme, split)
 *   decoder         ByteLevel; Metaspace; Sequence [Replace..., ByteFallback, Fuse, Strip]
 *   post_processor  null, ByteLevel, TemplateProcessing (a special token before and/or
 *                   after $A), Sequence of them: the prompt's BOS / EOS
 *   truncation, padding: ignored (transformers turns them off unless asked)
 * tokenizer_config.json: for tokenizer_class LlamaTokenizer(Fast), add_bos_token
 * (default true) and add_eos_token (default false) replace the post-processor, as
 * LlamaTokenizerFast.update_post_processor does; added_tokens_decoder must agree
 * with tokenizer.json; the other keys are ignored (zz_json_config says which).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer_impl.h"
#include "zz_hf_json.h" /* zz_json_load_hf: the reading of Hugging Face's JSON files */

/* The two split patterns the pre-tokenizer matches by hand (tokenizer.c). */
static const char zz_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char zz_llama3_pattern[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

bool zz_tokenizer_has_json(const char *dir) {
  if (!dir) return false;
  char path[4200];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  return access(path, F_OK) == 0;
}

/* ================================================================ small readers */

/* The "type" of a component object, or NULL. */
static const char *zz_j_type(const json_t *o) { return json_string_value(json_object_get(o, "type")); }

/* A bool member: absent or null gives def; another type is an error. */
static zz_status zz_j_bool(const json_t *o, const char *key, bool def, bool *out, const char *path, const char *where) {
  json_t *v = json_object_get(o, key);
  if (!v || json_is_null(v)) {
    *out = def;
    return ZZ_OK;
  }
  if (!json_is_boolean(v)) return zz_error(ZZ_ERR_FORMAT, "%s: %s.%s must be true or false", path, where, key);
  *out = json_is_true(v);
  return ZZ_OK;
}

/* A string member that must be there. */
static zz_status zz_j_str(const json_t *o, const char *key, const char **out, const char *path, const char *where) {
  *out = json_string_value(json_object_get(o, key));
  if (!*out) return zz_error(ZZ_ERR_FORMAT, "%s: %s.%s must be a string", path, where, key);
  return ZZ_OK;
}

/* One UTF-8 character of at most 4 bytes (Metaspace's replacement, Strip's content). */
static zz_status zz_j_char(const json_t *o, const char *key, char out[5], size_t *len, const char *path,
                           const char *where) {
  const char *s;
  ZZ_CHECK(zz_j_str(o, key, &s, path, where));
  uint32_t cp;
  size_t n = strlen(s);
  size_t k = n ? zz_utf8_next((const uint8_t *)s, n, &cp) : 0;
  if (k == 0 || k != n)
    return zz_error(ZZ_ERR_FORMAT, "%s: %s.%s must be one character, got \"%.40s\"", path, where, key, s);
  memcpy(out, s, n + 1);
  *len = n;
  return ZZ_OK;
}

static zz_status zz_replace_set(zz_tok_replace *r, const char *from, const char *to, const char *path) {
  r->from = from ? strdup(from) : NULL;
  r->to = strdup(to);
  r->from_len = from ? strlen(from) : 0;
  r->to_len = strlen(to);
  if ((from && !r->from) || !r->to) return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory", path);
  return ZZ_OK;
}

/* A Replace step (normalizer or decoder): {"pattern": {"String": s}, "content": c}. */
static zz_status zz_j_replace(const json_t *o, zz_tok_replace *r, const char *path, const char *where) {
  json_t *pat = json_object_get(o, "pattern");
  const char *from = json_string_value(json_object_get(pat, "String"));
  if (!from) {
    if (json_object_get(pat, "Regex"))
      return zz_error(ZZ_ERR_UNSUPPORTED, "%s: %s: Replace with a Regex pattern is not supported (only a String)", path,
                      where);
    return zz_error(ZZ_ERR_FORMAT, "%s: %s.pattern must be {\"String\": ...}", path, where);
  }
  if (!from[0]) return zz_error(ZZ_ERR_FORMAT, "%s: %s.pattern is an empty string", path, where);
  const char *to;
  ZZ_CHECK(zz_j_str(o, "content", &to, path, where));
  return zz_replace_set(r, from, to, path);
}

/* The members of a Sequence component (key: "normalizers", "pretokenizers",
 * "decoders", "processors"), or the component alone. */
static zz_status zz_j_steps(const json_t *o, const char *key, json_t **list_out, const char *path, const char *where) {
  const char *type = zz_j_type(o);
  if (!type) return zz_error(ZZ_ERR_FORMAT, "%s: %s must be null or an object with a \"type\"", path, where);
  if (strcmp(type, "Sequence") != 0) {
    *list_out = json_pack("[O]", o);
  } else {
    json_t *l = json_object_get(o, key);
    if (!json_is_array(l)) return zz_error(ZZ_ERR_FORMAT, "%s: %s.%s must be an array", path, where, key);
    *list_out = json_incref(l);
  }
  if (!*list_out) return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory", path);
  if (json_array_size(*list_out) > ZZ_TOK_MAX_STEPS) {
    json_decref(*list_out);
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: %s has more than %d steps", path, where, ZZ_TOK_MAX_STEPS);
  }
  return ZZ_OK;
}

/* ================================================================ model */

static zz_status zz_json_merges(zz_tokenizer *tok, const json_t *merges, const char *path) {
  if (!json_is_array(merges)) return zz_error(ZZ_ERR_FORMAT, "%s: model.merges must be an array", path);
  ZZ_CHECK(zz_tok_merges_alloc(tok, json_array_size(merges), path));
  size_t i;
  json_t *m;
  json_array_foreach(merges, i, m) {
    char where[4200];
    snprintf(where, sizeof where, "%.4000s: model.merges[%zu]", path, i);
    const char *a, *b;
    size_t a_len, b_len;
    if (json_is_string(m)) { /* "a b" */
      const char *s = json_string_value(m);
      const char *sp = strchr(s, ' ');
      if (!sp || sp == s || !sp[1] || strchr(sp + 1, ' '))
        return zz_error(ZZ_ERR_FORMAT, "%s: expected two tokens separated by one space, got \"%.80s\"", where, s);
      a = s;
      a_len = (size_t)(sp - s);
      b = sp + 1;
      b_len = strlen(b);
    } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
               json_is_string(json_array_get(m, 1))) { /* ["a", "b"] */
      a = json_string_value(json_array_get(m, 0));
      b = json_string_value(json_array_get(m, 1));
      a_len = json_string_length(json_array_get(m, 0));
      b_len = json_string_length(json_array_get(m, 1));
    } else {
      return zz_error(ZZ_ERR_FORMAT, "%s: a merge must be \"a b\" or [\"a\", \"b\"]", where);
    }
    ZZ_CHECK(zz_tok_merge_add(tok, a, a_len, b, b_len, where));
  }
  return ZZ_OK;
}

static int zz_added_cmp(const void *pa, const void *pb) {
  const zz_tok_added *a = pa, *b = pb;
  if (a->len != b->len) return a->len > b->len ? -1 : 1;
  return a->id < b->id ? -1 : a->id > b->id;
}

/* The vocabulary (model.vocab, then the added tokens not in it), the merges and
 * the BPE options. */
static zz_status zz_json_model(zz_tokenizer *tok, const json_t *root, const char *path) {
  json_t *model = json_object_get(root, "model");
  if (!json_is_object(model)) return zz_error(ZZ_ERR_FORMAT, "%s: \"model\" must be an object", path);
  const char *type = zz_j_type(model);
  if (type && strcmp(type, "BPE") != 0)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: model.type \"%.40s\" is not supported (only BPE)", path, type);
  json_t *dropout = json_object_get(model, "dropout");
  if (dropout && !json_is_null(dropout) && !(json_is_number(dropout) && json_number_value(dropout) == 0))
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: model.dropout is not supported (must be null)", path);
  static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 2; i++) {
    json_t *v = json_object_get(model, affixes[i]);
    if (v && !json_is_null(v) && !(json_is_string(v) && !json_string_value(v)[0]))
      return zz_error(ZZ_ERR_UNSUPPORTED, "%s: model.%s is not supported (must be null)", path, affixes[i]);
  }
  ZZ_CHECK(zz_j_bool(model, "fuse_unk", false, &tok->fuse_unk, path, "model"));
  ZZ_CHECK(zz_j_bool(model, "byte_fallback", false, &tok->byte_fallback, path, "model"));
  ZZ_CHECK(zz_j_bool(model, "ignore_merges", false, &tok->ignore_merges, path, "model"));

  json_t *vocab = json_object_get(model, "vocab");
  if (!json_is_object(vocab)) return zz_error(ZZ_ERR_FORMAT, "%s: model.vocab must be an object", path);
  json_t *added = json_object_get(root, "added_tokens");
  if (added && !json_is_null(added) && !json_is_array(added))
    return zz_error(ZZ_ERR_FORMAT, "%s: added_tokens must be an array", path);
  size_t n_added = json_is_array(added) ? json_array_size(added) : 0;
  size_t pool = 0;
  const char *key;
  json_t *v;
  json_object_foreach(vocab, key, v) pool += strlen(key) + 1;
  size_t i;
  json_array_foreach(added, i, v) pool += json_string_length(json_object_get(v, "content")) + 1;
  ZZ_CHECK(zz_tok_vocab_alloc(tok, json_object_size(vocab) + n_added, pool, path));
  json_object_foreach(vocab, key, v) {
    if (!json_is_integer(v))
      return zz_error(ZZ_ERR_FORMAT, "%s: model.vocab \"%.80s\": the id must be an integer", path, key);
    ZZ_CHECK(zz_tok_vocab_add(tok, key, strlen(key), json_integer_value(v), true, path));
  }

  tok->added = calloc(n_added ? n_added : 1, sizeof *tok->added);
  if (!tok->added) return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory", path);
  json_array_foreach(added, i, v) {
    char where[64];
    snprintf(where, sizeof where, "added_tokens[%zu]", i);
    json_t *jid = json_object_get(v, "id");
    const char *content = json_string_value(json_object_get(v, "content"));
    size_t len = json_string_length(json_object_get(v, "content"));
    if (!json_is_integer(jid) || !content || !len || strlen(content) != len)
      return zz_error(ZZ_ERR_FORMAT, "%s: %s needs an integer \"id\" and a non-empty \"content\"", path, where);
    bool flag = false;
    static const char *const unsupported[] = {"lstrip", "rstrip", "single_word"};
    for (int k = 0; k < 3; k++) {
      ZZ_CHECK(zz_j_bool(v, unsupported[k], false, &flag, path, where));
      if (flag)
        return zz_error(ZZ_ERR_UNSUPPORTED, "%s: %s (\"%.80s\"): %s true is not supported", path, where, content,
                        unsupported[k]);
    }
    bool special = false;
    ZZ_CHECK(zz_j_bool(v, "special", false, &special, path, where));
    zz_tok_added *a = &tok->added[tok->n_added];
    /* the library's default: special tokens are matched in the raw text */
    ZZ_CHECK(zz_j_bool(v, "normalized", !special, &a->normalized, path, where));
    json_int_t id = json_integer_value(jid);
    const zz_tok_entry *in_vocab = zz_tok_find(tok, content, len);
    if (in_vocab && in_vocab->id != id)
      return zz_error(ZZ_ERR_FORMAT, "%s: %s \"%.80s\" has id %lld but model.vocab gives it %d", path, where, content,
                      (long long)id, (int)in_vocab->id);
    if (!in_vocab) ZZ_CHECK(zz_tok_vocab_add(tok, content, len, id, false, path));
    a->text = strdup(content);
    if (!a->text) return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory", path);
    a->len = len;
    a->id = (int32_t)id;
    tok->n_added++;
  }
  qsort(tok->added, (size_t)tok->n_added, sizeof *tok->added, zz_added_cmp);

  ZZ_CHECK(zz_json_merges(tok, json_object_get(model, "merges"), path));

  tok->unk_id = -1;
  json_t *unk = json_object_get(model, "unk_token");
  if (unk && !json_is_null(unk)) {
    const zz_tok_entry *e = json_is_string(unk) ? zz_tok_find(tok, json_string_value(unk), json_string_length(unk))
                                                : NULL;
    if (!e) return zz_error(ZZ_ERR_FORMAT, "%s: model.unk_token must be a token of model.vocab", path);
    tok->unk_id = e->id;
  }
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", b);
    const zz_tok_entry *e = zz_tok_find(tok, name, 6);
    tok->fallback_id[b] = e ? e->id : -1;
  }
  return ZZ_OK;
}

/* ================================================================ normalizer, pre-tokenizer */

static zz_status zz_json_normalizer(zz_tokenizer *tok, const json_t *root, const char *path) {
  json_t *norm = json_object_get(root, "normalizer");
  if (!norm || json_is_null(norm)) return ZZ_OK;
  json_t *steps;
  ZZ_CHECK(zz_j_steps(norm, "normalizers", &steps, path, "normalizer"));
  zz_status st = ZZ_OK;
  size_t i;
  json_t *s;
  json_array_foreach(steps, i, s) {
    const char *type = zz_j_type(s);
    zz_tok_replace *r = &tok->norm[tok->n_norm++];
    if (type && strcmp(type, "Prepend") == 0) {
      const char *pre;
      st = zz_j_str(s, "prepend", &pre, path, "normalizer Prepend");
      if (st == ZZ_OK) st = zz_replace_set(r, NULL, pre, path);
    } else if (type && strcmp(type, "Replace") == 0) {
      st = zz_j_replace(s, r, path, "normalizer Replace");
    } else {
      st = zz_error(ZZ_ERR_UNSUPPORTED,
                    "%s: normalizer type \"%.40s\" is not supported (supported: Prepend, "
                    "Replace with a String pattern, a Sequence of them)",
                    path, type ? type : "(none)");
    }
    if (st != ZZ_OK) break;
  }
  json_decref(steps);
  return st;
}

static zz_status zz_json_prepend_scheme(const json_t *o, zz_tok_prepend *out, const char *path, const char *where) {
  const char *scheme = json_string_value(json_object_get(o, "prepend_scheme"));
  if (!scheme) { /* files before tokenizers 0.14 say add_prefix_space */
    bool add = true;
    ZZ_CHECK(zz_j_bool(o, "add_prefix_space", true, &add, path, where));
    *out = add ? ZZ_PREPEND_ALWAYS : ZZ_PREPEND_NEVER;
  } else if (strcmp(scheme, "always") == 0) {
    *out = ZZ_PREPEND_ALWAYS;
  } else if (strcmp(scheme, "first") == 0) {
    *out = ZZ_PREPEND_FIRST;
  } else if (strcmp(scheme, "never") == 0) {
    *out = ZZ_PREPEND_NEVER;
  } else {
    return zz_error(ZZ_ERR_FORMAT, "%s: %s.prepend_scheme \"%.40s\" is not always, first or never", path, where,
                    scheme);
  }
  return ZZ_OK;
}

static zz_status zz_json_pre_step(zz_tokenizer *tok, const json_t *s, size_t i, size_t n, const char *path) {
  const char *type = zz_j_type(s);
  if (type && strcmp(type, "Split") == 0) {
    const char *pat = json_string_value(json_object_get(json_object_get(s, "pattern"), "Regex"));
    const char *behavior = json_string_value(json_object_get(s, "behavior"));
    bool invert = false;
    ZZ_CHECK(zz_j_bool(s, "invert", false, &invert, path, "pre_tokenizer Split"));
    if (i != 0 || tok->split != ZZ_SPLIT_NONE)
      return zz_error(ZZ_ERR_UNSUPPORTED, "%s: pre_tokenizer: a Split is supported only as the first step", path);
    if (!pat || !behavior || strcmp(behavior, "Isolated") != 0 || invert)
      return zz_error(ZZ_ERR_UNSUPPORTED,
                      "%s: pre_tokenizer Split: only a Regex pattern with behavior "
                      "\"Isolated\" and invert false is supported",
                      path);
    if (strcmp(pat, zz_llama3_pattern) == 0) tok->split = ZZ_SPLIT_LLAMA3;
    else if (strcmp(pat, zz_gpt2_pattern) == 0)
      tok->split = ZZ_SPLIT_GPT2;
    else
      return zz_error(ZZ_ERR_UNSUPPORTED,
                      "%s: pre_tokenizer Split pattern \"%.120s\" is not supported (only "
                      "GPT-2's and LLaMA-3's patterns)",
                      path, pat);
    return ZZ_OK;
  }
  if (type && strcmp(type, "ByteLevel") == 0) {
    bool use_regex = false;
    ZZ_CHECK(zz_j_bool(s, "use_regex", true, &use_regex, path, "pre_tokenizer ByteLevel"));
    ZZ_CHECK(zz_j_bool(s, "add_prefix_space", false, &tok->prefix_space, path, "pre_tokenizer ByteLevel"));
    if (tok->byte_level || i + 1 != n)
      return zz_error(ZZ_ERR_UNSUPPORTED, "%s: pre_tokenizer: ByteLevel is supported only as the last step", path);
    if (tok->split != ZZ_SPLIT_NONE && (use_regex || tok->prefix_space))
      return zz_error(ZZ_ERR_UNSUPPORTED,
                      "%s: pre_tokenizer: ByteLevel after a Split needs use_regex and "
                      "add_prefix_space false",
                      path);
    if (use_regex) tok->split = ZZ_SPLIT_GPT2;
    tok->byte_level = true;
    return ZZ_OK;
  }
  if (type && strcmp(type, "Metaspace") == 0) {
    if (n != 1) return zz_error(ZZ_ERR_UNSUPPORTED, "%s: pre_tokenizer: Metaspace is supported only alone", path);
    tok->metaspace = true;
    ZZ_CHECK(zz_j_char(s, "replacement", tok->meta_rep, &tok->meta_rep_len, path, "pre_tokenizer Metaspace"));
    ZZ_CHECK(zz_json_prepend_scheme(s, &tok->meta_prepend, path, "pre_tokenizer Metaspace"));
    bool split = false;
    ZZ_CHECK(zz_j_bool(s, "split", true, &split, path, "pre_tokenizer Metaspace"));
    if (split) tok->split = ZZ_SPLIT_META;
    return ZZ_OK;
  }
  return zz_error(ZZ_ERR_UNSUPPORTED,
                  "%s: pre_tokenizer type \"%.40s\" is not supported (supported: ByteLevel, "
                  "Metaspace, Sequence [Split, ByteLevel])",
                  path, type ? type : "(none)");
}

static zz_status zz_json_pre_tokenizer(zz_tokenizer *tok, const json_t *root, const char *path) {
  json_t *pre = json_object_get(root, "pre_tokenizer");
  if (!pre || json_is_null(pre)) return ZZ_OK;
  json_t *steps;
  ZZ_CHECK(zz_j_steps(pre, "pretokenizers", &steps, path, "pre_tokenizer"));
  zz_status st = ZZ_OK;
  size_t i, n = json_array_size(steps);
  json_t *s;
  json_array_foreach(steps, i, s) {
    st = zz_json_pre_step(tok, s, i, n, path);
    if (st != ZZ_OK) break;
  }
  json_decref(steps);
  return st;
}

/* ================================================================ decoder, post-processor */

static zz_status zz_json_decoder(zz_tokenizer *tok, const json_t *root, const char *path) {
  json_t *dec = json_object_get(root, "decoder");
  if (!dec || json_is_null(dec))
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: decoder is null (tokens joined by spaces); not supported", path);
  json_t *steps;
  ZZ_CHECK(zz_j_steps(dec, "decoders", &steps, path, "decoder"));
  zz_status st = ZZ_OK;
  size_t i, n = json_array_size(steps);
  json_t *s;
  enum { REPLACE, FALLBACK, FUSE, STRIP, DONE } at = REPLACE; /* the order the steps must come in */
  tok->decoder = ZZ_DEC_PIECES;
  json_array_foreach(steps, i, s) {
    const char *type = zz_j_type(s);
    const char *t = type ? type : "(none)";
    if ((strcmp(t, "ByteLevel") == 0 || strcmp(t, "Metaspace") == 0) && n == 1) {
      if (t[0] == 'B') {
        tok->decoder = ZZ_DEC_BYTE_LEVEL;
        break;
      }
      tok->decoder = ZZ_DEC_METASPACE;
      char rep[5];
      size_t rep_len;
      zz_tok_prepend scheme;
      st = zz_j_char(s, "replacement", rep, &rep_len, path, "decoder Metaspace");
      if (st == ZZ_OK) st = zz_json_prepend_scheme(s, &scheme, path, "decoder Metaspace");
      if (st != ZZ_OK) break;
      if (tok->metaspace && strcmp(rep, tok->meta_rep) != 0) {
        st = zz_error(ZZ_ERR_UNSUPPORTED, "%s: decoder Metaspace replacement differs from the pre_tokenizer's", path);
        break;
      }
      memcpy(tok->meta_rep, rep, sizeof rep);
      tok->meta_rep_len = rep_len;
      tok->meta_dec_first = scheme != ZZ_PREPEND_NEVER;
      break;
    }
    if (strcmp(t, "Replace") == 0 && at == REPLACE) {
      st = zz_j_replace(s, &tok->dec_rep[tok->n_dec_rep++], path, "decoder Replace");
    } else if (strcmp(t, "ByteFallback") == 0 && at <= FALLBACK) {
      tok->dec_byte_fallback = true;
      at = FUSE;
    } else if (strcmp(t, "Fuse") == 0 && at <= FUSE) {
      at = STRIP;
    } else if (strcmp(t, "Strip") == 0 && at == STRIP) {
      st = zz_j_char(s, "content", tok->strip, &tok->strip_len, path, "decoder Strip");
      json_t *a = json_object_get(s, "start"), *b = json_object_get(s, "stop");
      if (st == ZZ_OK && (!json_is_integer(a) || !json_is_integer(b) || json_integer_value(a) < 0 ||
                          json_integer_value(b) < 0 || json_integer_value(a) > 64 || json_integer_value(b) > 64))
        st = zz_error(ZZ_ERR_FORMAT, "%s: decoder Strip needs start and stop in [0, 64]", path);
      if (st == ZZ_OK) {
        tok->strip_start = (int)json_integer_value(a);
        tok->strip_stop = (int)json_integer_value(b);
      }
      at = DONE;
    } else {
      st = zz_error(ZZ_ERR_UNSUPPORTED,
                    "%s: decoder step %zu (\"%.40s\") is not supported here (supported: "
                    "ByteLevel, Metaspace, or Sequence [Replace..., ByteFallback, Fuse, Strip] in that order)",
                    path, i, t);
    }
    if (st != ZZ_OK) break;
  }
  json_decref(steps);
  return st;
}

/* The id of a special token named by the post-processor. */
static zz_status zz_template_id(const json_t *pp, const json_t *item, int32_t *id, const char *path) {
  const char *name = json_string_value(json_object_get(json_object_get(item, "SpecialToken"), "id"));
  json_t *ids = json_object_get(json_object_get(json_object_get(pp, "special_tokens"), name ? name : ""), "ids");
  if (!name || !json_is_array(ids) || json_array_size(ids) != 1 || !json_is_integer(json_array_get(ids, 0)))
    return zz_error(ZZ_ERR_UNSUPPORTED,
                    "%s: post_processor TemplateProcessing: special token \"%.80s\" needs "
                    "exactly one id in special_tokens",
                    path, name ? name : "(none)");
  json_int_t v = json_integer_value(json_array_get(ids, 0));
  if (v < 0 || v > INT32_MAX)
    return zz_error(ZZ_ERR_FORMAT, "%s: post_processor: special token \"%.80s\" has id %lld", path, name, (long long)v);
  *id = (int32_t)v;
  return ZZ_OK;
}

static zz_status zz_json_template(zz_tokenizer *tok, const json_t *pp, const char *path) {
  json_t *single = json_object_get(pp, "single");
  if (!json_is_array(single))
    return zz_error(ZZ_ERR_FORMAT, "%s: post_processor TemplateProcessing: \"single\" must be an array", path);
  int seen_a = 0;
  size_t i;
  json_t *item;
  json_array_foreach(single, i, item) {
    json_t *seq = json_object_get(item, "Sequence");
    if (seq) {
      const char *which = json_string_value(json_object_get(seq, "id"));
      if (!which || strcmp(which, "A") != 0 || seen_a++)
        return zz_error(ZZ_ERR_UNSUPPORTED, "%s: post_processor TemplateProcessing: \"single\" must hold $A once",
                        path);
      continue;
    }
    int32_t *slot = seen_a ? &tok->eos_id : &tok->bos_id;
    if (*slot >= 0)
      return zz_error(ZZ_ERR_UNSUPPORTED,
                      "%s: post_processor TemplateProcessing: at most one special token "
                      "before and one after $A",
                      path);
    ZZ_CHECK(zz_template_id(pp, item, slot, path));
  }
  if (!seen_a) return zz_error(ZZ_ERR_UNSUPPORTED, "%s: post_processor TemplateProcessing: \"single\" has no $A", path);
  return ZZ_OK;
}

static zz_status zz_json_post_processor(zz_tokenizer *tok, const json_t *root, const char *path) {
  json_t *pp = json_object_get(root, "post_processor");
  if (!pp || json_is_null(pp)) return ZZ_OK;
  json_t *steps;
  ZZ_CHECK(zz_j_steps(pp, "processors", &steps, path, "post_processor"));
  zz_status st = ZZ_OK;
  size_t i;
  json_t *s;
  json_array_foreach(steps, i, s) {
    const char *type = zz_j_type(s);
    if (type && strcmp(type, "ByteLevel") == 0) continue; /* offsets only */
    if (type && strcmp(type, "TemplateProcessing") == 0) {
      st = zz_json_template(tok, s, path);
    } else {
      st = zz_error(ZZ_ERR_UNSUPPORTED,
                    "%s: post_processor type \"%.40s\" is not supported (supported: "
                    "ByteLevel, TemplateProcessing, a Sequence of them)",
                    path, type ? type : "(none)");
    }
    if (st != ZZ_OK) break;
  }
  json_decref(steps);
  return st;
}

/* ================================================================ tokenizer_config.json */

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
static zz_status zz_json_config(zz_tokenizer *tok, const char *dir) {
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
      st = zz_j_bool(cfg, keys[k], k == 0, &add[k], path, "tokenizer_config");
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
      ZZ_CHECK(zz_j_bool(v, unsupported[k], false, &flag, path, where));
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
  qsort(tok->added, (size_t)tok->n_added, sizeof *tok->added, zz_added_cmp);
  return ZZ_OK;
}

/* ================================================================ loading */

zz_status zz_tok_load_json(zz_tokenizer *tok, const char *dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  json_error_t jerr;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) return zz_error(ZZ_ERR_FORMAT, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
  tok->json = true;
  tok->unk_id = tok->bos_id = tok->eos_id = -1;
  zz_status st = ZZ_OK;
  if (!json_is_object(root)) st = zz_error(ZZ_ERR_FORMAT, "%s: expected a JSON object", path);
  if (st == ZZ_OK) st = zz_json_model(tok, root, path);
  if (st == ZZ_OK) st = zz_json_normalizer(tok, root, path);
  if (st == ZZ_OK) st = zz_json_pre_tokenizer(tok, root, path);
  if (st == ZZ_OK && tok->n_norm > 0)
    for (int i = 0; i < tok->n_added; i++)
      if (tok->added[i].normalized) {
        st = zz_error(ZZ_ERR_UNSUPPORTED,
                      "%s: added token \"%.80s\" is \"normalized\": true beside a "
                      "normalizer; not supported",
                      path, tok->added[i].text);
        break;
      }
  if (st == ZZ_OK) st = zz_json_decoder(tok, root, path);
  if (st == ZZ_OK) st = zz_json_post_processor(tok, root, path);
  if (st == ZZ_OK) st = zz_json_config(tok, dir);
  if (st == ZZ_OK) st = zz_tok_finish(tok, path);
  json_decref(root);
  return st;
}
