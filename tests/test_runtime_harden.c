/*
 * test_runtime_harden.c — what breaking zigzag from the outside found (issue #8)
 * and the doubled error prefix (issue #9): overlong and out-of-range command-line
 * numbers, policies whose sizes overflow, the CPU device's arena and CPU tier
 * sharing one RAM, lying safetensors shapes and empty headers, padding written to
 * the offload file, stop requests (Ctrl-C), the lock on --out, and an error
 * message that quotes the previous one.
 */
#include <CUnit/CUnit.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_launch.h"
#include "zz_tests.h"

/* ---------------------------------------------------------------- errors (issue #9) */

static void test_error_quotes_previous(void) {
  zz_error(ZZ_ERR_INVALID_ARG, "tokenizer encode: invalid UTF-8 at byte offset %d", 17);
  zz_error(ZZ_ERR_INVALID_ARG, "%s:%d: %s", "in.jsonl", 3, zz_error_message());
  CU_ASSERT_STRING_EQUAL(zz_error_message(), "in.jsonl:3: tokenizer encode: invalid UTF-8 at byte offset 17");
}

/* ---------------------------------------------------------------- command line */

static int zz_parse_args(int argc, const char **args) {
  zz_opts o;
  zz_opts_defaults(&o);
  return zz_opts_parse(argc, (char **)args, &o);
}

static void test_options_overlong_percent(void) {
  char *a = malloc(261), *b = malloc(2001);
  memset(a, 'a', 260);
  a[260] = '\0';
  memset(b, '1', 2000);
  b[2000] = '\0';
  const char *args[] = {"zigzag", "bench", "--percent", a, b, "3", "4", "5", "6"};
  CU_ASSERT_EQUAL(zz_parse_args(9, args), 2); /* refused, not a crash */
  const char *two[] = {"zigzag", "bench", "--percent", b, b};
  CU_ASSERT_EQUAL(zz_parse_args(5, two), 2);
  free(a);
  free(b);
  const char *ok[] = {"zigzag", "bench", "--percent", "20", "80", "0,100", "100", "0"};
  CU_ASSERT_EQUAL(zz_parse_args(8, ok), 0);
}

static void test_options_ranges(void) {
  static const char *const bad[][2] = {
      {"--num-gpu-batches", "178956971"},
      {"--num-gpu-batches", "0"},
      {"--gpu-batch-size", "4294967297"},
      {"--threads", "100000"},
      {"--max-new-tokens", "0"},
      {"--top-p", "0"},
      {"--top-p", "nan"},
      {"--temperature", "inf"},
      {"--attn-sparsity", "nan"},
      {"--seed", "-1"},
      {"--prompt-len", "99999999999"},
      {"--gpu-mem", "lots"},
      {"--policy", "gbs=2 num_gb=110737418"},
      {"--policy", "gbs=4294967297"},
      {"--policy", "w=nan,0"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    const char *args[] = {"zigzag", "bench", bad[i][0], bad[i][1]};
    int r = zz_parse_args(4, args);
    if (r != 2) fprintf(stderr, "%s %s: parse gave %d\n", bad[i][0], bad[i][1], r);
    CU_ASSERT_EQUAL(r, 2);
  }
  const char *nan6[] = {"zigzag", "bench", "--percent", "nan", "0", "100", "0", "100", "0"};
  CU_ASSERT_EQUAL(zz_parse_args(9, nan6), 2);
  const char *edge[] = {"zigzag",           "bench", "--num-gpu-batches", "4096",
                        "--gpu-batch-size", "65536", "--threads",         "1024"};
  CU_ASSERT_EQUAL(zz_parse_args(8, edge), 0);
}

static void test_policy_ranges(void) {
  zz_policy p;
  CU_ASSERT_EQUAL(zz_policy_parse("gbs=4294967297", &p), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "[1, 65536]"));
  CU_ASSERT_EQUAL(zz_policy_parse("gbs=2 num_gb=110737418", &p), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "num_gb"));
  CU_ASSERT_EQUAL(zz_policy_parse("w=nan,0", &p), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zz_policy_parse("c=0,inf", &p), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zz_policy_parse("gbs=65536 num_gb=4096", &p), ZZ_OK);
  zz_policy_default(&p);
  p.c_cpu = NAN;
  CU_ASSERT_EQUAL(zz_policy_check(&p), ZZ_ERR_INVALID_ARG);
  zz_policy_default(&p);
  p.num_gpu_batches = 178956971;
  CU_ASSERT_EQUAL(zz_policy_check(&p), ZZ_ERR_INVALID_ARG);
}

/* ---------------------------------------------------------------- memory plans */

