/* fuzz_util.h — what the libFuzzer targets share: a private scratch directory
 * (on /dev/shm when there is one) and writing the input to a file in it. */
#ifndef ZZ_FUZZ_UTIL_H
#define ZZ_FUZZ_UTIL_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_launch.h"
#include "zz_runtime.h"

/* A directory of this process, created once; removed by nobody (the fuzzer
 * exits with _exit), so it lives in the temporary filesystem. */
static inline const char *zz_fuzz_dir(void) {
  static char dir[256];
  if (!dir[0]) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/zz-fuzz-XXXXXX", base);
    if (!mkdtemp(dir)) abort();
  }
  return dir;
}

/* Writes data to DIR/name; the path into path_out. */
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

#endif
