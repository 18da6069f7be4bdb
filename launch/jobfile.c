/*
 * jobfile.c — what makes a long job safe to kill: each finished block's lines are
 * flushed and synced before the next block starts, and --resume reads back the
 * ids already written (dropping a line torn by the kill) so those prompts are
 * skipped. --out itself (zz_output): never written through a link, and an
 * existing file replaced by a new one only at the new job's first commit, so no
 * error or kill loses what it held. Also the progress line.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zz_jobfile.h"

struct zz_resume_set {
  char **slots;     /* open addressing on the id's compact JSON text */
  uint64_t *values; /* [cap] beside each slot */
  size_t cap, count;
};


zz_resume_set *zz_resume_new(void) { return calloc(1, sizeof(zz_resume_set)); }

/* The slot of id, or of the empty place where it would go. */
static size_t zz_resume_slot(const zz_resume_set *s, const char *id) {
  size_t j = zz_fnv1a(ZZ_FNV_BASIS, id, strlen(id)) & (s->cap - 1);
  while (s->slots[j] && strcmp(s->slots[j], id) != 0) j = (j + 1) & (s->cap - 1);
  return j;
}

zz_status zz_resume_put(zz_resume_set *s, const char *id, uint64_t value, bool *fresh) {
  *fresh = !zz_resume_has(s, id);
  if (!*fresh) return ZZ_OK;
  if (2 * (s->count + 1) > s->cap) {
    size_t ncap = s->cap ? 2 * s->cap : 1024;
    zz_resume_set n = {.slots = calloc(ncap, sizeof(char *)),
                       .values = calloc(ncap, sizeof(uint64_t)),
                       .cap = ncap,
                       .count = s->count};
    if (!n.slots || !n.values) {
      free(n.slots);
      free(n.values);
      return zz_error(ZZ_ERR_NO_MEMORY, "resume: out of memory");
    }
    for (size_t i = 0; i < s->cap; i++)
      if (s->slots[i]) {
        size_t j = zz_resume_slot(&n, s->slots[i]);
        n.slots[j] = s->slots[i];
        n.values[j] = s->values[i];
      }
    free(s->slots);
    free(s->values);
    *s = n;
  }
  size_t j = zz_resume_slot(s, id);
  if (!(s->slots[j] = strdup(id))) return zz_error(ZZ_ERR_NO_MEMORY, "resume: out of memory");
  s->values[j] = value;
  s->count++;
  return ZZ_OK;
}

zz_status zz_resume_insert(zz_resume_set *s, const char *id, bool *fresh) { return zz_resume_put(s, id, 0, fresh); }

bool zz_resume_get(const zz_resume_set *s, const char *id, uint64_t *value_out) {
  if (!s || !s->cap) return false;
  size_t j = zz_resume_slot(s, id);
  if (!s->slots[j]) return false;
  if (value_out) *value_out = s->values[j];
  return true;
}

bool zz_resume_has(const zz_resume_set *s, const char *id) { return zz_resume_get(s, id, NULL); }

const char *zz_resume_next(const zz_resume_set *s, size_t *pos) {
  for (; s && *pos < s->cap; (*pos)++)
    if (s->slots[*pos]) return s->slots[(*pos)++];
  return NULL;
}

void zz_resume_free(zz_resume_set *s) {
  if (!s) return;
  for (size_t i = 0; i < s->cap; i++) free(s->slots[i]);
  free(s->slots);
  free(s->values);
  free(s);
}

/* Reads the ids of every complete line; returns the byte length of the complete
 * lines so a torn tail can be cut off. An id twice is refused: the file was not
 * written by one job. */
