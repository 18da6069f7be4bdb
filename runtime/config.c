/*
 * config.c — model configurations: the OPT presets and a Hugging Face config.json.
 */
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>

#include "zz_runtime.h"

typedef struct zz_preset {
  const char *name;
  int64_t hidden, n_layers, n_heads, ffn, embed_dim;
  bool pre_ln;
} zz_preset;

/* Sizes from the published OPT configs (Zhang et al., 2022). */
static const zz_preset zz_presets[] = {
    {"opt-125m", 768, 12, 12, 3072, 768, true},
    {"opt-350m", 1024, 24, 16, 4096, 512, false},
    {"opt-1.3b", 2048, 24, 32, 8192, 2048, true},
    {"opt-2.7b", 2560, 32, 32, 10240, 2560, true},
    {"opt-6.7b", 4096, 32, 32, 16384, 4096, true},
    {"opt-13b", 5120, 40, 40, 20480, 5120, true},
    {"opt-30b", 7168, 48, 56, 28672, 7168, true},
    {"opt-66b", 9216, 64, 72, 36864, 9216, true},
    {"opt-175b", 12288, 96, 96, 49152, 12288, true},
};
#define ZZ_N_PRESETS (sizeof zz_presets / sizeof zz_presets[0])

const char *const *zz_config_preset_names(void) {
  static const char *names[ZZ_N_PRESETS + 1];
  for (size_t i = 0; i < ZZ_N_PRESETS; i++) names[i] = zz_presets[i].name;
  return names;
}

static void zz_config_opt_defaults(zz_config *c) {
  memset(c, 0, sizeof *c);
  strcpy(c->model_type, "opt");
  c->vocab_size = 50272;
  c->max_pos = 2048;
  c->pre_ln = true;
  c->final_ln = true;
  c->enable_bias = true;
  c->bos = 2;
  c->eos = 2;
  c->pad = 1;
  c->ln_eps = 1e-5f;
  c->dtype = ZZ_DTYPE_F16;
}

zz_status zz_config_preset(const char *name, zz_config *out) {
  for (size_t i = 0; i < ZZ_N_PRESETS; i++) {
    const zz_preset *p = &zz_presets[i];
    if (strcasecmp(name, p->name) != 0 && !(strncasecmp(name, "facebook/", 9) == 0 &&
                                            strcasecmp(name + 9, p->name) == 0))
      continue;
    zz_config c;
    zz_config_opt_defaults(&c);
    snprintf(c.name, sizeof c.name, "%s", p->name);
    c.hidden = p->hidden;
    c.n_layers = p->n_layers;
    c.n_heads = p->n_heads;
    c.ffn = p->ffn;
    c.embed_dim = p->embed_dim;
    c.pre_ln = p->pre_ln;
    c.final_ln = p->pre_ln;
    *out = c;
    return ZZ_OK;
  }
  char list[512] = "";
  for (size_t i = 0; i < ZZ_N_PRESETS; i++) {
    strncat(list, i ? ", " : "", sizeof list - strlen(list) - 1);
    strncat(list, zz_presets[i].name, sizeof list - strlen(list) - 1);
  }
  return zz_error(ZZ_ERR_INVALID_ARG, "unknown model preset '%s' (known: %s)", name, list);
}

/* Reads an integer field; absent → default; wrong type → error naming the key. */
static zz_status zz_json_int(json_t *obj, const char *path, const char *key, int64_t def,
                             int64_t *out) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) {
    if (def < 0) return zz_error(ZZ_ERR_FORMAT, "%s: required key \"%s\" is missing", path, key);
    *out = def;
    return ZZ_OK;
  }
  if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (1ll << 40))
    return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" must be a non-negative integer", path, key);
  *out = json_integer_value(v);
  return ZZ_OK;
}

static zz_status zz_json_bool(json_t *obj, const char *path, const char *key, bool def,
                              bool *out) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) {
    *out = def;
    return ZZ_OK;
  }
  if (!json_is_boolean(v)) return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" must be true or false", path, key);
  *out = json_is_true(v);
  return ZZ_OK;
}

