/* test_stage_unit.c — the parts of stage/ that need no second rank: tags, their limits,
 * the block message, the layer split, the --comm choice and its refusals (two ranks
 * on one GPU among them), and the MPI exchange through the exchange interface (one
 * rank sending to itself). Runs without mpirun, as an MPI singleton. */
#include <CUnit/Basic.h>
#include <stdlib.h>
#include <string.h>

#include "comm_impl.h"
#include "xchg_impl.h"

static void test_tags_roundtrip(void) {
  /* every (kind, step, group) of a large run maps to its own tag, and back */
  const int G = 64, S = 4097;
  CU_ASSERT_EQUAL(zz_tag_check(G, S - 1, 2147483647), ZZ_OK);
  int prev = -1;
  for (int s = 0; s < S; s += 7)
    for (int g = 0; g < G; g++)
      for (int k = 0; k < ZZ_KIND_COUNT; k++) {
        int tag = zz_tag_make((zz_kind)k, s, g, G);
        CU_ASSERT(tag > prev);
        prev = tag;
        zz_kind kk;
        int ss, gg;
        zz_tag_split(tag, G, &kk, &ss, &gg);
        CU_ASSERT(kk == (zz_kind)k && ss == s && gg == g);
      }
}

static void test_tag_limits(void) {
  /* the standard's minimum MPI_TAG_UB (32767) allows 10922 (step, group) pairs */
  CU_ASSERT_EQUAL(zz_tag_check(8, 1000, 32767), ZZ_OK);
  CU_ASSERT_EQUAL(zz_tag_check(16, 1000, 32767), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zz_tag_check(1024, 1 << 16, 2147483647), ZZ_OK);
  CU_ASSERT_EQUAL(zz_tag_check(1024, 1 << 20, 2147483647), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(zz_tag_check(0, 10, 32767), ZZ_ERR_INVALID_ARG);
}

static void test_block_message(void) {
  int32_t first[] = {0, 2, 5}, len[] = {3, 1, 4, 1, 5};
  uint64_t rng[] = {1, 2, 3, 4, 0xffffffffffffffffull};
  zz_stage_block b = {
      .index = 9, .nseq = 5, .ngroups = 2, .max_new_tokens = 32, .group_first = first, .prompt_len = len, .rng = rng};
  CU_ASSERT_EQUAL(zz_block_check(&b, 4, 64), ZZ_OK);
  size_t n = zz_block_words(&b);
  uint64_t *w = calloc(n, sizeof *w);
  zz_block_pack(&b, w);
  zz_stage_block c;
  void *mem = NULL;
  CU_ASSERT_EQUAL_FATAL(zz_block_unpack(w, n, &c, &mem), ZZ_OK);
  CU_ASSERT(c.index == 9 && c.nseq == 5 && c.ngroups == 2 && c.max_new_tokens == 32);
  for (int g = 0; g <= 2; g++) CU_ASSERT_EQUAL(c.group_first[g], first[g]);
  for (int i = 0; i < 5; i++) CU_ASSERT(c.prompt_len[i] == len[i] && c.rng[i] == rng[i]);
  CU_ASSERT_PTR_NULL(c.prompt_ids);
  free(mem);
  /* the token message's extra words: none without params or without logprobs; else
   * the block's largest ask k gives 1 + 2k, and they survive the message */
  CU_ASSERT_EQUAL(zz_block_token_words(&b), 0);
  zz_seq_params sp[5];
  int32_t ids[14] = {0};
  for (int i = 0; i < 5; i++) zz_seq_params_default(&sp[i], &(zz_sampling){.top_p = 1}, 8);
  b.params = sp, b.prompt_ids = ids;
  CU_ASSERT_EQUAL(zz_block_token_words(&b), 0);
  sp[1].logprobs = 0;
  CU_ASSERT_EQUAL(zz_block_token_words(&b), 1);
  sp[3].logprobs = 20, sp[4].logprobs = 3;
  CU_ASSERT_EQUAL(zz_block_token_words(&b), 41);
  size_t np = zz_block_words(&b);
  uint64_t *wp = calloc(np, sizeof *wp);
  zz_block_pack(&b, wp);
  CU_ASSERT_EQUAL_FATAL(zz_block_unpack(wp, np, &c, &mem), ZZ_OK);
  CU_ASSERT_EQUAL(zz_block_token_words(&c), 41);
  free(mem);
  free(wp);
  b.params = NULL, b.prompt_ids = NULL;
  /* a count beyond 32 bits is refused, not cut to its low 32 bits (issue #21 item 20) */
  size_t len0 = 6 + 3; /* the word of sequence 0's prompt length (6 header words, 3 group starts) */
  w[len0] = (1ull << 32) + 3;
  CU_ASSERT_EQUAL(zz_block_unpack(w, n, &c, &mem), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "prompt length of sequence 0 is 4294967299"));
  w[len0] = 3;
  w[7] = (1ull << 32) + 2; /* group 1 would start at sequence 2 */
  CU_ASSERT_EQUAL(zz_block_unpack(w, n, &c, &mem), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "first sequence of group 1"));
  w[7] = 2;
  CU_ASSERT_EQUAL_FATAL(zz_block_unpack(w, n, &c, &mem), ZZ_OK);
  free(mem);
  /* a truncated or foreign message is refused, not read past its end */
  CU_ASSERT_EQUAL(zz_block_unpack(w, n - 1, &c, &mem), ZZ_ERR_FORMAT);
  w[0] ^= 1;
  CU_ASSERT_EQUAL(zz_block_unpack(w, n, &c, &mem), ZZ_ERR_FORMAT);
  free(w);
  /* shapes the driver refuses */
  CU_ASSERT_EQUAL(zz_block_check(&b, 1, 64), ZZ_ERR_INVALID_ARG); /* more groups than configured */
  CU_ASSERT_EQUAL(zz_block_check(&b, 4, 16), ZZ_ERR_INVALID_ARG); /* too many new tokens */
  first[1] = 0;
  CU_ASSERT_EQUAL(zz_block_check(&b, 4, 64), ZZ_ERR_INVALID_ARG); /* an empty group */
  first[1] = 2;
  b.nseq = (1 << 24) + 1; /* more than the message carries: refused by the sender */
  CU_ASSERT_EQUAL(zz_block_check(&b, 4, 64), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "more than a block message carries"));
  /* refill: 5 sequences in 3 slots (groups over slots), each slot's first sequence,
   * a continuation, through the message; a slot of a sequence the block lacks refused */
  int32_t sfirst[] = {0, 2, 3}, slot_seq[] = {4, 0, 2};
  b.nseq = 5, b.group_first = sfirst, b.nslots = 3, b.cont = 1, b.slot_seq = slot_seq;
  CU_ASSERT_EQUAL(zz_block_check(&b, 4, 64), ZZ_OK);
  n = zz_block_words(&b);
  w = calloc(n, sizeof *w);
  zz_block_pack(&b, w);
  CU_ASSERT_EQUAL_FATAL(zz_block_unpack(w, n, &c, &mem), ZZ_OK);
  CU_ASSERT(c.nseq == 5 && c.nslots == 3 && c.cont == 1 && c.group_first[2] == 3);
  for (int i = 0; i < 3; i++) CU_ASSERT_EQUAL(c.slot_seq[i], slot_seq[i]);
  for (int i = 0; i < 5; i++) CU_ASSERT(c.prompt_len[i] == len[i] && c.rng[i] == rng[i]);
  free(mem);
  w[n - 1] = 5; /* the last slot begins with sequence 5 of 5 */
  CU_ASSERT_EQUAL(zz_block_unpack(w, n, &c, &mem), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "a slot begins with sequence 5 of 5"));
  free(w);
  slot_seq[1] = -1;
  CU_ASSERT_EQUAL(zz_block_check(&b, 4, 64), ZZ_ERR_INVALID_ARG);
  slot_seq[1] = 0, sfirst[2] = 5; /* groups must cover the slots, not the sequences */
  CU_ASSERT_EQUAL(zz_block_check(&b, 4, 64), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "cover slots 0..3"));
}

