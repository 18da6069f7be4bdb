/*
 * zz_jobs.h — the files of a long job: the JSON Lines prompt reader
 * (runtime/jobio.c) and a file replaced whole by rename, never half written nor
 * written through a link (runtime/newfile.c).
 *
 * Usage:
 *     zz_prompt_reader *r;  zz_prompt p;  bool got;
 *     ZZ_CHECK(zz_prompt_reader_open("prompts.jsonl", &r));
 *     while (zz_prompt_reader_next(r, &p, &got) == ZZ_OK && got) { use(&p); zz_prompt_free(&p); }
 *     zz_prompt_reader_close(r);
 *     ZZ_CHECK(zz_file_replace("out.json", text, len));
 */
#ifndef ZZ_JOBS_H
#define ZZ_JOBS_H

#include "zz_base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ JSON Lines jobs */

/* One prompt of a job file: {"id": …, "prompt": "text"} or {"input_ids": [..]}. */
typedef struct zz_prompt {
  char *id;     /* the id as JSON text ("7", "\"abc\""), or the line number */
  char *text;   /* NULL when input_ids was given */
  int32_t *ids; /* NULL when prompt was given */
  int64_t n_ids;
  int64_t line; /* 1-based line in the file */
  char *raw;    /* the line's JSON when it has keys beyond id, prompt, input_ids (its settings,
                      or an OpenAI batch request: launch/lines.c reads it), else NULL */
  bool openai;  /* an OpenAI batch request line ("custom_id", "body"...): id is its custom_id */
} zz_prompt;

typedef struct zz_prompt_reader zz_prompt_reader;
/* path "-" reads stdin. */
zz_status zz_prompt_reader_open(const char *path, zz_prompt_reader **out);
/* *got = false at end of file; a malformed line is an error naming file:line. */
zz_status zz_prompt_reader_next(zz_prompt_reader *r, zz_prompt *p, bool *got);
/* Back to the first line, so a job can check every line before it runs any; stdin
 * is kept in an unnamed temporary file as it is read, and read again from there. */
zz_status zz_prompt_reader_rewind(zz_prompt_reader *r);
/* Where the next line starts (*at) and its number before it (*line), in the file
 * as zz_prompt_reader_rewind reads it again (stdin: its kept copy); seek goes back
 * there after a rewind, so the next zz_prompt_reader_next reads that prompt again. */
zz_status zz_prompt_reader_tell(zz_prompt_reader *r, int64_t *at, int64_t *line);
zz_status zz_prompt_reader_seek(zz_prompt_reader *r, int64_t at, int64_t line);
void zz_prompt_reader_close(zz_prompt_reader *r);
void zz_prompt_free(zz_prompt *p);

/* A file that replaces `path` (runtime/newfile.c): written in full, then renamed
 * into place, so the old file stays whole until the new one is, and a link at path
 * is replaced, never written through. */
typedef struct zz_newfile {
  int fd;          /* the new file, open for writing */
  char path[4096]; /* where it goes */
  char tmp[4096];  /* its hidden name in path's directory ("" while unnamed, O_TMPFILE) */
} zz_newfile;
zz_status zz_newfile_create(const char *path, zz_newfile *nf);
/* Syncs it and renames it to path (the directory synced too); fd stays open. */
zz_status zz_newfile_publish(zz_newfile *nf);
/* Closes fd; an unpublished file is removed. */
void zz_newfile_discard(zz_newfile *nf);
/* The three for `len` bytes of data. */
zz_status zz_file_replace(const char *path, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* ZZ_JOBS_H */
