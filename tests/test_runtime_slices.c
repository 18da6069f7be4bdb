/*
 * test_runtime_slices.c — what the pipeline builds on: the fixture models run as
 * 2 and 3 layer slices chained in one process (hidden states handed from one
 * slice's engine to the next, the last slice's logits sampled greedily here) and
 * as T = 2 and 3 micro-batch groups sharing one set of weights, under policies
 * that put weights, cache and activations on the CPU and on disk: the tokens must
 * be those of the whole-model, one-group run. Also: the memory plan's layout is
 * what the engine bound, buffer by buffer.
 */
#include <CUnit/CUnit.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zz_tests.h"

#define ZZ_NP 12
#define ZZ_NEW 5
#define ZZ_MAX_SLICES 3

typedef struct zz_sfix {
  zz_config cfg;
  zz_model m;
  zz_checkpoint *ck;
} zz_sfix;

static zz_device *S_dev;
static zz_sfix S_models[2];
static int32_t *S_ids[ZZ_NP];
static int64_t S_lens[ZZ_NP];
static char S_dir[4096];
static const char *const S_names[2] = {"tiny-opt", "tiny-opt-postln"};

static const char *const S_policies[] = {
    "gbs=2 num_gb=2 w=100,0 c=100,0 a=100,0",            /* all on the device */
    "gbs=2 num_gb=2 w=0,100 c=0,100 a=0,100 cpu_attn=1", /* weights, cache, act on the CPU */
    "gbs=1 num_gb=3 w=0,0 c=0,0 a=0,0",                  /* everything on disk */
    "gbs=3 num_gb=1 w=30,30 c=30,30 a=30,30 overlap=0",  /* split over three tiers, serial */
    "gbs=2 num_gb=2 w=20,30 c=0,0 a=100,0 cpu_attn=1",   /* cache on disk, CPU attention */
};
#define ZZ_NPOL (int)(sizeof S_policies / sizeof S_policies[0])

static int zz_slices_setup(void) {
  for (int f = 0; f < 2; f++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", ZZ_FIXTURES_DIR, S_names[f]);
    if (zz_config_load(path, &S_models[f].cfg) || zz_model_init(&S_models[f].cfg, &S_models[f].m) ||
        zz_checkpoint_open(path, &S_models[f].ck))
      return -1;
  }
  if (zz_device_create_cpu(0, 2, 0, &S_dev)) return -1;
  zz_rng r;
  zz_rng_seed(&r, 7, 0);
  for (int i = 0; i < ZZ_NP; i++) {
    S_lens[i] = 1 + (i * 5) % 17;
    S_ids[i] = malloc((size_t)S_lens[i] * sizeof(int32_t));
    S_ids[i][0] = 2;
    for (int64_t j = 1; j < S_lens[i]; j++) S_ids[i][j] = 4 + (int32_t)(zz_rng_next(&r) % 990);
  }
  snprintf(S_dir, sizeof S_dir, "%s", zz_test_tmpdir());
  return 0;
}

static int zz_slices_teardown(void) {
  for (int i = 0; i < ZZ_NP; i++) free(S_ids[i]);
  for (int f = 0; f < 2; f++) {
    zz_checkpoint_close(S_models[f].ck);
    zz_model_free(&S_models[f].m);
  }
  zz_device_destroy(S_dev);
  rmdir(S_dir);
  return 0;
}

static zz_engine_opts zz_opts_for(const char *policy, int l0, int l1, int groups) {
  zz_engine_opts o = {
      .shape = {.prompt_len = 17, .gen_len = ZZ_NEW}, .layer_begin = l0, .layer_end = l1, .n_groups = groups};
  o.tiers.offload_dir = S_dir;
  CU_ASSERT_FATAL(zz_policy_parse(policy, &o.policy) == ZZ_OK);
  return o;
}

