/*
 * test_runtime_fuzz.c — every loader and parser against a few thousand mutated
 * files made from the fixtures (bytes changed, truncated, header lengths that
 * lie). A mutated file may load or be refused; it must never crash, hang or
 * leave a status without a message. Deterministic (fixed seed); run it under
 * ASan/UBSan for the full effect.
 */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_runtime.h"
#include "zz_tests.h"

static zz_rng zz_fuzz_rng;

static uint64_t zz_pick(uint64_t n) { return n ? zz_rng_next(&zz_fuzz_rng) % n : 0; }

/* One mutation of buf[0..len): a few bytes in [lo, hi) changed, or a cut. */
static size_t zz_mutate(char *buf, size_t len, size_t lo, size_t hi) {
  static const char bytes[] = "0123456789{}[]\":,- eE.\x00\xff";
  switch (zz_pick(4)) {
    case 0: return zz_pick(len); /* truncate */
    case 1: {                    /* overwrite 1-4 bytes with JSON-ish characters */
      int k = 1 + (int)zz_pick(4);
      for (int i = 0; i < k; i++) buf[lo + zz_pick(hi - lo)] = bytes[zz_pick(sizeof bytes - 1)];
      return len;
    }
    case 2: { /* a digit changed: sizes and offsets that lie */
      for (int tries = 0; tries < 64; tries++) {
        size_t at = lo + zz_pick(hi - lo);
        if (buf[at] >= '0' && buf[at] <= '9') {
          buf[at] = (char)('0' + zz_pick(10));
          break;
        }
      }
      return len;
    }
    default: /* random bytes anywhere */
      for (int i = 0; i < 8; i++) buf[zz_pick(len)] = (char)zz_pick(256);
      return len;
  }
}

static void test_fuzz_safetensors(void) {
  char src[4096], dir[4096], path[4200], cfgdir[4096];
  snprintf(src, sizeof src, "%s/tiny-opt/model.safetensors", ZZ_FIXTURES_DIR);
  snprintf(cfgdir, sizeof cfgdir, "%s/tiny-opt", ZZ_FIXTURES_DIR);
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  size_t len;
  char *orig = zz_test_read_file(src, &len);
  CU_ASSERT_FATAL(orig != NULL);
  size_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | (unsigned char)orig[i];
  zz_config cfg;
  zz_model m;
  CU_ASSERT_FATAL(zz_config_load(cfgdir, &cfg) == ZZ_OK);
  CU_ASSERT_FATAL(zz_model_init(&cfg, &m) == ZZ_OK);
  char *buf = malloc(len);
  float *dst = malloc((size_t)(cfg.vocab_size * cfg.ffn + 4096) * sizeof(float));
  int loaded = 0, refused = 0, silent = 0;
  for (int it = 0; it < 400; it++) {
    memcpy(buf, orig, len);
    size_t n = zz_mutate(buf, len, 8, 8 + hlen);
    zz_test_write_file(path, buf, n);
    zz_checkpoint *ck = NULL;
    zz_error_clear();
    zz_status st = zz_checkpoint_open(dir, &ck);
    if (st == ZZ_OK) st = zz_checkpoint_check_model(ck, &m);
    if (st == ZZ_OK)
      for (int l = 0; l < m.n_layers && st == ZZ_OK; l++)
        for (int w = 0; w < m.layers[l].n_weights && st == ZZ_OK; w++) {
          const zz_weight_spec *s = &m.layers[l].weights[w];
          if (s->ndim)
            st = zz_checkpoint_read(ck, s->name, ZZ_DTYPE_F32, dst, s->shape[0] * (s->ndim > 1 ? s->shape[1] : 1));
        }
    if (st == ZZ_OK) loaded++;
    else {
      refused++;
      silent += zz_error_message()[0] == '\0';
    }
    zz_checkpoint_close(ck);
  }
  CU_ASSERT(refused > 100);
  CU_ASSERT_EQUAL(silent, 0);
  CU_ASSERT(loaded > 0); /* mutations in the data bytes load: the test is not vacuous */
  unlink(path);
  rmdir(dir);
  free(buf);
  free(dst);
  free(orig);
  zz_model_free(&m);
}

