/*
 * stage_mock.c — the pipeline stage driven by a mock engine, for the MPI tests.
 *
 * The mock stands in for the engine behind zz_stage_callbacks: L "layers" split in
 * contiguous slices over the ranks; a hidden state is one row of H uint32 per token
 * (prefill: every prompt token, decode: one per sequence); rank 0 embeds ids, every
 * layer mixes each row with a per-sequence, per-layer state (the mock's KV cache, so
 * tokens depend on the whole history and on groups never being mixed up); the last
 * rank turns a sequence's last row and its rng stream into the next token id, and
 * marks the sequence done when the id is a multiple of 7; rank 0 ends one itself
 * when the id is a multiple of 11 (as a stop string is found there), and the last
 * rank sends two extra words per token (the id scrambled, the step: the place of
 * log-probabilities), which rank 0 checks. Rank 0 compares what comes
 * around the ring with a plain single-process loop over the same functions (no MPI,
 * no groups): the tokens must be identical for any number of ranks and groups.
 *
 * Fault injection (--fault error|kill|stop|slow on --fault-rank at the first compute
 * with step >= --fault-step): error returns a zz_status from compute, kill and stop
 * raise SIGKILL / SIGSTOP, slow sleeps --slow-s seconds inside compute (a long step
 * that must not be taken for a lost rank); init-stop raises SIGSTOP before MPI starts
 * (a rank that never arrives).
 *
 *   mpirun -np 3 stage_mock --groups 4 --blocks 2 --seqs 7 --max-new 10
 */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zz_stage.h"

#define VOCAB 50000
#define EOS_PAD 2

typedef struct opts {
  int groups, seqs, blocks, max_new, layers, hidden, bind, gpu;
  double peer_timeout, slow_s, step_ms;
  const char *fault, *mark, *piddir;
  int fault_rank, fault_step;
} opts;

/* ================================================================ the mock model */

static uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

static uint32_t rotl32(uint32_t x, int r) { return (x << r) | (x >> (32 - r)); }

static void embed(int32_t id, int32_t pos, int H, uint32_t *row) {
  for (int k = 0; k < H; k++) row[k] = mix32((uint32_t)id * 2654435761u + (uint32_t)k * 40503u + (uint32_t)pos * 97u);
}

/* layer l on one row of sequence whose state for this layer is *c */
static void layer(int l, uint32_t *c, int H, uint32_t *row) {
  *c = (*c ^ row[0] ^ (uint32_t)(l + 1)) * 0x01000193u;
  for (int k = 0; k < H; k++) row[k] = rotl32(row[k] ^ *c, (l % 7) + 1) * (uint32_t)(2 * l + 1) + (uint32_t)k;
}

static int32_t token_of(const uint32_t *row, int H, uint64_t rng, int step) {
  uint64_t x = rng ^ ((uint64_t)step << 32);
  for (int k = 0; k < H; k++) x = (x ^ row[k]) * 0x100000001b3ull;
  return (int32_t)(mix32((uint32_t)(x ^ (x >> 29))) % VOCAB);
}

/* the block rank 0 hands out: prompts depend on the global sequence number only */
typedef struct mock_block {
  int32_t *first, *len, *ids;
  uint64_t *rng;
  int nseq, ngroups;
} mock_block;

static void make_block(const opts *o, int b, mock_block *mb) {
  int N = o->seqs, T = o->groups;
  mb->nseq = N;
  mb->ngroups = T;
  mb->first = calloc((size_t)T + 1, sizeof(int32_t));
  mb->len = calloc((size_t)N, sizeof(int32_t));
  mb->rng = calloc((size_t)N, sizeof(uint64_t));
  for (int g = 0; g <= T; g++) mb->first[g] = (int32_t)((int64_t)g * N / T); /* uneven sizes */
  int total = 0;
  for (int i = 0; i < N; i++) {
    int q = b * N + i;
    mb->len[i] = 1 + (q * 7) % 5;
    mb->rng[i] = 0x1234u + (uint64_t)q * 0x9E3779B97F4A7C15ull;
    total += mb->len[i];
  }
  mb->ids = calloc((size_t)total, sizeof(int32_t));
  for (int i = 0, k = 0; i < N; i++)
    for (int j = 0; j < mb->len[i]; j++) mb->ids[k++] = (int32_t)(((b * N + i) * 131 + j * 17) % VOCAB);
}

static void free_block(mock_block *mb) {
  free(mb->first);
  free(mb->len);
  free(mb->ids);
  free(mb->rng);
}

/* ================================================================ reference: one process */

