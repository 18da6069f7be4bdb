/*
 * test_runtime_loader.c — checkpoints and configs that lie: truncated files,
 * offsets past the end, wrong shapes or dtypes, huge header lengths, broken
 * shard indexes. Each must be refused with a message naming the tensor or file.
 */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zz_runtime.h"
#include "zz_tests.h"

/* Writes DIR/model.safetensors from a header text and n data bytes. */
static void zz_write_st(const char *dir, const char *header, size_t data_bytes) {
  size_t hl = strlen(header);
  size_t total = 8 + hl + data_bytes;
  unsigned char *buf = calloc(1, total);
  for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
  memcpy(buf + 8, header, hl);
  for (size_t i = 0; i < data_bytes; i++) buf[8 + hl + i] = (unsigned char)(i * 7);
  char path[4200];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  zz_test_write_file(path, buf, total);
  free(buf);
}

static zz_status zz_open_expect(const char *dir, const char *header, size_t data, const char *needle) {
  zz_write_st(dir, header, data);
  zz_checkpoint *ck = NULL;
  zz_status st = zz_checkpoint_open(dir, &ck);
  if (st == ZZ_OK) {
    zz_checkpoint_close(ck);
  } else if (needle && !strstr(zz_error_message(), needle)) {
    fprintf(stderr, "\nmessage '%s' lacks '%s'\n", zz_error_message(), needle);
    return ZZ_OK; /* make the assertion fail */
  }
  return st;
}

static void test_malformed_safetensors(void) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  const char *good = "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}";
  CU_ASSERT_EQUAL(zz_open_expect(dir, good, 24, NULL), ZZ_OK);
  /* truncated data: offsets past the end */
  CU_ASSERT_EQUAL(zz_open_expect(dir, good, 20, "a.weight"), ZZ_ERR_FORMAT);
  /* byte count disagrees with shape */
  CU_ASSERT_EQUAL(
      zz_open_expect(dir, "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,24]}}", 24, "a.weight"),
      ZZ_ERR_FORMAT);
  /* unknown dtype */
  CU_ASSERT_EQUAL(
      zz_open_expect(dir, "{\"a.weight\":{\"dtype\":\"F12\",\"shape\":[2],\"data_offsets\":[0,3]}}", 3, "F12"),
      ZZ_ERR_FORMAT);
  /* not JSON, not an object, missing fields, negative offsets */
  CU_ASSERT_EQUAL(zz_open_expect(dir, "{\"a\":", 0, "JSON"), ZZ_ERR_FORMAT);
  CU_ASSERT_EQUAL(zz_open_expect(dir, "[1,2]", 0, "object"), ZZ_ERR_FORMAT);
  CU_ASSERT_EQUAL(zz_open_expect(dir, "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "a.weight"),
                  ZZ_ERR_FORMAT);
  CU_ASSERT_EQUAL(
      zz_open_expect(dir, "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, "a.weight"),
      ZZ_ERR_FORMAT);
  CU_ASSERT_EQUAL(
      zz_open_expect(dir, "{\"a.weight\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "a.weight"),
      ZZ_ERR_FORMAT);

  /* an integer tensor where the config needs floats: opened, refused by name */
  zz_write_st(dir, "{\"a.weight\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]}}", 24);
  zz_checkpoint *ck0 = NULL;
  CU_ASSERT_FATAL(zz_checkpoint_open(dir, &ck0) == ZZ_OK);
  int64_t three = 3;
  CU_ASSERT_EQUAL(zz_checkpoint_check(ck0, "a.weight", 1, &three), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "I64"));
  float f3[3];
  CU_ASSERT_EQUAL(zz_checkpoint_read(ck0, "a.weight", ZZ_DTYPE_F32, f3, 3), ZZ_ERR_FORMAT);
  zz_checkpoint_close(ck0);

  /* a header length far larger than the file */
  char path[4200];
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  unsigned char huge[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, '{', '}'};
  zz_test_write_file(path, huge, sizeof huge);
  zz_checkpoint *ck = NULL;
  CU_ASSERT_EQUAL(zz_checkpoint_open(dir, &ck), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "header length"));
  /* shorter than the length field itself */
  zz_test_write_file(path, huge, 5);
  CU_ASSERT_EQUAL(zz_checkpoint_open(dir, &ck), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "truncated"));
  /* nothing there */
  unlink(path);
  CU_ASSERT_EQUAL(zz_checkpoint_open(dir, &ck), ZZ_ERR_IO);
  rmdir(dir);
}

