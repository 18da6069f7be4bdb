/*
 * comm.c — the messages between neighbour ranks: tags that encode (kind, token step,
 * group), waits that always end (done, a fault anywhere, or a deadline), and the
 * block broadcast: the composition of each block, rank 0 to everyone.
 */
#include <stdint.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_impl.h"

/* ================================================================ tags */

zz_status zz_tag_check(int groups_max, int max_new_tokens, int tag_ub) {
  if (groups_max < 1 || max_new_tokens < 1)
    return zz_error(ZZ_ERR_INVALID_ARG, "stage: groups (%d) and max new tokens (%d) must be >= 1", groups_max,
                    max_new_tokens);
  int64_t top = ((int64_t)max_new_tokens + 1) * groups_max * ZZ_KIND_COUNT - 1;
  if (top > tag_ub)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "stage: %d groups x %d new tokens need MPI tags up to %lld, but this MPI "
                    "allows %d ((tokens + 1) x groups x %d must stay <= MPI_TAG_UB + 1)",
                    groups_max, max_new_tokens, (long long)top, tag_ub, ZZ_KIND_COUNT);
  return ZZ_OK;
}

int zz_tag_make(zz_kind kind, int step, int group, int groups_max) {
  return (step * groups_max + group) * ZZ_KIND_COUNT + (int)kind;
}

void zz_tag_split(int tag, int groups_max, zz_kind *kind, int *step, int *group) {
  *kind = (zz_kind)(tag % ZZ_KIND_COUNT);
  int sg = tag / ZZ_KIND_COUNT;
  *step = sg / groups_max;
  *group = sg % groups_max;
}

/* ================================================================ waits */

void zz_comm_backoff(int *spins) {
  /* Spin briefly (a message is often just about to land), then sleep up to 1 ms so a
   * waiting rank leaves the cores to the ranks and threads that compute. */
  int s = (*spins)++;
  if (s < 16) return;
  long ns = s < 64 ? 20000 : s < 256 ? 200000 : 1000000;
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
}