/* tokens[b][i][s], steps[b][i] */
typedef struct tokens {
  int32_t *id; /* [blocks * seqs * max_new] */
  int *steps;  /* [blocks * seqs] */
} tokens;

static void reference(const opts *o, tokens *out) {
  int N = o->seqs, H = o->hidden, L = o->layers;
  for (int b = 0; b < o->blocks; b++) {
    mock_block mb;
    make_block(o, b, &mb);
    uint32_t *state = calloc((size_t)N * (size_t)L, sizeof(uint32_t));
    uint8_t *done = calloc((size_t)N, 1);
    uint32_t *row = calloc((size_t)H, sizeof(uint32_t));
    int32_t *cur = calloc((size_t)N, sizeof(int32_t));
    for (int g = 0; g < o->groups; g++) {
      int f = mb.first[g], e = mb.first[g + 1];
      for (int step = 0; step < o->max_new; step++) {
        int all = 1;
        for (int i = f; i < e; i++) {
          int off = 0;
          for (int x = 0; x < i; x++) off += mb.len[x];
          int rows = step == 0 ? mb.len[i] : 1;
          for (int j = 0; j < rows; j++) {
            if (step == 0) embed(mb.ids[off + j], j, H, row);
            else
              embed(cur[i], mb.len[i] + step - 1, H, row);
            for (int l = 0; l < L; l++) layer(l, &state[(size_t)i * L + l], H, row);
          }
          int32_t id = done[i] ? EOS_PAD : token_of(row, H, mb.rng[i], step);
          if (!done[i] && (id % 7 == 0 || id % 11 == 0)) done[i] = 1;
          cur[i] = id;
          out->id[((size_t)b * N + i) * o->max_new + step] = id;
          out->steps[b * N + i] = step + 1;
          all &= done[i];
        }
        if (all) break;
      }
    }
    free(state);
    free(done);
    free(row);
    free(cur);
    free_block(&mb);
  }
}

/* ================================================================ the engine side */

typedef struct mock {
  const opts *o;
  int rank, size, l0, l1; /* this rank's layers [l0, l1) */
  int next;               /* rank 0: next block to hand out */
  mock_block mb;
  int have_mb;
  uint32_t *state;       /* [nseq][l1 - l0] */
  uint8_t *ended;        /* rank 0: [nseq] sequences rank 0 ended itself (id % 11) */
  uint8_t *over;         /* last rank: [nseq] what rank 0's done flags must say (id % 7 or % 11 seen) */
  zz_seq_params *params; /* [nseq] each asks logprobs 2: the token message carries 5 extra words */
  tokens got;            /* rank 0: what came around the ring */
  int faulted;
} mock;

static zz_status m_next_block(void *ctx, zz_stage_block *out, int *more) {
  mock *m = ctx;
  if (m->have_mb) free_block(&m->mb);
  m->have_mb = 0;
  if (m->next >= m->o->blocks) {
    *more = 0;
    return ZZ_OK;
  }
  make_block(m->o, m->next, &m->mb);
  m->have_mb = 1;
  free(m->params);
  if (!(m->params = calloc((size_t)m->mb.nseq, sizeof *m->params))) return zz_error(ZZ_ERR_NO_MEMORY, "mock params");
  for (int i = 0; i < m->mb.nseq; i++) {
    zz_seq_params_default(&m->params[i], &(zz_sampling){.top_p = 1}, m->o->max_new);
    m->params[i].logprobs = 2;
  }
  *out = (zz_stage_block){.nseq = m->mb.nseq,
                          .ngroups = m->mb.ngroups,
                          .max_new_tokens = m->o->max_new,
                          .group_first = m->mb.first,
                          .prompt_len = m->mb.len,
                          .rng = m->mb.rng,
                          .prompt_ids = m->mb.ids,
                          .params = m->params};
  m->next++;
  *more = 1;
  return ZZ_OK;
}

static zz_status m_begin_block(void *ctx, const zz_stage_block *b) {
  mock *m = ctx;
  free(m->state);
  free(m->ended);
  m->state = calloc((size_t)b->nseq * (size_t)(m->l1 - m->l0 > 0 ? m->l1 - m->l0 : 1), sizeof(uint32_t));
  m->ended = calloc((size_t)b->nseq, 1);
  free(m->over);
  m->over = calloc((size_t)b->nseq, 1);
  if (zz_block_token_words(b) != 5)
    return zz_error(ZZ_ERR_INVALID_ARG, "mock: the block's token words are %d, not 5", zz_block_token_words(b));
  return m->state && m->ended && m->over ? ZZ_OK : zz_error(ZZ_ERR_NO_MEMORY, "mock state");
}

