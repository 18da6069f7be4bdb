/*
 * zz_chat.h — chat templates (runtime/text/chat*.c): the Jinja that Hugging Face's
 * chat-template sandbox runs (jinja2's ImmutableSandboxedEnvironment with
 * trim_blocks, lstrip_blocks and loop controls, plus transformers' tojson,
 * raise_exception, strftime_now and {% generation %}), rendered as transformers'
 * apply_chat_template renders it. The messages, tools and extra variables are JSON
 * values, whole. A construct that would render otherwise than jinja2 is an error
 * naming it and its line, never a guess. A template comes from a model directory, so
 * it is untrusted: steps, output, memory, call depth and time are bounded
 * (zz_chat_limits), each with an error naming the limit.
 *
 * Usage:
 *     zz_chat_input in = {.messages = msgs, .add_generation_prompt = true, .vars = specials};
 *     char *text;
 *     if (zz_chat_render(tmpl, &in, &text) == ZZ_OK) ... free(text);
 */
#ifndef ZZ_CHAT_H
#define ZZ_CHAT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "zz_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zz_chat_limits {
  int64_t max_steps;  /* expressions evaluated, loop turns and calls, all together */
  size_t max_output;  /* bytes of the text (and of any one string) */
  size_t max_memory;  /* bytes the render may hold */
  int max_depth;      /* macro calls nested, and the template's own nesting */
  double max_seconds; /* wall time */
} zz_chat_limits;
/* The limits a render gets unless told otherwise: far above what real templates
 * need (a long conversation renders in milliseconds), hostile ones stop in well
 * under a second. */
zz_chat_limits zz_chat_limits_default(void);

typedef struct zz_chat_input {
  json_t *messages;           /* a JSON list of message objects, as sent */
  json_t *tools;              /* NULL, or the list of tools (the template's `tools`) */
  json_t *vars;               /* NULL, or an object of more variables: special tokens, template kwargs */
  bool add_generation_prompt; /* the template's add_generation_prompt */
  /* transformers' continue_final_message: the last message left open, the text cut
   * just after its content (refused with add_generation_prompt) */
  bool continue_final_message;
  int64_t now;                  /* strftime_now's time, seconds since the epoch; 0: the clock */
  const zz_chat_limits *limits; /* NULL: zz_chat_limits_default() */
} zz_chat_input;

/* tmpl rendered for in; *out malloc'd. Errors: ZZ_ERR_FORMAT (a syntax error, a
 * construct not supported, a type error, a limit passed: the message names the
 * line), ZZ_ERR_INVALID_ARG (the template's raise_exception, with its message). */
zz_status zz_chat_render(const char *tmpl, const zz_chat_input *in, char **out);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_CHAT_H */