zz_status zz_mpi_status(int rc, const char *fmt, ...) {
  if (rc == MPI_SUCCESS) return ZZ_OK;
  char what[512], msg[MPI_MAX_ERROR_STRING];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  int len = 0;
  if (MPI_Error_string(rc, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", rc);
  return zz_error(ZZ_ERR_MPI, "%s: %s", what, msg);
}

zz_status zz_comm_wait(zz_faults *f, MPI_Request *req, MPI_Status *status, double deadline_s, const char *what,
                       int peer, double *waited_out) {
  double t0 = zz_now();
  int spins = 0;
  zz_status st = ZZ_OK;
  for (;;) {
    int done = 0;
    int rc = MPI_Test(req, &done, status ? status : MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      st = zz_mpi_status(rc, "%s (rank %d)", what, peer);
      break;
    }
    if (done) break;
    if ((st = zz_faults_check(f)) != ZZ_OK) break;
    if (zz_now() - t0 > deadline_s) {
      st = zz_error(ZZ_ERR_MPI, "%s (rank %d): nothing after %.0f s (step timeout)", what, peer, deadline_s);
      break;
    }
    zz_comm_backoff(&spins);
  }
  if (waited_out) *waited_out += zz_now() - t0;
  return st;
}

zz_status zz_comm_recv_any_size(zz_faults *f, MPI_Comm comm, int source, int tag, double deadline_s, const char *what,
                                void **buf_out, int *bytes_out, double *waited_out) {
  double t0 = zz_now();
  int spins = 0;
  MPI_Message msg;
  MPI_Status status;
  for (;;) {
    int found = 0;
    int rc = MPI_Improbe(source, tag, comm, &found, &msg, &status);
    ZZ_MPI_CHECK(rc, "%s (rank %d)", what, source);
    if (found) break;
    ZZ_CHECK(zz_faults_check(f));
    if (zz_now() - t0 > deadline_s)
      return zz_error(ZZ_ERR_MPI, "%s (rank %d): nothing after %.0f s (step timeout)", what, source, deadline_s);
    zz_comm_backoff(&spins);
  }
  int bytes = 0;
  MPI_Get_count(&status, MPI_BYTE, &bytes);
  void *buf = malloc(bytes > 0 ? (size_t)bytes : 1);
  if (!buf) return zz_error(ZZ_ERR_NO_MEMORY, "%s: %d bytes", what, bytes);
  MPI_Request req;
  int rc = MPI_Imrecv(buf, bytes, MPI_BYTE, &msg, &req);
  zz_status st = zz_mpi_status(rc, "%s (rank %d)", what, source);
  if (st == ZZ_OK) st = zz_comm_wait(f, &req, NULL, deadline_s, what, source, NULL);
  if (waited_out) *waited_out += zz_now() - t0;
  if (st != ZZ_OK) {
    free(buf);
    return st;
  }
  *buf_out = buf;
  *bytes_out = bytes;
  return ZZ_OK;
}

/* ================================================================ block message */

#define ZZ_BLOCK_HEAD 6 /* magic, index, nseq, ngroups, max_new_tokens, nslots | cont << 32 */
static size_t block_base_words(uint64_t nseq, uint64_t ngroups, uint64_t nslots) {
  return ZZ_BLOCK_HEAD + ngroups + 1 + 2 * nseq + nslots;
}

static size_t block_prompt_total(const zz_stage_block *b) {
  size_t t = 0;
  for (int i = 0; i < b->nseq; i++) t += (size_t)b->prompt_len[i];
  return t;
}

int zz_block_token_words(const zz_stage_block *b) {
  int k = -1;
  for (int i = 0; b->params && i < b->nseq; i++)
    if (b->params[i].logprobs > k) k = b->params[i].logprobs;
  return k < 0 ? 0 : 1 + 2 * k;
}

size_t zz_block_words(const zz_stage_block *b) {
  size_t n = block_base_words((uint64_t)b->nseq, (uint64_t)b->ngroups, (uint64_t)b->nslots);
  return b->params ? n + ZZ_SEQ_PARAMS_WORDS * (size_t)b->nseq + block_prompt_total(b) : n;
}

void zz_block_pack(const zz_stage_block *b, uint64_t *w) {
  size_t k = 0;
  w[k++] = ZZ_BLOCK_MAGIC;
  w[k++] = (uint64_t)b->index;
  w[k++] = (uint64_t)b->nseq;
  w[k++] = (uint64_t)b->ngroups;
  w[k++] = (uint64_t)b->max_new_tokens;
  w[k++] = (uint64_t)b->nslots | (uint64_t)(b->cont != 0) << 32;
  for (int g = 0; g <= b->ngroups; g++) w[k++] = (uint64_t)b->group_first[g];
  for (int i = 0; i < b->nseq; i++) w[k++] = (uint64_t)b->prompt_len[i];
  for (int i = 0; i < b->nseq; i++) w[k++] = b->rng[i];
  for (int i = 0; i < b->nslots; i++) w[k++] = (uint64_t)b->slot_seq[i];
  if (!b->params) return;
  for (int i = 0; i < b->nseq; i++, k += ZZ_SEQ_PARAMS_WORDS) zz_seq_params_pack(&b->params[i], w + k);
  for (size_t t = 0, n = block_prompt_total(b); t < n; t++) w[k++] = (uint32_t)b->prompt_ids[t];
}

zz_status zz_block_unpack(const uint64_t *w, size_t nwords, zz_stage_block *b, void **storage_out) {
  if (nwords < ZZ_BLOCK_HEAD || w[0] != ZZ_BLOCK_MAGIC)
    return zz_error(ZZ_ERR_FORMAT, "stage: block message: bad header (%zu words)", nwords);
  uint64_t nseq = w[2], ngroups = w[3], nslots = w[5] & 0xffffffffu;
  if (nseq > ZZ_BLOCK_MAX_SEQ || ngroups > ZZ_BLOCK_MAX_GROUPS || w[4] > ZZ_BLOCK_MAX_NEW || nslots > nseq ||
      w[5] >> 33 || nwords < block_base_words(nseq, ngroups, nslots))
    return zz_error(ZZ_ERR_FORMAT, "stage: block message: %zu words for %llu sequences in %llu groups", nwords,
                    (unsigned long long)nseq, (unsigned long long)ngroups);
  /* group starts and prompt lengths are int32: a larger word is a broken message */
  const uint64_t H = ZZ_BLOCK_HEAD;
  for (uint64_t k = H; k < H + ngroups + 1 + nseq; k++)
    if (w[k] > INT32_MAX)
      return zz_error(ZZ_ERR_FORMAT, "stage: block message: %s %llu is %llu, beyond 2^31 - 1",
                      k < H + 1 + ngroups ? "the first sequence of group" : "the prompt length of sequence",
                      (unsigned long long)(k < H + 1 + ngroups ? k - H : k - H - 1 - ngroups),
                      (unsigned long long)w[k]);
  for (uint64_t k = H + ngroups + 1 + 2 * nseq; k < H + ngroups + 1 + 2 * nseq + nslots; k++)
    if (w[k] >= nseq)
      return zz_error(ZZ_ERR_FORMAT, "stage: block message: a slot begins with sequence %llu of %llu",
                      (unsigned long long)w[k], (unsigned long long)nseq);
  zz_stage_block blk = {.index = (int64_t)w[1],
                        .nseq = (int32_t)nseq,
                        .ngroups = (int32_t)ngroups,
                        .max_new_tokens = (int32_t)w[4],
                        .nslots = (int32_t)nslots,
                        .cont = (int32_t)(w[5] >> 32)};
  size_t base = block_base_words(nseq, ngroups, nslots), extra = nwords - base, total = 0;
  for (uint64_t i = 0; i < nseq; i++) total += w[H + 1 + ngroups + i];
  /* params (and the prompts) or not: nothing else fits */
  if (extra && extra != ZZ_SEQ_PARAMS_WORDS * nseq + total)
    return zz_error(ZZ_ERR_FORMAT, "stage: block message: %zu words for %llu sequences in %llu groups", nwords,
                    (unsigned long long)nseq, (unsigned long long)ngroups);
  size_t np = extra ? nseq : 0, nid = extra ? total : 0;
  size_t bytes = nseq * sizeof(uint64_t) + np * sizeof(zz_seq_params) +
                 (ngroups + 1 + nseq + nid + nslots) * sizeof(int32_t);
  /* rng and params first: their alignment */
  uint8_t *mem = malloc(bytes ? bytes : 1);
  if (!mem) return zz_error(ZZ_ERR_NO_MEMORY, "stage: block of %llu sequences", (unsigned long long)nseq);
  uint64_t *rng = (uint64_t *)mem;
  zz_seq_params *params = (zz_seq_params *)(mem + nseq * sizeof(uint64_t));
  int32_t *first = (int32_t *)(params + np);
  int32_t *len = first + ngroups + 1, *ids = len + nseq, *slot_seq = ids + nid;
  size_t k = H;
  for (uint64_t g = 0; g <= ngroups; g++) first[g] = (int32_t)w[k++];
  for (uint64_t i = 0; i < nseq; i++) len[i] = (int32_t)w[k++];
  for (uint64_t i = 0; i < nseq; i++) rng[i] = w[k++];
  for (uint64_t i = 0; i < nslots; i++) slot_seq[i] = (int32_t)w[k++];
  for (size_t i = 0; i < np; i++, k += ZZ_SEQ_PARAMS_WORDS)
    if (zz_seq_params_unpack(w + k, (int)w[4], &params[i]) != ZZ_OK) {
      free(mem);
      return zz_error(ZZ_ERR_FORMAT, "stage: block message: sequence %zu: %s", i, zz_error_message());
    }
  for (size_t t = 0; t < nid; t++, k++) {
    if (w[k] > INT32_MAX) {
      free(mem);
      return zz_error(ZZ_ERR_FORMAT, "stage: block message: prompt id %zu is %llu", t, (unsigned long long)w[k]);
    }
    ids[t] = (int32_t)w[k];
  }
  if (np) blk.params = params, blk.prompt_ids = ids;
  blk.group_first = first;
  blk.prompt_len = len;
  blk.rng = rng;
  blk.slot_seq = nslots ? slot_seq : NULL;
  *b = blk;
  *storage_out = mem;
  return ZZ_OK;
}

zz_status zz_block_check(const zz_stage_block *b, int groups_max, int max_new_tokens) {
  if (b->nseq > ZZ_BLOCK_MAX_SEQ)
    return zz_error(ZZ_ERR_INVALID_ARG, "stage: block %lld: %d sequences, more than a block message carries (%d)",
                    (long long)b->index, b->nseq, ZZ_BLOCK_MAX_SEQ);
  int units = b->nslots ? b->nslots : b->nseq; /* what the groups are runs of */
  if (b->nslots < 0 || b->nslots > b->nseq || (b->nslots && !b->slot_seq))
    return zz_error(ZZ_ERR_INVALID_ARG, "stage: block %lld: %d slots for %d sequences", (long long)b->index, b->nslots,
                    b->nseq);
  for (int i = 0; i < b->nslots; i++)
    if (b->slot_seq[i] < 0 || b->slot_seq[i] >= b->nseq)
      return zz_error(ZZ_ERR_INVALID_ARG, "stage: block %lld: slot %d begins with sequence %d of %d",
                      (long long)b->index, i, b->slot_seq[i], b->nseq);
  if (b->nseq < 1 || b->ngroups < 1 || b->ngroups > units || b->ngroups > groups_max)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "stage: block %lld: %d %s in %d groups (1 <= groups <= %s, "
                    "groups <= %d configured)",
                    (long long)b->index, units, b->nslots ? "slots" : "sequences", b->ngroups,
                    b->nslots ? "slots" : "sequences", groups_max);
  if (b->max_new_tokens < 1 || b->max_new_tokens > max_new_tokens)
    return zz_error(ZZ_ERR_INVALID_ARG, "stage: block %lld: max new tokens %d outside 1..%d (configured limit)",
                    (long long)b->index, b->max_new_tokens, max_new_tokens);
  if (!b->group_first || !b->prompt_len || !b->rng)
    return zz_error(ZZ_ERR_INVALID_ARG, "stage: block %lld: missing arrays", (long long)b->index);
  if (b->group_first[0] != 0 || b->group_first[b->ngroups] != units)
    return zz_error(ZZ_ERR_INVALID_ARG, "stage: block %lld: groups must cover %s 0..%d", (long long)b->index,
                    b->nslots ? "slots" : "sequences", units);
  for (int g = 0; g < b->ngroups; g++)
    if (b->group_first[g + 1] <= b->group_first[g])
      return zz_error(ZZ_ERR_INVALID_ARG, "stage: block %lld: group %d is empty", (long long)b->index, g);
  for (int i = 0; i < b->nseq; i++)
    if (b->prompt_len[i] < 1)
      return zz_error(ZZ_ERR_INVALID_ARG, "stage: block %lld: sequence %d has an empty prompt", (long long)b->index, i);
  return ZZ_OK;
}

/* ================================================================ block broadcast */

zz_status zz_block_bcast_send(zz_block_bcast *m, MPI_Comm comm, int groups_max, const zz_stage_block *b, int more,
                              zz_stage_stats *stats) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  size_t nw = more ? zz_block_words(b) : ZZ_BLOCK_HEAD;
  m->words = calloc(nw, sizeof *m->words);
  m->req = malloc((size_t)size * sizeof *m->req);
  if (!m->words || !m->req) {
    free(m->words);
    free(m->req);
    *m = (zz_block_bcast){0};
    return zz_error(ZZ_ERR_NO_MEMORY, "stage: block message");
  }
  if (more) zz_block_pack(b, m->words);
  else
    m->words[0] = ZZ_BLOCK_MAGIC, m->words[1] = (uint64_t)b->index;
  int tag = zz_tag_make(ZZ_KIND_BLOCK, 0, 0, groups_max);
  for (int r = 1; r < size; r++) {
    int rc = MPI_Isend(m->words, (int)(nw * sizeof *m->words), MPI_BYTE, r, tag, comm, &m->req[r]);
    stats->bytes_sent += nw * sizeof *m->words;
    stats->messages_sent++;
    if (rc != MPI_SUCCESS) return zz_error(ZZ_ERR_MPI, "stage: sending block %lld to rank %d", (long long)b->index, r);
  }
  return ZZ_OK;
}