/* Whole model through zz_generate with T groups; prompts in requests of T blocks. */
static zz_status zz_run_groups(const zz_sfix *f, const char *policy, int groups, int32_t toks[ZZ_NP][ZZ_NEW]) {
  zz_engine_opts o = zz_opts_for(policy, 0, 0, groups);
  zz_engine *e = NULL;
  zz_status st = zz_engine_create_opts(S_dev, &f->m, f->ck, &o, &e);
  int64_t cap = (int64_t)groups * o.policy.gpu_batch_size * o.policy.num_gpu_batches;
  for (int64_t first = 0; st == ZZ_OK && first < ZZ_NP; first += cap) {
    int64_t cnt = ZZ_NP - first < cap ? ZZ_NP - first : cap;
    uint64_t streams[ZZ_NP];
    for (int64_t i = 0; i < cnt; i++) streams[i] = (uint64_t)(first + i);
    zz_request req = {.n = cnt,
                      .ids = (const int32_t *const *)S_ids + first,
                      .lens = S_lens + first,
                      .streams = streams,
                      .max_new_tokens = ZZ_NEW,
                      .ignore_eos = true};
    zz_result res;
    if ((st = zz_generate(e, &req, &res)) != ZZ_OK) break;
    for (int64_t i = 0; i < cnt; i++) memcpy(toks[first + i], res.tokens[i], ZZ_NEW * sizeof(int32_t));
    zz_result_free(&res, cnt);
  }
  zz_engine_destroy(e);
  return st;
}

/* One block of T groups through a chain of slice engines, greedy. */
static zz_status zz_chain_block(zz_engine **eng, int ns, int groups, int64_t first, int64_t cnt,
                                int32_t toks[ZZ_NP][ZZ_NEW], void *buf[2], bool on_device) {
  const zz_policy *pol = zz_engine_policy(eng[0]);
  int64_t bls = (int64_t)pol->gpu_batch_size * pol->num_gpu_batches;
  int64_t vocab = zz_engine_model(eng[0])->cfg.vocab_size;
  int32_t newest[ZZ_NP];
  for (int g = 0; g < groups && g * bls < cnt; g++) {
    int64_t n = cnt - g * bls < bls ? cnt - g * bls : bls;
    for (int s = 0; s < ns; s++) ZZ_CHECK(zz_engine_begin_block(eng[s], g, n, S_lens + first + g * bls));
  }
  for (int step = 0; step < ZZ_NEW; step++)
    for (int g = 0; g < groups && g * bls < cnt; g++) {
      int64_t off = first + g * bls, n = cnt - g * bls < bls ? cnt - g * bls : bls;
      for (int s = 0; s < ns; s++) {
        zz_step_io io = {.prompts = (const int32_t *const *)S_ids + off,
                         .tokens = newest + off,
                         .hidden_in = buf[(s + 1) % 2],
                         .hidden_out = s + 1 < ns ? buf[s % 2] : NULL,
                         .hidden_on_device = on_device};
        ZZ_CHECK(zz_engine_step(eng[s], g, step, &io));
        if (s + 1 < ns)
          CU_ASSERT(zz_engine_hidden_bytes(eng[s], g, step) == zz_engine_hidden_bytes(eng[s + 1], g, step));
      }
      const float *logits = zz_engine_logits(eng[ns - 1]);
      for (int64_t i = 0; i < n; i++) newest[off + i] = toks[off + i][step] = zz_argmax(logits + i * vocab, vocab);
    }
  return ZZ_OK;
}

/* The model cut at `cuts` (ns - 1 layer indices) into ns engines with T groups;
 * the hidden states handed between them in host memory, or in the device's memory
 * (as the NCCL exchange hands them) when on_device. */