static void test_memplan_absurd_sizes(void) {
  zz_config c;
  zz_model m;
  CU_ASSERT_FATAL(zz_config_preset("opt-175b", &c) == ZZ_OK);
  CU_ASSERT_FATAL(zz_model_init(&c, &m) == ZZ_OK);
  zz_policy p;
  CU_ASSERT_FATAL(zz_policy_parse("gbs=65536 num_gb=4096 w=0,0 c=0,0 a=0,0", &p) == ZZ_OK);
  zz_shape shape = {.prompt_len = 1 << 19, .gen_len = 1 << 19};
  zz_memplan plan;
  double t0 = zz_now();
  /* the sizes would wrap 64 bits: refused, not a plan of a few wrapped bytes */
  CU_ASSERT_EQUAL(zz_memplan_build(&m, &p, &shape, ZZ_DTYPE_F32, ZZ_DTYPE_F16, 0, &plan), ZZ_ERR_INFEASIBLE);
  CU_ASSERT(zz_now() - t0 < 5.0);
  zz_model_free(&m);
  /* the largest policy on a real shape is planned in 64 bits (and fits no machine) */
  CU_ASSERT_FATAL(zz_config_preset("opt-125m", &c) == ZZ_OK);
  CU_ASSERT_FATAL(zz_model_init(&c, &m) == ZZ_OK);
  shape = (zz_shape){.prompt_len = 512, .gen_len = 32};
  CU_ASSERT_EQUAL_FATAL(zz_memplan_build(&m, &p, &shape, ZZ_DTYPE_F32, ZZ_DTYPE_F16, 0, &plan), ZZ_OK);
  CU_ASSERT(zz_memplan_tier_total(&plan, ZZ_TIER_DISK) > ((size_t)1 << 50));
  zz_memplan_free(&plan);
  zz_model_free(&m);
}

static void test_memplan_shared_ram(void) {
  zz_config c;
  zz_model m;
  CU_ASSERT_FATAL(zz_config_preset("opt-6.7b", &c) == ZZ_OK);
  CU_ASSERT_FATAL(zz_model_init(&c, &m) == ZZ_OK);
  zz_policy p;
  CU_ASSERT_FATAL(zz_policy_parse("gbs=8 num_gb=1 w=80,20 c=100,0 a=100,0", &p) == ZZ_OK);
  zz_shape shape = {.prompt_len = 64, .gen_len = 8};
  zz_memplan plan;
  CU_ASSERT_FATAL(zz_memplan_build(&m, &p, &shape, ZZ_DTYPE_F32, ZZ_DTYPE_F16, 1 << 20, &plan) == ZZ_OK);
  size_t g = zz_memplan_tier_total(&plan, ZZ_TIER_GPU), cpu = zz_memplan_tier_total(&plan, ZZ_TIER_CPU);
  size_t ram = (g > cpu ? g : cpu) + 1;
  /* each tier alone fits the RAM, the two together do not */
  size_t cap[ZZ_TIER_COUNT] = {ram, ram, 0};
  CU_ASSERT_EQUAL(zz_memplan_check(&plan, cap), ZZ_OK);
  CU_ASSERT_EQUAL(zz_memplan_check_shared(&plan, ram), ZZ_ERR_INFEASIBLE);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "together"));
  CU_ASSERT_EQUAL(zz_memplan_check_shared(&plan, g + cpu), ZZ_OK);
  CU_ASSERT_EQUAL(zz_memplan_check_shared(&plan, SIZE_MAX), ZZ_OK);
  zz_memplan_free(&plan);
  zz_model_free(&m);
}

/* ---------------------------------------------------------------- safetensors */

/* DIR/model.safetensors holding just this JSON header. */
static void zz_write_header(const char *dir, const char *json) {
  char path[4200], buf[4096];
  size_t n = strlen(json);
  for (int i = 0; i < 8; i++) buf[i] = (char)((n >> (8 * i)) & 0xff);
  memcpy(buf + 8, json, n);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  zz_test_write_file(path, buf, 8 + n);
}