zz_status zz_block_bcast_recv(zz_block_bcast *m, zz_faults *f, MPI_Comm comm, int groups_max, double deadline_s,
                              zz_stage_block *b, int *more, zz_stage_stats *stats) {
  int bytes = 0;
  void *buf = NULL;
  ZZ_CHECK(zz_comm_recv_any_size(f, comm, 0, zz_tag_make(ZZ_KIND_BLOCK, 0, 0, groups_max), deadline_s,
                                 "stage: waiting for the next block", &buf, &bytes, &stats->bubble_s));
  m->words = buf;
  stats->bytes_received += (uint64_t)bytes;
  size_t nw = (size_t)bytes / sizeof *m->words;
  *more = !(nw == ZZ_BLOCK_HEAD && m->words[0] == ZZ_BLOCK_MAGIC && m->words[2] == 0);
  return *more ? zz_block_unpack(m->words, nw, b, &m->storage) : ZZ_OK;
}

zz_status zz_block_bcast_end(zz_block_bcast *m, zz_faults *f, MPI_Comm comm, double deadline_s, zz_status s) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  for (int r = 1; m->req && r < size && s == ZZ_OK; r++)
    s = zz_comm_wait(f, &m->req[r], NULL, deadline_s, "stage: sending the block", r, NULL);
  if (s == ZZ_OK || !m->req) free(m->words); /* after a failure MPI may still read it */
  free(m->req);
  free(m->storage);
  *m = (zz_block_bcast){0};
  return s;
}
