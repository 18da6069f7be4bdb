/*
 * check_batch_output.c — validates a file of OpenAI batch output lines against the
 * form issue #25 gives (and vLLM's run_batch writes):
 *   {"id", "custom_id", "response": {"status_code": 200, "request_id", "body": {"id",
 *    "object": "text_completion" | "chat.completion", "created", "model", "choices":
 *    [{"index", "text" | "message": {"role": "assistant", "content"}, "logprobs",
 *    "finish_reason": "stop" | "length"}], "usage": {"prompt_tokens",
 *    "completion_tokens", "total_tokens"}}}, "error": null}
 * or the same with "response": null and "error": {"code", "message"}.
 * Prints "CUSTOM_ID ok N" (N choices) or "CUSTOM_ID error CODE" per line; a line that
 * is neither is named on stderr and the exit status is 1. Used by test_genif.sh.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int bad(long line, const char *what) {
  fprintf(stderr, "line %ld: %s\n", line, what);
  return 1;
}

static int check_choice(long ln, json_t *c, size_t i, bool chat) {
  if (!json_is_object(c) || json_integer_value(json_object_get(c, "index")) != (json_int_t)i ||
      !json_is_integer(json_object_get(c, "index")))
    return bad(ln, "choice without its index");
  if (chat) {
    json_t *m = json_object_get(c, "message");
    const char *role = json_is_object(m) ? json_string_value(json_object_get(m, "role")) : NULL;
    if (!role || strcmp(role, "assistant") || !json_is_string(json_object_get(m, "content")))
      return bad(ln, "chat choice without message {role: assistant, content}");
  } else if (!json_is_string(json_object_get(c, "text"))) {
    return bad(ln, "completion choice without text");
  }
  json_t *lp = json_object_get(c, "logprobs");
  if (!lp || !(json_is_null(lp) || json_is_object(lp))) return bad(ln, "choice: logprobs must be null or an object");
  const char *f = json_string_value(json_object_get(c, "finish_reason"));
  if (!f || (strcmp(f, "stop") && strcmp(f, "length"))) return bad(ln, "choice: finish_reason not stop / length");
  return 0;
}

static int check_line(long ln, json_t *o) {
  if (!json_is_object(o) || json_object_size(o) != 4) return bad(ln, "not an object of 4 keys");
  json_t *id = json_object_get(o, "id"), *cid = json_object_get(o, "custom_id"), *resp = json_object_get(o, "response"),
         *err = json_object_get(o, "error");
  if (!json_is_string(id) || !cid || !(json_is_string(cid) || json_is_null(cid)) || !resp || !err)
    return bad(ln, "id, custom_id, response, error");
  const char *name = json_is_string(cid) ? json_string_value(cid) : "(null)";
  if (json_is_null(resp)) {
    if (!json_is_object(err) || !json_is_string(json_object_get(err, "code")) ||
        !json_is_string(json_object_get(err, "message")))
      return bad(ln, "response null without error {code, message}");
    printf("%s error %s\n", name, json_string_value(json_object_get(err, "code")));
    return 0;
  }
  if (!json_is_null(err)) return bad(ln, "a response with an error");
  if (json_integer_value(json_object_get(resp, "status_code")) != 200 ||
      !json_is_string(json_object_get(resp, "request_id")))
    return bad(ln, "response without status_code 200 and request_id");
  json_t *b = json_object_get(resp, "body");
  const char *obj = json_string_value(json_object_get(b, "object"));
  if (!json_is_object(b) || !json_is_string(json_object_get(b, "id")) || !obj ||
      (strcmp(obj, "text_completion") && strcmp(obj, "chat.completion")) ||
      !json_is_integer(json_object_get(b, "created")) || !json_is_string(json_object_get(b, "model")))
    return bad(ln, "body without id, object, created, model");
  json_t *ch = json_object_get(b, "choices"), *u = json_object_get(b, "usage");
  if (!json_is_array(ch) || json_array_size(ch) == 0) return bad(ln, "body without choices");
  for (size_t i = 0; i < json_array_size(ch); i++)
    if (check_choice(ln, json_array_get(ch, i), i, !strcmp(obj, "chat.completion"))) return 1;
  json_t *pt = json_object_get(u, "prompt_tokens"), *ct = json_object_get(u, "completion_tokens"),
         *tt = json_object_get(u, "total_tokens");
  if (!json_is_integer(pt) || !json_is_integer(ct) || !json_is_integer(tt) ||
      json_integer_value(pt) + json_integer_value(ct) != json_integer_value(tt) || json_integer_value(pt) < 1)
    return bad(ln, "usage: prompt_tokens + completion_tokens != total_tokens");
  printf("%s ok %zu\n", name, json_array_size(ch));
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s FILE.jsonl\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "r");
  if (!f) {
    perror(argv[1]);
    return 2;
  }
  char *buf = NULL;
  size_t cap = 0;
  long ln = 0;
  int rc = 0;
  while (getline(&buf, &cap, f) > 0) {
    ln++;
    json_error_t e;
    json_t *o = json_loads(buf, 0, &e);
    if (!o) rc |= bad(ln, "not JSON");
    else
      rc |= check_line(ln, o);
    json_decref(o);
  }
  free(buf);
  fclose(f);
  return rc;
}
