/*
 * jobio.c — the JSON Lines job file: one prompt per line, {"prompt": text} or
 * {"input_ids": [...]}, with an optional "id" kept verbatim for the output line.
 * Blank lines are skipped; anything else malformed names file:line.
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "zz_jobs.h"

struct zz_prompt_reader {
  FILE *f;
  FILE *spool; /* stdin or a pipe: every line read so far, so it can be read again */
  char path[4096];
  int64_t line;
  char *buf;
  size_t cap;
};

zz_status zz_prompt_reader_open(const char *path, zz_prompt_reader **out) {
  zz_prompt_reader *r = calloc(1, sizeof *r);
  if (!r) return zz_error(ZZ_ERR_NO_MEMORY, "prompts: out of memory");
  if (strcmp(path, "-") == 0) {
    r->f = stdin;
    snprintf(r->path, sizeof r->path, "<stdin>");
  } else {
    r->f = fopen(path, "r");
    snprintf(r->path, sizeof r->path, "%s", path);
  }
  if (!r->f) {
    zz_status st = zz_error(ZZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    free(r);
    return st;
  }
  struct stat sb;
  if ((fstat(fileno(r->f), &sb) != 0 || !S_ISREG(sb.st_mode)) && !(r->spool = tmpfile())) {
    zz_status st = zz_error(ZZ_ERR_IO, "%s: cannot make a temporary file to hold the prompts: %s", r->path,
                            strerror(errno));
    zz_prompt_reader_close(r);
    return st;
  }
  *out = r;
  return ZZ_OK;
}

void zz_prompt_reader_close(zz_prompt_reader *r) {
  if (!r) return;
  if (r->f && r->f != stdin) fclose(r->f);
  if (r->spool && r->spool != r->f) fclose(r->spool);
  free(r->buf);
  free(r);
}

void zz_prompt_free(zz_prompt *p) {
  if (!p) return;
  free(p->id);
  free(p->text);
  free(p->ids);
  free(p->raw);
  memset(p, 0, sizeof *p);
}

/* An OpenAI batch request line: its checks (and a bad one's error line) are the
 * launcher's, so only its custom_id is read here (the line number when it has none
 * that is a string: the launcher answers it with an error). */
static zz_status zz_prompt_openai(zz_prompt_reader *r, json_t *o, const char *text, size_t len, zz_prompt *p) {
  json_t *cid = json_object_get(o, "custom_id");
  zz_prompt q = {.line = r->line, .openai = true};
  char tmp[32];
  snprintf(tmp, sizeof tmp, "%lld", (long long)r->line);
  q.id = json_is_string(cid) ? json_dumps(cid, JSON_ENCODE_ANY | JSON_COMPACT) : strdup(tmp);
  q.raw = strndup(text, len);
  if (!q.id || !q.raw) {
    zz_prompt_free(&q);
    return zz_error(ZZ_ERR_NO_MEMORY, "prompts: out of memory");
  }
  *p = q;
  return ZZ_OK;
}

static zz_status zz_prompt_from_json(zz_prompt_reader *r, json_t *o, const char *line, size_t len, zz_prompt *p) {
  if (!json_is_object(o)) return zz_error(ZZ_ERR_FORMAT, "%s:%lld: not a JSON object", r->path, (long long)r->line);
  if (json_object_get(o, "custom_id") || json_object_get(o, "body") || json_object_get(o, "url"))
    return zz_prompt_openai(r, o, line, len, p);
  json_t *id = json_object_get(o, "id"), *text = json_object_get(o, "prompt"), *ids = json_object_get(o, "input_ids");
  if ((text != NULL) == (ids != NULL))
    return zz_error(ZZ_ERR_FORMAT, "%s:%lld: a line needs exactly one of \"prompt\" and \"input_ids\"", r->path,
                    (long long)r->line);
  if (text && !json_is_string(text))
    return zz_error(ZZ_ERR_FORMAT, "%s:%lld: \"prompt\" must be a string", r->path, (long long)r->line);
  if (ids && (!json_is_array(ids) || json_array_size(ids) == 0))
    return zz_error(ZZ_ERR_FORMAT, "%s:%lld: \"input_ids\" must be a non-empty list", r->path, (long long)r->line);
  if (id && !(json_is_string(id) || json_is_integer(id)))
    return zz_error(ZZ_ERR_FORMAT, "%s:%lld: \"id\" must be a string or an integer", r->path, (long long)r->line);
  zz_prompt q = {.line = r->line};
  /* settings beside the prompt: kept whole for the launcher, which names any it
   * does not know (a key is never dropped silently) */
  if ((size_t)(id != NULL) + 1 < json_object_size(o) && !(q.raw = strndup(line, len)))
    return zz_error(ZZ_ERR_NO_MEMORY, "prompts: out of memory");
  q.id = id ? json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
  if (!id) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%lld", (long long)r->line);
    q.id = strdup(tmp);
  }
  if (!q.id) {
    zz_prompt_free(&q);
    return zz_error(ZZ_ERR_NO_MEMORY, "prompts: out of memory");
  }
  if (text) {
    q.text = strdup(json_string_value(text));
    if (!q.text) {
      zz_prompt_free(&q);
      return zz_error(ZZ_ERR_NO_MEMORY, "prompts: out of memory");
    }
  } else {
    size_t n = json_array_size(ids);
    q.ids = malloc(n * sizeof *q.ids);
    if (!q.ids) {
      zz_prompt_free(&q);
      return zz_error(ZZ_ERR_NO_MEMORY, "prompts: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
      json_t *x = json_array_get(ids, i);
      if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX) {
        zz_prompt_free(&q);
        return zz_error(ZZ_ERR_FORMAT, "%s:%lld: input_ids[%zu] is not a token id", r->path, (long long)r->line, i);
      }
      q.ids[i] = (int32_t)json_integer_value(x);
    }
    q.n_ids = (int64_t)n;
  }
  *p = q;
  return ZZ_OK;
}

