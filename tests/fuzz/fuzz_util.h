/* fuzz_util.h — what the libFuzzer targets share: a private scratch directory
 * (on /dev/shm when there is one) and writing the input to a file in it. */
#ifndef ZZ_FUZZ_UTIL_H
#define ZZ_FUZZ_UTIL_H

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_launch.h"
#include "zz_runtime.h"

/* path and everything under it (the scratch directory's files). */
static inline void zz_fuzz_remove_tree(const char *path) {
  DIR *d = opendir(path);
  if (d) {
    for (struct dirent *e; (e = readdir(d));) {
      if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
      char sub[512];
      snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
      zz_fuzz_remove_tree(sub);
    }
    closedir(d);
  }
  remove(path);
}

static inline const char *zz_fuzz_dir(void);
static inline void zz_fuzz_dir_remove(void) { zz_fuzz_remove_tree(zz_fuzz_dir()); }

/* A directory of this process, created once, in the temporary filesystem;
 * removed when the fuzzer ends its run (libFuzzer's exit runs atexit), kept
 * after a crash (_Exit), beside the input that made it. */
static inline const char *zz_fuzz_dir(void) {
  static char dir[256];
  if (!dir[0]) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/zz-fuzz-XXXXXX", base);
    if (!mkdtemp(dir)) abort();
    atexit(zz_fuzz_dir_remove);
  }
  return dir;
}

/* Writes data to DIR/name; the path into path_out. */
static inline void zz_fuzz_file(const char *name, const uint8_t *data, size_t len, char *path_out, size_t cap);

/* The input as DIR/name, then the checkpoint of DIR opened and checked against m
 * (*ck set, to be closed by the caller, also on failure). */
static inline zz_status zz_fuzz_checkpoint(const char *name, const uint8_t *data, size_t len, const zz_model *m,
                                           zz_checkpoint **ck) {
  char path[512];
  zz_fuzz_file(name, data, len, path, sizeof path);
  *ck = NULL;
  zz_error_clear();
  zz_status st = zz_checkpoint_open(zz_fuzz_dir(), ck);
  return st == ZZ_OK ? zz_checkpoint_check_model(*ck, m) : st;
}

static inline void zz_fuzz_file(const char *name, const uint8_t *data, size_t len, char *path_out, size_t cap) {
  snprintf(path_out, cap, "%s/%s", zz_fuzz_dir(), name);
  int fd = open(path_out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) abort();
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(fd, data + done, len - done);
    if (w <= 0) abort();
    done += (size_t)w;
  }
  close(fd);
}

/* A refusal must say why: a status without a message is a finding. */
static inline void zz_fuzz_expect_message(zz_status st) {
  if (st != ZZ_OK && zz_error_message()[0] == '\0') {
    fprintf(stderr, "status %s without a message\n", zz_status_str(st));
    abort();
  }
}

/* Loads the tokenizer files written to the scratch directory, then encodes text
 * and decodes the ids back, then decodes the text's bytes taken as ids (byte-level
 * singles and <0xNN> tokens sit low: ill-formed UTF-8); every failure must carry a
 * message, and what decodes is UTF-8 (Hugging Face's U+FFFD rules), which jansson
 * checks. */
static inline void zz_fuzz_tokenizer(const uint8_t *text, size_t len) {
  zz_tokenizer *tok = NULL;
  zz_error_clear();
  zz_status st = zz_tokenizer_load(zz_fuzz_dir(), &tok);
  zz_fuzz_expect_message(st);
  if (st != ZZ_OK) return;
  int32_t *ids = NULL;
  int64_t n = 0;
  zz_error_clear();
  st = zz_tokenizer_encode(tok, (const char *)text, len, &ids, &n);
  zz_fuzz_expect_message(st);
  if (st == ZZ_OK) {
    char *out = NULL;
    size_t out_len = 0;
    st = zz_tokenizer_decode(tok, ids, n, &out, &out_len);
    zz_fuzz_expect_message(st);
    free(out);
  }
  free(ids);
  int64_t vocab = zz_tokenizer_vocab_size(tok);
  ids = len && vocab > 0 ? malloc(len * sizeof *ids) : NULL;
  for (size_t i = 0; ids && i < len; i++) ids[i] = (int32_t)(text[i] % vocab);
  if (ids) {
    char *out = NULL;
    size_t out_len = 0;
    zz_error_clear();
    st = zz_tokenizer_decode(tok, ids, (int64_t)len, &out, &out_len);
    zz_fuzz_expect_message(st); /* an id between the vocabulary's may be missing */
    json_t *utf8 = st == ZZ_OK ? json_stringn(out, out_len) : NULL;
    if (st == ZZ_OK && !utf8) {
      fprintf(stderr, "decode gave %zu bytes that are not UTF-8\n", out_len);
      abort();
    }
    json_decref(utf8);
    free(out);
  }
  free(ids);
  zz_tokenizer_free(tok);
}

#endif