/* An MPI return code on the status trail (ZZ_MPI_CHECK): success passes, an
 * error names what failed and MPI's own reason. */
static zz_status zz_mpi_check_twice(int rc) {
  ZZ_MPI_CHECK(rc, "test: %s %d", "step", 7);
  return ZZ_OK;
}

static void test_mpi_status(void) {
  CU_ASSERT_EQUAL(zz_mpi_status(MPI_SUCCESS, "nothing"), ZZ_OK);
  CU_ASSERT_EQUAL(zz_mpi_check_twice(MPI_SUCCESS), ZZ_OK);
  CU_ASSERT_EQUAL(zz_mpi_check_twice(MPI_ERR_TRUNCATE), ZZ_ERR_MPI);
  char want[MPI_MAX_ERROR_STRING + 32], reason[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(MPI_ERR_TRUNCATE, reason, &len);
  snprintf(want, sizeof want, "test: step 7: %s", reason);
  CU_ASSERT_STRING_EQUAL(zz_error_message(), want);
  zz_error_clear();
}

/* --comm: the names, and the refusal NCCL gets on the CPU device (or without NCCL). */
static void test_comm_choice(void) {
  zz_stage_comm c = ZZ_STAGE_COMM_COUNT;
  CU_ASSERT(zz_stage_comm_parse("mpi", &c) == ZZ_OK && c == ZZ_STAGE_COMM_MPI);
  CU_ASSERT(zz_stage_comm_parse("nccl", &c) == ZZ_OK && c == ZZ_STAGE_COMM_NCCL);
  CU_ASSERT_STRING_EQUAL(zz_stage_comm_name(ZZ_STAGE_COMM_NCCL), "nccl");
  CU_ASSERT_EQUAL(zz_stage_comm_parse("gloo", &c), ZZ_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "--comm gloo: want mpi or nccl"));
  zz_device *cpu = NULL;
  CU_ASSERT_FATAL(zz_device_create_cpu(1 << 20, 1, 1, &cpu) == ZZ_OK);
  CU_ASSERT_EQUAL(zz_stage_comm_check(ZZ_STAGE_COMM_MPI, cpu), ZZ_OK);
  CU_ASSERT_EQUAL(zz_stage_comm_check(ZZ_STAGE_COMM_NCCL, cpu), ZZ_ERR_UNSUPPORTED);
#ifdef ZZ_HAVE_NCCL
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "--comm nccl: this rank computes on the cpu device"));
#else
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "--comm nccl: this zigzag was built without NCCL"));
#endif
  zz_device_destroy(cpu);
}

