/*
 * config.c — model configurations: the presets of every architecture and a Hugging
 * Face config.json, whose model_type picks the architecture that reads it.
 */
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "arch_impl.h"

const char *const *zz_config_preset_names(void) {
  static const char *names[64];
  static int n = -1;
  if (n < 0) {
    n = 0;
    for (const zz_arch *const *a = zz_arch_all(); *a; a++)
      for (int i = 0; (*a)->preset_name(i) && n < 63; i++) names[n++] = (*a)->preset_name(i);
    names[n] = NULL;
  }
  return names;
}

zz_status zz_config_preset(const char *name, zz_config *out) {
  for (const zz_arch *const *a = zz_arch_all(); *a; a++) {
    zz_config c;
    if ((*a)->preset(name, &c)) {
      *out = c;
      return ZZ_OK;
    }
  }
  char list[512] = "";
  for (const char *const *p = zz_config_preset_names(); *p; p++) {
    size_t used = strlen(list);
    snprintf(list + used, sizeof list - used, "%s%s", p == zz_config_preset_names() ? "" : ", ", *p);
  }
  return zz_error(ZZ_ERR_INVALID_ARG, "unknown model preset '%s' (known: %s)", name, list);
}

/* ================================================================ Hugging Face JSON files */

/* Every number is read as a double: real directories carry integers past int64
 * (tokenizer_config.json's model_max_length sentinel 1000000000000000019884624838656,
 * which jansson's integer parser refuses as "too big"), and integers written as
 * reals (4096.0). The readers below then hold each key to its own range, exact
 * for every integer up to 2^53 (far above any bound here). */
zz_status zz_json_load_hf(const char *path, bool required, json_t **out) {
  *out = NULL;
  struct stat st;
  if (stat(path, &st) != 0) {
    if (!required) return ZZ_OK;
    return zz_error(ZZ_ERR_IO, "%s: cannot open (no such file)", path);
  }
  if (!S_ISREG(st.st_mode)) return zz_error(ZZ_ERR_IO, "%s: not a regular file", path);
  json_error_t err;
  json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &err);
  if (!root) return zz_error(ZZ_ERR_FORMAT, "%s:%d:%d: %s", path, err.line, err.column, err.text);
  if (!json_is_object(root)) {
    json_decref(root);
    return zz_error(ZZ_ERR_FORMAT, "%s: not a JSON object", path);
  }
  *out = root;
  return ZZ_OK;
}

/* v as an integer in [lo, hi]: an integer, or a real with no fraction. */
static bool zz_json_int_value(const json_t *v, int64_t lo, int64_t hi, int64_t *out) {
  if (!json_is_number(v)) return false;
  double x = json_number_value(v);
  if (!(x >= (double)lo && x <= (double)hi) || x != floor(x)) return false;
  *out = (int64_t)x;
  return true;
}

zz_status zz_json_int_in(json_t *obj, const char *path, const char *key, int64_t def, int64_t lo, int64_t hi,
                         int64_t *out) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) {
    if (def < 0) return zz_error(ZZ_ERR_FORMAT, "%s: required key \"%s\" is missing", path, key);
    *out = def;
    return ZZ_OK;
  }
  if (!zz_json_int_value(v, lo, hi, out)) {
    if (json_is_number(v))
      return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" = %.17g must be an integer in [%lld, %lld]", path, key,
                      json_number_value(v), (long long)lo, (long long)hi);
    return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" must be an integer in [%lld, %lld]", path, key, (long long)lo,
                    (long long)hi);
  }
  return ZZ_OK;
}

zz_status zz_json_int(json_t *obj, const char *path, const char *key, int64_t def, int64_t *out) {
  return zz_json_int_in(obj, path, key, def, 0, 1ll << 40, out);
}

zz_status zz_json_bool(json_t *obj, const char *path, const char *key, bool def, bool *out) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) {
    *out = def;
    return ZZ_OK;
  }
  if (!json_is_boolean(v)) return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" must be true or false", path, key);
  *out = json_is_true(v);
  return ZZ_OK;
}

/* The checkpoint's dtype: "torch_dtype" (transformers < 5) or "dtype" (≥ 5);
 * where both are written they must agree. */