/* The fixture model with one tensor's shape changed in its header: the loader
 * must name that tensor and both shapes. */
static void test_shape_mismatch_named(void) {
  char src[4096], dir[4096], path[4200];
  snprintf(src, sizeof src, "%s/tiny-opt/model.safetensors", ZZ_FIXTURES_DIR);
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  size_t len;
  char *buf = zz_test_read_file(src, &len);
  CU_ASSERT_FATAL(buf != NULL);
  /* fc1.weight of layer 1 is [256, 64]: claim [64, 256] (same bytes, wrong shape) */
  char *p = strstr(buf + 8, "\"model.decoder.layers.1.fc1.weight\"");
  CU_ASSERT_FATAL(p != NULL);
  char *sh = strstr(p, "[256,64]");
  CU_ASSERT_FATAL(sh != NULL);
  memcpy(sh, "[64,256]", 8);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  zz_test_write_file(path, buf, len);
  free(buf);
  zz_config cfg;
  zz_model m;
  char cfgsrc[4096];
  snprintf(cfgsrc, sizeof cfgsrc, "%s/tiny-opt", ZZ_FIXTURES_DIR);
  CU_ASSERT_FATAL(zz_config_load(cfgsrc, &cfg) == ZZ_OK);
  CU_ASSERT_FATAL(zz_model_init(&cfg, &m) == ZZ_OK);
  zz_checkpoint *ck = NULL;
  CU_ASSERT_FATAL(zz_checkpoint_open(dir, &ck) == ZZ_OK);
  CU_ASSERT_EQUAL(zz_checkpoint_check_model(ck, &m), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "layers.1.fc1.weight"));
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "[256, 64]"));
  zz_checkpoint_close(ck);
  /* truncate the file by one byte: the last tensor's offsets now pass the end */
  zz_test_write_file(path, "", 0);
  buf = zz_test_read_file(src, &len);
  zz_test_write_file(path, buf, len - 1);
  free(buf);
  CU_ASSERT_EQUAL(zz_checkpoint_open(dir, &ck), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "outside"));
  unlink(path);
  rmdir(dir);
  zz_model_free(&m);
}

static void test_sharded_and_prefix(void) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/tiny-opt-postln", ZZ_FIXTURES_DIR);
  zz_checkpoint *ck = NULL;
  CU_ASSERT_FATAL(zz_checkpoint_open(dir, &ck) == ZZ_OK);
  CU_ASSERT(zz_checkpoint_count(ck) > 20);
  int64_t shape[2] = {1008, 32};
  /* stored as "decoder.embed_tokens.weight", asked for by its canonical name */
  CU_ASSERT_EQUAL(zz_checkpoint_check(ck, "model.decoder.embed_tokens.weight", 2, shape), ZZ_OK);
  float row[32];
  CU_ASSERT_EQUAL(zz_checkpoint_read(ck, "model.decoder.project_in.weight", ZZ_DTYPE_F32, row, 32), ZZ_ERR_FORMAT);
  zz_checkpoint_close(ck);
}

static void test_bad_configs(void) {
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(path, sizeof path, "%s/config.json", dir);
  zz_config c;
  const struct {
    const char *text, *needle;
  } cases[] = {
      {"{\"model_type\": \"opt\", \"hidden_size\": 64", "config.json:"},
      {"{\"model_type\": \"llama2000\"}", "llama2000"},
      {"{\"model_type\": \"opt\", \"hidden_size\": 64}", "vocab_size"},
      {"{\"model_type\": \"opt\", \"vocab_size\": 10, \"hidden_size\": 30, \"ffn_dim\": 4, \"num_hidden_layers\": 1, "
       "\"num_attention_heads\": 4}",
       "multiple"},
      {"{\"model_type\": \"opt\", \"vocab_size\": \"x\"}", "vocab_size"},
      {"[]", "not a JSON object"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    zz_test_write_file(path, cases[i].text, strlen(cases[i].text));
    CU_ASSERT_NOT_EQUAL(zz_config_load(dir, &c), ZZ_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), cases[i].needle));
  }
  unlink(path);
  CU_ASSERT_EQUAL(zz_config_load(dir, &c), ZZ_ERR_IO);
  rmdir(dir);
}