static void test_safetensors_lies(void) {
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  zz_checkpoint *ck = NULL;
  /* no tensors: every lookup is a clean "missing", no sort or search of NULL */
  zz_write_header(dir, "{}");
  CU_ASSERT_EQUAL_FATAL(zz_checkpoint_open(dir, &ck), ZZ_OK);
  int64_t shape[2] = {2, 2};
  CU_ASSERT_EQUAL(zz_checkpoint_check(ck, "model.decoder.embed_tokens.weight", 2, shape), ZZ_ERR_FORMAT);
  zz_checkpoint_close(ck);
  ck = NULL;
  /* a tensor not of a float type: refused by name, by the shape check and the read alike */
  zz_write_header(dir, "{\"i\": {\"dtype\": \"I32\", \"shape\": [0], \"data_offsets\": [0, 0]}}");
  CU_ASSERT_EQUAL_FATAL(zz_checkpoint_open(dir, &ck), ZZ_OK);
  int64_t none[1] = {0};
  float f;
  CU_ASSERT_EQUAL(zz_checkpoint_check(ck, "i", 1, none), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "tensor i: dtype I32 is not a float type"));
  CU_ASSERT_EQUAL(zz_checkpoint_read(ck, "i", ZZ_DTYPE_F32, &f, 0), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "tensor i: dtype I32 is not a float type"));
  CU_ASSERT_EQUAL(zz_checkpoint_read(ck, "j", ZZ_DTYPE_F32, &f, 1), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "tensor j is missing"));
  zz_checkpoint_close(ck);
  ck = NULL;
  /* a shape whose element count is beyond 2^64: refused before it wraps */
  zz_write_header(dir, "{\"w\": {\"dtype\": \"F32\", \"shape\": [1099511627776, 1099511627776, 1099511627776], "
                       "\"data_offsets\": [0, 0]}}");
  CU_ASSERT_EQUAL(zz_checkpoint_open(dir, &ck), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "impossibly large"));
  zz_checkpoint_close(ck);
  unlink(path);
  rmdir(dir);
}

/* ---------------------------------------------------------------- offload file padding */

static const zz_device_ops *zz_real_ops;

/* Host memory full of 0xA5, as uninitialised memory may be. */
static zz_status zz_poison_host_alloc(zz_device *dev, size_t bytes, void **out) {
  ZZ_CHECK(zz_real_ops->host_alloc(dev, bytes, out));
  memset(*out, 0xA5, bytes);
  return ZZ_OK;
}

/* This process's offload file (unlinked, so "(deleted)"), opened anew: the
 * engine's descriptor has O_DIRECT, which wants aligned buffers. */
static int zz_open_offload_file(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  struct dirent *de;
  int fd = -1;
  while ((de = readdir(d)) != NULL) {
    char link[300], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%s", de->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) continue;
    target[n] = '\0';
    if (strstr(target, "zigzag-offload-") && fd < 0) fd = open(link, O_RDONLY);
  }
  closedir(d);
  return fd;
}

static void test_offload_padding_zeroed(void) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  zz_test_fixture f;
  CU_ASSERT_FATAL(zz_test_fixture_open("tiny-opt", true, &f) == ZZ_OK);
  zz_device *dev = f.dev;
  static zz_device_ops poisoned;
  zz_real_ops = dev->ops;
  poisoned = *dev->ops;
  poisoned.host_alloc = zz_poison_host_alloc;
  dev->ops = &poisoned;
  zz_policy pol;
  CU_ASSERT_FATAL(zz_policy_parse("gbs=2 num_gb=2 w=0,0 c=0,0 a=0,0", &pol) == ZZ_OK);
  zz_shape shape = {.prompt_len = 5, .gen_len = 3};
  zz_tiers tiers = {.offload_dir = dir};
  zz_engine *eng = NULL;
  CU_ASSERT_FATAL(zz_engine_create_tiers(dev, &f.m, f.ck, &pol, &shape, &tiers, &eng) == ZZ_OK);
  int32_t p0[] = {2, 47, 915}, p1[] = {2, 36, 291, 638, 407}, p2[] = {2}, p3[] = {2, 5, 6, 7};
  const int32_t *ids[] = {p0, p1, p2, p3};
  int64_t lens[] = {3, 5, 1, 4};
  zz_request req = {.n = 4, .ids = ids, .lens = lens, .max_new_tokens = 3, .ignore_eos = true};
  zz_result res;
  CU_ASSERT_FATAL(zz_generate(eng, &req, &res) == ZZ_OK);
  zz_result_free(&res, 4);
  int fd = zz_open_offload_file();
  CU_ASSERT_FATAL(fd >= 0);
  size_t size = (size_t)lseek(fd, 0, SEEK_END);
  unsigned char *buf = malloc(size);
  CU_ASSERT_FATAL(buf != NULL && pread(fd, buf, size, 0) == (ssize_t)size);
  /* 64 bytes of 0xA5 in a row: host memory nobody wrote reached the file */
  size_t run = 0, runs = 0;
  for (size_t i = 0; i < size; i++) {
    run = buf[i] == 0xA5 ? run + 1 : 0;
    if (run == 64) runs++;
  }
  CU_ASSERT_EQUAL(runs, 0);
  free(buf);
  close(fd);
  zz_engine_destroy(eng);
  dev->ops = zz_real_ops;
  zz_test_fixture_close(&f);
  rmdir(dir);
}