static zz_status zz_run_chain_on(const zz_sfix *f, const char *policy, const int *cuts, int ns, int groups,
                                 int32_t toks[ZZ_NP][ZZ_NEW], bool on_device) {
  zz_engine *eng[ZZ_MAX_SLICES] = {0};
  zz_status st = ZZ_OK;
  for (int s = 0; s < ns && st == ZZ_OK; s++) {
    zz_engine_opts o = zz_opts_for(policy, s ? cuts[s - 1] : 0, s + 1 < ns ? cuts[s] : f->m.n_layers, groups);
    st = zz_engine_create_opts(S_dev, &f->m, f->ck, &o, &eng[s]);
  }
  const zz_policy *pol = st == ZZ_OK ? zz_engine_policy(eng[0]) : NULL;
  int64_t cap = pol ? (int64_t)groups * pol->gpu_batch_size * pol->num_gpu_batches : 0;
  size_t hb = (size_t)cap * 17 * (size_t)f->cfg.hidden * sizeof(float);
  void *buf[2] = {NULL, NULL};
  for (int i = 0; i < 2 && st == ZZ_OK; i++) {
    if (on_device) st = zz_device_alloc(S_dev, hb + 1, &buf[i]);
    else if (!(buf[i] = malloc(hb + 1)))
      st = ZZ_ERR_NO_MEMORY;
  }
  for (int64_t first = 0; st == ZZ_OK && first < ZZ_NP; first += cap) {
    int64_t cnt = ZZ_NP - first < cap ? ZZ_NP - first : cap;
    st = zz_chain_block(eng, ns, groups, first, cnt, toks, buf, on_device);
  }
  for (int i = 0; i < 2; i++) {
    if (on_device) zz_device_free(S_dev, buf[i]);
    else
      free(buf[i]);
  }
  for (int s = 0; s < ns; s++) zz_engine_destroy(eng[s]);
  return st;
}

static zz_status zz_run_chain(const zz_sfix *f, const char *policy, const int *cuts, int ns, int groups,
                              int32_t toks[ZZ_NP][ZZ_NEW]) {
  return zz_run_chain_on(f, policy, cuts, ns, groups, toks, false);
}

static void zz_expect_same(int32_t a[ZZ_NP][ZZ_NEW], int32_t b[ZZ_NP][ZZ_NEW], zz_status st, const char *what,
                           const char *model, const char *policy) {
  if (st != ZZ_OK) fprintf(stderr, "\n%s %s '%s': %s\n", what, model, policy, zz_error_message());
  CU_ASSERT_EQUAL(st, ZZ_OK);
  bool same = st == ZZ_OK && memcmp(a, b, sizeof(int32_t) * ZZ_NP * ZZ_NEW) == 0;
  if (!same && st == ZZ_OK)
    fprintf(stderr, "\n%s %s '%s': tokens differ from the whole-model run\n", what, model, policy);
  CU_ASSERT(same);
}

static void test_groups_and_slices(void) {
  for (int f = 0; f < 2; f++) {
    /* 8 and 6 layers (embed, attention + MLP per transformer layer, output): even
     * and odd slice lengths, so both parities of the weight slots are crossed */
    int nl = S_models[f].m.n_layers;
    const int cuts2[] = {nl / 2}, cuts3[] = {nl / 3, 2 * nl / 3};
    int32_t base[ZZ_NP][ZZ_NEW], got[ZZ_NP][ZZ_NEW];
    CU_ASSERT_FATAL(zz_run_groups(&S_models[f], "gbs=12 num_gb=1 w=100,0 c=100,0 a=100,0", 1, base) == ZZ_OK);
    for (int p = 0; p < ZZ_NPOL; p++) {
      for (int t = 2; t <= 3; t++) {
        memset(got, 0, sizeof got);
        zz_expect_same(base, got, zz_run_groups(&S_models[f], S_policies[p], t, got), t == 2 ? "T=2" : "T=3",
                       S_names[f], S_policies[p]);
      }
      memset(got, 0, sizeof got);
      zz_expect_same(base, got, zz_run_chain(&S_models[f], S_policies[p], cuts2, 2, 1, got), "2 slices", S_names[f],
                     S_policies[p]);
      memset(got, 0, sizeof got);
      zz_expect_same(base, got, zz_run_chain(&S_models[f], S_policies[p], cuts3, 3, 2, got), "3 slices x T=2",
                     S_names[f], S_policies[p]);
    }
  }
}

/* Hidden states handed between slices in device memory (hidden_on_device, what the
 * NCCL exchange does on a GPU; here the CPU device's own arena, which the checked
 * device boundary keeps apart from host memory) give the same tokens as host
 * buffers, under every policy; a host pointer said to be on the device is refused. */
