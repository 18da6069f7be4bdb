/*
 * chat.c — a model directory's chat template for the generate job's "messages"
 * lines and `zigzag chat-template`: tokenizer_config.json's chat_template (a
 * string, or a list of named ones: "default"), bos_token and eos_token (a string or
 * an added token {"content": ...}), rendered by runtime/chat_template.c.
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

zz_status zz_chat_ctx_load(const char *model_dir, zz_chat_ctx *out) {
  memset(out, 0, sizeof *out);
  struct stat sb;
  if (!model_dir || stat(model_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return ZZ_OK;
  char path[4200];
  snprintf(path, sizeof path, "%s/tokenizer_config.json", model_dir);
  if (stat(path, &sb) != 0) return ZZ_OK;
  json_error_t e;
  json_t *root = json_load_file(path, JSON_DECODE_INT_AS_REAL, &e); /* 1e30 sentinels */
  if (!root) return zz_error(ZZ_ERR_FORMAT, "%s:%d: bad JSON: %s", path, e.line, e.text);
  json_t *t = json_object_get(root, "chat_template");
  if (json_is_array(t)) { /* [{"name": "default", "template": ...}, {"name": "tool_use", ...}] */
    json_t *pick = NULL, *x;
    size_t i;
    json_array_foreach(t, i, x) if (json_is_string(json_object_get(x, "name")) &&
                                    !strcmp(json_string_value(json_object_get(x, "name")), "default")) pick = x;
    t = pick ? json_object_get(pick, "template") : NULL;
  }
  if (json_is_string(t)) out->tmpl = strdup(json_string_value(t));
  out->bos = zz_token_text_of(json_object_get(root, "bos_token"));
  out->eos = zz_token_text_of(json_object_get(root, "eos_token"));
  json_decref(root);
  return ZZ_OK;
}

void zz_chat_ctx_free(zz_chat_ctx *c) {
  if (!c) return;
  free(c->tmpl);
  free(c->bos);
  free(c->eos);
  memset(c, 0, sizeof *c);
}

bool zz_chat_render_messages(const zz_chat_ctx *c, json_t *messages, char **text_out, char *err, size_t errlen) {
  if (!c->tmpl) {
    snprintf(err, errlen,
             "the model has no chat_template in tokenizer_config.json; give \"prompt\" (/v1/completions) "
             "with the text rendered");
    return false;
  }
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
  zz_status st = zz_chat_template_render(c->tmpl, m, (int)n, c->bos, c->eos, true, text_out);
  free(m);
  if (st != ZZ_OK) {
    snprintf(err, errlen, "chat template: %s", zz_error_message());
    zz_error_clear();
    return false;
  }
  return true;
}
