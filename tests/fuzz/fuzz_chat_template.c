/* fuzz_chat_template.c — a chat template (tokenizer_config.json's chat_template,
 * runtime/chat_template.c), then after a NUL byte the contents of up to three
 * messages separated by NUL bytes (roles user / assistant / user): it renders to a
 * string, or is refused with a message; never a crash, a leak or a hang. */
#include "fuzz_util.h"
#include "zz_chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  char *text = malloc(len + 2);
  memcpy(text, data, len);
  text[len] = text[len + 1] = '\0';
  zz_chat_msg m[3] = {{"user", ""}, {"assistant", ""}, {"user", ""}};
  int n = 1;
  const char *p = text + strlen(text);
  for (int k = 0; k < 3 && p < text + len; k++, n = k) {
    m[k].content = p + 1;
    p = m[k].content + strlen(m[k].content);
  }
  if (n < 1) n = 1;
  char *out = NULL;
  zz_error_clear();
  zz_status st = zz_chat_template_render(text, m, n, "<s>", "</s>", true, &out);
  zz_fuzz_expect_message(st);
  if (st == ZZ_OK && !out) abort();
  free(out);
  free(text);
  return 0;
}