/* A shard name of "" or "." in model.safetensors.index.json is the directory
 * itself (issue #21 item 20): refused naming the index and the tensor. */
static void test_index_shard_names(void) {
  char dir[4096], path[4200], shard[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
  snprintf(shard, sizeof shard, "%s/sub", dir);
  CU_ASSERT_EQUAL_FATAL(mkdir(shard, 0700), 0);
  static const char *const names[] = {"", ".", "..", "sub", "a/b"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, "{\"metadata\": {\"total_size\": 24}, \"weight_map\": {\"a.weight\": \"%s\"}}",
             names[i]);
    CU_ASSERT_EQUAL_FATAL(zz_test_write_file(path, text, strlen(text)), 0);
    zz_checkpoint *ck = NULL;
    zz_status st = zz_checkpoint_open(dir, &ck);
    const char *msg = zz_error_message();
    /* "sub" is a plain name of a directory: refused as not a regular file */
    bool named = strstr(msg, i == 3 ? "sub: not a regular file" : "model.safetensors.index.json: tensor a.weight");
    if (st == ZZ_OK || !named) fprintf(stderr, "\nshard \"%s\": %s '%s'\n", names[i], zz_status_str(st), msg);
    CU_ASSERT(st != ZZ_OK && named);
    zz_checkpoint_close(ck);
  }
  unlink(path);
  rmdir(shard);
  rmdir(dir);
}

/* OPT's config.json numbers: each out-of-range key refused by name (issue #21
 * item 10), a real written for an integer accepted where it has no fraction. */
static void test_opt_config_ranges(void) {
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(path, sizeof path, "%s/config.json", dir);
#define ZZ_OPT_BASE                                                                                                    \
  "\"model_type\": \"opt\", \"vocab_size\": 64, \"hidden_size\": 32, \"ffn_dim\": 64, "                                \
  "\"num_hidden_layers\": 2, \"num_attention_heads\": 4"
  static const struct {
    const char *text, *needle; /* needle NULL: loads */
  } cases[] = {
      {"{" ZZ_OPT_BASE ", \"max_position_embeddings\": 128.0, \"eos_token_id\": [2, 3]}", NULL},
      {"{" ZZ_OPT_BASE ", \"max_position_embeddings\": 1e30}",
       "\"max_position_embeddings\" = 1e+30 must be an integer"},
      {"{" ZZ_OPT_BASE ", \"word_embed_proj_dim\": 0}", "\"word_embed_proj_dim\" = 0 must be an integer in [1,"},
      {"{" ZZ_OPT_BASE ", \"pad_token_id\": 64}", "\"pad_token_id\" = 64 must be an integer in [0, 63]"},
      {"{" ZZ_OPT_BASE ", \"eos_token_id\": 64}", "\"eos_token_id\" must be an id or a list of ids in [0, 63]"},
      {"{\"model_type\": \"opt\", \"vocab_size\": 64, \"hidden_size\": 32, \"ffn_dim\": 64, \"num_hidden_layers\": 5000}",
       "\"num_hidden_layers\" = 5000 must be an integer in [1, 4096]"},
  };
#undef ZZ_OPT_BASE
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    CU_ASSERT_EQUAL_FATAL(zz_test_write_file(path, cases[i].text, strlen(cases[i].text)), 0);
    zz_config c;
    zz_status st = zz_config_load(dir, &c);
    bool ok = cases[i].needle ? st == ZZ_ERR_FORMAT && strstr(zz_error_message(), cases[i].needle) : st == ZZ_OK;
    if (!ok) fprintf(stderr, "\nconfig %s: %s '%s'\n", cases[i].text, zz_status_str(st), zz_error_message());
    CU_ASSERT(ok);
  }
  unlink(path);
  rmdir(dir);
}

void zz_test_loader_register(void) {
  CU_pSuite s = CU_add_suite("loader", NULL, NULL);
  CU_add_test(s, "malformed safetensors refused", test_malformed_safetensors);
  CU_add_test(s, "shape mismatch and truncation named", test_shape_mismatch_named);
  CU_add_test(s, "sharded index, names without model. prefix", test_sharded_and_prefix);
  CU_add_test(s, "bad config.json refused", test_bad_configs);
  CU_add_test(s, "index shard names that are the directory refused", test_index_shard_names);
  CU_add_test(s, "OPT config.json numbers range-checked by key", test_opt_config_ranges);
}
