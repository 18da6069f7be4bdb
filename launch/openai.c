/*
 * openai.c — the output line of one prompt (zz_line_answer, lines_impl.h): the
 * native form {"id", "output_ids", "text", "finish_reason", ...}, or the OpenAI
 * batch output form
 *   {"id", "custom_id", "response": {"status_code": 200, "request_id", "body": {"id",
 *    "object": "text_completion" | "chat.completion", "created", "model", "choices",
 *    "usage"}}, "error": null}
 * and a line's error in either ({"id", "error": {"code", "message"}}; the batch form
 * with "response": null). Ids derive from the custom_id (FNV-1a), so a rerun
 * answers a line with the same ids; "created" is the time the line was written.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lines_impl.h"

/* Text of tokens[0..n) ("" without a tokenizer); ids past the tokenizer (padding
 * rows of the embedding) have none. */
static char *zz_decode(const zz_tokenizer *tok, const int32_t *tokens, int64_t n, size_t *len_out) {
  *len_out = 0;
  if (!tok) return strdup("");
  int32_t *known = malloc((size_t)(n ? n : 1) * sizeof *known);
  if (!known) return NULL;
  int64_t m = 0;
  for (int64_t i = 0; i < n; i++)
    if (tokens[i] >= 0 && tokens[i] < zz_tokenizer_vocab_size(tok)) known[m++] = tokens[i];
  char *text = NULL;
  if (zz_tokenizer_decode(tok, known, m, &text, len_out) != ZZ_OK) {
    zz_error_clear();
    text = strdup("");
    *len_out = 0;
  }
  free(known);
  return text;
}

/* A completion's text as the line's form returns it: the OpenAI forms leave out the
 * end id that finished it (vLLM's skip of special tokens at the end); every form
 * ends before a stop string (OpenAI's semantics: the stop is not returned). */
static json_t *zz_completion_text(const zz_line *l, const zz_tokenizer *tok, const zz_config *cfg,
                                  const zz_completion *c) {
  int64_t n = c->n_tokens;
  if (l->kind != ZZ_LINE_NATIVE && c->finish == ZZ_FINISH_EOS && n > 0 && zz_config_is_eos(cfg, c->tokens[n - 1])) n--;
  size_t len = 0;
  char *text = zz_decode(tok, c->tokens, n, &len);
  if (!text) return NULL;
  size_t at;
  if (c->finish == ZZ_FINISH_STOP && zz_line_find_stop(l, text, len, &at) >= 0) len = at;
  json_t *s = json_stringn(text, len);
  free(text);
  return s;
}

static const char *zz_finish_name(zz_finish f) { return f == ZZ_FINISH_LENGTH ? "length" : "stop"; }

static json_t *zz_token_text(const zz_tokenizer *tok, int32_t t) {
  size_t len;
  char *s = zz_decode(tok, &t, 1, &len);
  json_t *j = s ? json_stringn(s, len) : json_string("");
  free(s);
  return j;
}

static json_t *zz_bytes_of(const json_t *s) {
  json_t *a = json_array();
  const unsigned char *b = (const unsigned char *)json_string_value(s);
  for (size_t i = 0; i < json_string_length(s); i++) json_array_append_new(a, json_integer(b[i]));
  return a;
}

/* native: "logprobs": [lp per token], "top_logprobs": [[{"id", "logprob"}...] per token] */
static void zz_native_logprobs(json_t *o, const zz_completion *c) {
  if (!c->out || !c->out->logprobs) return;
  json_t *lp = json_array(), *top = c->out->top ? json_array() : NULL;
  for (int64_t t = 0; t < c->n_tokens; t++) {
    json_array_append_new(lp, json_real(c->out->logprobs[t]));
    if (!top) continue;
    json_t *row = json_array();
    for (int k = 0; k < c->out->top_k; k++) {
      const zz_top_logprob *x = &c->out->top[t * c->out->top_k + k];
      json_t *e = json_object();
      json_object_set_new(e, "id", json_integer(x->token));
      json_object_set_new(e, "logprob", json_real(x->logprob));
      json_array_append_new(row, e);
    }
    json_array_append_new(top, row);
  }
  json_object_set_new(o, "logprobs", lp);
  if (top) json_object_set_new(o, "top_logprobs", top);
}