zz_status zz_prompt_reader_next(zz_prompt_reader *r, zz_prompt *p, bool *got) {
  for (;;) {
    ssize_t len = getline(&r->buf, &r->cap, r->f);
    if (len < 0) {
      if (ferror(r->f)) return zz_error(ZZ_ERR_IO, "%s: read error after line %lld", r->path, (long long)r->line);
      *got = false;
      return ZZ_OK;
    }
    r->line++;
    if (r->spool && r->f != r->spool && fwrite(r->buf, 1, (size_t)len, r->spool) != (size_t)len)
      return zz_error(ZZ_ERR_IO, "%s: cannot keep line %lld in a temporary file: %s", r->path, (long long)r->line,
                      strerror(errno));
    size_t i = 0;
    while (i < (size_t)len && (r->buf[i] == ' ' || r->buf[i] == '\t' || r->buf[i] == '\n' || r->buf[i] == '\r')) i++;
    if (i == (size_t)len) continue; /* blank line */
    json_error_t err;
    json_t *o = json_loadb(r->buf, (size_t)len, JSON_REJECT_DUPLICATES, &err);
    if (!o)
      return zz_error(ZZ_ERR_FORMAT, "%s:%lld:%d: bad JSON: %s", r->path, (long long)r->line, err.column, err.text);
    zz_status st = zz_prompt_from_json(r, o, r->buf, (size_t)len, p);
    json_decref(o);
    if (st == ZZ_OK) *got = true;
    return st;
  }
}

zz_status zz_prompt_reader_rewind(zz_prompt_reader *r) {
  if (r->spool && r->f != r->spool) { /* from here on, what was kept of it */
    if (r->f != stdin) fclose(r->f);
    r->f = r->spool;
  }
  if (fflush(r->f) != 0 || fseek(r->f, 0, SEEK_SET) != 0)
    return zz_error(ZZ_ERR_IO, "%s: cannot read it again from the start: %s", r->path, strerror(errno));
  clearerr(r->f);
  r->line = 0;
  return ZZ_OK;
}

zz_status zz_prompt_reader_tell(zz_prompt_reader *r, int64_t *at, int64_t *line) {
  FILE *f = r->spool ? r->spool : r->f; /* the kept copy grows with what was read */
  off_t o = ftello(f);
  if (o < 0) return zz_error(ZZ_ERR_IO, "%s: cannot tell a place in it: %s", r->path, strerror(errno));
  *at = (int64_t)o;
  *line = r->line;
  return ZZ_OK;
}

zz_status zz_prompt_reader_seek(zz_prompt_reader *r, int64_t at, int64_t line) {
  if (r->spool && r->f != r->spool)
    return zz_error(ZZ_ERR_INVALID_ARG, "%s: a place is sought only after the prompts were read once", r->path);
  if (fseeko(r->f, (off_t)at, SEEK_SET) != 0)
    return zz_error(ZZ_ERR_IO, "%s: cannot go back to line %lld: %s", r->path, (long long)line + 1, strerror(errno));
  clearerr(r->f);
  r->line = line;
  return ZZ_OK;
}
