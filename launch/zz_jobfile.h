/*
 * zz_jobfile.h — the bookkeeping of a generate job: the ids already written
 * (--resume), the output file committed block by block (launch/jobfile.c), the
 * progress line, and the job's files and prompts (launch/job.c).
 */
#ifndef ZZ_JOBFILE_H
#define ZZ_JOBFILE_H

#include "zz_opts.h"

/* ids already present in an output file, for --resume; also a prompt's hash by id */
typedef struct zz_resume_set zz_resume_set;
/* Ids in the set (0 for NULL). */
int64_t zz_resume_count(const zz_resume_set *s);
bool zz_resume_has(const zz_resume_set *s, const char *id_json);
/* An empty set (NULL when out of memory); *fresh says whether id was new. */
zz_resume_set *zz_resume_new(void);
zz_status zz_resume_insert(zz_resume_set *s, const char *id_json, bool *fresh);
/* The same with a value kept beside the id (a prompt's hash), and its lookup. */
zz_status zz_resume_put(zz_resume_set *s, const char *id_json, uint64_t value, bool *fresh);
bool zz_resume_get(const zz_resume_set *s, const char *id_json, uint64_t *value_out);
/* Every id once, in no order: start with *pos = 0; NULL at the end. */
const char *zz_resume_next(const zz_resume_set *s, size_t *pos);
void zz_resume_free(zz_resume_set *s);

/* --out of a generate job (launch/jobfile.c). Nothing that was in it is lost on
 * any error or kill: --resume appends to it in place (a torn last line cut); a new
 * job over an existing file writes a new file in its directory that replaces it by
 * rename at the first commit; a path that does not exist is created with O_EXCL.
 * A symbolic link at the path is refused. Locked (flock) for the whole job; beside
 * a regular file, PATH.job.json records the job that wrote it (zz_job_record). */
typedef struct zz_output {
  const char *path; /* "-": stdout */
  FILE *f;          /* where lines go (NULL until zz_output_begin for a file being replaced) */
  FILE *old;        /* the file a new job replaces: kept whole and locked until then */
  zz_newfile nf;    /* that new file */
  mode_t mode;      /* the old file's mode, given to the new one */
  bool regular, created, resume, begun;
  long good_len; /* --resume: bytes of the complete lines */
  char *record;  /* the job record written beside it, or NULL */
} zz_output;
/* Opens and locks path, refusing a link, a directory, a file another job holds.
 * With resume reads the ids it holds (done_out; refusing a file that is not one
 * job's output); changes nothing. */
zz_status zz_output_open(zz_output *o, const char *path, bool resume, zz_resume_set **done_out);
/* Starts writing, once nothing else can refuse the job: --resume cuts a torn last
 * line; a new job over an existing file starts its new file. record (or NULL): the
 * job record, written beside the output before its first line is at the path. */
zz_status zz_output_begin(zz_output *o, const char *record);
/* Flushes and syncs a finished block's lines; the first commit of a new job over
 * an existing file puts the new file in place. */
zz_status zz_output_commit(zz_output *o);
/* A file this job created but never began writing is removed: a refused job
 * leaves no trace. */
void zz_output_close(zz_output *o);
/* PATH.job.json */
void zz_output_record_path(const char *path, char *buf, size_t len);
/* Non-empty lines of a regular file, or -1 (stdin, pipes). */
int64_t zz_count_lines(const char *path);

/* What the time left is estimated from: the lines still to run and the blocks done. */
typedef struct zz_eta_in {
  int64_t prompt_left, gen_left; /* prompt tokens of the lines still to run (each completion's), and the new
                                    tokens they ask (max_tokens x n) */
  int64_t prompt_done, gen_done; /* of the blocks done: prompt tokens computed, new tokens generated */
  int64_t gen_asked_done;        /* and the new tokens those blocks asked (an answer ends sooner at EOS or a stop) */
  double prefill_s, decode_s;    /* their prompt steps' and token steps' seconds (0, 0: not known) */
  double elapsed_s;              /* since the job began: the seconds outside the two phases too */
} zz_eta_in;
/* Seconds left (-1: nothing done yet to measure a rate by): the prompt tokens left
 * at the prefill rate measured so far, plus the new tokens left, times the share
 * of asked tokens answers have taken so far, at the decode rate; scaled by the
 * elapsed time over the two phases' (commits, tokenizing, between blocks). Without
 * the phases' seconds, every token at the job's rate so far. */
double zz_eta_seconds(const zz_eta_in *in);

/* One committed block, as the progress line counts it. */
typedef struct zz_progress_block {
  int64_t lines, new_tokens; /* lines written, new tokens generated */
  int64_t prompt_tokens;     /* prompt tokens of its sequences (each completion's) */
  int64_t asked_tokens;      /* new tokens its sequences asked */
  double prefill_s, decode_s;
} zz_progress_block;