/* completions: {"tokens", "token_logprobs", "top_logprobs": [{text: lp}] | null, "text_offset"} */
static json_t *zz_completion_logprobs(const zz_tokenizer *tok, const zz_completion *c, int64_t n) {
  json_t *o = json_object(), *toks = json_array(), *lps = json_array(), *offs = json_array();
  json_t *top = c->out->top ? json_array() : json_null();
  size_t off = 0;
  for (int64_t t = 0; t < n; t++) {
    json_t *s = zz_token_text(tok, c->tokens[t]);
    json_array_append_new(offs, json_integer((json_int_t)off));
    off += json_string_length(s);
    json_array_append_new(toks, s);
    json_array_append_new(lps, json_real(c->out->logprobs[t]));
    if (!json_is_array(top)) continue;
    json_t *row = json_object();
    for (int k = 0; k < c->out->top_k; k++) {
      const zz_top_logprob *x = &c->out->top[t * c->out->top_k + k];
      json_t *ts = zz_token_text(tok, x->token);
      if (!json_object_get(row, json_string_value(ts))) /* two ids of one text: the likelier */
        json_object_set_new(row, json_string_value(ts), json_real(x->logprob));
      json_decref(ts);
    }
    json_array_append_new(top, row);
  }
  json_object_set_new(o, "tokens", toks);
  json_object_set_new(o, "token_logprobs", lps);
  json_object_set_new(o, "top_logprobs", top);
  json_object_set_new(o, "text_offset", offs);
  return o;
}

/* chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]} */
static json_t *zz_chat_logprobs(const zz_tokenizer *tok, const zz_completion *c, int64_t n) {
  json_t *content = json_array();
  for (int64_t t = 0; t < n; t++) {
    json_t *e = json_object(), *s = zz_token_text(tok, c->tokens[t]), *top = json_array();
    json_object_set_new(e, "bytes", zz_bytes_of(s));
    json_object_set_new(e, "token", s);
    json_object_set_new(e, "logprob", json_real(c->out->logprobs[t]));
    for (int k = 0; c->out->top && k < c->out->top_k; k++) {
      const zz_top_logprob *x = &c->out->top[t * c->out->top_k + k];
      json_t *a = json_object(), *ts = zz_token_text(tok, x->token);
      json_object_set_new(a, "bytes", zz_bytes_of(ts));
      json_object_set_new(a, "token", ts);
      json_object_set_new(a, "logprob", json_real(x->logprob));
      json_array_append_new(top, a);
    }
    json_object_set_new(e, "top_logprobs", top);
    json_array_append_new(content, e);
  }
  json_t *o = json_object();
  json_object_set_new(o, "content", content);
  return o;
}

static json_t *zz_native_completion(const zz_line *l, const zz_tokenizer *tok, const zz_config *cfg,
                                    const zz_completion *c, json_t *o) {
  json_t *arr = json_array();
  for (int64_t i = 0; i < c->n_tokens; i++) json_array_append_new(arr, json_integer(c->tokens[i]));
  json_object_set_new(o, "output_ids", arr);
  if (tok) json_object_set_new(o, "text", zz_completion_text(l, tok, cfg, c));
  json_object_set_new(o, "finish_reason", json_string(zz_finish_name(c->finish)));
  zz_native_logprobs(o, c);
  return o;
}

/* What the OpenAI forms' ids are made of: the custom_id's hash, 24 hex digits. */
/* A line's error, as both forms write it: {"code", "message"}. */
static json_t *zz_line_error(const zz_line *l) {
  json_t *e = json_object();
  json_object_set_new(e, "code", json_string(l->err_code));
  json_object_set_new(e, "message", json_string(l->err));
  return e;
}

static void zz_openai_hex(const zz_prompt *p, char *hex, size_t len) {
  uint64_t h = zz_fnv1a(ZZ_FNV_BASIS, p->id, strlen(p->id));
  snprintf(hex, len, "%016llx%08llx", (unsigned long long)h, (unsigned long long)(p->line & 0xffffffffu));
}