static zz_status zz_resume_scan(const char *path, FILE *f, zz_resume_set *s, long *good_len) {
  char *line = NULL;
  size_t cap = 0;
  long pos = 0;
  int64_t lineno = 0;
  zz_status st = ZZ_OK;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) > 0) {
    lineno++;
    if (line[len - 1] != '\n') break; /* torn by a kill: dropped and redone */
    json_t *o = json_loadb(line, (size_t)len, 0, NULL);
    /* "id" alone is not enough: the prompts file has ids too, and resuming into it
     * by mistake must not eat it */
    json_t *id = o ? json_object_get(o, "id") : NULL;
    /* the OpenAI batch output form names its prompt by custom_id (null: a line
     * without one, answered with an error, kept but not matched) */
    bool openai = o && json_object_get(o, "custom_id") && json_object_get(o, "response") && json_object_get(o, "error");
    if (openai) id = json_object_get(o, "custom_id");
    bool native = o && id &&
                  (json_is_array(json_object_get(o, "output_ids")) || json_is_array(json_object_get(o, "choices")) ||
                   json_is_object(json_object_get(o, "error")));
    if (openai && !json_is_string(id)) {
      json_decref(o);
      pos += len;
      continue;
    }
    if (!openai && !native) {
      json_decref(o);
      st = zz_error(ZZ_ERR_FORMAT, "%s:%lld: not a zigzag output line; refusing to resume into it", path,
                    (long long)lineno);
      break;
    }
    char *text = json_dumps(id, JSON_ENCODE_ANY | JSON_COMPACT);
    json_decref(o);
    if (!text) {
      st = zz_error(ZZ_ERR_NO_MEMORY, "resume: out of memory");
      break;
    }
    bool fresh = false;
    st = zz_resume_insert(s, text, &fresh);
    if (st == ZZ_OK && !fresh)
      st = zz_error(ZZ_ERR_FORMAT,
                    "%s:%lld: id %s is there twice: this file was not written by one zigzag job; "
                    "refusing to resume into it",
                    path, (long long)lineno, text);
    free(text);
    if (st != ZZ_OK) break;
    pos += len;
  }
  free(line);
  *good_len = pos;
  return st;
}

/* ---------------------------------------------------------------- --out */

static zz_status zz_output_lock(int fd, const char *path) {
  /* two jobs appending to one file interleave and tear each other's lines: the
   * lock (released when the job ends, however it ends) lets only one in */
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) return ZZ_OK;
  if (errno == EWOULDBLOCK)
    return zz_error(ZZ_ERR_IO,
                    "--out %s: another zigzag job holds this file (it is writing it); wait for that "
                    "job to end or choose another --out",
                    path);
  return zz_error(ZZ_ERR_IO, "--out %s: cannot lock: %s", path, strerror(errno));
}

static zz_status zz_output_symlink(const char *path) {
  char target[4096];
  ssize_t n = readlink(path, target, sizeof target - 1);
  target[n > 0 ? n : 0] = '\0';
  return zz_error(ZZ_ERR_INVALID_ARG,
                  "--out %s is a symbolic link (to %s): zigzag never writes through a link; "
                  "give the file's own path",
                  path, n > 0 ? target : "?");
}

