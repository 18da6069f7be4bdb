/* test_util.c — file helpers shared by the test programs (see zz_tests.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_tests.h"

char *zz_test_read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  if (buf) buf[n] = '\0';
  if (len) *len = (size_t)n;
  return buf;
}

int zz_test_write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(data, 1, len, f);
  return fclose(f) != 0 || w != len ? -1 : 0;
}

const char *zz_test_tmpdir(void) {
  static char dir[4096];
  const char *base = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/zz-test-XXXXXX", base && *base ? base : "/tmp");
  return mkdtemp(dir);
}