/* ---------------------------------------------------------------- stop requests */

static void test_stop_request(void) {
  zz_test_fixture f;
  CU_ASSERT_FATAL(zz_test_fixture_open("tiny-opt", false, &f) == ZZ_OK);
  zz_policy pol;
  zz_policy_default(&pol);
  zz_shape shape = {.prompt_len = 4, .gen_len = 4};
  zz_engine *eng = NULL;
  zz_request_stop(SIGINT); /* while the weights load */
  CU_ASSERT_EQUAL(zz_engine_create(f.dev, &f.m, NULL, &pol, &shape, &eng), ZZ_ERR_INTERRUPTED);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "SIGINT"));
  zz_request_stop(0);
  CU_ASSERT_EQUAL_FATAL(zz_engine_create(f.dev, &f.m, NULL, &pol, &shape, &eng), ZZ_OK);
  int32_t p[] = {2, 47, 915};
  const int32_t *ids[] = {p};
  int64_t lens[] = {3};
  zz_request req = {.n = 1, .ids = ids, .lens = lens, .max_new_tokens = 4};
  zz_result res;
  zz_request_stop(SIGTERM); /* between tokens: the block is abandoned */
  CU_ASSERT_EQUAL(zz_generate(eng, &req, &res), ZZ_ERR_INTERRUPTED);
  zz_request_stop(0);
  CU_ASSERT_EQUAL(zz_generate(eng, &req, &res), ZZ_OK);
  zz_result_free(&res, 1);
  zz_engine_destroy(eng);
  zz_test_fixture_close(&f);
}

/* ---------------------------------------------------------------- --out lock */

static void test_output_lock(void) {
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(path, sizeof path, "%s/out.jsonl", dir);
  zz_test_write_file(path, "keep\n", 5);
  zz_resume_set *s1 = NULL, *s2 = NULL;
  zz_output o1, o2;
  CU_ASSERT_EQUAL_FATAL(zz_output_open(&o1, path, false, &s1), ZZ_OK);
  /* a second job (another open file description) is refused */
  CU_ASSERT_EQUAL(zz_output_open(&o2, path, false, &s2), ZZ_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "another zigzag job"));
  /* nothing is cut when the job begins: only its first commit replaces the file */
  CU_ASSERT_EQUAL_FATAL(zz_output_begin(&o1, NULL), ZZ_OK);
  size_t len = 0;
  char *text = zz_test_read_file(path, &len);
  CU_ASSERT_EQUAL(len, 5);
  free(text);
  fputs("{}\n", o1.f);
  CU_ASSERT_EQUAL(zz_output_commit(&o1), ZZ_OK);
  text = zz_test_read_file(path, &len);
  CU_ASSERT_EQUAL(len, 3);
  free(text);
  /* the lock went with the new file to the path */
  CU_ASSERT_EQUAL(zz_output_open(&o2, path, false, &s2), ZZ_ERR_IO);
  zz_output_close(&o1);
  zz_resume_free(s1);
  /* the lock went with the first job */
  CU_ASSERT_EQUAL_FATAL(zz_output_open(&o2, path, false, &s2), ZZ_OK);
  zz_output_close(&o2);
  zz_resume_free(s2);
  unlink(path);
  rmdir(dir);
}

void zz_test_harden_register(void) {
  CU_pSuite s = CU_add_suite("harden", NULL, NULL);
  CU_add_test(s, "an error message may quote the previous one (issue #9)", test_error_quotes_previous);
  CU_add_test(s, "--percent with overlong arguments is refused, not a crash", test_options_overlong_percent);
  CU_add_test(s, "every number option is range-checked at parse time", test_options_ranges);
  CU_add_test(s, "policy numbers: ranges, NaN, 2^32 + 1", test_policy_ranges);
  CU_add_test(s, "a plan whose sizes would wrap 64 bits is refused", test_memplan_absurd_sizes);
  CU_add_test(s, "cpu device: arena + CPU tier must fit RAM together", test_memplan_shared_ram);
  CU_add_test(s, "safetensors: empty header, shape beyond 2^64", test_safetensors_lies);
  CU_add_test(s, "offload file padding is zeroed, not host garbage", test_offload_padding_zeroed);
  CU_add_test(s, "a stop request interrupts loading and generating", test_stop_request);
  CU_add_test(s, "--out is locked for the whole job, replaced only at the first commit", test_output_lock);
}
