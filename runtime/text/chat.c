/*
 * chat.c — zz_chat_render (zz_chat.h): one render of a chat template as
 * transformers' apply_chat_template(tokenize=False) does it. The template's source
 * read as jinja2 reads it (line ends to "\n", one final newline dropped); the
 * variables it sees: messages (keys whose value is null dropped, a reasoning field
 * copied to reasoning_content and thinking, as transformers 5 does), tools (None
 * when there are none), documents (None), add_generation_prompt, then the extra
 * variables (special tokens, template kwargs); continue_final_message by
 * transformers' marker; the limits of the render.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_impl.h"

zz_chat_limits zz_chat_limits_default(void) {
  return (zz_chat_limits){
      .max_steps = 5000000, .max_output = 32u << 20, .max_memory = 512u << 20, .max_depth = 64, .max_seconds = 1.0};
}

/* the template as jinja2's lexer sees it: "\r\n" and "\r" as "\n", without one final "\n" */
static char *zz_cj_normalise(zz_cj *c, const char *tmpl) {
  size_t n = strlen(tmpl), k = 0;
  char *s = zz_cj_alloc(c, n + 1);
  if (!s) return NULL;
  for (size_t i = 0; i < n; i++) {
    if (tmpl[i] == '\r') {
      s[k++] = '\n';
      if (tmpl[i + 1] == '\n') i++;
    } else {
      s[k++] = tmpl[i];
    }
  }
  if (k && s[k - 1] == '\n') k--;
  s[k] = '\0';
  return s;
}

static const char *const zz_cj_reasoning[] = {"reasoning_content", "thinking", "reasoning"};
static const char zz_cj_tag[] = "CONTINUE_FINAL_MESSAGE_TAG ";

/* one message as transformers hands it to the template */
static bool zz_cj_message(zz_cj *c, json_t *m, bool tag_last, zz_cj_val *out, zz_cj_val *final_out) {
  if (!json_is_object(m)) return zz_cj_fail(c, NULL, "a message that is not a JSON object");
  *out = zz_cj_new_dict(c, ZZ_CJ_DICT);
  if (out->k != ZZ_CJ_DICT) return false;
  json_t *reason = NULL;
  for (int i = 0; i < 3 && !reason; i++) {
    json_t *r = json_object_get(m, zz_cj_reasoning[i]);
    if (r && !json_is_null(r)) reason = r;
  }
  zz_cj_val rv;
  if (reason && !zz_cj_from_json(c, reason, &rv)) return false;
  if (reason && !json_object_get(m, "thinking") && !zz_cj_dict_set(c, out->d, zz_cj_cstr("thinking"), rv)) return false;
  const char *key;
  json_t *x;
  json_object_foreach(m, key, x) {
    zz_cj_val v;
    if (json_is_null(x)) continue; /* transformers drops them: templates handle a missing key */
    char *k = zz_cj_strdup(c, key, strlen(key));
    if (!k || !zz_cj_from_json(c, x, &v)) return false;
    if (reason && !strcmp(key, "thinking")) v = rv;
    if (!zz_cj_dict_set(c, out->d, zz_cj_cstr(k), v)) return false;
  }
  if (reason && !zz_cj_dict_set(c, out->d, zz_cj_cstr("reasoning_content"), rv)) return false;
  if (!tag_last) return true;
  /* continue_final_message: the marker after the content (the last text part) */
  zz_cj_val content = zz_cj_undef, *slot = NULL;
  for (size_t i = 0; i < out->d->n; i++)
    if (out->d->keys[i].n == 7 && !memcmp(out->d->keys[i].s, "content", 7)) slot = &out->d->vals[i];
  if (slot && slot->k == ZZ_CJ_LIST) {
    for (size_t i = slot->l->n; i-- > 0 && !content.n;) {
      zz_cj_val *part = &slot->l->v[i];
      for (size_t k = 0; part->k == ZZ_CJ_DICT && k < part->d->n; k++)
        if (part->d->keys[k].n == 4 && !memcmp(part->d->keys[k].s, "text", 4) && part->d->vals[k].k == ZZ_CJ_STR) {
          zz_cj_val copy = zz_cj_new_dict(c, ZZ_CJ_DICT);
          if (copy.k != ZZ_CJ_DICT) return false;
          for (size_t j = 0; j < part->d->n; j++)
            if (!zz_cj_dict_set(c, copy.d, part->d->keys[j], part->d->vals[j])) return false;
          content = part->d->vals[k];
          slot = &copy.d->vals[k];
          part->d = copy.d;
          break;
        }
    }
    if (!content.n) return zz_cj_fail(c, NULL, "continue_final_message: the final message has no text to continue");
  } else if (slot && slot->k == ZZ_CJ_STR) {
    content = *slot;
  } else {
    return zz_cj_fail(c, NULL, "continue_final_message: the final message has no \"content\" to continue");
  }
  char *s = zz_cj_alloc(c, content.n + sizeof zz_cj_tag);
  if (!s) return false;
  memcpy(s, content.s, content.n);
  memcpy(s + content.n, zz_cj_tag, sizeof zz_cj_tag);
  *slot = zz_cj_str(s, content.n + sizeof zz_cj_tag - 1);
  *final_out = content;
  return true;
}

