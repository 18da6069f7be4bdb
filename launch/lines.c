/*
 * lines.c — one line of a generate job read into its settings (lines_impl.h): the
 * native form's keys beside the prompt, and the OpenAI batch request form. Every
 * key is either taken or named in the line's error; a value is checked against
 * its range here, so a line that passes runs.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "lines_impl.h"

void zz_line_fail(zz_line *l, const char *code, const char *fmt, ...) {
  if (l->err) return; /* the first problem is the one named */
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  l->err_code = strdup(code);
  l->err = strdup(buf);
}

void zz_line_free(zz_line *l) {
  if (!l) return;
  for (int i = 0; i < l->n_stop; i++) free(l->stop[i]);
  free(l->model);
  free(l->err_code);
  free(l->err);
  json_decref(l->body);
  memset(l, 0, sizeof *l);
}

/* ---------------------------------------------------------------- the job's defaults */

zz_status zz_opts_generation_defaults(zz_opts *o) {
  zz_gen_config g;
  ZZ_CHECK(zz_gen_config_load(o->model, &g));
  if (!g.present) return ZZ_OK;
  /* generation_config.json < command line < line */
  if (!(o->gen_given & ZZ_GIVEN_TEMPERATURE)) o->temperature = g.temperature;
  if (!(o->gen_given & ZZ_GIVEN_TOP_K) && g.do_sample) o->top_k = g.top_k;
  if (!(o->gen_given & ZZ_GIVEN_TOP_P) && g.do_sample) o->top_p = g.top_p;
  if (!(o->gen_given & ZZ_GIVEN_REP_PENALTY)) o->repetition_penalty = g.repetition_penalty;
  if (!(o->gen_given & ZZ_GIVEN_MAX_NEW) && g.max_new_tokens > 0) o->max_new_tokens = g.max_new_tokens;
  return ZZ_OK;
}

void zz_line_defaults_init(const zz_opts *o, zz_line_defaults *d) {
  memset(d, 0, sizeof *d);
  zz_sampling s = zz_opts_sampling(o);
  zz_seq_params_default(&d->sp, &s, o->max_new_tokens);
  d->sp.repetition_penalty = o->repetition_penalty > 0 ? o->repetition_penalty : 1.0f;
  d->sp.logprobs = o->logprobs;
  d->model_name = o->model;
}

int zz_line_find_stop(const zz_line *l, const char *text, size_t len, size_t *at_out) {
  int best = -1;
  size_t at = len;
  for (int i = 0; i < l->n_stop; i++) {
    size_t m = strlen(l->stop[i]);
    for (size_t k = 0; m && k + m <= len && k < at; k++)
      if (memcmp(text + k, l->stop[i], m) == 0) {
        if (k < at) at = k, best = i;
        break;
      }
  }
  if (best >= 0) *at_out = at;
  return best;
}

/* ---------------------------------------------------------------- values */

/* where: "body.temperature" or "temperature", for the messages */
static bool zz_num(zz_line *l, json_t *v, const char *where, double lo, double hi, bool lo_open, double *out) {
  if (!json_is_number(v)) {
    zz_line_fail(l, "invalid_type", "%s must be a number", where);
    return false;
  }
  double x = json_number_value(v);
  if (!isfinite(x) || (lo_open ? x <= lo : x < lo) || x > hi) {
    zz_line_fail(l, "invalid_value", "%s = %g is outside %c%g, %g]", where, x, lo_open ? '(' : '[', lo, hi);
    return false;
  }
  *out = x;
  return true;
}

static bool zz_int(zz_line *l, json_t *v, const char *where, long long lo, long long hi, long long *out) {
  if (!json_is_integer(v)) {
    zz_line_fail(l, "invalid_type", "%s must be an integer", where);
    return false;
  }
  long long x = json_integer_value(v);
  if (x < lo || x > hi) {
    zz_line_fail(l, "invalid_value", "%s = %lld is outside [%lld, %lld]", where, x, lo, hi);
    return false;
  }
  *out = x;
  return true;
}

static void zz_stops(zz_line *l, json_t *v, const char *where) {
  if (json_is_null(v)) return;
  size_t n = json_is_array(v) ? json_array_size(v) : 1;
  if (!json_is_string(v) && !json_is_array(v)) {
    zz_line_fail(l, "invalid_type", "%s must be a string or a list of strings", where);
    return;
  }
  if (n > ZZ_MAX_STOPS) {
    zz_line_fail(l, "invalid_value", "%s has %zu strings; at most %d", where, n, ZZ_MAX_STOPS);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    json_t *s = json_is_array(v) ? json_array_get(v, i) : v;
    if (!json_is_string(s) || json_string_length(s) == 0) {
      zz_line_fail(l, "invalid_value", "%s[%zu] must be a non-empty string", where, i);
      return;
    }
    l->stop[l->n_stop++] = strdup(json_string_value(s));
  }
}

