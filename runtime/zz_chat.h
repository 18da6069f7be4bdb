/*
 * zz_chat.h — chat templates (runtime/chat_template.c): the subset of Jinja that
 * the chat templates of Hugging Face models are written in, rendered the way
 * transformers' apply_chat_template renders them (jinja2 with trim_blocks and
 * lstrip_blocks; messages, bos_token, eos_token, add_generation_prompt,
 * raise_exception). A construct outside the subset is an error naming it and its
 * place in the template, never a silent guess.
 *
 * Usage:
 *     zz_chat_msg m[] = {{"system", "Be brief."}, {"user", "Hi"}};
 *     char *text;
 *     if (zz_chat_template_render(tmpl, m, 2, "<s>", "</s>", true, &text) == ZZ_OK) ... free(text);
 */
#ifndef ZZ_CHAT_H
#define ZZ_CHAT_H

#include <stdbool.h>

#include "zz_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zz_chat_msg {
  const char *role, *content;
} zz_chat_msg;

/* tmpl rendered with messages m[0..n); bos / eos may be NULL (undefined in the
 * template). *out malloc'd. Errors: ZZ_ERR_FORMAT (a syntax error or a construct
 * not supported, with its line), ZZ_ERR_INVALID_ARG (the template's
 * raise_exception, with its message). */
zz_status zz_chat_template_render(const char *tmpl, const zz_chat_msg *m, int n, const char *bos, const char *eos,
                                  bool add_generation_prompt, char **out);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_CHAT_H */
