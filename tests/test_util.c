/* test_util.c — file helpers shared by the test programs (see zz_tests.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

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


bool zz_test_ids_equal(const int32_t *ids, int64_t n, const void *want) {
  const json_t *w = want;
  if (!json_is_array(w) || n != (int64_t)json_array_size(w)) return false;
  for (int64_t k = 0; k < n; k++)
    if (ids[k] != json_integer_value(json_array_get(w, (size_t)k))) return false;
  return true;
}

void zz_test_dot_f64(const float *x, const float *w, const float *b, int64_t in, int relu, double *acc, double *mag) {
  double a = b ? *b : 0, m = b ? fabs(*b) : 0;
  for (int64_t k = 0; k < in; k++) {
    a += (double)x[k] * w[k];
    m += fabs((double)x[k] * w[k]);
  }
  *acc = relu && a < 0 ? 0 : a;
  *mag = m;
}

zz_status zz_test_load_config(const char *text) {
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(path, sizeof path, "%s/config.json", dir);
  if (zz_test_write_file(path, text, strlen(text)) != 0) return ZZ_ERR_IO;
  zz_config c;
  zz_status st = zz_config_load(dir, &c);
  unlink(path);
  rmdir(dir);
  return st;
}

bool zz_test_config_gives(const char *text, zz_status want, const char *needle) {
  zz_status st = zz_test_load_config(text);
  bool ok = st == want && (!needle || strstr(zz_error_message(), needle));
  if (!ok) fprintf(stderr, "\nconfig %s: got %s '%s'\n", text, zz_status_str(st), zz_error_message());
  return ok;
}

zz_status zz_test_fixture_open(const char *name, bool checkpoint, zz_test_fixture *out) {
  char fx[4096];
  snprintf(fx, sizeof fx, "%s/%s", ZZ_FIXTURES_DIR, name);
  zz_config cfg;
  *out = (zz_test_fixture){0};
  ZZ_CHECK(zz_config_load(fx, &cfg));
  ZZ_CHECK(zz_model_init(&cfg, &out->m));
  zz_status st = checkpoint ? zz_checkpoint_open(fx, &out->ck) : ZZ_OK;
  if (st == ZZ_OK) st = zz_device_create_cpu(0, 1, 0, &out->dev);
  if (st != ZZ_OK) zz_test_fixture_close(out);
  return st;
}

void zz_test_fixture_close(zz_test_fixture *f) {
  zz_device_destroy(f->dev);
  zz_checkpoint_close(f->ck);
  zz_model_free(&f->m);
  *f = (zz_test_fixture){0};
}