/* One setting shared by both forms, under its name in that form; false: not one. */
static bool zz_setting(zz_line *l, const char *key, json_t *v, const char *where, bool chat) {
  double x;
  long long k;
  zz_seq_params *sp = &l->sp;
  if (!strcmp(key, "temperature")) {
    if (zz_num(l, v, where, 0, 100, false, &x)) sp->sampling.temperature = (float)x;
  } else if (!strcmp(key, "top_p")) {
    if (zz_num(l, v, where, 0, 1, true, &x)) sp->sampling.top_p = (float)x;
  } else if (!strcmp(key, "top_k")) { /* vLLM's: -1 (or 0) = all */
    if (zz_int(l, v, where, -1, ZZ_MAX_VOCAB, &k)) sp->sampling.top_k = k < 0 ? 0 : (int)k;
  } else if (!strcmp(key, "seed")) {
    if (zz_int(l, v, where, INT64_MIN, INT64_MAX, &k)) {
      sp->sampling.seed = (uint64_t)k;
      l->own_seed = true;
    }
  } else if (!strcmp(key, "stop")) {
    zz_stops(l, v, where);
  } else if (!strcmp(key, "repetition_penalty")) {
    if (zz_num(l, v, where, 0, 100, true, &x)) sp->repetition_penalty = (float)x;
  } else if (!strcmp(key, "presence_penalty")) {
    if (zz_num(l, v, where, -2, 2, false, &x)) sp->presence_penalty = (float)x;
  } else if (!strcmp(key, "frequency_penalty")) {
    if (zz_num(l, v, where, -2, 2, false, &x)) sp->frequency_penalty = (float)x;
  } else if (!strcmp(key, "n")) {
    if (zz_int(l, v, where, 1, ZZ_MAX_COMPLETIONS, &k)) l->n = (int)k;
  } else if (!strcmp(key, "logprobs") && chat) { /* chat: true / false, the count is top_logprobs */
    if (!json_is_boolean(v) && !json_is_null(v)) zz_line_fail(l, "invalid_type", "%s must be true or false", where);
    else if (json_is_true(v)) {
      l->top_logprobs_chat = true;
      if (sp->logprobs < 0) sp->logprobs = 0;
    }
  } else if (!strcmp(key, "logprobs")) { /* completions and native: an integer, or true (0) */
    if (json_is_boolean(v)) sp->logprobs = json_is_true(v) ? 0 : -1;
    else if (!json_is_null(v) && zz_int(l, v, where, 0, ZZ_MAX_TOP_LOGPROBS, &k))
      sp->logprobs = (int)k;
  } else {
    return false;
  }
  return true;
}

/* ---------------------------------------------------------------- native lines */

static void zz_line_native(zz_line *l, json_t *o) {
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    if (!strcmp(key, "id") || !strcmp(key, "prompt") || !strcmp(key, "input_ids")) continue;
    long long k;
    if (!strcmp(key, "max_new_tokens")) {
      if (zz_int(l, v, key, 1, ZZ_MAX_POSITIONS, &k)) l->sp.max_new_tokens = (int)k;
    } else if (!zz_setting(l, key, v, key, false)) {
      zz_line_fail(l, "unsupported_parameter",
                   "\"%s\" is not a key zigzag takes in a line (id, prompt, input_ids, max_new_tokens, temperature, "
                   "top_p, top_k, seed, stop, repetition_penalty, presence_penalty, frequency_penalty, n, logprobs)",
                   key);
    }
  }
}

/* ---------------------------------------------------------------- OpenAI batch lines */