static void test_hidden_on_device(void) {
  for (int f = 0; f < 2; f++) {
    int nl = S_models[f].m.n_layers;
    const int cuts3[] = {nl / 3, 2 * nl / 3};
    int32_t base[ZZ_NP][ZZ_NEW], got[ZZ_NP][ZZ_NEW];
    CU_ASSERT_FATAL(zz_run_groups(&S_models[f], "gbs=12 num_gb=1 w=100,0 c=100,0 a=100,0", 1, base) == ZZ_OK);
    for (int p = 0; p < ZZ_NPOL; p++) {
      memset(got, 0, sizeof got);
      zz_expect_same(base, got, zz_run_chain_on(&S_models[f], S_policies[p], cuts3, 3, 2, got, true),
                     "3 slices x T=2, hidden states on the device", S_names[f], S_policies[p]);
    }
  }
  zz_engine_opts o = zz_opts_for(S_policies[0], 3, 8, 1);
  zz_engine *e = NULL;
  CU_ASSERT_FATAL(zz_engine_create_opts(S_dev, &S_models[0].m, S_models[0].ck, &o, &e) == ZZ_OK);
  CU_ASSERT_FATAL(zz_engine_begin_block(e, 0, 2, S_lens) == ZZ_OK);
  size_t hb = zz_engine_hidden_bytes(e, 0, 0);
  void *host = calloc(1, hb);
  zz_step_io io = {.hidden_in = host, .hidden_on_device = true};
  CU_ASSERT_EQUAL(zz_engine_step(e, 0, 0, &io), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "copy: src"));
  free(host);
  zz_engine_destroy(e);
}

/* Refill through a chain of slices, as a pipeline runs it: a group of four decodes
 * steps 0 and 1 with slots 1 and 3 ended at step 1; then each takes a new prompt
 * before step 2, its prompt step handed from slice to slice like any prompt step
 * (ids into the first, hidden states between), its first token from the last
 * slice's logits at its row; steps 2 to 5 decode all four. Every prompt's tokens are
 * its tokens in the whole-model run, with 1 and with 3 slices. */
static zz_status zz_refill_chain(const zz_sfix *f, const int *cuts, int ns, int32_t base[ZZ_NP][ZZ_NEW]) {
  static const int first[4] = {3, 1, 6, 4}, later[4] = {-1, 5, -1, 2}; /* prompts: 16, 6, 14, 4; then 9 and 11 */
  zz_engine *eng[ZZ_MAX_SLICES] = {0};
  zz_status st = ZZ_OK;
  for (int s = 0; s < ns && st == ZZ_OK; s++) {
    zz_engine_opts o = zz_opts_for(S_policies[0], s ? cuts[s - 1] : 0, s + 1 < ns ? cuts[s] : f->m.n_layers, 1);
    st = zz_engine_create_opts(S_dev, &f->m, f->ck, &o, &eng[s]);
  }
  int64_t vocab = f->cfg.vocab_size, lens[4];
  const int32_t *ids[4];
  int32_t newest[4], toks[4][ZZ_NEW + 1], nt[4] = {0};
  bool ended[4] = {false};
  size_t hb = (size_t)4 * 17 * (size_t)f->cfg.hidden * sizeof(float);
  void *buf[2] = {malloc(hb), malloc(hb)};
  if (st == ZZ_OK && (!buf[0] || !buf[1])) st = ZZ_ERR_NO_MEMORY;
  for (int i = 0; i < 4; i++) ids[i] = S_ids[first[i]], lens[i] = S_lens[first[i]];
  for (int s = 0; s < ns && st == ZZ_OK; s++) st = zz_engine_begin_block(eng[s], 0, 4, lens);
  for (int step = 0; step <= ZZ_NEW && st == ZZ_OK; step++) {
    for (int i = 0; i < 4; i++) ended[i] = step == 1 && later[i] >= 0;
    for (int s = 0; s < ns && st == ZZ_OK; s++) {
      zz_step_io io = {.prompts = ids,
                       .tokens = newest,
                       .hidden_in = buf[(s + 1) % 2],
                       .hidden_out = s + 1 < ns ? buf[s % 2] : NULL,
                       .ended = ended};
      st = zz_engine_step(eng[s], 0, step, &io);
    }
    for (int i = 0; i < 4 && st == ZZ_OK; i++)
      if (!ended[i] && nt[i] <= ZZ_NEW)
        newest[i] = toks[i][nt[i]++] = zz_argmax(zz_engine_logits(eng[ns - 1]) + i * vocab, vocab);
    for (int i = 0; i < 4 && st == ZZ_OK && step == 1; i++) {
      if (later[i] < 0) continue;
      ids[i] = S_ids[later[i]];
      nt[i] = 0;
      for (int s = 0; s < ns && st == ZZ_OK; s++) {
        CU_ASSERT(zz_engine_refill_room(eng[s], 0, 2, S_lens[later[i]]) >= ZZ_NEW);
        zz_step_io io = {
            .prompts = ids + i, .hidden_in = buf[(s + 1) % 2], .hidden_out = s + 1 < ns ? buf[s % 2] : NULL};
        st = zz_engine_refill(eng[s], 0, i, S_lens[later[i]], 2, &io);
        if (s + 1 < ns)
          CU_ASSERT(zz_engine_refill_bytes(eng[s], S_lens[later[i]]) ==
                    (size_t)S_lens[later[i]] * f->cfg.hidden * sizeof(float));
      }
      if (st == ZZ_OK) newest[i] = toks[i][nt[i]++] = zz_argmax(zz_engine_logits(eng[ns - 1]) + i * vocab, vocab);
    }
  }
  for (int i = 0; i < 4 && st == ZZ_OK; i++) {
    int p = later[i] >= 0 ? later[i] : first[i];
    CU_ASSERT(nt[i] >= ZZ_NEW);
    bool same = memcmp(toks[i], base[p], ZZ_NEW * sizeof(int32_t)) == 0;
    if (!same) fprintf(stderr, "\n%d slices: prompt %d (slot %d) differs from the whole-model run\n", ns, p, i);
    CU_ASSERT(same);
  }
  free(buf[0]);
  free(buf[1]);
  for (int s = 0; s < ns; s++) zz_engine_destroy(eng[s]);
  return st;
}