static int64_t rows_of(const zz_stage_block *b, int32_t step, int32_t g) {
  if (step > 0) return b->group_first[g + 1] - b->group_first[g];
  int64_t r = 0;
  for (int i = b->group_first[g]; i < b->group_first[g + 1]; i++) r += b->prompt_len[i];
  return r;
}

static size_t m_hidden_bytes(void *ctx, const zz_stage_block *b, int32_t step, int32_t g) {
  mock *m = ctx;
  return (size_t)rows_of(b, step, g) * (size_t)m->o->hidden * sizeof(uint32_t);
}

/* The line the tests time a fault from (wall clock, as `date +%s.%N`). */
static void say_fault(int rank, const char *kind, int step) {
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  fprintf(stderr, "mock: rank %d: fault %s at step %d, time %.3f\n", rank, kind, step,
          (double)now.tv_sec + 1e-9 * (double)now.tv_nsec);
}

static void inject(mock *m, int step) {
  const opts *o = m->o;
  if (m->faulted || !o->fault || m->rank != o->fault_rank || step < o->fault_step) return;
  m->faulted = 1;
  say_fault(m->rank, o->fault, step);
  if (!strcmp(o->fault, "kill")) raise(SIGKILL);
  if (!strcmp(o->fault, "stop")) raise(SIGSTOP);
  if (!strcmp(o->fault, "slow")) {
    struct timespec ts = {(time_t)o->slow_s, (long)((o->slow_s - (double)(time_t)o->slow_s) * 1e9)};
    nanosleep(&ts, NULL);
  }
}

static zz_status m_compute(void *ctx, const zz_stage_item *it) {
  mock *m = ctx;
  const opts *o = m->o;
  int H = o->hidden, nl = m->l1 - m->l0;
  const zz_stage_block *b = it->block;
  inject(m, it->step);
  if (o->fault && !strcmp(o->fault, "error") && m->faulted)
    return zz_error(ZZ_ERR_DEVICE, "mock compute failed (injected fault)");
  if (o->mark && m->rank == 0 && b->index == 0 && it->step == 2 && it->group == 0) {
    FILE *f = fopen(o->mark, "w");
    if (f) fclose(f);
  }
  /* rank 0's done flags reach the last rank behind the hidden state (MPI) */
  if (m->rank > 0 && m->rank == m->size - 1 && it->step > 0)
    for (int s = 0; s < it->nseq; s++)
      if (!it->done || (it->done[s] != 0) != m->over[it->first + s])
        return zz_error(ZZ_ERR_MPI, "mock: step %d sequence %d: rank 0's done flag did not reach the last rank",
                        it->step, it->first + s);
  if (o->step_ms > 0) {
    struct timespec ts = {0, (long)(o->step_ms * 1e6)};
    nanosleep(&ts, NULL);
  }
  uint32_t *out = it->hidden_out;
  if (m->rank == 0) { /* embed */
    int64_t k = 0;
    for (int s = 0; s < it->nseq; s++) {
      int i = it->first + s;
      if (it->step == 0)
        for (int j = 0; j < b->prompt_len[i]; j++, k++) embed(it->ids[k], j, H, out + (size_t)k * H);
      else
        embed(it->ids[s], b->prompt_len[i] + it->step - 1, H, out + (size_t)s * H);
    }
  } else {
    if (it->hidden_in_bytes != it->hidden_out_bytes)
      return zz_error(ZZ_ERR_INVALID_ARG, "mock: %zu bytes in, %zu out", it->hidden_in_bytes, it->hidden_out_bytes);
    memcpy(out, it->hidden_in, it->hidden_in_bytes);
  }
  int64_t r = 0;
  for (int s = 0; s < it->nseq; s++) {
    int i = it->first + s, rows = it->step == 0 ? b->prompt_len[i] : 1;
    for (int j = 0; j < rows; j++, r++)
      for (int l = m->l0; l < m->l1; l++) layer(l, &m->state[(size_t)i * nl + (l - m->l0)], H, out + (size_t)r * H);
  }
  return ZZ_OK;
}