static zz_status zz_config_from_json(json_t *root, const char *path, zz_config *out) {
  if (!json_is_object(root)) return zz_error(ZZ_ERR_FORMAT, "%s: not a JSON object", path);
  const char *type = json_string_value(json_object_get(root, "model_type"));
  if (!type) return zz_error(ZZ_ERR_FORMAT, "%s: \"model_type\" is missing", path);
  if (strcmp(type, "opt") != 0)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: model_type \"%s\" is not supported (only \"opt\")",
                    path, type);
  zz_config c;
  zz_config_opt_defaults(&c);
  int64_t bos = 0, eos = 0, pad = 0;
  ZZ_CHECK(zz_json_int(root, path, "vocab_size", -1, &c.vocab_size));
  ZZ_CHECK(zz_json_int(root, path, "hidden_size", -1, &c.hidden));
  ZZ_CHECK(zz_json_int(root, path, "ffn_dim", -1, &c.ffn));
  ZZ_CHECK(zz_json_int(root, path, "num_hidden_layers", -1, &c.n_layers));
  ZZ_CHECK(zz_json_int(root, path, "num_attention_heads", -1, &c.n_heads));
  ZZ_CHECK(zz_json_int(root, path, "max_position_embeddings", 2048, &c.max_pos));
  ZZ_CHECK(zz_json_int(root, path, "word_embed_proj_dim", c.hidden, &c.embed_dim));
  ZZ_CHECK(zz_json_int(root, path, "bos_token_id", 2, &bos));
  ZZ_CHECK(zz_json_int(root, path, "eos_token_id", 2, &eos));
  ZZ_CHECK(zz_json_int(root, path, "pad_token_id", 1, &pad));
  ZZ_CHECK(zz_json_bool(root, path, "do_layer_norm_before", true, &c.pre_ln));
  bool remove_final = false, affine = true;
  ZZ_CHECK(zz_json_bool(root, path, "_remove_final_layer_norm", false, &remove_final));
  ZZ_CHECK(zz_json_bool(root, path, "enable_bias", true, &c.enable_bias));
  ZZ_CHECK(zz_json_bool(root, path, "layer_norm_elementwise_affine", true, &affine));
  if (!affine)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: layer_norm_elementwise_affine=false is not supported", path);
  c.final_ln = c.pre_ln && !remove_final;
  const char *act = json_string_value(json_object_get(root, "activation_function"));
  if (act && strcmp(act, "relu") != 0)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: activation_function \"%s\" is not supported", path, act);
  const char *dt = json_string_value(json_object_get(root, "torch_dtype"));
  if (!dt || strcmp(dt, "float32") == 0)
    c.dtype = ZZ_DTYPE_F32;
  else if (strcmp(dt, "float16") == 0)
    c.dtype = ZZ_DTYPE_F16;
  else if (strcmp(dt, "bfloat16") == 0)
    c.dtype = ZZ_DTYPE_BF16;
  else
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: torch_dtype \"%s\" is not supported", path, dt);
  if (c.vocab_size < 4 || c.hidden < 1 || c.ffn < 1 || c.n_layers < 1 || c.n_heads < 1 ||
      c.embed_dim < 1 || c.max_pos < 1)
    return zz_error(ZZ_ERR_FORMAT, "%s: sizes must be positive", path);
  /* far beyond any published model: a lying config, not a big model */
  if (c.vocab_size > ZZ_MAX_VOCAB || c.hidden > (1 << 20) || c.ffn > (1 << 22) || c.n_layers > 4096 ||
      c.n_heads > c.hidden || c.embed_dim > (1 << 20) || c.max_pos > ZZ_MAX_POSITIONS)
    return zz_error(ZZ_ERR_FORMAT, "%s: sizes out of range (vocab %lld, hidden %lld, ffn %lld, layers %lld, heads %lld)",
                    path, (long long)c.vocab_size, (long long)c.hidden, (long long)c.ffn, (long long)c.n_layers,
                    (long long)c.n_heads);
  if (c.hidden % c.n_heads != 0)
    return zz_error(ZZ_ERR_FORMAT, "%s: hidden_size %lld is not a multiple of num_attention_heads %lld",
                    path, (long long)c.hidden, (long long)c.n_heads);
  if (bos >= c.vocab_size || eos >= c.vocab_size || pad >= c.vocab_size)
    return zz_error(ZZ_ERR_FORMAT, "%s: special token ids must be below vocab_size", path);
  c.bos = (int32_t)bos;
  c.eos = (int32_t)eos;
  c.pad = (int32_t)pad;
  *out = c;
  return ZZ_OK;
}

zz_status zz_config_load(const char *dir, zz_config *out) {
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  json_error_t err;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
  if (!root) {
    struct stat st;
    if (stat(path, &st) != 0) return zz_error(ZZ_ERR_IO, "%s: cannot open (no such file)", path);
    return zz_error(ZZ_ERR_FORMAT, "%s:%d:%d: %s", path, err.line, err.column, err.text);
  }
  zz_config c;
  zz_status st = zz_config_from_json(root, path, &c);
  json_decref(root);
  if (st != ZZ_OK) return st;
  snprintf(c.name, sizeof c.name, "%s", dir);
  *out = c;
  return ZZ_OK;
}

zz_status zz_config_resolve(const char *model, zz_config *out) {
  struct stat st;
  if (stat(model, &st) == 0 && S_ISDIR(st.st_mode)) return zz_config_load(model, out);
  zz_status s = zz_config_preset(model, out);
  if (s != ZZ_OK && strchr(model, '/'))
    return zz_error(ZZ_ERR_IO, "--model %s: no such directory, and not a preset name", model);
  return s;
}
