/*
 * test_runtime_chat.c — issue 46: chat as transformers 5 renders it. A model
 * directory's template found where transformers saves it (chat_template.jinja and
 * additional_chat_templates/, or tokenizer_config.json's chat_template, string or
 * list: tests/fixtures/chat-hf5, chat-hf4, made by make_chat_dir_fixtures.py).
 */
#include <CUnit/CUnit.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "lines_impl.h"
#include "zz_chat.h"
#include "zz_runtime.h"
#include "zz_tests.h"

/* ---------------------------------------------------------------- where the template is */

static void test_chat_dirs(void) {
  zz_chat_ctx c5, c4, none;
  char err[600];
  CU_ASSERT_FATAL(zz_chat_ctx_load(ZZ_FIXTURES_DIR "/chat-hf5", &c5) == ZZ_OK);
  CU_ASSERT_FATAL(zz_chat_ctx_load(ZZ_FIXTURES_DIR "/chat-hf4", &c4) == ZZ_OK);
  /* both layouts: the same two templates and tokens */
  CU_ASSERT_FATAL(c5.tmpl && c5.tmpl_tools && c4.tmpl && c4.tmpl_tools);
  CU_ASSERT(strcmp(c5.tmpl, c4.tmpl) == 0 && strcmp(c5.tmpl_tools, c4.tmpl_tools) == 0);
  CU_ASSERT(strcmp(c5.tmpl, c5.tmpl_tools) != 0);
  CU_ASSERT(c5.bos && c4.bos && !strcmp(c5.bos, "<s>") && !strcmp(c4.eos, "</s>"));
  CU_ASSERT(zz_chat_ctx_template(&c5, false, err, sizeof err) == c5.tmpl);
  CU_ASSERT(zz_chat_ctx_template(&c5, true, err, sizeof err) == c5.tmpl_tools);
  /* the default renders transformers' text */
  json_error_t e;
  json_t *want = json_load_file(ZZ_FIXTURES_DIR "/chat-hf5/expected.json", 0, &e);
  CU_ASSERT_FATAL(want != NULL);
  char *text = NULL;
  CU_ASSERT_FATAL(zz_chat_render_messages(&c5, json_object_get(want, "messages"), &text, err, sizeof err));
  CU_ASSERT(strcmp(text, json_string_value(json_object_get(want, "plain"))) == 0);
  free(text);
  json_decref(want);
  /* no template anywhere: the message names every place looked */
  CU_ASSERT_FATAL(zz_chat_ctx_load(ZZ_FIXTURES_DIR "/tok-gpt2-json", &none) == ZZ_OK);
  CU_ASSERT(zz_chat_ctx_template(&none, false, err, sizeof err) == NULL);
  CU_ASSERT(strstr(err, "chat_template.jinja") && strstr(err, "tokenizer_config.json") &&
            strstr(err, "additional_chat_templates"));
  zz_chat_ctx_free(&c5);
  zz_chat_ctx_free(&c4);
  zz_chat_ctx_free(&none);
}

void zz_test_chat_register(void) {
  CU_pSuite s = CU_add_suite("chat", NULL, NULL);
  CU_add_test(s, "a template where transformers 5 and 4 save it (chat_template.jinja, tokenizer_config.json)",
              test_chat_dirs);
}