/* Mutates DIR/name (copied from the fixture directory) and calls load(dir) each time. */
static void zz_fuzz_text_in(const char *fixture, const char *name, int iters, zz_status (*load)(const char *dir)) {
  char src[4096], dir[4096], path[4200], other[4200];
  snprintf(src, sizeof src, "%s/%s/%s", ZZ_FIXTURES_DIR, fixture, name);
  snprintf(dir, sizeof dir, "%s", zz_test_tmpdir());
  snprintf(path, sizeof path, "%s/%s", dir, name);
  /* the tokenizer needs both of its files */
  const char *pair = strcmp(name, "vocab.json") == 0   ? "merges.txt"
                     : strcmp(name, "merges.txt") == 0 ? "vocab.json"
                                                       : NULL;
  if (pair) {
    char psrc[4096];
    size_t pl;
    snprintf(psrc, sizeof psrc, "%s/tiny-opt/%s", ZZ_FIXTURES_DIR, pair);
    snprintf(other, sizeof other, "%s/%s", dir, pair);
    char *p = zz_test_read_file(psrc, &pl);
    zz_test_write_file(other, p, pl);
    free(p);
  }
  size_t len;
  char *orig = zz_test_read_file(src, &len);
  CU_ASSERT_FATAL(orig != NULL);
  char *buf = malloc(len + 1);
  int refused = 0, silent = 0;
  for (int it = 0; it < iters; it++) {
    memcpy(buf, orig, len);
    size_t n = zz_mutate(buf, len, 0, len);
    zz_test_write_file(path, buf, n);
    zz_error_clear();
    zz_status st = load(dir);
    if (st != ZZ_OK) {
      refused++;
      silent += zz_error_message()[0] == '\0';
    }
  }
  CU_ASSERT(refused > 0);
  CU_ASSERT_EQUAL(silent, 0);
  unlink(path);
  if (pair) unlink(other);
  rmdir(dir);
  free(buf);
  free(orig);
}

static void zz_fuzz_text(const char *name, int iters, zz_status (*load)(const char *dir)) {
  zz_fuzz_text_in("tiny-opt", name, iters, load);
}

static zz_status zz_load_config(const char *dir) {
  zz_config c;
  zz_model m;
  ZZ_CHECK(zz_config_load(dir, &c));
  ZZ_CHECK(zz_model_init(&c, &m));
  zz_model_free(&m);
  return ZZ_OK;
}

static zz_status zz_load_tokenizer(const char *dir) {
  zz_tokenizer *t = NULL;
  ZZ_CHECK(zz_tokenizer_load(dir, &t));
  int32_t *ids = NULL;
  int64_t n = 0;
  const char *text = "Four score and seven years ago, caf\xc3\xa9 \xf0\x9f\x91\x8d";
  zz_status st = zz_tokenizer_encode(t, text, strlen(text), &ids, &n);
  char *back = NULL;
  size_t bl = 0;
  if (st == ZZ_OK) st = zz_tokenizer_decode(t, ids, n, &back, &bl);
  free(ids);
  free(back);
  zz_tokenizer_free(t);
  return st;
}

static zz_status zz_load_prompts(const char *dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/config.json", dir);
  zz_prompt_reader *r;
  ZZ_CHECK(zz_prompt_reader_open(path, &r));
  zz_prompt p;
  bool got = true;
  zz_status st = ZZ_OK;
  while (st == ZZ_OK && got) {
    st = zz_prompt_reader_next(r, &p, &got);
    if (st == ZZ_OK && got) zz_prompt_free(&p);
  }
  zz_prompt_reader_close(r);
  return st;
}

static void test_fuzz_config(void) { zz_fuzz_text("config.json", 400, zz_load_config); }
static void test_fuzz_vocab(void) { zz_fuzz_text("vocab.json", 200, zz_load_tokenizer); }
static void test_fuzz_merges(void) { zz_fuzz_text("merges.txt", 200, zz_load_tokenizer); }
static void test_fuzz_tokenizer_json(void) {
  zz_fuzz_text_in("tok-llama3", "tokenizer.json", 100, zz_load_tokenizer);
  zz_fuzz_text_in("tok-llama2", "tokenizer.json", 100, zz_load_tokenizer);
  zz_fuzz_text_in("tok-qwen2", "tokenizer.json", 100, zz_load_tokenizer);
  zz_fuzz_text_in("tok-phi3", "tokenizer.json", 100, zz_load_tokenizer);
}
/* config.json read as a prompts file: every line is a malformed prompt */
static void test_fuzz_prompts(void) { zz_fuzz_text("config.json", 200, zz_load_prompts); }

void zz_test_fuzz_register(void) {
  zz_rng_seed(&zz_fuzz_rng, 20261122, 0);
  CU_pSuite s = CU_add_suite("fuzz", NULL, NULL);
  CU_add_test(s, "mutated safetensors headers", test_fuzz_safetensors);
  CU_add_test(s, "mutated config.json", test_fuzz_config);
  CU_add_test(s, "mutated vocab.json", test_fuzz_vocab);
  CU_add_test(s, "mutated merges.txt", test_fuzz_merges);
  CU_add_test(s, "mutated tokenizer.json", test_fuzz_tokenizer_json);
  CU_add_test(s, "malformed prompt lines", test_fuzz_prompts);
}
