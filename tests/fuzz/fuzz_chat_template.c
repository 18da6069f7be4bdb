/* fuzz_chat_template.c — a chat template (runtime/text/chat*.c: parser and
 * renderer), then after a NUL byte the contents of up to three messages separated
 * by NUL bytes (roles user / assistant / user; a tool list and kwargs beside them):
 * it renders to a string, or is refused with a message; never a crash, a leak or a
 * hang (the render's limits are small here, so a hostile input stops quickly). */
#include "fuzz_util.h"
#include "zz_chat.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
  char *text = malloc(len + 2);
  memcpy(text, data, len);
  text[len] = text[len + 1] = '\0';
  static const char *const roles[] = {"user", "assistant", "user"};
  json_t *msgs = json_array();
  const char *p = text + strlen(text);
  for (int k = 0; k < 3 && p < text + len; k++) {
    const char *content = p + 1;
    json_array_append_new(msgs, json_pack("{ss,ss}", "role", roles[k], "content", content));
    p = content + strlen(content);
  }
  if (!json_array_size(msgs)) json_array_append_new(msgs, json_pack("{ss,ss}", "role", "user", "content", "hi"));
  json_t *tools = json_loads("[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
                             "{\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"number\"}}}}}]",
                             0, NULL);
  json_t *vars = json_pack("{ss,ss,sb}", "bos_token", "<s>", "eos_token", "</s>", "enable_thinking", 0);
  zz_chat_limits lim = zz_chat_limits_default();
  lim.max_steps = 200000, lim.max_output = 1 << 20, lim.max_memory = 64u << 20, lim.max_depth = 32;
  zz_chat_input in = {
      .messages = msgs, .tools = tools, .vars = vars, .add_generation_prompt = true, .now = 1, .limits = &lim};
  char *out = NULL;
  zz_error_clear();
  zz_status st = zz_chat_render(text, &in, &out);
  zz_fuzz_expect_message(st);
  if (st == ZZ_OK && !out) abort();
  free(out);
  json_decref(msgs);
  json_decref(tools);
  json_decref(vars);
  free(text);
  return 0;
}