static void test_refill_slices(void) {
  for (int f = 0; f < 2; f++) {
    int nl = S_models[f].m.n_layers;
    const int cuts3[] = {nl / 3, 2 * nl / 3};
    int32_t base[ZZ_NP][ZZ_NEW];
    CU_ASSERT_FATAL(zz_run_groups(&S_models[f], "gbs=12 num_gb=1 w=100,0 c=100,0 a=100,0", 1, base) == ZZ_OK);
    for (int ns = 1; ns <= 3; ns += 2) {
      zz_status st = zz_refill_chain(&S_models[f], cuts3, ns, base);
      if (st != ZZ_OK) fprintf(stderr, "\n%s, %d slices: %s\n", S_names[f], ns, zz_error_message());
      CU_ASSERT_EQUAL(st, ZZ_OK);
    }
  }
  /* a later slice's refill needs its hidden state; a cache off the device, none */
  zz_engine_opts o = zz_opts_for(S_policies[0], 3, 8, 1);
  zz_engine *e = NULL;
  CU_ASSERT_FATAL(zz_engine_create_opts(S_dev, &S_models[0].m, S_models[0].ck, &o, &e) == ZZ_OK);
  CU_ASSERT(zz_engine_can_refill(e, 0));
  CU_ASSERT_FATAL(zz_engine_begin_block(e, 0, 2, S_lens + 3) == ZZ_OK);
  zz_step_io io = {.prompts = (const int32_t *const *)S_ids};
  CU_ASSERT_EQUAL(zz_engine_refill(e, 0, 1, S_lens[0], 2, &io), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "hidden_in"));
  zz_engine_destroy(e);
  o = zz_opts_for(S_policies[1], 3, 8, 1);
  CU_ASSERT_FATAL(zz_engine_create_opts(S_dev, &S_models[0].m, S_models[0].ck, &o, &e) == ZZ_OK);
  CU_ASSERT(!zz_engine_can_refill(e, 0));
  zz_engine_destroy(e);
}

