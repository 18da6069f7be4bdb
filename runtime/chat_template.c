/*
 * chat_template.c — placeholder until the Jinja subset lands.
 */
#include "zz_chat.h"

zz_status zz_chat_template_render(const char *tmpl, const zz_chat_msg *m, int n, const char *bos, const char *eos,
                                  bool add_generation_prompt, char **out) {
  (void)tmpl, (void)m, (void)n, (void)bos, (void)eos, (void)add_generation_prompt, (void)out;
  return zz_error(ZZ_ERR_UNSUPPORTED, "chat templates are not rendered yet");
}
