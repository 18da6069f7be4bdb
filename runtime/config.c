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

/* Reads an integer field; absent → default; wrong type → error naming the key. */
zz_status zz_json_int(json_t *obj, const char *path, const char *key, int64_t def,
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

zz_status zz_json_bool(json_t *obj, const char *path, const char *key, bool def,
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

zz_status zz_json_dtype(json_t *obj, const char *path, zz_dtype *out) {
  const char *dt = json_string_value(json_object_get(obj, "torch_dtype"));
  if (!dt || strcmp(dt, "float32") == 0)
    *out = ZZ_DTYPE_F32;
  else if (strcmp(dt, "float16") == 0)
    *out = ZZ_DTYPE_F16;
  else if (strcmp(dt, "bfloat16") == 0)
    *out = ZZ_DTYPE_BF16;
  else
    return zz_error(ZZ_ERR_UNSUPPORTED, "%s: torch_dtype \"%s\" is not supported", path, dt);
  return ZZ_OK;
}

zz_status zz_json_positive(json_t *obj, const char *path, const char *key, double def, double *out) {
  json_t *v = json_object_get(obj, key);
  if (!v || json_is_null(v)) {
    if (def <= 0) return zz_error(ZZ_ERR_FORMAT, "%s: required key \"%s\" is missing", path, key);
    *out = def;
    return ZZ_OK;
  }
  double x = json_number_value(v);
  if (!json_is_number(v) || !(x > 0) || !isfinite(x) || x > 1e30)
    return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" must be a positive number", path, key);
  *out = x;
  return ZZ_OK;
}

/* model_type picks the architecture, which reads its own fields. */
static zz_status zz_config_from_json(json_t *root, const char *path, zz_config *out) {
  if (!json_is_object(root)) return zz_error(ZZ_ERR_FORMAT, "%s: not a JSON object", path);
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