zz_status zz_output_open(zz_output *o, const char *path, bool resume, zz_resume_set **done_out) {
  memset(o, 0, sizeof *o);
  o->path = path;
  o->nf.fd = -1;
  o->resume = resume;
  *done_out = NULL;
  if (strcmp(path, "-") == 0) {
    if (resume) return zz_error(ZZ_ERR_INVALID_ARG, "--resume needs --out to be a file, not stdout");
    o->f = stdout;
    return ZZ_OK;
  }
  /* nothing is cut or replaced here: that waits for zz_output_begin, after the
   * whole job (model, plan, every prompt) has been checked */
  int fd = -1;
  struct stat sb;
  for (int tries = 0; fd < 0 && tries < 2; tries++) {
    if (lstat(path, &sb) != 0) {
      if (errno != ENOENT) return zz_error(ZZ_ERR_IO, "--out %s: %s", path, strerror(errno));
      /* a new file: O_EXCL, so two jobs racing for it do not share it */
      fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
      if (fd >= 0) o->created = true;
      else if (errno != EEXIST)
        return zz_error(ZZ_ERR_IO, "--out %s: cannot create: %s", path, strerror(errno));
      continue;
    }
    if (S_ISLNK(sb.st_mode)) return zz_output_symlink(path);
    if (S_ISDIR(sb.st_mode)) return zz_error(ZZ_ERR_INVALID_ARG, "--out %s is a directory", path);
    fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ELOOP) return zz_output_symlink(path);
    if (fd < 0) return zz_error(ZZ_ERR_IO, "--out %s: cannot open for writing: %s", path, strerror(errno));
  }
  if (fd < 0) return zz_error(ZZ_ERR_IO, "--out %s: appeared and vanished while opening it", path);
  zz_status st = zz_output_lock(fd, path);
  if (st == ZZ_OK && fstat(fd, &sb) != 0) st = zz_error(ZZ_ERR_IO, "--out %s: %s", path, strerror(errno));
  o->regular = st == ZZ_OK && S_ISREG(sb.st_mode);
  o->mode = sb.st_mode & 07777;
  FILE *f = st == ZZ_OK ? fdopen(fd, "r+") : NULL;
  if (st == ZZ_OK && !f) st = zz_error(ZZ_ERR_IO, "--out %s: cannot open for writing: %s", path, strerror(errno));
  if (!f) {
    close(fd);
    return st;
  }
  zz_resume_set *s = calloc(1, sizeof *s);
  if (!s) st = zz_error(ZZ_ERR_NO_MEMORY, "resume: out of memory");
  if (st == ZZ_OK && resume && o->regular) st = zz_resume_scan(path, f, s, &o->good_len);
  if (st != ZZ_OK) {
    fclose(f);
    zz_resume_free(s);
    return st;
  }
  if (resume || !o->regular || o->created) {
    o->f = f; /* written in place: appended to, a device or a pipe, or new */
  } else {
    o->old = f; /* kept whole and locked until the new file replaces it */
  }
  if (s->count) fprintf(stderr, "zigzag: resuming: %zu prompts already in %s\n", s->count, path);
  *done_out = s;
  return ZZ_OK;
}

void zz_output_record_path(const char *path, char *buf, size_t len) { snprintf(buf, len, "%s.job.json", path); }

static zz_status zz_output_write_record(const zz_output *o) {
  if (!o->record) return ZZ_OK;
  char rp[4200];
  zz_output_record_path(o->path, rp, sizeof rp);
  return zz_file_replace(rp, o->record, strlen(o->record));
}

zz_status zz_output_begin(zz_output *o, const char *record) {
  o->begun = true;
  if (o->f == stdout || !o->regular) return ZZ_OK;
  if (record && !(o->record = strdup(record))) return zz_error(ZZ_ERR_NO_MEMORY, "out of memory");
  if (o->f) { /* --resume or a new path: in place, the record first */
    if (o->resume &&
        (fflush(o->f) != 0 || ftruncate(fileno(o->f), o->good_len) != 0 || fseek(o->f, o->good_len, SEEK_SET) != 0))
      return zz_error(ZZ_ERR_IO, "%s: cannot cut the torn last line: %s", o->path, strerror(errno));
    return o->good_len == 0 ? zz_output_write_record(o) : ZZ_OK;
  }
  /* an existing file a new job replaces: the lines go to a new file that takes its
   * place at the first commit, so a job that fails or is killed before then leaves
   * the old file as it was */
  ZZ_CHECK(zz_newfile_create(o->path, &o->nf));
  if (fchmod(o->nf.fd, o->mode) != 0 || zz_output_lock(o->nf.fd, o->path) != ZZ_OK || !(o->f = fdopen(o->nf.fd, "w"))) {
    zz_status st = zz_error(ZZ_ERR_IO, "--out %s: cannot prepare the new file: %s", o->path, strerror(errno));
    zz_newfile_discard(&o->nf);
    return st;
  }
  return ZZ_OK;
}

