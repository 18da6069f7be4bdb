/*
 * tokenizer_json.c — reads a Hugging Face tokenizer.json (the tokenizers library's
 * serialization) into a zz_tokenizer that encode.c and decode.c use; the
 * tokenizer_config.json beside it is read by tokenizer_config.c.
 *
 * What is understood (everything else is refused, naming the field and the file):
 *   model           BPE: vocab, merges ("a b" strings or [a, b] pairs), unk_token,
 *                   fuse_unk, byte_fallback, ignore_merges; no dropout, no
 *                   continuing_subword_prefix / end_of_word_suffix
 *   added_tokens    matched in the text before anything else, with the whitespace
 *                   before (lstrip) and after (rstrip) them; no single_word;
 *                   "normalized" ones only without a normalizer
 *   normalizer      null, NFC, Prepend, Replace (String pattern), Sequence of them
 *   pre_tokenizer   null; ByteLevel (use_regex: GPT-2's pattern; add_prefix_space);
 *                   Sequence [Split (a Regex pattern regex.c understands, Isolated), ByteLevel
 *                   (use_regex false)]; Metaspace (prepend_scheme, split)
 *   decoder         ByteLevel; Metaspace; Sequence [Replace..., ByteFallback, Fuse, Strip]
 *   post_processor  null, ByteLevel, TemplateProcessing (a special token before and/or
 *                   after $A), Sequence of them: the prompt's BOS / EOS
 *   truncation, padding: ignored (transformers turns them off unless asked)
 * tokenizer_config.json: for tokenizer_class LlamaTokenizer(Fast), add_bos_token
 * (default true) and add_eos_token (default false) replace the post-processor, as
 * LlamaTokenizerFast.update_post_processor does; added_tokens_decoder must agree
 * with tokenizer.json; the other keys are ignored (zz_tok_load_config says which).
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer_impl.h"

bool zz_tokenizer_has_json(const char *dir) {
  if (!dir) return false;
  char path[4200];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  return access(path, F_OK) == 0;
}

/* ================================================================ small readers */

/* The "type" of a component object, or NULL. */
static const char *zz_j_type(const json_t *o) { return json_string_value(json_object_get(o, "type")); }

zz_status zz_tok_json_bool(const json_t *o, const char *key, bool def, bool *out, const char *path, const char *where) {
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
  ZZ_CHECK(zz_tok_json_bool(model, "fuse_unk", false, &tok->fuse_unk, path, "model"));
  ZZ_CHECK(zz_tok_json_bool(model, "byte_fallback", false, &tok->byte_fallback, path, "model"));
  ZZ_CHECK(zz_tok_json_bool(model, "ignore_merges", false, &tok->ignore_merges, path, "model"));

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
    ZZ_CHECK(zz_tok_json_bool(v, "single_word", false, &flag, path, where));
    if (flag)
      return zz_error(ZZ_ERR_UNSUPPORTED, "%s: %s (\"%.80s\"): single_word true is not supported", path, where,
                      content);
    bool special = false;
    ZZ_CHECK(zz_tok_json_bool(v, "special", false, &special, path, where));
    zz_tok_added *a = &tok->added[tok->n_added];
    /* the library's default: special tokens are matched in the raw text */
    ZZ_CHECK(zz_tok_json_bool(v, "normalized", !special, &a->normalized, path, where));
    ZZ_CHECK(zz_tok_json_bool(v, "lstrip", false, &a->lstrip, path, where));
    ZZ_CHECK(zz_tok_json_bool(v, "rstrip", false, &a->rstrip, path, where));
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
  zz_tok_added_sort(tok);

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
    zz_tok_norm *step = &tok->norm[tok->n_norm++];
    zz_tok_replace *r = &step->replace;
    if (type && strcmp(type, "NFC") == 0) {
      step->nfc = true;
    } else if (type && strcmp(type, "Prepend") == 0) {
      const char *pre;
      st = zz_j_str(s, "prepend", &pre, path, "normalizer Prepend");
      if (st == ZZ_OK) st = zz_replace_set(r, NULL, pre, path);
    } else if (type && strcmp(type, "Replace") == 0) {
      st = zz_j_replace(s, r, path, "normalizer Replace");
    } else {
      st = zz_error(ZZ_ERR_UNSUPPORTED,
                    "%s: normalizer type \"%.40s\" is not supported (supported: NFC, Prepend, "
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
    ZZ_CHECK(zz_tok_json_bool(o, "add_prefix_space", true, &add, path, where));
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
    ZZ_CHECK(zz_tok_json_bool(s, "invert", false, &invert, path, "pre_tokenizer Split"));
    if (i != 0 || tok->split != ZZ_SPLIT_NONE)
      return zz_error(ZZ_ERR_UNSUPPORTED, "%s: pre_tokenizer: a Split is supported only as the first step", path);
    if (!pat || !behavior || strcmp(behavior, "Isolated") != 0 || invert)
      return zz_error(ZZ_ERR_UNSUPPORTED,
                      "%s: pre_tokenizer Split: only a Regex pattern with behavior "
                      "\"Isolated\" and invert false is supported",
                      path);
    char where[4200];
    snprintf(where, sizeof where, "%.4000s: pre_tokenizer Split", path);
    return zz_tok_set_split(tok, pat, where);
  }
  if (type && strcmp(type, "ByteLevel") == 0) {
    bool use_regex = false;
    ZZ_CHECK(zz_tok_json_bool(s, "use_regex", true, &use_regex, path, "pre_tokenizer ByteLevel"));
    ZZ_CHECK(zz_tok_json_bool(s, "add_prefix_space", false, &tok->prefix_space, path, "pre_tokenizer ByteLevel"));
    if (tok->byte_level || i + 1 != n)
      return zz_error(ZZ_ERR_UNSUPPORTED, "%s: pre_tokenizer: ByteLevel is supported only as the last step", path);
    if (tok->split != ZZ_SPLIT_NONE && (use_regex || tok->prefix_space))
      return zz_error(ZZ_ERR_UNSUPPORTED,
                      "%s: pre_tokenizer: ByteLevel after a Split needs use_regex and "
                      "add_prefix_space false",
                      path);
    if (use_regex) ZZ_CHECK(zz_tok_set_split(tok, NULL, path));
    tok->byte_level = true;
    return ZZ_OK;
  }
  if (type && strcmp(type, "Metaspace") == 0) {
    if (n != 1) return zz_error(ZZ_ERR_UNSUPPORTED, "%s: pre_tokenizer: Metaspace is supported only alone", path);
    tok->metaspace = true;
    ZZ_CHECK(zz_j_char(s, "replacement", tok->meta_rep, &tok->meta_rep_len, path, "pre_tokenizer Metaspace"));
    ZZ_CHECK(zz_json_prepend_scheme(s, &tok->meta_prepend, path, "pre_tokenizer Metaspace"));
    bool split = false;
    ZZ_CHECK(zz_tok_json_bool(s, "split", true, &split, path, "pre_tokenizer Metaspace"));
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
  if (st == ZZ_OK) st = zz_tok_load_config(tok, dir);
  if (st == ZZ_OK) st = zz_tok_finish(tok, path);
  json_decref(root);
  return st;
}