static void zz_line_openai(zz_line *l, json_t *o, const zz_line_defaults *d) {
  json_t *cid = json_object_get(o, "custom_id"), *method = json_object_get(o, "method"),
         *url = json_object_get(o, "url"), *body = json_object_get(o, "body");
  const char *key;
  json_t *v;
  json_object_foreach(
      o, key, v) if (strcmp(key, "custom_id") && strcmp(key, "method") && strcmp(key, "url") && strcmp(key, "body"))
      zz_line_fail(l, "unsupported_parameter",
                   "\"%s\" is not a key of a batch request line (custom_id, method, url, "
                   "body)",
                   key);
  if (!json_is_string(cid)) zz_line_fail(l, "invalid_value", "custom_id must be a string");
  if (method && !(json_is_string(method) && !strcmp(json_string_value(method), "POST")))
    zz_line_fail(l, "invalid_value", "method must be \"POST\"");
  const char *u = json_string_value(url);
  if (u && !strcmp(u, "/v1/completions")) l->kind = ZZ_LINE_COMPLETION;
  else if (u && !strcmp(u, "/v1/chat/completions"))
    l->kind = ZZ_LINE_CHAT;
  else {
    l->kind = ZZ_LINE_COMPLETION; /* answered in that form */
    zz_line_fail(l, "invalid_url", "url must be \"/v1/completions\" or \"/v1/chat/completions\"%s%s%s",
                 u ? " (not \"" : "", u ? u : "", u ? "\")" : "");
  }
  if (!json_is_object(body)) {
    zz_line_fail(l, "invalid_request", "body must be a JSON object");
    return;
  }
  l->body = json_incref(body);
  bool chat = l->kind == ZZ_LINE_CHAT;
  json_t *topk = NULL;
  json_object_foreach(body, key, v) {
    char where[128];
    snprintf(where, sizeof where, "body.%s", key);
    long long k;
    if (!strcmp(key, "model")) {
      if (!json_is_string(v)) zz_line_fail(l, "invalid_type", "body.model must be a string");
      else
        l->model = strdup(json_string_value(v));
    } else if (!strcmp(key, "prompt") && !chat) {
      bool ids = json_is_array(v) && json_array_size(v) > 0;
      for (size_t i = 0; ids && i < json_array_size(v); i++) ids = json_is_integer(json_array_get(v, i));
      if (!json_is_string(v) && !ids)
        zz_line_fail(l, "invalid_type",
                     "body.prompt must be a string or a non-empty list of token ids (one prompt "
                     "per line: a list of prompts is several lines)");
    } else if (!strcmp(key, "messages") && chat) {
      if (!json_is_array(v) || json_array_size(v) == 0)
        zz_line_fail(l, "invalid_type", "body.messages must be a non-empty list");
      for (size_t i = 0; i < json_array_size(v); i++) { /* the template reads the rest of each message */
        json_t *m = json_array_get(v, i), *content = json_object_get(m, "content");
        if (!json_is_object(m) || !json_is_string(json_object_get(m, "role")) ||
            !(json_is_string(content) || json_is_array(content) || json_is_null(content) ||
              (!content && json_object_get(m, "tool_calls"))))
          zz_line_fail(l, "invalid_value",
                       "body.messages[%zu] must be {\"role\": text, \"content\": text, a list of parts or "
                       "null, ...}",
                       i);
      }
    } else if (chat && (!strcmp(key, "tools") || !strcmp(key, "chat_template_kwargs"))) {
      if (!json_is_null(v) && !(key[0] == 't' ? json_is_array(v) : json_is_object(v)))
        zz_line_fail(l, "invalid_type", "body.%s must be %s", key, key[0] == 't' ? "a list" : "an object");
    } else if (chat && (!strcmp(key, "add_generation_prompt") || !strcmp(key, "continue_final_message") ||
                        !strcmp(key, "parallel_tool_calls"))) {
      if (!json_is_boolean(v)) zz_line_fail(l, "invalid_type", "body.%s must be true or false", key);
    } else if (chat && !strcmp(key, "tool_choice")) {
      /* "auto", "none", "required" or a named function: the template sees the tools either way */
    } else if (!strcmp(key, "max_tokens") || (chat && !strcmp(key, "max_completion_tokens"))) {
      if (zz_int(l, v, where, 1, ZZ_MAX_POSITIONS, &k)) l->sp.max_new_tokens = (int)k;
    } else if (chat && !strcmp(key, "top_logprobs")) {
      topk = v;
    } else if ((!strcmp(key, "stream") || !strcmp(key, "echo")) && json_is_false(v)) {
      /* the default, asked for explicitly */
    } else if (!strcmp(key, "user") && json_is_string(v)) {
      /* an end-user tag for the provider's records: nothing to do with the tokens */
    } else if (!zz_setting(l, key, v, where, chat)) {
      zz_line_fail(l, "unsupported_parameter", "body.%s%s is not supported by zigzag", key,
                   !strcmp(key, "stream") || !strcmp(key, "echo") ? " other than false" : "");
    }
  }
  if (!json_object_get(body, chat ? "messages" : "prompt"))
    zz_line_fail(l, "missing_required_parameter", "body.%s is required", chat ? "messages" : "prompt");
  long long k;
  if (topk && !json_is_null(topk) && zz_int(l, topk, "body.top_logprobs", 0, ZZ_MAX_TOP_LOGPROBS, &k)) {
    if (!l->top_logprobs_chat) zz_line_fail(l, "invalid_value", "body.top_logprobs needs body.logprobs true");
    else
      l->sp.logprobs = (int)k;
  }
  if (!l->model && d->model_name && !(l->model = strdup(d->model_name)))
    zz_line_fail(l, "internal_error", "out of memory");
}

zz_status zz_line_parse(const zz_prompt *p, const zz_line_defaults *d, zz_line *out) {
  zz_line l = {.kind = ZZ_LINE_NATIVE, .sp = d->sp, .n = 1};
  if (p->openai) l.kind = ZZ_LINE_COMPLETION;
  if (p->raw) {
    json_error_t e;
    json_t *o = json_loads(p->raw, JSON_REJECT_DUPLICATES, &e);
    if (!o) return zz_error(ZZ_ERR_FORMAT, "line %lld: %s", (long long)p->line, e.text); /* read once already */
    if (p->openai) zz_line_openai(&l, o, d);
    else
      zz_line_native(&l, o);
    json_decref(o);
  }
  if (!l.err && zz_seq_params_check(&l.sp, ZZ_MAX_POSITIONS) != ZZ_OK) {
    zz_line_fail(&l, "invalid_value", "%s", zz_error_message());
    zz_error_clear();
  }
  for (int i = 0; i < l.n_stop; i++)
    if (!l.stop[i]) zz_line_fail(&l, "internal_error", "out of memory");
  if (l.err_code && !l.err) {
    zz_line_free(&l);
    return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  }
  *out = l;
  return ZZ_OK;
}