typedef struct zz_progress {
  bool on;
  bool tty; /* stderr is a terminal (asked once) */
  int64_t total, done, skipped, tokens;
  zz_eta_in eta; /* the lines left (zz_job_start) and the blocks done (zz_progress_update) */
  double t0, last;
  int64_t live;                     /* tokens of the block still running (zz_progress_token) */
  int64_t max_tokens;               /* prompts to run x the most new tokens a line asks: the ETA's bound before a
                         first block ends (0: unknown) */
  int64_t errors;                   /* lines answered with an error */
  int64_t pos_computed, pos_useful; /* zz_result's, summed over blocks (0: not known, a pipeline) */
  int64_t refilled;                 /* zz_result's: sequences that took an ended one's slot */
  const char *out;                  /* where the lines go, for the summary */
} zz_progress;
void zz_progress_start(zz_progress *p, const zz_opts *o, int64_t total);
void zz_progress_update(zz_progress *p, const zz_progress_block *b);
/* One token of a running block: a terminal's line is redrawn at most twice a second. */
void zz_progress_token(zz_progress *p);
/* The progress line's end, then the one-line summary (prompts, tokens, tokens/s,
 * elapsed, the output), printed on stderr whatever it is. */
void zz_progress_finish(zz_progress *p);

/* A generate job's files and prompts (launch/job.c): the one process, or rank 0 of
 * a pipeline. The other ranks open only the model side (files = false). */
typedef struct zz_job {
  const zz_opts *o;   /* the options (the caller's, read only) */
  bool files;         /* holds the prompts, the output and the tokenizer */
  int max_prompt_len; /* --max-prompt-len, or without it the positions --max-new-tokens leaves */
  zz_config cfg;
  zz_model model;
  zz_checkpoint *ck; /* NULL with --dummy */
  zz_tokenizer *tok; /* NULL without vocab.json */
  zz_shape shape;    /* the longest prompt to run (or --max-prompt-len), the most new tokens a line asks */
  zz_prompt_reader *rd;
  zz_resume_set *done_ids; /* ids already in --out (--resume) */
  zz_resume_set *hashes;   /* every prompt's id and hash (zz_job_scan), each id once */
  int64_t todo;            /* prompts not yet in --out */
  int64_t longest;         /* tokens of the longest of those (0: none) */
  int64_t shortest;        /* and of the shortest */
  int32_t *common;         /* [n_common] the tokens all of them start with (shape.shared_prefix) */
  int64_t n_common;
  int64_t prompt_todo; /* their prompt tokens, each completion's (the ETA, zz_eta_in) */
  int64_t gen_todo;    /* the new tokens they ask, max tokens x completions */
  char *record;        /* the job record (PATH.job.json), JSON text */
  zz_output out;
  /* the block being gathered: [cap] each, n used */
  zz_prompt *prompts;
  int32_t **ids;
  int64_t *lens;
  uint64_t *streams; /* prompt number in the file: the sampling stream */
  int64_t n, cap;
  bool more; /* prompts may be left */
  zz_progress prog;
  int64_t kill_after, committed, written; /* blocks (ZZ_FAULT_KILL_AFTER_BLOCKS), blocks, prompts */
  struct zz_job_lines *lx;                /* each line's own settings, its completions, its error (launch/job.c) */
} zz_job;

/* Resolves the model, checkpoint and shape for asked (the longest prompt, 0: the
 * job's longest, and the new tokens the command line asks); with files also the
 * tokenizer, the prompt reader and --out (locked; with --resume its ids read), every
 * prompt read and checked. o must outlive the job. */
zz_status zz_job_open(zz_job *j, const zz_opts *o, zz_shape asked, bool files);
/* Starts writing --out (truncated unless --resume) and the progress line; blocks of
 * up to cap prompts. Called once nothing else can refuse the job. */
zz_status zz_job_start(zz_job *j, int64_t cap);
/* The next up to max_n prompts not yet in the output, as a request (n = 0: none
 * left); valid until the next gather. */
zz_status zz_job_gather(zz_job *j, int64_t max_n, zz_request *req_out);
/* Writes the gathered prompts' lines from res, flushes and syncs them. */
zz_status zz_job_commit(zz_job *j, const zz_result *res);
/* The sequences still to run in the order blocks gather them (a line of n
 * completions gives n; a line answered with an error none): each one's prompt
 * tokens and max tokens, malloc'd [*n_out] (zigzag plan --prompts). */
zz_status zz_job_workload(const zz_job *j, int64_t **lens_out, int64_t **max_new_out, int64_t *n_out);
/* The one line of an interrupted (--resume hint) or failed job; the exit code. */
int zz_job_fail(const zz_job *j, zz_status st);
void zz_job_close(zz_job *j);
/* SIGINT / SIGTERM ask for a stop at the next safe point; a second one ends at once. */
void zz_catch_stop_signals(void);

#endif /* ZZ_JOBFILE_H */
