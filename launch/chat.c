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

static zz_status zz_chat_ctx_read(const char *model_dir, zz_chat_ctx *out) {
  struct stat sb;
  if (!(out->vars = json_object())) return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  if (!model_dir || stat(model_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return ZZ_OK;
  char path[4200];
  snprintf(path, sizeof path, "%s/chat_template.jinja", model_dir);
  ZZ_CHECK(zz_chat_read_file(path, &out->tmpl));
  snprintf(path, sizeof path, "%s/additional_chat_templates/tool_use.jinja", model_dir);
  ZZ_CHECK(zz_chat_read_file(path, &out->tmpl_tools));
  snprintf(path, sizeof path, "%s/tokenizer_config.json", model_dir);
  if (stat(path, &sb) != 0) return ZZ_OK;
  json_error_t e;
  json_t *root = json_load_file(path, JSON_DECODE_INT_AS_REAL, &e); /* 1e30 sentinels */
  if (!root) return zz_error(ZZ_ERR_FORMAT, "%s:%d: bad JSON: %s", path, e.line, e.text);
  if (!out->tmpl && !out->tmpl_tools) zz_chat_config_templates(json_object_get(root, "chat_template"), out);
  /* transformers' special_tokens_map: the named special tokens the template sees */
  static const char *const specials[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                         "pad_token", "cls_token", "mask_token"};
  for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) {
    char *t = zz_token_text_of(json_object_get(root, specials[i]));
    if (t) json_object_set_new(out->vars, specials[i], json_string(t));
    free(t);
  }
  json_decref(root);
  return ZZ_OK;
}

zz_status zz_chat_ctx_load(const char *model_dir, zz_chat_ctx *out) {
  memset(out, 0, sizeof *out);
  zz_status st = zz_chat_ctx_read(model_dir, out);
  if (st != ZZ_OK) zz_chat_ctx_free(out); /* nothing held after a failure */
  return st;
}

void zz_chat_ctx_free(zz_chat_ctx *c) {
  if (!c) return;
  free(c->tmpl);
  free(c->tmpl_tools);
  json_decref(c->vars);
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

/* Whether the template walks a message's content as a list of parts (vLLM's
 * "openai" content format); else a list of text parts is joined by "\n" into one
 * string, as vLLM does for templates that print the content whole. */
static bool zz_chat_walks_parts(const char *tmpl) {
  static const char *const forms[] = {"in message['content']", "in message[\"content\"]", "in message.content",
                                      "in content"};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++)
    if (strstr(tmpl, forms[i])) return true;
  return false;
}

/* A copy of the messages as the templates expect them: a tool call's arguments (a
 * JSON string in OpenAI's form) as the object they hold (vLLM does the same: the
 * templates of transformers write arguments | tojson); content parts joined where
 * the template does not walk them. */
static json_t *zz_chat_messages_for(const char *tmpl, json_t *messages, char *err, size_t errlen) {
  json_t *out = json_deep_copy(messages), *m, *tc, *part;
  size_t i, k;
  bool parts = zz_chat_walks_parts(tmpl);
  if (!out) return snprintf(err, errlen, "out of memory"), NULL;
  json_array_foreach(out, i, m) {
    json_array_foreach(json_object_get(m, "tool_calls"), k, tc) {
      json_t *fn = json_object_get(tc, "function"), *args = json_object_get(fn, "arguments");
      json_t *obj = json_is_string(args) ? json_loads(json_string_value(args), JSON_DECODE_ANY, NULL) : NULL;
      if (obj && json_is_object(obj)) json_object_set(fn, "arguments", obj);
      json_decref(obj);
    }
    json_t *content = json_object_get(m, "content");
    if (parts || !json_is_array(content)) continue;
    size_t len = 0, n = 0;
    json_array_foreach(content, k, part) len += json_string_length(json_object_get(part, "text")) + 1;
    char *joined = malloc(len + 1);
    if (!joined) return json_decref(out), snprintf(err, errlen, "out of memory"), NULL;
    json_array_foreach(content, k, part) {
      json_t *t = json_object_get(part, "text");
      if (!json_is_string(t)) continue;
      if (n) joined[n++] = '\n';
      memcpy(joined + n, json_string_value(t), json_string_length(t));
      n += json_string_length(t);
    }
    json_object_set_new(m, "content", json_stringn(joined, n));
    free(joined);
  }
  return out;
}

bool zz_chat_render_request(const zz_chat_ctx *c, json_t *body, char **text_out, int *tool_format_out, char *err,
                            size_t errlen) {
  json_t *tools = json_object_get(body, "tools"), *kw = json_object_get(body, "chat_template_kwargs");
  json_t *agp = json_object_get(body, "add_generation_prompt"), *cont = json_object_get(body, "continue_final_message");
  if (json_is_null(tools)) tools = NULL;
  const char *tmpl = zz_chat_ctx_template(c, tools != NULL, err, errlen);
  if (!tmpl) return false;
  json_t *choice = json_object_get(body, "tool_choice");
  if (tool_format_out)
    *tool_format_out = tools && !(json_is_string(choice) && !strcmp(json_string_value(choice), "none"))
                           ? (int)zz_chat_tool_format(tmpl)
                           : ZZ_TOOLS_NONE;
  json_t *msgs = zz_chat_messages_for(tmpl, json_object_get(body, "messages"), err, errlen);
  json_t *vars = json_copy(c->vars);
  if (!msgs || !vars) {
    json_decref(msgs);
    json_decref(vars);
    snprintf(err, errlen, "out of memory");
    return false;
  }
  if (json_is_object(kw)) json_object_update(vars, kw); /* kwargs over special tokens, as transformers has it */
  zz_chat_input in = {.messages = msgs,
                      .tools = tools,
                      .vars = vars,
                      .add_generation_prompt = agp ? json_is_true(agp) : true,
                      .continue_final_message = json_is_true(cont)};
  zz_status st = zz_chat_render(tmpl, &in, text_out);
  json_decref(msgs);
  json_decref(vars);
  if (st != ZZ_OK) {
    snprintf(err, errlen, "chat template: %s", zz_error_message());
    zz_error_clear();
    return false;
  }
  return true;
}

bool zz_chat_render_messages(const zz_chat_ctx *c, json_t *messages, char **text_out, char *err, size_t errlen) {
  json_t *body = json_pack("{sO}", "messages", messages);
  bool ok = body && zz_chat_render_request(c, body, text_out, NULL, err, errlen);
  if (!body) snprintf(err, errlen, "out of memory");
  json_decref(body);
  return ok;
}

/* ---------------------------------------------------------------- tool calls in the answer */

zz_tool_format zz_chat_tool_format(const char *tmpl) {
  if (strstr(tmpl, "<tool_call>")) return ZZ_TOOLS_HERMES;
  if (strstr(tmpl, "[TOOL_CALLS]")) return ZZ_TOOLS_MISTRAL;
  if (strstr(tmpl, "<|python_tag|>") || strstr(tmpl, "\"parameters\": dictionary of argument name"))
    return ZZ_TOOLS_LLAMA_JSON;
  return ZZ_TOOLS_NONE;
}

/* One call {"name": text, "arguments" or "parameters": object} appended as OpenAI's
 * form: arguments a JSON string (json.dumps with ensure_ascii=False, as vLLM). */
static bool zz_chat_add_call(json_t *calls, json_t *call, const char *id_base) {
  json_t *name = json_object_get(call, "name"), *args = json_object_get(call, "arguments");
  if (!args) args = json_object_get(call, "parameters");
  if (!json_is_object(call) || !json_is_string(name) || !(json_is_object(args) || json_is_string(args))) return false;
  /* jansson's separators without JSON_COMPACT are json.dumps' (", " and ": ") */
  char *text = json_is_string(args) ? strdup(json_string_value(args)) : json_dumps(args, JSON_PRESERVE_ORDER);
  char id[96];
  snprintf(id, sizeof id, "call_%s_%zu", id_base, json_array_size(calls));
  json_t *fn = json_pack("{sOss}", "name", name, "arguments", text ? text : "{}");
  free(text);
  json_array_append_new(calls, json_pack("{ssssso}", "id", id, "type", "function", "function", fn));
  return true;
}

bool zz_chat_tool_calls(zz_tool_format f, const char *text, const char *id_base, json_t **content_out,
                        json_t **calls_out) {
  json_t *calls = json_array();
  const char *first = NULL;
  bool good = calls != NULL;
  if (f == ZZ_TOOLS_HERMES) { /* <tool_call>{json}</tool_call>, one or more */
    for (const char *p = strstr(text, "<tool_call>"); good && p; p = strstr(p, "<tool_call>")) {
      if (!first) first = p;
      const char *b = p + strlen("<tool_call>"), *e = strstr(b, "</tool_call>");
      size_t n = e ? (size_t)(e - b) : strlen(b); /* an unclosed last one: to the end, as vLLM reads it */
      json_t *call = json_loadb(b, n, 0, NULL);
      good = call && zz_chat_add_call(calls, call, id_base);
      json_decref(call);
      p = e ? e + strlen("</tool_call>") : b + n;
    }
  } else if (f == ZZ_TOOLS_MISTRAL) { /* [TOOL_CALLS][{"name", "arguments"}, ...] */
    first = strstr(text, "[TOOL_CALLS]");
    json_t *arr = first ? json_loads(first + strlen("[TOOL_CALLS]"), 0, NULL) : NULL;
    size_t i;
    json_t *call;
    good = good && json_is_array(arr);
    json_array_foreach(arr, i, call) good = good && zz_chat_add_call(calls, call, id_base);
    json_decref(arr);
  } else if (f == ZZ_TOOLS_LLAMA_JSON) { /* [<|python_tag|>]{"name", "parameters"}[; {...}] */
    const char *p = text;
    while (*p == ' ' || *p == '\n' || *p == '\t') p++;
    if (!strncmp(p, "<|python_tag|>", 14)) p += 14;
    first = *p == '{' ? text : NULL;
    while (good && first && *p) {
      json_error_t e;
      json_t *call = json_loads(p, JSON_DISABLE_EOF_CHECK, &e);
      good = call && zz_chat_add_call(calls, call, id_base);
      json_decref(call);
      if (!good) break;
      p += e.position;
      while (*p == ' ' || *p == '\n' || *p == '\t' || *p == ';') p++;
    }
  }
  if (!good || !first || !json_array_size(calls)) {
    json_decref(calls);
    return false;
  }
  size_t lead = (size_t)(first - text);
  while (lead && (text[lead - 1] == ' ' || text[lead - 1] == '\n')) lead--;
  *content_out = lead ? json_stringn(text, lead) : json_null();
  *calls_out = calls;
  return true;
}
