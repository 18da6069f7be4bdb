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
  CU_ASSERT(json_equal(c5.vars, c4.vars));
  CU_ASSERT(!strcmp(json_string_value(json_object_get(c5.vars, "bos_token")), "<s>"));
  CU_ASSERT(!strcmp(json_string_value(json_object_get(c4.vars, "eos_token")), "</s>"));
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

/* ---------------------------------------------------------------- the sandbox's Jinja */

/* Each case of a fixture file rendered and compared with the text transformers
 * gave; a case transformers refused must be refused. Returns the cases that agree. */
static size_t zz_chat_cases(const char *path, size_t *total) {
  json_error_t e;
  json_t *root = json_load_file(path, 0, &e), *c;
  CU_ASSERT_FATAL(root != NULL);
  size_t i, same = 0;
  json_array_foreach(json_object_get(root, "cases"), i, c) {
    json_t *msgs = json_object_get(c, "messages") ? json_object_get(c, "messages") : json_object_get(root, "messages");
    json_t *tools = json_object_get(c, "tools") ? json_object_get(c, "tools") : json_object_get(root, "tools");
    json_t *vars = json_object_get(c, "vars") ? json_object_get(c, "vars") : json_object_get(root, "vars");
    json_t *agp = json_object_get(c, "add_generation_prompt");
    zz_chat_input in = {.messages = msgs,
                        .tools = json_is_null(tools) ? NULL : tools,
                        .vars = vars,
                        .add_generation_prompt = agp ? json_is_true(agp) : true,
                        .now = 1700000000};
    char *out = NULL;
    const char *tmpl = json_string_value(json_object_get(c, "template"));
    char *file = NULL;
    if (json_object_get(root, "conversations")) { /* the corpus: a template file and a named conversation */
      char tpath[600];
      snprintf(tpath, sizeof tpath, "%s/chat_corpus/%s", ZZ_FIXTURES_DIR, tmpl);
      file = zz_test_read_file(tpath, NULL);
      CU_ASSERT_FATAL(file != NULL);
      tmpl = file;
      in.messages = json_object_get(json_object_get(root, "conversations"),
                                    json_string_value(json_object_get(c, "conversation")));
      in.now = json_integer_value(json_object_get(root, "now"));
    }
    zz_status st = zz_chat_render(tmpl, &in, &out);
    const char *want = json_string_value(json_object_get(c, "expected"));
    bool ok = want ? st == ZZ_OK && strcmp(out, want) == 0 : st != ZZ_OK;
    if (!ok)
      fprintf(stderr, "\n%s case %zu (%s %s): %s\n got: [%s]\nwant: [%s]\n", path, i,
              json_string_value(json_object_get(c, "conversation")) ? json_string_value(json_object_get(c, "template"))
                                                                    : "",
              json_string_value(json_object_get(c, "conversation"))
                  ? json_string_value(json_object_get(c, "conversation"))
                  : "",
              st == ZZ_OK ? "differs" : zz_error_message(), out ? out : "", want ? want : "an error");
    same += ok;
    free(file);
    free(out);
    zz_error_clear();
  }
  *total = json_array_size(json_object_get(root, "cases"));
  json_decref(root);
  return same;
}

static void test_chat_jinja(void) {
  size_t total, same = zz_chat_cases(ZZ_FIXTURES_DIR "/chat_jinja_cases.json", &total);
  CU_ASSERT(total >= 50);
  CU_ASSERT(same == total);
}

/* ---------------------------------------------------------------- refusals and limits */

static zz_status zz_chat_try(const char *tmpl, const zz_chat_limits *lim, char **out) {
  json_t *msgs = json_loads("[{\"role\": \"user\", \"content\": \"hi\"}]", 0, NULL);
  zz_chat_input in = {.messages = msgs, .add_generation_prompt = true, .limits = lim};
  *out = NULL;
  zz_status st = zz_chat_render(tmpl, &in, out);
  json_decref(msgs);
  return st;
}

typedef struct zz_chat_refusal {
  const char *tmpl, *want; /* a template, and what its error must say */
} zz_chat_refusal;

/* each template refused (ZZ_ERR_FORMAT) with a message holding want */
static void zz_chat_expect_refusals(const zz_chat_refusal *cases, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char *out;
    zz_status st = zz_chat_try(cases[i].tmpl, NULL, &out);
    if (st == ZZ_OK || !strstr(zz_error_message(), cases[i].want))
      fprintf(stderr, "\ncase %zu: %s\n", i, st == ZZ_OK ? out : zz_error_message());
    CU_ASSERT(st == ZZ_ERR_FORMAT && strstr(zz_error_message(), cases[i].want) != NULL);
    free(out);
    zz_error_clear();
  }
}