zz_status zz_output_commit(zz_output *o) {
  if (fflush(o->f) != 0) return zz_error(ZZ_ERR_IO, "%s: write failed: %s", o->path, strerror(errno));
  if (o->f != stdout && fdatasync(fileno(o->f)) != 0 && errno != EINVAL)
    return zz_error(ZZ_ERR_IO, "%s: sync failed: %s", o->path, strerror(errno));
  if (!o->old) return ZZ_OK;
  /* the first commit of a new job over an old file. The old record goes first: an
   * old file left without one is refused by --resume, never mixed with this job */
  char rp[4200];
  zz_output_record_path(o->path, rp, sizeof rp);
  if (unlink(rp) != 0 && errno != ENOENT)
    return zz_error(ZZ_ERR_IO, "%s: cannot remove the old job record: %s", rp, strerror(errno));
  ZZ_CHECK(zz_newfile_publish(&o->nf));
  fclose(o->old); /* its lock goes; the new file, now at the path, holds one */
  o->old = NULL;
  return zz_output_write_record(o);
}

void zz_output_close(zz_output *o) {
  if (o->created && !o->begun) unlink(o->path); /* still locked by us: nobody else has it */
  if (o->f && o->f != stdout) fclose(o->f);
  if (o->nf.tmp[0]) unlink(o->nf.tmp); /* unpublished, named: removed */
  if (o->old) fclose(o->old);
  free(o->record);
  memset(o, 0, sizeof *o);
}

int64_t zz_resume_count(const zz_resume_set *s) { return s ? (int64_t)s->count : 0; }