/* Two ranks on one GPU are named, with their hosts and the GPU; distinct GPUs pass. */
static void test_same_gpu(void) {
  const char hosts[4][ZZ_HOST_LEN] = {"h0", "h1", "h2", "h3"};
  char ids[4][ZZ_GPU_ID_LEN] = {"GPU-aa at PCI 0000:3b:00.0", "GPU-bb at PCI 0000:5e:00.0",
                                "GPU-cc at PCI 0000:3b:00.0", "GPU-dd at PCI 0000:86:00.0"};
  CU_ASSERT_EQUAL(zz_xchg_same_gpu((const char(*)[ZZ_GPU_ID_LEN])ids, hosts, 4), ZZ_OK);
  snprintf(ids[3], sizeof ids[3], "%s", ids[1]);
  CU_ASSERT_EQUAL(zz_xchg_same_gpu((const char(*)[ZZ_GPU_ID_LEN])ids, hosts, 4), ZZ_ERR_UNSUPPORTED);
  const char *msg = zz_error_message();
  CU_ASSERT_PTR_NOT_NULL(
      strstr(msg, "rank 1 (host h1) and rank 3 (host h3) both compute on GPU-bb at PCI 0000:5e:00.0"));
  CU_ASSERT_PTR_NOT_NULL(strstr(msg, "NCCL cannot put two ranks on one GPU"));
  CU_ASSERT_EQUAL(zz_xchg_same_gpu((const char(*)[ZZ_GPU_ID_LEN])ids, hosts, 3), ZZ_OK); /* rank 3 not there */
}

/* The MPI exchange through the interface, one rank sending to itself: the bytes
 * arrive as sent (a full buffer, one byte, and the empty "group stopped" message),
 * a receive nobody answers ends at the step timeout, and the end of the block
 * cancels it. */
