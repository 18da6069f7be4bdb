/*
 * jobfile.c — what makes a long job safe to kill: each finished block's lines are
 * flushed and synced before the next block starts, and --resume reads back the
 * ids already written (dropping a line torn by the kill) so those prompts are
 * skipped. Also the progress line.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zz_launch.h"

struct zz_resume_set {
  char **slots; /* open addressing on the id's compact JSON text */
  size_t cap, count;
};

static uint64_t zz_hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

zz_resume_set *zz_resume_new(void) { return calloc(1, sizeof(zz_resume_set)); }

static zz_status zz_resume_add(zz_resume_set *s, const char *id) {
  if (2 * (s->count + 1) > s->cap) {
    size_t ncap = s->cap ? 2 * s->cap : 1024;
    char **ns = calloc(ncap, sizeof *ns);
    if (!ns) return zz_error(ZZ_ERR_NO_MEMORY, "resume: out of memory");
    for (size_t i = 0; i < s->cap; i++)
      if (s->slots[i]) {
        size_t j = zz_hash_str(s->slots[i]) & (ncap - 1);
        while (ns[j]) j = (j + 1) & (ncap - 1);
        ns[j] = s->slots[i];
      }
    free(s->slots);
    s->slots = ns;
    s->cap = ncap;
  }
  size_t j = zz_hash_str(id) & (s->cap - 1);
  while (s->slots[j]) {
    if (strcmp(s->slots[j], id) == 0) return ZZ_OK;
    j = (j + 1) & (s->cap - 1);
  }
  if (!(s->slots[j] = strdup(id))) return zz_error(ZZ_ERR_NO_MEMORY, "resume: out of memory");
  s->count++;
  return ZZ_OK;
}

zz_status zz_resume_insert(zz_resume_set *s, const char *id, bool *fresh) {
  *fresh = !zz_resume_has(s, id);
  return *fresh ? zz_resume_add(s, id) : ZZ_OK;
}

bool zz_resume_has(const zz_resume_set *s, const char *id) {
  if (!s || !s->cap) return false;
  size_t j = zz_hash_str(id) & (s->cap - 1);
  while (s->slots[j]) {
    if (strcmp(s->slots[j], id) == 0) return true;
    j = (j + 1) & (s->cap - 1);
  }
  return false;
}

void zz_resume_free(zz_resume_set *s) {
  if (!s) return;
  for (size_t i = 0; i < s->cap; i++) free(s->slots[i]);
  free(s->slots);
  free(s);
}

/* Reads the ids of every complete line; returns the byte length of the complete
 * lines so a torn tail can be cut off. */
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
    if (!o || !id || !json_is_array(json_object_get(o, "output_ids"))) {
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
    st = zz_resume_add(s, text);
    free(text);
    if (st != ZZ_OK) break;
    pos += len;
  }
  free(line);
  *good_len = pos;
  return st;
}