static json_t *zz_openai_line(const zz_prompt *p, const zz_line *l, const zz_tokenizer *tok, const zz_config *cfg,
                              const zz_completion *c, int64_t prompt_tokens) {
  char hex[48], buf[64];
  zz_openai_hex(p, hex, sizeof hex);
  bool chat = l->kind == ZZ_LINE_CHAT;
  json_t *o = json_object();
  snprintf(buf, sizeof buf, "batch_req_%s", hex);
  json_object_set_new(o, "id", json_string(buf));
  json_t *cid = json_loads(p->id, JSON_DECODE_ANY, NULL);
  /* a line without a custom_id that is a string has its line number as id: null here */
  if (json_is_string(cid)) json_object_set_new(o, "custom_id", cid);
  else {
    json_decref(cid);
    json_object_set_new(o, "custom_id", json_null());
  }
  if (l->err) {
    json_object_set_new(o, "response", json_null());
    json_object_set_new(o, "error", zz_line_error(l));
    return o;
  }
  json_t *body = json_object(), *choices = json_array();
  snprintf(buf, sizeof buf, "%s-%s", chat ? "chatcmpl" : "cmpl", hex);
  json_object_set_new(body, "id", json_string(buf));
  json_object_set_new(body, "object", json_string(chat ? "chat.completion" : "text_completion"));
  json_object_set_new(body, "created", json_integer((json_int_t)time(NULL)));
  json_object_set_new(body, "model", json_string(l->model ? l->model : ""));
  int64_t completion_tokens = 0;
  for (int i = 0; i < l->n; i++) {
    const zz_completion *ci = &c[i];
    completion_tokens += ci->n_tokens;
    int64_t shown = ci->n_tokens; /* the tokens the text is made of */
    if (ci->finish == ZZ_FINISH_EOS && shown > 0 && zz_config_is_eos(cfg, ci->tokens[shown - 1])) shown--;
    json_t *ch = json_object();
    json_object_set_new(ch, "index", json_integer(i));
    if (chat) {
      json_t *msg = json_object(), *text = zz_completion_text(l, tok, cfg, ci), *content, *calls = NULL;
      json_object_set_new(msg, "role", json_string("assistant"));
      /* a template family's tool calls become OpenAI's tool_calls (launch/chat.c) */
      if (json_is_string(text) && l->tool_format != ZZ_TOOLS_NONE &&
          zz_chat_tool_calls(l->tool_format, json_string_value(text), hex, &content, &calls)) {
        json_decref(text);
        text = content;
        json_object_set_new(msg, "tool_calls", calls);
      }
      json_object_set_new(msg, "content", text);
      json_object_set_new(ch, "message", msg);
    } else {
      json_object_set_new(ch, "text", zz_completion_text(l, tok, cfg, ci));
    }
    bool lp = ci->out && ci->out->logprobs;
    json_object_set_new(ch, "logprobs",
                        !lp    ? json_null()
                        : chat ? zz_chat_logprobs(tok, ci, shown)
                               : zz_completion_logprobs(tok, ci, shown));
    bool called = json_object_get(json_object_get(ch, "message"), "tool_calls") != NULL;
    json_object_set_new(ch, "finish_reason", json_string(called ? "tool_calls" : zz_finish_name(ci->finish)));
    json_array_append_new(choices, ch);
  }
  json_object_set_new(body, "choices", choices);
  json_t *usage = json_object();
  json_object_set_new(usage, "prompt_tokens", json_integer(prompt_tokens));
  json_object_set_new(usage, "completion_tokens", json_integer(completion_tokens));
  json_object_set_new(usage, "total_tokens", json_integer(prompt_tokens + completion_tokens));
  json_object_set_new(body, "usage", usage);
  json_t *resp = json_object();
  json_object_set_new(resp, "status_code", json_integer(200));
  snprintf(buf, sizeof buf, "req_%s", hex);
  json_object_set_new(resp, "request_id", json_string(buf));
  json_object_set_new(resp, "body", body);
  json_object_set_new(o, "response", resp);
  json_object_set_new(o, "error", json_null());
  return o;
}

char *zz_line_answer(const zz_prompt *p, const zz_line *l, const zz_tokenizer *tok, const zz_config *cfg,
                     const zz_completion *c, int64_t prompt_tokens, const zz_line_defaults *d) {
  (void)d;
  json_t *o;
  if (l->kind != ZZ_LINE_NATIVE) {
    o = zz_openai_line(p, l, tok, cfg, c, prompt_tokens);
  } else {
    o = json_object();
    json_t *id = json_loads(p->id, JSON_DECODE_ANY, NULL);
    json_object_set_new(o, "id", id ? id : json_string(p->id));
    if (l->err) {
      json_object_set_new(o, "error", zz_line_error(l));
    } else if (l->n == 1) {
      zz_native_completion(l, tok, cfg, &c[0], o);
    } else {
      json_t *choices = json_array();
      for (int i = 0; i < l->n; i++) {
        json_t *ch = json_object();
        json_object_set_new(ch, "index", json_integer(i));
        json_array_append_new(choices, zz_native_completion(l, tok, cfg, &c[i], ch));
      }
      json_object_set_new(o, "choices", choices);
    }
  }
  char *body = o ? json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII | JSON_REAL_PRECISION(9))
                 : NULL; /* float round trip */
  json_decref(o);
  if (!body) return NULL;
  size_t len = strlen(body);
  char *line = realloc(body, len + 2);
  if (!line) {
    free(body);
    return NULL;
  }
  line[len] = '\n';
  line[len + 1] = '\0';
  return line;
}