/* what differs from jinja2 is refused naming the line and the construct */
static void test_chat_refusals(void) {
  static const zz_chat_refusal cases[] = {
      {"a\n{{ messages | wordwrap }}", "line 2 of the template: the filter 'wordwrap' is not supported"},
      {"{% include 'x.jinja' %}", "line 1 of the template: the statement {% include %} is not supported"},
      {"{{ messages[0]['content'] ", "a tag that does not end"},
      {"{% if true %}x", "a block without its end (elif else endif)"},
      {"{% endfor %}", "{% endfor %} without its start"},
      {"{{ '%s' % 1 }}", "string formatting with '%' is not supported"},
      {"{{ 'Straße'.upper() }}", "changing the case of non-ASCII text is not supported"},
      {"{{ 99999999999999999999 }}", "an integer too large"}, /* fuzz_chat_template found the overflow */
      {"{{ 9000000000000000000 * 2 }}", "an integer past 64 bits"},
      {"{% for x in messages recursive %}{% endfor %}", "a recursive for is not supported"},
      {"{% break %}", "{% break %} outside a for loop"},
      {"{% set ns = namespace(_x=1) %}", "starting with '_'"},
      {"{{ {[1]: 2} }}", "a dict key that is a list is not supported"},
      {"{{ ['b', 'A'] | sort }}", "sort of strings with upper-case"},
      {"{{ [1, 2] | unique(attribute='x') }}", "the filter 'unique' with arguments is not supported"},
      {"{{ '10' | int(base=16) }}", "int has no argument 'base'"},
  };
  zz_chat_expect_refusals(cases, sizeof cases / sizeof cases[0]);
}

/* hostile templates stop with an error naming the limit (under the default limits:
 * each stops in milliseconds; ctest's time is the bound, no timed assertion) */
static void test_chat_limits(void) {
  static const zz_chat_refusal cases[] = {
      {"{% for i in range(10**9) %}x{% endfor %}", "max_steps"},
      {"{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", "max_"},
      {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "max_depth"},
      {"{% set ns = namespace(s='ab') %}{% for i in range(200) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
       "max_output"},
      {"{{ 'x' * 10**12 }}", "max_output"},
      {"{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", "max_"},
      {"{{ 2 ** 10**18 }}", "64 bits"},
      /* work that allocates nothing counts too: scans, unique, sorts */
      {"{% set big = range(100000) | list %}{% for i in range(100000) %}{% if i in big %}{% endif %}{% endfor %}",
       "max_"},
      {"{{ range(3000000) | unique | list | length }}", "max_"}, /* steps, or under ASan, seconds */
      {"{% set s = 'ab' * 10000000 %}{% for i in range(100000) %}{{ s.find('c') }}{% endfor %}", "max_"},
  };
  zz_chat_expect_refusals(cases, sizeof cases / sizeof cases[0]);
  /* nesting past the parser's depth */
  char deep[4200];
  memset(deep, '(', 2000);
  sprintf(deep + 2000, "1");
  memset(deep + 2001, ')', 2000);
  deep[4001] = '\0';
  char *t = malloc(4300), *out;
  sprintf(t, "{{ %s }}", deep);
  CU_ASSERT(zz_chat_try(t, NULL, &out) == ZZ_ERR_FORMAT && strstr(zz_error_message(), "max_depth"));
  free(t);
  zz_error_clear();
  /* each limit as set: time, memory, output */
  zz_chat_limits lim = zz_chat_limits_default();
  lim.max_seconds = 0;
  CU_ASSERT(zz_chat_try("{% for i in range(100000) %}{% endfor %}", &lim, &out) == ZZ_ERR_FORMAT &&
            strstr(zz_error_message(), "max_seconds"));
  lim = zz_chat_limits_default();
  lim.max_memory = 1 << 20;
  CU_ASSERT(zz_chat_try("{% for i in range(1000) %}{% set x = 'y' * 10000 %}{% endfor %}", &lim, &out) ==
                ZZ_ERR_FORMAT &&
            strstr(zz_error_message(), "max_memory"));
  lim = zz_chat_limits_default();
  lim.max_output = 10;
  CU_ASSERT(zz_chat_try("{{ 'abcdefghijk' }}", &lim, &out) == ZZ_ERR_FORMAT &&
            strstr(zz_error_message(), "max_output"));
  CU_ASSERT(zz_chat_try("{{ 'abcdefghij' }}", &lim, &out) == ZZ_OK && out && !strcmp(out, "abcdefghij"));
  free(out);
  zz_error_clear();
}

