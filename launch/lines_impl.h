/*
 * lines_impl.h — what one line of a generate job asks for, in either form zigzag
 * reads (launch/lines.c, launch/openai.c):
 *
 *   native   {"id", "prompt" | "input_ids", max_new_tokens, temperature, top_p, top_k,
 *             seed, stop, repetition_penalty, presence_penalty, frequency_penalty, n, logprobs}
 *   OpenAI   {"custom_id", "method": "POST", "url": "/v1/completions" | "/v1/chat/completions",
 *             "body": {...}}  (the batch API's request line, as vLLM's run_batch reads it)
 *
 * A line's settings start from the job's (generation_config.json, then the command
 * line: zz_line_defaults) and the line overrides them. A key zigzag does not take,
 * or a bad value, gives the line an error (code, message naming the key) that its
 * output line carries: the other lines run. Nothing is ignored silently.
 */
#ifndef ZZ_LINES_IMPL_H
#define ZZ_LINES_IMPL_H

#include <jansson.h>

#include "zz_launch.h"
#include "zz_seq.h"

#define ZZ_MAX_STOPS 4         /* OpenAI's limit on stop sequences */
#define ZZ_MAX_COMPLETIONS 128 /* n per line */

typedef enum { ZZ_LINE_NATIVE, ZZ_LINE_COMPLETION, ZZ_LINE_CHAT } zz_line_kind;

/* The job's settings every line starts from. */
typedef struct zz_line_defaults {
  zz_seq_params sp;       /* sampling, max_new_tokens, penalties, logprobs (--logprobs) */
  const char *model_name; /* what an OpenAI body without "model" is answered with */
} zz_line_defaults;

typedef struct zz_line {
  zz_line_kind kind;
  zz_seq_params sp; /* its settings, resolved */
  bool own_seed;    /* it gave "seed": its completions draw streams 0..n-1 of that seed */
  int n;            /* completions */
  char *stop[ZZ_MAX_STOPS];
  int n_stop;
  bool top_logprobs_chat; /* chat: logprobs true (top_logprobs in sp.logprobs) */
  char *model;            /* OpenAI: the body's "model", echoed in the answer */
  json_t *body;           /* OpenAI: the request body (owned) */
  int tool_format;        /* chat with tools: the zz_tool_format its answer is read in (launch/chat.c) */
  char *err_code;         /* a per-line error: NULL, or its code ("unsupported_parameter", ...) */
  char *err;              /* and its message naming the key */
} zz_line;

/* Reads p's line (p->raw, or its prompt alone) into *out with d's settings as the
 * start. A bad line gives out->err, with ZZ_OK; only running out of memory is an
 * error. */
zz_status zz_line_parse(const zz_prompt *p, const zz_line_defaults *d, zz_line *out);
/* Sets the line's error (printf-style message; the code, e.g. "invalid_value"). */
void zz_line_fail(zz_line *l, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void zz_line_free(zz_line *l);
/* The settings the job's lines start from: generation_config.json under the
 * command line (o->gen_given says which flags were given); o's sampling fields
 * are set to the result, so the job record and a pipeline see them too. */
zz_status zz_opts_generation_defaults(zz_opts *o);
void zz_line_defaults_init(const zz_opts *o, zz_line_defaults *d);
/* Index of the first stop string found in text[0..len) and its offset; -1 if none. */
int zz_line_find_stop(const zz_line *l, const char *text, size_t len, size_t *at_out);

/* ---- the answers (launch/openai.c) */

/* One completion of a line as it ended. */
typedef struct zz_completion {
  const int32_t *tokens;
  int64_t n_tokens;
  zz_finish finish;
  const zz_seq_out *out; /* its log-probabilities, or NULL */
} zz_completion;

/* The output line of p (newline included; NULL when out of memory): an error line,
 * or a native one, or the OpenAI batch output form, from its completions c[0..l->n).
 * prompt_tokens: the prompt's length in tokens (usage). */
char *zz_line_answer(const zz_prompt *p, const zz_line *l, const zz_tokenizer *tok, const zz_config *cfg,
                     const zz_completion *c, int64_t prompt_tokens, const zz_line_defaults *d);

/* ---- chat templates (chat_template.jinja, tokenizer_config.json: launch/chat.c) */

/* The rendering context of a model directory: its chat templates and special tokens.
 * An absent template is not an error here: a line with "messages" is. */
typedef struct zz_chat_ctx {
  char *tmpl;       /* the default template; NULL: none */
  char *tmpl_tools; /* the "tool_use" one, for a request with tools; NULL: none */
  json_t *vars;     /* the named special tokens (bos_token, eos_token, ...) as text */
} zz_chat_ctx;
zz_status zz_chat_ctx_load(const char *model_dir, zz_chat_ctx *out);
void zz_chat_ctx_free(zz_chat_ctx *c);
/* The template a request renders with (tools: it has tools); NULL, with the places
 * looked in err, where the model has none. */
const char *zz_chat_ctx_template(const zz_chat_ctx *c, bool tools, char *err, size_t errlen);
/* A chat request's body rendered (launch/chat.c): its messages (whole objects:
 * tool_calls, tool messages, content parts), tools, chat_template_kwargs,
 * add_generation_prompt (default true) and continue_final_message, as vLLM's batch
 * runner takes them; *text_out malloc'd. On failure a message in err (the line's
 * error). */
bool zz_chat_render_request(const zz_chat_ctx *c, json_t *body, char **text_out, int *tool_format_out, char *err,
                            size_t errlen);
/* The tool-call forms of the template families whose answers are read back into
 * OpenAI's tool_calls: Qwen / Hermes "<tool_call>{json}</tool_call>", Llama 3.1's
 * JSON {"name", "parameters"}, Mistral's "[TOOL_CALLS][...]". */
typedef enum { ZZ_TOOLS_NONE, ZZ_TOOLS_HERMES, ZZ_TOOLS_LLAMA_JSON, ZZ_TOOLS_MISTRAL } zz_tool_format;
/* The form a template's family writes (ZZ_TOOLS_NONE: unknown, the text stays text). */
zz_tool_format zz_chat_tool_format(const char *tmpl);
/* text in form f: true with *content_out (the text before the calls, or JSON null)
 * and *calls_out (OpenAI's [{"id", "type": "function", "function": {"name",
 * "arguments": a JSON string}}], ids from id_base) where it is tool calls; false
 * (nothing set) where it is not. */
bool zz_chat_tool_calls(zz_tool_format f, const char *text, const char *id_base, json_t **content_out,
                        json_t **calls_out);
/* The same for messages alone, with the generation prompt. */
bool zz_chat_render_messages(const zz_chat_ctx *c, json_t *messages, char **text_out, char *err, size_t errlen);

#endif /* ZZ_LINES_IMPL_H */