static zz_status m_sample(void *ctx, const zz_stage_item *it, int32_t *ids, uint8_t *done, int32_t *extra) {
  mock *m = ctx;
  int H = m->o->hidden;
  const uint32_t *h = it->hidden_out;
  int64_t r = 0;
  for (int s = 0; s < it->nseq; s++) {
    int i = it->first + s;
    r += it->step == 0 ? it->block->prompt_len[i] : 1;
    int32_t id = done[s] ? EOS_PAD : token_of(h + (size_t)(r - 1) * H, H, it->block->rng[i], it->step);
    if (!done[s] && id % 7 == 0) done[s] = 1;
    if (id % 7 == 0 || id % 11 == 0) m->over[i] = 1;
    ids[s] = id;
    int32_t *x = extra + (size_t)s * 5;
    x[0] = id ^ 0x5a5a5a5a, x[1] = it->step, x[2] = x[3] = x[4] = i;
  }
  return ZZ_OK;
}

static zz_status m_tokens(void *ctx, const zz_stage_block *b, int32_t step, int32_t g, const int32_t *ids,
                          uint8_t *done, const int32_t *extra) {
  mock *m = ctx;
  int N = m->o->seqs;
  for (int s = 0; s < b->group_first[g + 1] - b->group_first[g]; s++) {
    int i = b->group_first[g] + s;
    const int32_t *x = extra + (size_t)s * 5;
    if (x[0] != (ids[s] ^ 0x5a5a5a5a) || x[1] != step || x[4] != i)
      return zz_error(ZZ_ERR_MPI, "mock: sequence %d step %d: the extra words did not come with the token", i, step);
    int32_t id = m->ended[i] ? EOS_PAD : ids[s]; /* ended here: the sampler does not know */
    if (m->ended[i] || (!done[s] && id % 11 == 0)) m->ended[i] = done[s] = 1;
    m->got.id[((size_t)b->index * N + i) * m->o->max_new + step] = id;
    m->got.steps[b->index * N + i] = step + 1;
  }
  return ZZ_OK;
}

/* ================================================================ main */

static void usage(void) {
  fprintf(stderr, "usage: stage_mock [--groups T] [--seqs N] [--blocks B] [--max-new M] "
                  "[--layers L] [--hidden H] [--peer-timeout S] [--step-ms D] [--no-bind] [--gpu N]\n"
                  "                  [--fault error|kill|stop|slow|init-stop --fault-rank R --fault-step S "
                  "[--slow-s X]] [--mark FILE] [--piddir DIR]\n");
}