/* real templates of 40 model families, transformers' text byte for byte */
static void test_chat_corpus(void) {
  size_t total, same = zz_chat_cases(ZZ_FIXTURES_DIR "/chat_corpus.json", &total);
  fprintf(stderr, "(%zu of %zu equal) ", same, total);
  CU_ASSERT(total >= 150);
  CU_ASSERT(same == total);
}

/* ---------------------------------------------------------------- OpenAI requests */

/* request bodies as clients send them (tool_calls with string arguments, tool
 * messages, content parts, tools, chat_template_kwargs, add_generation_prompt,
 * continue_final_message) through launch/chat.c: transformers' text for them */
static void test_chat_requests(void) {
  json_error_t e;
  json_t *root = json_load_file(ZZ_FIXTURES_DIR "/chat_requests.json", 0, &e), *c;
  CU_ASSERT_FATAL(root != NULL);
  size_t i, same = 0;
  json_array_foreach(json_object_get(root, "cases"), i, c) {
    char path[600], err[600], *text = NULL;
    snprintf(path, sizeof path, "%s/chat_corpus/%s", ZZ_FIXTURES_DIR,
             json_string_value(json_object_get(c, "template")));
    zz_chat_ctx ctx = {.tmpl = zz_test_read_file(path, NULL),
                       .vars = json_deep_copy(json_object_get(root, "specials"))};
    CU_ASSERT_FATAL(ctx.tmpl != NULL);
    bool ok = zz_chat_render_request(&ctx, json_object_get(c, "body"), &text, NULL, err, sizeof err);
    const char *want = json_string_value(json_object_get(c, "expected"));
    bool good = want ? ok && !strcmp(text, want) : !ok;
    if (!good)
      fprintf(stderr, "\nrequest %zu: %s\n got: [%s]\nwant: [%s]\n", i, ok ? "differs" : err, text ? text : "",
              want ? want : "an error");
    same += good;
    free(text);
    zz_chat_ctx_free(&ctx);
  }
  CU_ASSERT(i >= 10 && same == i);
  json_decref(root);
}

/* ---------------------------------------------------------------- tool calls in the answer */