static const char *zz_cj_rfind(const char *s, size_t n, const char *w, size_t wn) {
  for (size_t i = n >= wn ? n - wn + 1 : 0; i-- > 0;)
    if (!memcmp(s + i, w, wn)) return s + i;
  return NULL;
}

/* transformers' cut of a continued message: the text up to the marker */
static bool zz_cj_cut_continue(zz_cj *c, zz_cj_buf *o, zz_cj_val final) {
  zz_cj_val stripped;
  size_t tagn = sizeof zz_cj_tag - 2; /* the marker without its space */
  if (!zz_cj_strip(c, &final, NULL, true, true, NULL, &stripped)) return false;
  const char *at = zz_cj_rfind(o->s, o->n, zz_cj_tag, tagn);
  if (!at || (stripped.n && !zz_cj_rfind(o->s, o->n, stripped.s, stripped.n)))
    return zz_cj_fail(c, NULL, "continue_final_message: the final message does not appear in the rendered chat");
  size_t cut = (size_t)(at - o->s);
  if (!(cut + tagn + 1 <= o->n && !memcmp(at, zz_cj_tag, tagn + 1))) { /* trailing space trimmed: rstrip */
    size_t w;
    while (cut && (w = zz_cj_space_before(o->s, cut))) cut -= w;
  }
  o->n = cut;
  o->s[cut] = '\0';
  return true;
}

static bool zz_cj_run_all(zz_cj *c, const char *tmpl, const zz_chat_input *in, zz_cj_buf *o) {
  zz_cj_scope top = {0};
  zz_cj_val msgs, v, final = zz_cj_undef;
  const char *src = zz_cj_normalise(c, tmpl);
  if (!src) return false;
  c->src = src;
  zz_cj_node *root = zz_cj_parse(c, src);
  if (c->err[0]) return false;
  if (in->continue_final_message) {
    if (in->add_generation_prompt)
      return zz_cj_fail(c, NULL,
                        "continue_final_message and add_generation_prompt together (transformers refuses them)");
    if (!json_array_size(in->messages)) return zz_cj_fail(c, NULL, "continue_final_message with no messages");
    if (!strstr(src, "content"))
      return zz_cj_fail(c, NULL, "continue_final_message: the template does not read \"content\"");
  }
  if (!json_is_array(in->messages)) return zz_cj_fail(c, NULL, "the messages are not a JSON list");
  msgs = zz_cj_new_list(c, json_array_size(in->messages));
  if (msgs.k != ZZ_CJ_LIST) return false;
  for (size_t i = 0; i < json_array_size(in->messages); i++, msgs.l->n++)
    if (!zz_cj_message(c, json_array_get(in->messages, i),
                       in->continue_final_message && i + 1 == json_array_size(in->messages), &msgs.l->v[i], &final))
      return false;
  if (!zz_cj_scope_set(c, &top, "messages", msgs)) return false;
  if (in->tools ? !zz_cj_from_json(c, in->tools, &v) : (v = zz_cj_none(), false)) return false;
  if (!zz_cj_scope_set(c, &top, "tools", v) || !zz_cj_scope_set(c, &top, "documents", zz_cj_none()) ||
      !zz_cj_scope_set(c, &top, "add_generation_prompt", zz_cj_bool(in->add_generation_prompt)))
    return false;
  const char *key;
  json_t *x;
  json_object_foreach(in->vars, key, x) {
    char *k = zz_cj_strdup(c, key, strlen(key));
    if (!k || !zz_cj_from_json(c, x, &v) || !zz_cj_scope_set(c, &top, k, v)) return false;
  }
  if (!zz_cj_buf_put(c, o, "", 0) || !zz_cj_render(c, &top, root, o)) return false;
  return !in->continue_final_message || zz_cj_cut_continue(c, o, final);
}

zz_status zz_chat_render(const char *tmpl, const zz_chat_input *in, char **out) {
  zz_cj c = {.lim = in->limits ? *in->limits : zz_chat_limits_default(), .now = in->now};
  zz_cj_buf o = {.limit = c.lim.max_output};
  bool good = zz_cj_run_all(&c, tmpl, in, &o);
  zz_status st = ZZ_OK;
  if (good) {
    *out = malloc(o.n + 1);
    if (*out) memcpy(*out, o.s, o.n + 1);
    else
      st = zz_error(ZZ_ERR_NO_MEMORY, "chat template: out of memory");
  } else {
    st = zz_error(c.raised ? ZZ_ERR_INVALID_ARG : ZZ_ERR_FORMAT, "%s", c.err[0] ? c.err : "out of memory");
  }
  zz_cj_free(&c);
  return st;
}