int main(int argc, char **argv) {
  opts o = {.groups = 4,
            .seqs = 7,
            .blocks = 2,
            .max_new = 10,
            .layers = 8,
            .hidden = 16,
            .bind = 1,
            .gpu = -1,
            .peer_timeout = 5,
            .slow_s = 3,
            .fault_rank = 1,
            .fault_step = 2};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--no-bind")) {
      o.bind = 0;
      continue;
    }
    if (!v) {
      usage();
      return 2;
    }
    if (!strcmp(a, "--groups")) o.groups = atoi(v);
    else if (!strcmp(a, "--seqs"))
      o.seqs = atoi(v);
    else if (!strcmp(a, "--blocks"))
      o.blocks = atoi(v);
    else if (!strcmp(a, "--max-new"))
      o.max_new = atoi(v);
    else if (!strcmp(a, "--layers"))
      o.layers = atoi(v);
    else if (!strcmp(a, "--hidden"))
      o.hidden = atoi(v);
    else if (!strcmp(a, "--peer-timeout"))
      o.peer_timeout = atof(v);
    else if (!strcmp(a, "--step-ms"))
      o.step_ms = atof(v);
    else if (!strcmp(a, "--slow-s"))
      o.slow_s = atof(v);
    else if (!strcmp(a, "--fault"))
      o.fault = v;
    else if (!strcmp(a, "--fault-rank"))
      o.fault_rank = atoi(v);
    else if (!strcmp(a, "--fault-step"))
      o.fault_step = atoi(v);
    else if (!strcmp(a, "--mark"))
      o.mark = v;
    else if (!strcmp(a, "--gpu"))
      o.gpu = atoi(v);
    else if (!strcmp(a, "--piddir"))
      o.piddir = v;
    else {
      usage();
      return 2;
    }
    i++;
  }
  if (o.groups < 1 || o.seqs < o.groups || o.blocks < 0 || o.max_new < 1 || o.layers < 1 || o.hidden < 1) {
    usage();
    return 2;
  }
  /* the pid file first (rank from the launcher), so the tests see a rank that never
   * gets through MPI_Init_thread */
  const char *env_rank = getenv("OMPI_COMM_WORLD_RANK");
  int launch_rank = env_rank ? atoi(env_rank) : 0;
  if (o.piddir) {
    char path[512];
    snprintf(path, sizeof path, "%s/rank%d.pid", o.piddir, launch_rank);
    FILE *f = fopen(path, "w");
    if (f) {
      fprintf(f, "%d\n", (int)getpid());
      fclose(f);
    }
  }
  /* a rank that never arrives (issue #21 item 6): stopped before MPI starts */
  if (o.fault && !strcmp(o.fault, "init-stop") && launch_rank == o.fault_rank) {
    say_fault(launch_rank, o.fault, 0);
    raise(SIGSTOP);
  }
  int provided = 0;
  if (zz_stage_mpi_init(o.peer_timeout, &provided) != ZZ_OK) {
    fprintf(stderr, "mock: %s\n", zz_error_message());
    return 1;
  }
  MPI_Comm comm = MPI_COMM_WORLD; /* the program plays launch/: it owns the world */
  mock m = {.o = &o};
  MPI_Comm_rank(comm, &m.rank);
  MPI_Comm_size(comm, &m.size);
  m.l0 = m.rank * o.layers / m.size;
  m.l1 = (m.rank + 1) * o.layers / m.size;
  size_t ntok = (size_t)o.blocks * (size_t)o.seqs * (size_t)o.max_new;
  m.got.id = calloc(ntok ? ntok : 1, sizeof(int32_t));
  m.got.steps = calloc((size_t)o.blocks * (size_t)o.seqs + 1, sizeof(int));

  zz_binding bind = {0};
  if (o.bind && zz_binding_init(comm, o.gpu, &bind) != ZZ_OK)
    fprintf(stderr, "mock: rank %d: %s (running unbound)\n", m.rank, zz_error_message());
  zz_stage_config cfg;
  zz_stage_config_default(&cfg);
  cfg.groups = o.groups;
  cfg.peer_timeout = o.peer_timeout;
  cfg.max_new_tokens = o.max_new;
  zz_stage *st = NULL;
  if (zz_stage_create(comm, &cfg, &st) != ZZ_OK) {
    fprintf(stderr, "mock: rank %d: %s\n", m.rank, zz_error_message());
    MPI_Abort(comm, 1);
  }
  zz_stage_callbacks cb = {.next_block = m_next_block,
                           .begin_block = m_begin_block,
                           .hidden_bytes = m_hidden_bytes,
                           .compute = m_compute,
                           .sample = m_sample,
                           .tokens = m_tokens};
  zz_status s = zz_stage_run(st, &cb, &m);
  if (s != ZZ_OK) zz_stage_fail(st, s);

  int rc = 0;
  zz_stage_stats x;
  zz_stage_get_stats(st, &x);
  if (m.rank == 0) {
    tokens ref = {calloc(ntok ? ntok : 1, sizeof(int32_t)), calloc((size_t)o.blocks * o.seqs + 1, sizeof(int))};
    reference(&o, &ref);
    int early = 0, full = 0;
    for (int q = 0; q < o.blocks * o.seqs && rc == 0; q++) {
      if (ref.steps[q] != m.got.steps[q]) {
        fprintf(stderr, "mock: sequence %d: %d tokens, single-process run has %d\n", q, m.got.steps[q], ref.steps[q]);
        rc = 1;
      }
      ref.steps[q] < o.max_new ? early++ : full++;
      for (int t = 0; t < ref.steps[q] && rc == 0; t++)
        if (ref.id[(size_t)q * o.max_new + t] != m.got.id[(size_t)q * o.max_new + t]) {
          fprintf(stderr, "mock: sequence %d token %d: %d, single-process run has %d\n", q, t,
                  m.got.id[(size_t)q * o.max_new + t], ref.id[(size_t)q * o.max_new + t]);
          rc = 1;
        }
    }
    if (rc == 0)
      printf("mock: tokens equal the single-process run: %d ranks, %d groups, %d blocks x %d "
             "sequences (%d stopped early, %d ran to %d tokens)\n",
             m.size, o.groups, o.blocks, o.seqs, early, full, o.max_new);
    free(ref.id);
    free(ref.steps);
  }
  printf("mock: rank %d: busy %.3f s, bubble %.3f s of %.3f s, %lld items, %.1f bytes sent per "
         "token\n",
         m.rank, x.busy_s, x.bubble_s, x.total_s, (long long)x.items, x.bytes_per_token);
  fflush(stdout);
  zz_stage_destroy(st);
  zz_binding_free(&bind);
  if (m.have_mb) free_block(&m.mb);
  free(m.params);
  free(m.ended);
  free(m.over);
  free(m.state);
  free(m.got.id);
  free(m.got.steps);
  MPI_Finalize();
  return rc;
}