static void test_chat_tool_calls(void) {
  static const struct {
    int format;
    const char *text, *content, *name0, *args0; /* content NULL: JSON null; name0 NULL: not tool calls */
    size_t n;
  } cases[] = {
      {ZZ_TOOLS_HERMES,
       "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
       "Let me check.", "get_weather", "{\"city\": \"Paris\"}", 1},
      {ZZ_TOOLS_HERMES,
       "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"b\", "
       "\"arguments\": {\"x\": [1, 2]}}</tool_call>",
       NULL, "a", "{}", 2},
      {ZZ_TOOLS_HERMES, "<tool_call>{not json}</tool_call>", NULL, NULL, NULL, 0},
      {ZZ_TOOLS_HERMES, "Paris is sunny.", NULL, NULL, NULL, 0},
      {ZZ_TOOLS_LLAMA_JSON, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Zürich\"}}", NULL, "get_weather",
       "{\"city\": \"Zürich\"}", 1},
      {ZZ_TOOLS_LLAMA_JSON,
       "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {\"k\": 1}}", NULL, "a",
       "{}", 2},
      {ZZ_TOOLS_LLAMA_JSON, "The answer is {x}.", NULL, NULL, NULL, 0},
      {ZZ_TOOLS_MISTRAL, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": \"c\"}}]", NULL, "f",
       "{\"a\": 1, \"b\": \"c\"}", 1},
      {ZZ_TOOLS_MISTRAL, "[TOOL_CALLS]oops", NULL, NULL, NULL, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *content = NULL, *calls = NULL;
    bool got = zz_chat_tool_calls(cases[i].format, cases[i].text, "x", &content, &calls);
    CU_ASSERT(got == (cases[i].name0 != NULL));
    if (!got) continue;
    json_t *fn = json_object_get(json_array_get(calls, 0), "function");
    bool same = json_array_size(calls) == cases[i].n &&
                !strcmp(json_string_value(json_object_get(fn, "name")), cases[i].name0) &&
                !strcmp(json_string_value(json_object_get(fn, "arguments")), cases[i].args0) &&
                (cases[i].content ? json_is_string(content) && !strcmp(json_string_value(content), cases[i].content)
                                  : json_is_null(content)) &&
                !strcmp(json_string_value(json_object_get(json_array_get(calls, 0), "type")), "function") &&
                json_is_string(json_object_get(json_array_get(calls, 0), "id"));
    if (!same) fprintf(stderr, "\ntool case %zu: %s\n", i, json_dumps(calls, 0));
    CU_ASSERT(same);
    json_decref(content);
    json_decref(calls);
  }
  /* the family's form, from its template */
  static const struct {
    const char *file;
    int format;
  } fams[] = {{"Qwen-Qwen2.5-7B-Instruct.jinja", ZZ_TOOLS_HERMES},
              {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ZZ_TOOLS_HERMES},
              {"meta-llama-Llama-3.1-8B-Instruct.jinja", ZZ_TOOLS_LLAMA_JSON},
              {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ZZ_TOOLS_MISTRAL},
              {"cz-zephyr.jinja", ZZ_TOOLS_NONE}};
  for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
    char path[600];
    snprintf(path, sizeof path, "%s/chat_corpus/%s", ZZ_FIXTURES_DIR, fams[i].file);
    char *t = zz_test_read_file(path, NULL);
    CU_ASSERT_FATAL(t != NULL);
    CU_ASSERT((int)zz_chat_tool_format(t) == fams[i].format);
    free(t);
  }
  /* the answer line: tool_calls and finish_reason "tool_calls", as OpenAI's */
  zz_tokenizer *tok;
  CU_ASSERT_FATAL(zz_tokenizer_load(ZZ_FIXTURES_DIR "/tok-gpt2-json", &tok) == ZZ_OK);
  const char *said = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>";
  int32_t *ids;
  int64_t n;
  CU_ASSERT_FATAL(zz_tokenizer_encode(tok, said, strlen(said), &ids, &n) == ZZ_OK);
  zz_opts o;
  zz_opts_defaults(&o);
  zz_line_defaults d;
  zz_line_defaults_init(&o, &d);
  zz_prompt p = {.id = "\"t1\"",
                 .line = 1,
                 .openai = true,
                 .raw = "{\"custom_id\": \"t1\", \"method\": \"POST\", \"url\": \"/v1/chat/completions\", \"body\": "
                        "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tools\": []}}"};
  zz_line l;
  CU_ASSERT_FATAL(zz_line_parse(&p, &d, &l) == ZZ_OK);
  if (l.err) fprintf(stderr, "\n%s\n", l.err);
  CU_ASSERT_FATAL(!l.err);
  l.tool_format = ZZ_TOOLS_HERMES;
  zz_config cfg = {0};
  zz_completion c = {.tokens = ids, .n_tokens = n, .finish = ZZ_FINISH_LENGTH};
  char *line = zz_line_answer(&p, &l, tok, &cfg, &c, 3, &d);
  json_t *ans = line ? json_loads(line, 0, NULL) : NULL;
  json_t *ch = json_array_get(json_object_get(json_object_get(json_object_get(ans, "response"), "body"), "choices"), 0);
  json_t *msg = json_object_get(ch, "message");
  CU_ASSERT(json_is_null(json_object_get(msg, "content")));
  CU_ASSERT(!strcmp(json_string_value(json_object_get(ch, "finish_reason")) ?: "", "tool_calls"));
  CU_ASSERT(
      !strcmp(json_string_value(json_object_get(
                  json_object_get(json_array_get(json_object_get(msg, "tool_calls"), 0), "function"), "arguments"))
                  ?: "",
              "{\"city\": \"Paris\"}"));
  json_decref(ans);
  free(line);
  free(ids);
  zz_line_free(&l);
  zz_tokenizer_free(tok);
}

void zz_test_chat_register(void) {
  CU_pSuite s = CU_add_suite("chat", NULL, NULL);
  CU_add_test(s, "a template where transformers 5 and 4 save it (chat_template.jinja, tokenizer_config.json)",
              test_chat_dirs);
  CU_add_test(s, "the sandbox's Jinja construct by construct, as transformers renders it", test_chat_jinja);
  CU_add_test(s, "real templates (chat_corpus/): transformers 5's text byte for byte", test_chat_corpus);
  CU_add_test(s, "OpenAI request bodies (tools, tool_calls, parts, kwargs) render as transformers does",
              test_chat_requests);
  CU_add_test(s, "tool calls in the answer: Hermes/Qwen, Llama 3.1 JSON, Mistral into OpenAI's tool_calls",
              test_chat_tool_calls);
  CU_add_test(s, "what differs from jinja2 is refused naming the line and the construct", test_chat_refusals);
  CU_add_test(s, "hostile templates stop with an error naming the limit", test_chat_limits);
}