static void test_xchg_mpi(void) {
  MPI_Comm ctrl;
  CU_ASSERT_FATAL(MPI_Comm_dup(MPI_COMM_SELF, &ctrl) == MPI_SUCCESS);
  const char hosts[1][ZZ_HOST_LEN] = {"h0"};
  zz_stage_config cfg;
  zz_stage_config_default(&cfg);
  zz_faults *f = NULL;
  CU_ASSERT_FATAL(zz_faults_start(ctrl, MPI_COMM_SELF, hosts, &cfg, 10.0, &f) == ZZ_OK);
  zz_device *cpu = NULL;
  CU_ASSERT_FATAL(zz_device_create_cpu(1 << 20, 1, 1, &cpu) == ZZ_OK);
  zz_xchg *x = NULL;
  CU_ASSERT_FATAL(zz_xchg_create_mpi(MPI_COMM_SELF, f, 0.3, cpu, &x) == ZZ_OK);
  CU_ASSERT_FALSE(x->ops->on_device);
  CU_ASSERT_FATAL(zz_xchg_reserve(x, 4096) == ZZ_OK);
  const size_t sizes[] = {4096, 1, 0};
  for (int i = 0; i < 3; i++) {
    int rs = i % ZZ_XCHG_RECV, ss = ZZ_XCHG_RECV + i % ZZ_XCHG_SEND;
    unsigned char *out = x->slot[ss].buf, *in = x->slot[rs].buf;
    for (size_t k = 0; k < 4096; k++) out[k] = (unsigned char)(k * 7 + (size_t)i);
    memset(in, 0, 4096);
    CU_ASSERT(zz_xchg_irecv(x, rs, 0, 10 + i) == ZZ_OK);
    CU_ASSERT(zz_xchg_busy(x, rs));
    CU_ASSERT(zz_xchg_isend(x, ss, sizes[i], 0, 10 + i) == ZZ_OK);
    CU_ASSERT(zz_xchg_poke(x, rs) == ZZ_OK);
    size_t got = 99;
    CU_ASSERT(zz_xchg_wait(x, rs, "test: receive", NULL, &got) == ZZ_OK);
    CU_ASSERT(zz_xchg_wait(x, ss, "test: send", NULL, NULL) == ZZ_OK);
    CU_ASSERT_EQUAL(got, sizes[i]);
    CU_ASSERT(memcmp(in, out, sizes[i]) == 0);
    CU_ASSERT(!zz_xchg_busy(x, rs) && !zz_xchg_busy(x, ss));
  }
  CU_ASSERT_EQUAL(zz_xchg_isend(x, 0, 8, 0, 1), ZZ_ERR_MPI);            /* a receive slot cannot send */
  CU_ASSERT_EQUAL(zz_xchg_isend(x, 2, 4097, 0, 1), ZZ_ERR_INVALID_ARG); /* more than the buffers hold */
  CU_ASSERT(zz_xchg_irecv(x, 1, 0, 99) == ZZ_OK);
  CU_ASSERT_EQUAL(zz_xchg_wait(x, 1, "test: nobody sends", NULL, NULL), ZZ_ERR_MPI);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "test: nobody sends (rank 0, mpi): nothing after"));
  CU_ASSERT_EQUAL(zz_xchg_settle(x, true), ZZ_OK);
  CU_ASSERT_FALSE(zz_xchg_busy(x, 1));
  zz_xchg_destroy(x);
  zz_device_destroy(cpu);
  CU_ASSERT(zz_faults_stop(f) == ZZ_OK);
  zz_faults_free(f);
  MPI_Comm_free(&ctrl);
}

int main(void) {
  int level = 0;
  if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &level) != MPI_SUCCESS) return 1;
  if (CU_initialize_registry() != CUE_SUCCESS) return 1;
  CU_pSuite s = CU_add_suite("stage", NULL, NULL);
  CU_add_test(s, "tags round-trip", test_tags_roundtrip);
  CU_add_test(s, "tag limits", test_tag_limits);
  CU_add_test(s, "block message", test_block_message);
  CU_add_test(s, "--comm names and refusals", test_comm_choice);
  CU_add_test(s, "MPI errors on the status trail", test_mpi_status);
  CU_add_test(s, "two ranks on one GPU refused", test_same_gpu);
  if (level >= MPI_THREAD_MULTIPLE) CU_add_test(s, "the MPI exchange through the interface", test_xchg_mpi);
  CU_basic_set_mode(CU_BRM_VERBOSE);
  CU_basic_run_tests();
  int failures = (int)CU_get_number_of_failures();
  CU_cleanup_registry();
  MPI_Finalize();
  return failures != 0;
}