int64_t zz_count_lines(const char *path) {
  struct stat sb;
  if (strcmp(path, "-") == 0 || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return -1;
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  int64_t n = 0;
  int c, prev = '\n', blank = 1;
  while ((c = fgetc(f)) != EOF) {
    if (c == '\n') {
      if (!blank) n++;
      blank = 1;
    } else if (c != ' ' && c != '\t' && c != '\r') {
      blank = 0;
    }
    prev = c;
  }
  if (prev != '\n' && !blank) n++;
  fclose(f);
  return n;
}

/* ---------------------------------------------------------------- progress */

void zz_progress_start(zz_progress *p, const zz_opts *o, int64_t total) {
  memset(p, 0, sizeof *p);
  p->tty = isatty(STDERR_FILENO);
  p->on = !o->no_progress && (o->progress || p->tty);
  p->total = total;
  p->t0 = p->last = zz_now();
  p->out = o->out && strcmp(o->out, "-") ? o->out : "stdout";
}

double zz_eta_seconds(const zz_eta_in *in) {
  if (in->prompt_left <= 0 && in->gen_left <= 0) return 0;
  if (in->prompt_done + in->gen_done <= 0) return -1;
  /* answers end sooner than they ask (EOS, a stop string) by the share seen so far */
  double share = in->gen_asked_done > 0 ? (double)in->gen_done / (double)in->gen_asked_done : 1;
  double gen = (double)in->gen_left * (share < 1 ? share : 1);
  double phases = in->prefill_s + in->decode_s;
  if (phases <= 0) /* no phase times: every token at the job's rate */
    return in->elapsed_s * ((double)in->prompt_left + gen) / (double)(in->prompt_done + in->gen_done);
  /* each phase at its own rate; a phase not seen yet at the other's */
  double per_prompt = in->prompt_done > 0 && in->prefill_s > 0 ? in->prefill_s / (double)in->prompt_done : -1;
  double per_gen = in->gen_done > 0 && in->decode_s > 0 ? in->decode_s / (double)in->gen_done : -1;
  if (per_prompt < 0) per_prompt = per_gen;
  if (per_gen < 0) per_gen = per_prompt;
  double left = (double)in->prompt_left * per_prompt + gen * per_gen;
  /* the time outside the two phases grows with them */
  return in->elapsed_s > phases ? left * in->elapsed_s / phases : left;
}

static void zz_progress_print(zz_progress *p, const char *end) {
  double el = zz_now() - p->t0;
  double gen_tps = el > 0 ? (double)(p->tokens + p->live) / el : 0;
  double prompt_tps = el > 0 ? (double)p->eta.prompt_done / el : 0;
  char eta[32] = "?";
  int64_t todo = p->total >= 0 ? p->total - p->skipped : -1;
  zz_eta_in in = p->eta;
  in.elapsed_s = el;
  double left = -1;
  if (p->done > 0) left = zz_eta_seconds(&in);
  else if (p->max_tokens > p->live && p->live > 0) /* within the first block: by tokens, at most */
    left = el * (double)(p->max_tokens - p->live) / (double)p->live;
  if (left >= 0)
    snprintf(eta, sizeof eta, "%s%d:%02d:%02d", p->done > 0 ? "" : "<", (int)(left / 3600), (int)(left / 60) % 60,
             (int)left % 60);
  if (todo >= 0)
    fprintf(stderr, "\rzigzag: %lld/%lld lines, %lld new tokens; prompt %.1f tok/s, generated %.1f tok/s; ETA %s%s",
            (long long)p->done, (long long)todo, (long long)(p->tokens + p->live), prompt_tps, gen_tps, eta, end);
  else
    fprintf(stderr, "\rzigzag: %lld lines, %lld new tokens; prompt %.1f tok/s, generated %.1f tok/s%s",
            (long long)p->done, (long long)p->tokens, prompt_tps, gen_tps, end);
  fflush(stderr);
}

void zz_progress_update(zz_progress *p, const zz_progress_block *b) {
  p->done += b->lines;
  p->tokens += b->new_tokens;
  zz_eta_in *e = &p->eta;
  e->prompt_left = e->prompt_left > b->prompt_tokens ? e->prompt_left - b->prompt_tokens : 0;
  e->gen_left = e->gen_left > b->asked_tokens ? e->gen_left - b->asked_tokens : 0;
  e->prompt_done += b->prompt_tokens;
  e->gen_done += b->new_tokens;
  e->gen_asked_done += b->asked_tokens;
  e->prefill_s += b->prefill_s;
  e->decode_s += b->decode_s;
  p->live = 0;
  p->last = zz_now();
  if (p->on) zz_progress_print(p, isatty(STDERR_FILENO) ? "" : "\n");
}

void zz_progress_finish(zz_progress *p) {
  /* a terminal's line is rewritten in place and needs its end; elsewhere each
   * block already printed a whole line, so only a job with no block prints here */
  if (p->on && (isatty(STDERR_FILENO) || p->done == 0)) zz_progress_print(p, "\n");
  double el = zz_now() - p->t0;
  char errs[64] = "";
  if (p->errors) snprintf(errs, sizeof errs, " (%lld answered with an error)", (long long)p->errors);
  fprintf(stderr, "zigzag: done: %lld prompts%s, %lld new tokens, %.1f tokens/s, %.1f s elapsed; output in %s\n",
          (long long)p->done, errs, (long long)p->tokens, el > 0 ? (double)p->tokens / el : 0.0, el, p->out);
  if (p->pos_computed > 0)
    fprintf(stderr, "zigzag: positions: %lld computed, %.1f%% of them padding or sequences already ended\n",
            (long long)p->pos_computed, 100.0 * (double)(p->pos_computed - p->pos_useful) / (double)p->pos_computed);
  if (p->refilled > 0)
    fprintf(stderr, "zigzag: refilled: %lld sequences took the slot of one that had ended\n", (long long)p->refilled);
}

void zz_progress_token(zz_progress *p) {
  p->live++;
  /* within a block only a terminal's line is redrawn: a log gets a line per block */
  if (!p->on || !p->tty) return;
  double now = zz_now();
  if (now - p->last < 0.5) return;
  p->last = now;
  zz_progress_print(p, "");
}