/* Impossible slices and steps are refused with the numbers, not run. */
static void test_slice_refusals(void) {
  zz_engine_opts o = zz_opts_for(S_policies[0], 5, 3, 1);
  zz_engine *e = NULL;
  CU_ASSERT_EQUAL(zz_engine_create_opts(S_dev, &S_models[0].m, S_models[0].ck, &o, &e), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "[5, 3)"));
  o = zz_opts_for(S_policies[0], 3, 8, 2);
  CU_ASSERT_FATAL(zz_engine_create_opts(S_dev, &S_models[0].m, S_models[0].ck, &o, &e) == ZZ_OK);
  zz_step_io io = {0};
  CU_ASSERT_EQUAL(zz_engine_step(e, 0, 0, &io), ZZ_ERR_INVALID_ARG); /* no block begun */
  CU_ASSERT_FATAL(zz_engine_begin_block(e, 1, 3, S_lens) == ZZ_OK);
  CU_ASSERT_EQUAL(zz_engine_step(e, 1, 0, &io), ZZ_ERR_INVALID_ARG); /* a later slice needs hidden_in */
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "hidden_in"));
  CU_ASSERT_EQUAL(zz_engine_begin_block(e, 2, 3, S_lens), ZZ_ERR_INVALID_ARG);
  zz_request req = {.n = 1, .ids = (const int32_t *const *)S_ids, .lens = S_lens, .max_new_tokens = 1};
  zz_result res;
  CU_ASSERT_EQUAL(zz_generate(e, &req, &res), ZZ_ERR_INVALID_ARG); /* generate needs the whole model */
  zz_engine_destroy(e);
}

/* The layout is what the engine bound: every buffer at its planned offset and
 * size inside its arena, none overlapping, every arena used to its last byte. */
static void test_layout_is_bound(void) {
  for (int p = 0; p < ZZ_NPOL; p++)
    for (int t = 1; t <= 2; t++) {
      zz_engine_opts o = zz_opts_for(S_policies[p], t == 1 ? 0 : 3, 8, t);
      zz_engine *e = NULL;
      CU_ASSERT_FATAL(zz_engine_create_opts(S_dev, &S_models[0].m, S_models[0].ck, &o, &e) == ZZ_OK);
      const zz_memplan *plan = zz_engine_plan(e);
      size_t end[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT] = {{0}};
      for (int i = 0; i < plan->n_buf; i++) {
        const zz_buffer *x = &plan->buf[i];
        void *ptr;
        size_t off, bytes;
        zz_engine_binding(e, i, &ptr, &off, &bytes);
        CU_ASSERT_EQUAL(off, x->offset);
        CU_ASSERT_EQUAL(bytes, x->bytes);
        CU_ASSERT(off >= end[x->tier][x->purpose]); /* no overlap with the buffer before */
        end[x->tier][x->purpose] = off + bytes;
        CU_ASSERT(off + bytes <= plan->bytes[x->tier][x->purpose]);
        CU_ASSERT((x->tier == ZZ_TIER_DISK) == (ptr == NULL));
        CU_ASSERT(off % x->align == 0);
      }
      size_t peak[ZZ_TIER_COUNT][ZZ_PURPOSE_COUNT];
      zz_engine_peaks(e, peak);
      for (int ti = 0; ti < ZZ_TIER_COUNT; ti++)
        for (int q = 0; q < ZZ_PURPOSE_COUNT; q++) {
          CU_ASSERT_EQUAL(end[ti][q], plan->bytes[ti][q]);
          CU_ASSERT_EQUAL(peak[ti][q], plan->bytes[ti][q]);
        }
      zz_engine_destroy(e);
    }
}

void zz_test_slices_register(void) {
  CU_pSuite s = CU_add_suite("slices and groups", zz_slices_setup, zz_slices_teardown);
  CU_add_test(s, "2 and 3 slices, T = 2 and 3 groups give the whole-model tokens", test_groups_and_slices);
  CU_add_test(s, "impossible slices and steps refused", test_slice_refusals);
  CU_add_test(s, "hidden states handed in device memory give the same tokens", test_hidden_on_device);
  CU_add_test(s, "the layout is what the engine bound", test_layout_is_bound);
  CU_add_test(s, "a refill through 1 and 3 slices gives the whole-model tokens", test_refill_slices);
}