zz_status zz_resume_open(const char *path, bool resume, zz_resume_set **set_out, FILE **out) {
  if (strcmp(path, "-") == 0) {
    if (resume) return zz_error(ZZ_ERR_INVALID_ARG, "--resume needs --out to be a file, not stdout");
    *set_out = NULL;
    *out = stdout;
    return ZZ_OK;
  }
  zz_resume_set *s = calloc(1, sizeof *s);
  if (!s) return zz_error(ZZ_ERR_NO_MEMORY, "resume: out of memory");
  /* opened without truncating: nothing is lost until zz_output_begin, after the
   * whole job (model, plan, prompts) has been checked */
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    zz_resume_free(s);
    return zz_error(ZZ_ERR_IO, "--out %s: cannot open for writing: %s", path, strerror(errno));
  }
  /* two jobs appending to one file interleave and tear each other's lines: the
   * lock (released when the job ends, however it ends) lets only one in */
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    close(fd);
    zz_resume_free(s);
    if (err == EWOULDBLOCK)
      return zz_error(ZZ_ERR_IO, "--out %s: another zigzag job holds this file (it is writing it); wait for that "
                      "job to end or choose another --out", path);
    return zz_error(ZZ_ERR_IO, "--out %s: cannot lock: %s", path, strerror(err));
  }
  FILE *f = fdopen(fd, "r+");
  if (!f) {
    zz_status st = zz_error(ZZ_ERR_IO, "--out %s: cannot open for writing: %s", path, strerror(errno));
    close(fd);
    zz_resume_free(s);
    return st;
  }
  struct stat sb;
  bool regular = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode);
  if (resume && regular) {
    long good = 0;
    zz_status st = zz_resume_scan(path, f, s, &good);
    if (st == ZZ_OK && ftruncate(fd, good) != 0)
      st = zz_error(ZZ_ERR_IO, "%s: cannot cut the torn last line: %s", path, strerror(errno));
    if (st == ZZ_OK && fseek(f, good, SEEK_SET) != 0)
      st = zz_error(ZZ_ERR_IO, "%s: seek failed: %s", path, strerror(errno));
    if (st != ZZ_OK) {
      fclose(f);
      zz_resume_free(s);
      return st;
    }
    if (s->count) fprintf(stderr, "zigzag: resuming: %zu prompts already in %s\n", s->count, path);
  }
  *set_out = s;
  *out = f;
  return ZZ_OK;
}

zz_status zz_output_begin(FILE *out, const char *path, bool resume) {
  struct stat sb;
  if (resume || out == stdout || fstat(fileno(out), &sb) != 0 || !S_ISREG(sb.st_mode)) return ZZ_OK;
  if (fflush(out) != 0 || ftruncate(fileno(out), 0) != 0 || fseek(out, 0, SEEK_SET) != 0)
    return zz_error(ZZ_ERR_IO, "--out %s: cannot truncate: %s", path, strerror(errno));
  return ZZ_OK;
}

int64_t zz_resume_count(const zz_resume_set *s) { return s ? (int64_t)s->count : 0; }

zz_status zz_output_commit(FILE *out, const char *path) {
  if (fflush(out) != 0) return zz_error(ZZ_ERR_IO, "%s: write failed: %s", path, strerror(errno));
  if (out != stdout && fdatasync(fileno(out)) != 0 && errno != EINVAL)
    return zz_error(ZZ_ERR_IO, "%s: sync failed: %s", path, strerror(errno));
  return ZZ_OK;
}

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
  p->on = !o->no_progress && (o->progress || isatty(STDERR_FILENO));
  p->total = total;
  p->t0 = p->last = zz_now();
}

static void zz_progress_print(zz_progress *p, const char *end) {
  double el = zz_now() - p->t0;
  double tps = el > 0 ? (double)p->tokens / el : 0;
  char eta[32] = "?";
  int64_t todo = p->total >= 0 ? p->total - p->skipped : -1;
  if (todo > 0 && p->done > 0) {
    double left = el * (double)(todo - p->done) / (double)p->done;
    snprintf(eta, sizeof eta, "%d:%02d:%02d", (int)(left / 3600), (int)(left / 60) % 60, (int)left % 60);
  }
  if (todo >= 0)
    fprintf(stderr, "\rzigzag: %lld/%lld sequences, %lld tokens, %.1f tok/s, ETA %s%s", (long long)p->done,
            (long long)todo, (long long)p->tokens, tps, eta, end);
  else
    fprintf(stderr, "\rzigzag: %lld sequences, %lld tokens, %.1f tok/s%s", (long long)p->done,
            (long long)p->tokens, tps, end);
  fflush(stderr);
}

void zz_progress_update(zz_progress *p, int64_t seqs, int64_t tokens) {
  p->done += seqs;
  p->tokens += tokens;
  if (p->on) zz_progress_print(p, isatty(STDERR_FILENO) ? "" : "\n");
}

void zz_progress_finish(zz_progress *p) {
  /* a terminal's line is rewritten in place and needs its end; elsewhere each
   * block already printed a whole line, so only a job with no block prints here */
  if (p->on && (isatty(STDERR_FILENO) || p->done == 0)) zz_progress_print(p, "\n");
}