zz_status zz_json_dtype(json_t *obj, const char *path, zz_dtype *out) {
  static const char *const keys[2] = {"torch_dtype", "dtype"};
  const char *dt[2];
  for (int k = 0; k < 2; k++) {
    json_t *v = json_object_get(obj, keys[k]);
    if (v && !json_is_null(v) && !json_is_string(v))
      return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" must be a string", path, keys[k]);
    dt[k] = json_string_value(v);
  }
  if (dt[0] && dt[1] && strcmp(dt[0], dt[1]) != 0)
    return zz_error(ZZ_ERR_FORMAT, "%s: \"torch_dtype\" \"%s\" and \"dtype\" \"%s\" disagree", path, dt[0], dt[1]);
  const char *d = dt[0] ? dt[0] : dt[1];
  if (!d || strcmp(d, "float32") == 0) *out = ZZ_DTYPE_F32;
  else if (strcmp(d, "float16") == 0)
    *out = ZZ_DTYPE_F16;
  else if (strcmp(d, "bfloat16") == 0)
    *out = ZZ_DTYPE_BF16;
  else
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: %s \"%s\" is not supported (float32, float16, bfloat16)", path,
                    keys[dt[0] ? 0 : 1], d);
  return ZZ_OK;
}

zz_status zz_json_real(json_t *obj, const char *path, const char *key, double def, double lo, double hi, double *out) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) {
    if (isnan(def)) return zz_error(ZZ_ERR_FORMAT, "%s: required key \"%s\" is missing", path, key);
    *out = def;
    return ZZ_OK;
  }
  double x = json_number_value(v);
  if (!json_is_number(v)) return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" must be a number in [%g, %g]", path, key, lo, hi);
  if (!(x >= lo && x <= hi))
    return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" = %g is out of range [%g, %g]", path, key, x, lo, hi);
  *out = x;
  return ZZ_OK;
}

bool zz_config_is_eos(const zz_config *c, int32_t tok) {
  for (int i = 0; i < c->n_eos; i++)
    if (c->eos_ids[i] == tok) return true;
  return false;
}

zz_status zz_json_eos(json_t *obj, const char *path, const char *key, int64_t vocab, zz_config *c) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) return ZZ_OK;
  size_t n = json_is_array(v) ? json_array_size(v) : 1;
  if (json_is_array(v) && n == 0) return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" is an empty list", path, key);
  if (n > ZZ_MAX_EOS_IDS)
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: \"%s\" lists %zu ids, more than the %d supported", path, key, n,
                    ZZ_MAX_EOS_IDS);
  int32_t ids[ZZ_MAX_EOS_IDS];
  for (size_t i = 0; i < n; i++) {
    int64_t id;
    if (!zz_json_int_value(json_is_array(v) ? json_array_get(v, i) : v, 0, vocab - 1, &id))
      return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" must be an id or a list of ids in [0, %lld] (vocab_size %lld)", path,
                      key, (long long)vocab - 1, (long long)vocab);
    ids[i] = (int32_t)id;
  }
  memcpy(c->eos_ids, ids, n * sizeof *ids);
  c->n_eos = (int)n;
  return ZZ_OK;
}

/* model_type picks the architecture, which reads its own fields. */
static zz_status zz_config_from_json(json_t *root, const char *path, zz_config *out) {
  const char *type = json_string_value(json_object_get(root, "model_type"));
  if (!type) return zz_error(ZZ_ERR_FORMAT, "%s: \"model_type\" is missing", path);
  char known[256] = "";
  for (const zz_arch *const *a = zz_arch_all(); *a; a++) {
    if (strcmp(type, (*a)->model_type) == 0) return (*a)->parse_config(root, path, out);
    size_t used = strlen(known);
    snprintf(known + used, sizeof known - used, "%s\"%s\"", used ? ", " : "", (*a)->model_type);
  }
  return zz_error(ZZ_ERR_UNSUPPORTED, "%s: model_type \"%s\" is not supported (known: %s)", path, type, known);
}

/* generation_config.json, where the directory has one: its eos_token_id (an id or a
 * list) replaces config.json's, as transformers' generate takes it from there. The
 * sampling settings in it (do_sample, temperature, top_p, max_length …) are not
 * read: zigzag takes those from its command line. */
static zz_status zz_generation_config(const char *dir, zz_config *c) {
  char path[4096];
  snprintf(path, sizeof path, "%s/generation_config.json", dir);
  json_t *root;
  ZZ_CHECK(zz_json_load_hf(path, false, &root));
  if (!root) return ZZ_OK;
  zz_status st = zz_json_eos(root, path, "eos_token_id", c->vocab_size, c);
  json_decref(root);
  return st;
}

zz_status zz_config_load(const char *dir, zz_config *out) {
  char path[4096];
  snprintf(path, sizeof path, "%s/config.json", dir);
  json_t *root;
  ZZ_CHECK(zz_json_load_hf(path, true, &root));
  zz_config c;
  zz_status st = zz_config_from_json(root, path, &c);
  json_decref(root);
  if (st != ZZ_OK) return st;
  ZZ_CHECK(zz_generation_config(dir, &c));
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
