/*
 * chat.c — a model directory's chat template for the generate job's "messages"
 * lines and `zigzag chat-template`, found where transformers looks for it:
 * chat_template.jinja (transformers 5 saves the default template there, and any
 * named ones as additional_chat_templates/NAME.jinja), else tokenizer_config.json's
 * chat_template (a string, or a list of {"name", "template"}: transformers 4). The
 * "tool_use" template, where there is one, renders a request that has tools (as
 * transformers' get_chat_template picks it). bos_token and eos_token (a string or an
 * added token {"content": ...}) come from tokenizer_config.json.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lines_impl.h"
#include "zz_chat.h"

static char *zz_token_text_of(json_t *v) {
  if (json_is_object(v)) v = json_object_get(v, "content");
  return json_is_string(v) ? strdup(json_string_value(v)) : NULL;
}

/* The whole of a text file, or NULL where there is none (errors: unreadable). */
static zz_status zz_chat_read_file(const char *path, char **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return ZZ_OK;
  char *s = NULL;
  size_t n = 0, cap = 0, got;
  do {
    if (n + 4096 + 1 > cap) {
      cap = (n + 4096 + 1) * 2;
      char *p = realloc(s, cap);
      if (!p) {
        free(s);
        fclose(f);
        return zz_error(ZZ_ERR_NO_MEMORY, "%s: out of memory", path);
      }
      s = p;
    }
    got = fread(s + n, 1, 4096, f);
    n += got;
  } while (got == 4096);
  bool bad = ferror(f);
  fclose(f);
  if (bad) {
    free(s);
    return zz_error(ZZ_ERR_IO, "%s: cannot be read", path);
  }
  s[n] = '\0';
  *out = s;
  return ZZ_OK;
}

/* tokenizer_config.json's chat_template: a string, or [{"name", "template"}, ...] */
static void zz_chat_config_templates(json_t *t, zz_chat_ctx *out) {
  if (json_is_string(t)) {
    out->tmpl = strdup(json_string_value(t));
    return;
  }
  json_t *x;
  size_t i;
  json_array_foreach(t, i, x) {
    const char *name = json_string_value(json_object_get(x, "name"));
    const char *body = json_string_value(json_object_get(x, "template"));
    if (!name || !body) continue;
    if (!strcmp(name, "default") && !out->tmpl) out->tmpl = strdup(body);
    if (!strcmp(name, "tool_use") && !out->tmpl_tools) out->tmpl_tools = strdup(body);
  }
}

zz_status zz_chat_ctx_load(const char *model_dir, zz_chat_ctx *out) {
  memset(out, 0, sizeof *out);
  struct stat sb;
  if (!model_dir || stat(model_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return ZZ_OK;
  char path[4200];
  snprintf(path, sizeof path, "%s/chat_template.jinja", model_dir);
  ZZ_CHECK(zz_chat_read_file(path, &out->tmpl));
  snprintf(path, sizeof path, "%s/additional_chat_templates/tool_use.jinja", model_dir);
  zz_status st = zz_chat_read_file(path, &out->tmpl_tools);
  snprintf(path, sizeof path, "%s/tokenizer_config.json", model_dir);
  if (st != ZZ_OK || stat(path, &sb) != 0) return st;
  json_error_t e;
  json_t *root = json_load_file(path, JSON_DECODE_INT_AS_REAL, &e); /* 1e30 sentinels */
  if (!root) return zz_error(ZZ_ERR_FORMAT, "%s:%d: bad JSON: %s", path, e.line, e.text);
  if (!out->tmpl && !out->tmpl_tools) zz_chat_config_templates(json_object_get(root, "chat_template"), out);
  out->bos = zz_token_text_of(json_object_get(root, "bos_token"));
  out->eos = zz_token_text_of(json_object_get(root, "eos_token"));
  json_decref(root);
  return ZZ_OK;
}

void zz_chat_ctx_free(zz_chat_ctx *c) {
  if (!c) return;
  free(c->tmpl);
  free(c->tmpl_tools);
  free(c->bos);
  free(c->eos);
  memset(c, 0, sizeof *c);
}

const char *zz_chat_ctx_template(const zz_chat_ctx *c, bool tools, char *err, size_t errlen) {
  const char *t = tools && c->tmpl_tools ? c->tmpl_tools : c->tmpl;
  if (!t)
    snprintf(err, errlen,
             "the model has no chat template (looked for chat_template.jinja, "
             "additional_chat_templates/tool_use.jinja and tokenizer_config.json's chat_template, "
             "a string or a list with \"default\"); give \"prompt\" (/v1/completions) with the text rendered");
  return t;
}

bool zz_chat_render_messages(const zz_chat_ctx *c, json_t *messages, char **text_out, char *err, size_t errlen) {
  const char *tmpl = zz_chat_ctx_template(c, false, err, errlen);
  if (!tmpl) return false;
  size_t n = json_array_size(messages);
  zz_chat_msg *m = calloc(n ? n : 1, sizeof *m);
  if (!m) {
    snprintf(err, errlen, "out of memory");
    return false;
  }
  for (size_t i = 0; i < n; i++) {
    json_t *x = json_array_get(messages, i);
    m[i].role = json_string_value(json_object_get(x, "role"));
    m[i].content = json_string_value(json_object_get(x, "content"));
  }
  zz_status st = zz_chat_template_render(tmpl, m, (int)n, c->bos, c->eos, true, text_out);
  free(m);
  if (st != ZZ_OK) {
    snprintf(err, errlen, "chat template: %s", zz_error_message());
    zz_error_clear();
    return false;
  }
  return true;
}
