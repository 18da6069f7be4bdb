/*
 * stage.c — the wavefront driver: the pipeline's schedule across ranks, one item at
 * a time, each item as named steps, each its own function below.
 *
 * Every rank walks the same items: for each block, for step = 0, 1, ..., for each
 * group g not yet stopped here: (step, g). The ranks form a ring, 0 -> 1 -> ... ->
 * last -> 0: hidden states go forward, the sampled tokens come back to rank 0. One
 * rank is a ring of one: its token message stays where it was written.
 *
 *   item (step, g) on rank r, the item count i:
 *     receive input  rank 0: the prompt (step 0), else the ring's token message of
 *                    (step-1, g) from the last rank: ids, done flags, stop
 *                    rank r > 0: the hidden state of (step, g) from r-1 in receive
 *                    slot i % 2 (posted one item ahead: item i+1's is posted now);
 *                    an empty message: the group stopped
 *     pass the stop  (stopped) an empty message to r+1; the group is over here
 *     compute        r's layers into the oldest of 3 send slots (free once its send
 *                    is through); the last rank samples
 *     send output    r < last: the hidden state to r+1 (rank 0 posts the receive of
 *                    the tokens this item brings back); last: the token message
 *                    of (step, g), with stop = all done or max new tokens reached
 *
 *   ranks 0..2, T = 2 groups, time going down:
 *     rank 0         rank 1         rank 2
 *     (0,0) ------>  (0,0) ------>  (0,0) sample --.
 *     (0,1) ------>  (0,1) ------>  (0,1) sample   |  tokens of (0,0)
 *     (1,0) <--------------------------------------'
 *
 * So the stop is decided once (by the last rank's sampler state) and reaches every
 * rank inside the message stream; no rank decides alone. In a refill block rank 0
 * decides it (a slot may take a waiting sequence, callbacks.refill), and its choice
 * rides behind the hidden state with the done flags. The block's composition
 * comes from rank 0 by the block broadcast (comm.c), the hidden states go through
 * the exchange (xchg.c), faults are watched by faults.c.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm_impl.h"
#include "launcher_impl.h"
#include "faults_impl.h"
#include "xchg_impl.h"

#define ZZ_RECV_SLOTS ZZ_XCHG_RECV
#define ZZ_SEND_SLOTS ZZ_XCHG_SEND

struct zz_stage {
  MPI_Comm data, ctrl; /* duplicates of the caller's communicator */
  int rank, size, tag_ub;
  zz_stage_config cfg;
  char (*hosts)[ZZ_HOST_LEN];
  zz_faults *faults;
  zz_stage_stats stats;
  /* the hidden-state exchange (--comm): receive slots then send slots, kept across
   * blocks; NULL until set or until the first block (then MPI with malloc) */
  zz_xchg *x;
};

void zz_stage_config_default(zz_stage_config *cfg) {
  *cfg = (zz_stage_config){.groups = 1,
                           .peer_timeout = 5.0,
                           .heartbeat = 0,
                           .exit_grace = 2.0,
                           .max_new_tokens = 4096,
                           .step_timeout = 900.0};
}

int zz_stage_rank(const zz_stage *st) { return st->rank; }
int zz_stage_size(const zz_stage *st) { return st->size; }
int zz_stage_groups(const zz_stage *st) { return st->cfg.groups; }

zz_status zz_stage_set_limits(zz_stage *st, int groups, int max_new_tokens) {
  ZZ_CHECK(zz_tag_check(groups, max_new_tokens, st->tag_ub));
  st->cfg.groups = groups;
  st->cfg.max_new_tokens = max_new_tokens;
  return ZZ_OK;
}

void zz_stage_get_stats(const zz_stage *st, zz_stage_stats *out) {
  *out = st->stats;
  out->bytes_per_token = out->tokens ? (double)out->bytes_sent / (double)out->tokens : 0;
}

/* ================================================================ create / destroy */

/* A collective that cannot hang forever: started non-blocking, polled to a deadline. */
static zz_status wait_startup(MPI_Request *req, double deadline_s, const char *what) {
  double t0 = zz_now();
  int spins = 0;
  for (;;) {
    int done = 0;
    ZZ_MPI_CHECK(MPI_Test(req, &done, MPI_STATUS_IGNORE), "stage: %s", what);
    if (done) return ZZ_OK;
    if (zz_now() - t0 > deadline_s)
      return zz_error(ZZ_ERR_MPI, "stage: %s: not every rank joined within %.0f s", what, deadline_s);
    zz_comm_backoff(&spins);
  }
}

zz_status zz_stage_create(MPI_Comm comm, const zz_stage_config *cfg, zz_stage **out) {
  int level = 0;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE)
    return zz_error(ZZ_ERR_UNSUPPORTED,
                    "stage: MPI must be initialised with MPI_THREAD_MULTIPLE (got level %d): "
                    "the progress thread sends heartbeats while the main thread computes",
                    level);
  if (cfg->peer_timeout <= 0 || cfg->exit_grace < 0 || cfg->step_timeout <= 0)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "stage: peer timeout %.1f s and step timeout %.1f s "
                    "must be > 0",
                    cfg->peer_timeout, cfg->step_timeout);
  zz_stage *st = calloc(1, sizeof *st);
  if (!st) return zz_error(ZZ_ERR_NO_MEMORY, "stage");
  st->cfg = *cfg;
  st->data = st->ctrl = MPI_COMM_NULL;
  zz_status s = ZZ_OK;
  MPI_Comm_rank(comm, &st->rank);
  MPI_Comm_size(comm, &st->size);
  double deadline = zz_launcher_startup_s(cfg->peer_timeout); /* every rank must turn up */
  MPI_Request req;
  ZZ_CHECK_GOTO(zz_mpi_status(MPI_Comm_idup(comm, &st->data, &req), "stage: duplicating the communicator"), s, fail);
  ZZ_CHECK_GOTO(wait_startup(&req, deadline, "duplicating the communicator"), s, fail);
  ZZ_CHECK_GOTO(zz_mpi_status(MPI_Comm_idup(comm, &st->ctrl, &req), "stage: duplicating the communicator"), s, fail);
  ZZ_CHECK_GOTO(wait_startup(&req, deadline, "duplicating the communicator"), s, fail);
  MPI_Comm_set_errhandler(st->data, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(st->ctrl, MPI_ERRORS_RETURN);
  int flag = 0;
  int *ub = NULL;
  MPI_Comm_get_attr(st->data, MPI_TAG_UB, &ub, &flag);
  st->tag_ub = flag && ub ? *ub : 32767;
  ZZ_CHECK_GOTO(zz_tag_check(cfg->groups, cfg->max_new_tokens, st->tag_ub), s, fail);

  /* host names, so every message can say where a rank runs */
  st->hosts = calloc((size_t)st->size, sizeof *st->hosts);
  if (!st->hosts) {
    s = zz_error(ZZ_ERR_NO_MEMORY, "stage: host names");
    goto fail;
  }
  char me[ZZ_HOST_LEN] = {0};
  if (gethostname(me, sizeof me - 1) != 0) snprintf(me, sizeof me, "unknown");
  ZZ_CHECK_GOTO(
      zz_mpi_status(MPI_Iallgather(me, ZZ_HOST_LEN, MPI_CHAR, st->hosts, ZZ_HOST_LEN, MPI_CHAR, st->data, &req),
                    "stage: exchanging host names"),
      s, fail);
  ZZ_CHECK_GOTO(wait_startup(&req, deadline, "exchanging host names"), s, fail);
  for (int r = 0; r < st->size; r++) st->hosts[r][ZZ_HOST_LEN - 1] = '\0';
  ZZ_CHECK_GOTO(zz_faults_start(st->ctrl, st->data, (const char(*)[ZZ_HOST_LEN])st->hosts, cfg, deadline, &st->faults),
                s, fail);
  *out = st;
  return ZZ_OK;
fail:
  if (st->ctrl != MPI_COMM_NULL) MPI_Comm_free(&st->ctrl);
  if (st->data != MPI_COMM_NULL) MPI_Comm_free(&st->data);
  free(st->hosts);
  free(st);
  return s;
}

/* ================================================================ the exchange */

zz_status zz_stage_use_comm(zz_stage *st, zz_stage_comm comm, zz_device *dev, size_t max_hidden_bytes) {
  zz_xchg *x = NULL;
  if (comm == ZZ_STAGE_COMM_NCCL) {
    if (!dev || max_hidden_bytes == 0)
      return zz_error(ZZ_ERR_INVALID_ARG, "stage: --comm nccl needs the device and the largest hidden state");
    ZZ_CHECK(zz_xchg_create_nccl(st->data, st->faults, st->cfg.step_timeout, dev, (const char(*)[ZZ_HOST_LEN])st->hosts,
                                 &x));
    zz_status s = zz_xchg_reserve(x, max_hidden_bytes);
    if (s != ZZ_OK) {
      zz_xchg_destroy(x);
      return s;
    }
  } else if (comm == ZZ_STAGE_COMM_MPI) {
    ZZ_CHECK(zz_xchg_create_mpi(st->data, st->faults, st->cfg.step_timeout, dev, &x));
  } else {
    return zz_error(ZZ_ERR_INVALID_ARG, "stage: comm %d does not exist", (int)comm);
  }
  zz_xchg_destroy(st->x);
  st->x = x;
  return ZZ_OK;
}

zz_status zz_stage_use_device(zz_stage *st, zz_device *dev) {
  if (st->x && st->x->dev == dev) return ZZ_OK;
  if (st->x && st->x->ops->on_device)
    return zz_error(ZZ_ERR_INVALID_ARG, "stage: the %s exchange runs on another device", st->x->ops->name);
  return zz_stage_use_comm(st, ZZ_STAGE_COMM_MPI, dev, 0);
}

void zz_stage_destroy(zz_stage *st) {
  if (!st) return;
  if (zz_faults_stop(st->faults) != ZZ_OK) zz_faults_exit(st->faults, zz_error_message());
  /* every peer said goodbye, so every peer is here to finalize an NCCL communicator
   * too; the exchange still polls the faults while it does */
  zz_xchg_destroy(st->x);
  zz_faults_free(st->faults);
  MPI_Comm_free(&st->ctrl);
  MPI_Comm_free(&st->data);
  free(st->hosts);
  free(st);
}

void zz_stage_fail(zz_stage *st, zz_status status) {
  const char *msg = zz_error_message();
  char cause[400];
  snprintf(cause, sizeof cause, "%s", *msg ? msg : zz_status_str(status));
  zz_faults_exit(st->faults, cause);
}

/* ================================================================ one block */

typedef struct slot {
  int x; /* its slot in the exchange */
  void *buf;
  int step, group; /* receive slots: the item it is posted for (-1: none) */
} slot;

typedef struct run {
  zz_stage *st;
  const zz_stage_callbacks *cb;
  void *ctx;
  const zz_stage_block *b;
  int gmax;         /* tag space: configured groups */
  size_t cap;       /* bytes of each hidden buffer */
  uint8_t *stopped; /* [ngroups] */
  int active;       /* groups not stopped here */
  slot recv[ZZ_RECV_SLOTS], send[ZZ_SEND_SLOTS];
  int next_send;
  int item; /* items walked in this block: receive slot = item % ZZ_RECV_SLOTS */
  /* the ring's token messages, one per group: the last rank writes (step, g)'s and
   * sends it; rank 0 receives it into the same place (one rank: it is there) */
  int tw;        /* extra words per sequence in a token message (zz_block_token_words) */
  int trail;     /* hidden messages of step > 0 end with the group's done flags, rank 0's
                    (MPI exchange: host memory), so every rank skips the GPU batches
                    that have ended as one process does */
  int32_t **tok; /* [ngroups][2 + (2 + tw) * nseq]: stop, nseq, ids[nseq], done[nseq], extra[nseq][tw] */
  MPI_Request *tok_req;
  int32_t *ids;    /* [nseq of the block] rank 0's next input */
  uint8_t *done;   /* [nseq] */
  uint8_t *sdone;  /* [nseq] last rank's sampler output */
  int32_t *sids;   /* [nseq] */
  int32_t *sextra; /* [nseq * tw] last rank's extra words (NULL when tw is 0) */
  /* refill blocks: the arrays above are by slot ([nslots]); joins: [nslots] the
   * sequence joining each slot at the group's current item (-1: none), rank 0's
   * choice, handed on behind the hidden state with the done flags */
  int refill;
  int32_t *joins;
} run;

/* One item (step, group) as it goes through the steps. */
typedef struct item {
  zz_stage_item in;            /* what compute sees: its input and output */
  int stop;                    /* the group stopped before this step: nothing to compute */
  int has_next, nstep, ngroup; /* the item after it, as known when it started */
  slot *out;                   /* the send slot of its output */
} item;

static int gsize(const zz_stage_block *b, int g) { return b->group_first[g + 1] - b->group_first[g]; }
/* What a block's groups are runs of: its slots (refill), else its sequences. */
static int units(const zz_stage_block *b) { return b->nslots ? b->nslots : b->nseq; }
/* The tag of (kind, step, g). A refill block's steps may pass max_new_tokens, so
 * steps from 1 wrap around 1 .. max_new_tokens (unchanged up to it): a tag comes
 * back only max_new_tokens steps of the same group later, long after its message
 * was matched (non-overtaking order). Step 0 keeps a tag of its own: the next block's
 * first messages may arrive while a receive posted one item ahead for a group that
 * stopped is still to be cancelled, and that one is never for step 0. */
static int item_tag(const run *R, zz_kind kind, int step, int g) {
  int m = R->st->cfg.max_new_tokens;
  return zz_tag_make(kind, step == 0 ? 0 : 1 + (step - 1) % m, g, R->gmax);
}
static int first_rank(const run *R) { return R->st->rank == 0; }
static int last_rank(const run *R) { return R->st->rank == R->st->size - 1; }
static int tok_words(const run *R, int n) { return 2 + (2 + R->tw) * n; }
static size_t tok_bytes(const run *R, int n) { return (size_t)tok_words(R, n) * sizeof(int32_t); }

static zz_status wait_send(run *R, slot *s) {
  if (!zz_xchg_busy(R->st->x, s->x)) return ZZ_OK;
  return zz_xchg_wait(R->st->x, s->x, "stage: sending", &R->st->stats.send_wait_s, NULL);
}

/* A free send slot: the oldest, after its send has completed. */
static zz_status take_send(run *R, slot **out) {
  slot *s = &R->send[R->next_send];
  R->next_send = (R->next_send + 1) % ZZ_SEND_SLOTS;
  ZZ_CHECK(wait_send(R, s));
  *out = s;
  return ZZ_OK;
}

/* The hidden state of (step, group) in send slot s, bytes of it (0: the group stopped). */
static zz_status send_hidden(run *R, slot *s, size_t bytes, int step, int group) {
  zz_stage *st = R->st;
  zz_status e = zz_xchg_isend(st->x, s->x, bytes, st->rank + 1, item_tag(R, ZZ_KIND_HIDDEN, step, group));
  if (e != ZZ_OK)
    return zz_error(e, "stage: send of step %d group %d to rank %d failed: %s", step, group, st->rank + 1,
                    zz_error_message());
  st->stats.bytes_sent += bytes;
  st->stats.messages_sent++;
  return ZZ_OK;
}

/* The item after (step, g) in wavefront order, given what is known stopped here. */
static int next_item(const run *R, int step, int g, int *step_out, int *g_out) {
  int T = R->b->ngroups;
  for (int k = 1; k <= T; k++) {
    int gg = (g + k) % T, ss = step + (g + k) / T;
    if (!R->stopped[gg]) {
      *step_out = ss;
      *g_out = gg;
      return 1;
    }
  }
  return 0;
}

static zz_status post_hidden_recv(run *R, int item, int step, int g) {
  slot *s = &R->recv[item % ZZ_RECV_SLOTS];
  if (zz_xchg_busy(R->st->x, s->x))
    return zz_error(ZZ_ERR_MPI, "stage: internal: receive slot busy at step %d group %d", step, g);
  s->step = step;
  s->group = g;
  zz_status e = zz_xchg_irecv(R->st->x, s->x, R->st->rank - 1, item_tag(R, ZZ_KIND_HIDDEN, step, g));
  if (e != ZZ_OK) return zz_error(e, "stage: posting the receive of step %d group %d: %s", step, g, zz_error_message());
  return ZZ_OK;
}

static zz_status cb_fail(run *R, zz_status s, const char *what, int step, int g) {
  char cause[400];
  snprintf(cause, sizeof cause, "%s failed at block %lld step %d group %d: %s", what, (long long)R->b->index, step, g,
           zz_error_message());
  zz_faults_report(R->st->faults, cause);
  return zz_error(s, "%s", cause);
}

static size_t hidden_bytes(run *R, int step, int g) { return R->cb->hidden_bytes(R->ctx, R->b, step, g); }
/* What the joins of an item add to its hidden state: their prompt steps'. */
static size_t join_bytes(run *R, const int32_t *joins, int n) {
  size_t t = 0;
  for (int i = 0; joins && i < n; i++)
    if (joins[i] >= 0) t += R->cb->join_bytes(R->ctx, R->b, joins[i]);
  return t;
}
/* The done flags behind the hidden state of (step, g), and in a refill block the
 * joins after them: bytes, 0 when none travel. */
static size_t trail_bytes(const run *R, int step, int g) {
  size_t n = (size_t)gsize(R->b, g);
  return R->trail && step > 0 ? n + (R->refill ? n * sizeof(int32_t) : 0) : 0;
}

static void block_init(run *R) {
  R->active = R->b->ngroups;
  for (int k = 0; k < ZZ_RECV_SLOTS; k++) R->recv[k] = (slot){.x = k, .step = -1, .group = -1};
  for (int k = 0; k < ZZ_SEND_SLOTS; k++) R->send[k] = (slot){.x = ZZ_RECV_SLOTS + k, .step = -1, .group = -1};
}

static zz_status block_buffers(run *R) {
  const zz_stage_block *b = R->b;
  if (b->ngroups < 1 || b->nseq < 1) return zz_error(ZZ_ERR_INVALID_ARG, "stage: empty block");
  size_t T = (size_t)b->ngroups, nu = (size_t)units(b);
  size_t cap = 0;
  R->trail = !R->st->x || !R->st->x->ops->on_device;
  R->refill = b->nslots > 0;
  if (R->refill && (!R->trail || !R->cb->join_bytes || (first_rank(R) && !R->cb->refill)))
    return zz_error(ZZ_ERR_INVALID_ARG, "stage: a refill block needs the MPI exchange (the joins travel behind the "
                                        "hidden state), and the refill and join_bytes callbacks");
  for (int g = 0; g < (int)T; g++)
    for (int s = 0; s < (b->max_new_tokens > 1 ? 2 : 1); s++) {
      size_t n = hidden_bytes(R, s, g);
      if (n == 0 || n > (size_t)INT32_MAX)
        return zz_error(ZZ_ERR_INVALID_ARG,
                        "stage: hidden state of step %d group %d is %zu "
                        "bytes (must be 1 .. 2^31-1)",
                        s, g, n);
      if (n + trail_bytes(R, s, g) > cap) cap = n + trail_bytes(R, s, g);
    }
  /* a refill block's step: each slot may take a sequence, whose prompt step's hidden
   * state follows the step's */
  size_t most = 0;
  for (int q = 0; R->refill && q < b->nseq; q++)
    if (R->cb->join_bytes(R->ctx, b, q) > most) most = R->cb->join_bytes(R->ctx, b, q);
  for (int g = 0; R->refill && g < (int)T; g++) {
    size_t n = hidden_bytes(R, 1, g) + (size_t)gsize(b, g) * most + trail_bytes(R, 1, g);
    if (n > (size_t)INT32_MAX)
      return zz_error(ZZ_ERR_INVALID_ARG, "stage: a refill step of group %d is %zu bytes", g, n);
    if (n > cap) cap = n;
  }
  R->cap = cap;
  R->stopped = calloc(T, 1);
  R->tok = calloc(T, sizeof *R->tok);
  R->tok_req = malloc(T * sizeof *R->tok_req);
  for (int g = 0; R->tok_req && g < (int)T; g++) R->tok_req[g] = MPI_REQUEST_NULL;
  R->ids = calloc(nu, sizeof *R->ids);
  R->done = calloc(nu, 1);
  R->sids = calloc(nu, sizeof *R->sids);
  R->sdone = calloc(nu, 1);
  R->joins = calloc(nu, sizeof *R->joins);
  R->tw = zz_block_token_words(b);
  if (R->tw) R->sextra = calloc(nu * (size_t)R->tw, sizeof *R->sextra);
  if (!R->stopped || !R->tok || !R->tok_req || !R->ids || !R->done || !R->sids || !R->sdone || !R->joins ||
      (R->tw && !R->sextra))
    return zz_error(ZZ_ERR_NO_MEMORY, "stage: block of %d sequences", b->nseq);
  for (int g = 0; g < (int)T; g++) {
    if (!(R->tok[g] = calloc((size_t)tok_words(R, gsize(b, g)), sizeof(int32_t))))
      return zz_error(ZZ_ERR_NO_MEMORY, "stage: token buffers");
  }
  if (!R->st->x) ZZ_CHECK(zz_xchg_create_mpi(R->st->data, R->st->faults, R->st->cfg.step_timeout, NULL, &R->st->x));
  ZZ_CHECK(zz_xchg_reserve(R->st->x, cap));
  for (int k = 0; k < ZZ_RECV_SLOTS; k++) R->recv[k].buf = R->st->x->slot[R->recv[k].x].buf;
  for (int k = 0; k < ZZ_SEND_SLOTS; k++) R->send[k].buf = R->st->x->slot[R->send[k].x].buf;
  return ZZ_OK;
}

/* Frees a block's buffers. Clean: a receive still posted (for an item nobody
 * sends) is cancelled. After a failure the exchange is aborted (MPI requests freed,
 * an NCCL communicator aborted) rather than waited for, and its buffers are left
 * alone, as MPI or NCCL may still write into them: the process is about to exit. */
static zz_status block_free(run *R, int clean) {
  zz_status s = R->st->x ? zz_xchg_settle(R->st->x, clean) : ZZ_OK;
  if (R->tok && R->tok_req) {
    for (int g = 0; g < R->b->ngroups; g++) {
      if (R->tok_req[g] != MPI_REQUEST_NULL) {
        MPI_Cancel(&R->tok_req[g]);
        if (clean) MPI_Wait(&R->tok_req[g], MPI_STATUS_IGNORE);
        else
          MPI_Request_free(&R->tok_req[g]);
      }
      if (clean) free(R->tok[g]);
    }
    free(R->tok);
  }
  free(R->tok_req);
  free(R->stopped);
  free(R->ids);
  free(R->done);
  free(R->sids);
  free(R->sdone);
  free(R->sextra);
  free(R->joins);
  return s;
}

/* ---------------------------------------------------------------- the ring */

/* Rank 0: the token message of (step - 1, g), sent by the last rank around the ring
 * (one rank: written in place by its own ring_send); its ids and done flags become
 * the item's input, its stop flag says whether the group is over. */
static zz_status ring_receive(run *R, item *I) {
  zz_stage *st = R->st;
  int step = I->in.step, g = I->in.group, n = I->in.nseq, first = I->in.first;
  if (st->size > 1) {
    ZZ_CHECK(zz_comm_wait(st->faults, &R->tok_req[g], NULL, st->cfg.step_timeout, "stage: waiting for token ids",
                          st->size - 1, &st->stats.bubble_s));
    st->stats.bytes_received += tok_bytes(R, n);
  }
  int32_t *m = R->tok[g];
  if (m[1] != n)
    return zz_error(ZZ_ERR_MPI, "stage: token message of step %d group %d holds %d sequences, expected %d", step - 1, g,
                    m[1], n);
  for (int i = 0; i < n; i++) {
    R->ids[first + i] = m[2 + i];
    R->done[first + i] = (uint8_t)m[2 + n + i];
  }
  I->stop = m[0];
  if (R->cb->tokens) {
    zz_status s = R->cb->tokens(R->ctx, R->b, step - 1, g, R->ids + first, R->done + first,
                                R->tw ? m + 2 + 2 * n : NULL);
    if (s != ZZ_OK) return cb_fail(R, s, "tokens", step - 1, g);
  }
  /* every sequence over, as rank 0 knows it (the sampler's flags and its own): the
   * group stops here, as one process stops computing it. A refill block's group
   * stops only when no slot takes a waiting sequence either, whatever the step */
  int all_done = 1;
  for (int i = 0; i < n; i++) all_done &= R->done[first + i] != 0;
  if (R->refill) {
    zz_status s = R->cb->refill(R->ctx, R->b, step, g, R->done + first, R->joins + first);
    if (s != ZZ_OK) return cb_fail(R, s, "refill", step, g);
    for (int i = 0; i < n; i++) all_done &= R->joins[first + i] < 0;
    I->stop = all_done;
    I->in.joins = R->joins + first;
  }
  I->stop |= all_done;
  I->in.ids = R->ids + first;
  I->in.nids = n;
  I->in.done = R->done + first;
  return ZZ_OK;
}

/* Last rank: the token message of (step, g) - the sampled ids, the done flags and
 * whether the group stops (every sequence done, or max new tokens reached) - to rank 0
 * (one rank: left in place for its ring_receive). The stop is decided here, once, and
 * reaches every rank inside the message stream. */
static zz_status ring_send(run *R, const item *I) {
  zz_stage *st = R->st;
  int step = I->in.step, g = I->in.group, n = I->in.nseq, first = I->in.first;
  int all_done = 1;
  for (int i = 0; i < n; i++) all_done &= R->sdone[first + i] != 0;
  if (R->tok_req[g] != MPI_REQUEST_NULL) /* the previous step's message of this group */
    ZZ_CHECK(zz_comm_wait(st->faults, &R->tok_req[g], NULL, st->cfg.step_timeout, "stage: sending token ids", 0,
                          &st->stats.send_wait_s));
  int32_t *m = R->tok[g];
  m[0] = all_done || step + 1 >= R->b->max_new_tokens;
  m[1] = n;
  for (int i = 0; i < n; i++) {
    m[2 + i] = R->sids[first + i];
    m[2 + n + i] = R->sdone[first + i];
  }
  if (R->tw) memcpy(m + 2 + 2 * n, R->sextra + (size_t)first * R->tw, (size_t)n * R->tw * sizeof *m);
  if (st->size == 1) return ZZ_OK;
  if (MPI_Isend(m, (int)tok_bytes(R, n), MPI_BYTE, 0, item_tag(R, ZZ_KIND_TOKENS, step, g), st->data, &R->tok_req[g]) !=
      MPI_SUCCESS)
    return zz_error(ZZ_ERR_MPI, "stage: send of the tokens of step %d group %d to rank 0 failed", step, g);
  st->stats.bytes_sent += tok_bytes(R, n);
  st->stats.messages_sent++;
  return ZZ_OK;
}

/* ---------------------------------------------------------------- the steps of an item */

/* receive input. Rank 0: the group's prompt (step 0) or the ring's token message.
 * Rank r > 0: the hidden state from r - 1, its receive posted one item ahead (the
 * next item's is posted here, before the wait); 0 bytes: the group stopped. */
static zz_status receive_input(run *R, item *I) {
  zz_stage *st = R->st;
  const zz_stage_block *b = R->b;
  int step = I->in.step, g = I->in.group, first = I->in.first;
  if (first_rank(R) && step > 0) return ring_receive(R, I);
  if (first_rank(R) && R->refill) return ZZ_OK; /* the slots' prompts are the caller's */
  if (first_rank(R)) {
    int64_t off = 0, len = 0;
    for (int i = 0; i < first; i++) off += b->prompt_len[i];
    for (int i = first; i < first + I->in.nseq; i++) len += b->prompt_len[i];
    I->in.ids = b->prompt_ids + off;
    I->in.nids = len;
    return ZZ_OK;
  }
  slot *rs = &R->recv[R->item % ZZ_RECV_SLOTS];
  if (rs->step != step || rs->group != g)
    return zz_error(ZZ_ERR_MPI, "stage: internal: step %d group %d has no receive posted", step, g);
  if (I->has_next) ZZ_CHECK(post_hidden_recv(R, R->item + 1, I->nstep, I->ngroup));
  size_t got = 0;
  ZZ_CHECK(zz_xchg_wait(st->x, rs->x, "stage: waiting for hidden state", &st->stats.bubble_s, &got));
  st->stats.bytes_received += (uint64_t)got;
  if (got == 0) {
    I->stop = 1;
    return ZZ_OK;
  }
  size_t tb = trail_bytes(R, step, g), want = hidden_bytes(R, step, g) + tb;
  if (R->refill && step > 0 && got >= tb) { /* the joins, last: they size the rest */
    int32_t *jn = R->joins + I->in.first;
    memcpy(jn, (const uint8_t *)rs->buf + got - (size_t)I->in.nseq * sizeof *jn, (size_t)I->in.nseq * sizeof *jn);
    for (int i = 0; i < I->in.nseq; i++)
      if (jn[i] < -1 || jn[i] >= R->b->nseq)
        return zz_error(ZZ_ERR_MPI, "stage: step %d group %d from rank %d: slot %d joins sequence %d of %d", step, g,
                        st->rank - 1, i, jn[i], R->b->nseq);
    want += join_bytes(R, jn, I->in.nseq);
    I->in.joins = jn;
  }
  if (got != want)
    return zz_error(ZZ_ERR_MPI,
                    "stage: hidden state of step %d group %d from rank %d is %zu bytes, this rank expects %zu", step, g,
                    st->rank - 1, got, want);
  I->in.hidden_in = rs->buf;
  I->in.hidden_in_bytes = got - tb;
  if (tb) I->in.done = (const uint8_t *)rs->buf + I->in.hidden_in_bytes;
  return ZZ_OK;
}

/* pass the stop. The group is over: the next rank hears it (an empty hidden
 * message), nothing is computed, the group leaves the walk on this rank. */
static zz_status pass_stop(run *R, const item *I) {
  if (!last_rank(R)) {
    slot *out;
    ZZ_CHECK(take_send(R, &out));
    ZZ_CHECK(send_hidden(R, out, 0, I->in.step, I->in.group));
  }
  R->stopped[I->in.group] = 1;
  R->active--;
  return ZZ_OK;
}

/* compute. This rank's layers into the oldest send slot (once its last send is
 * through); the last rank samples too. Meanwhile the next item's hidden state may
 * have announced itself: it starts moving first. */
static zz_status compute(run *R, item *I) {
  zz_stage *st = R->st;
  int step = I->in.step, g = I->in.group;
  ZZ_CHECK(take_send(R, &I->out));
  I->in.hidden_out = I->out->buf;
  I->in.hidden_out_bytes = hidden_bytes(R, step, g) + join_bytes(R, I->in.joins, I->in.nseq);
  I->in.hidden_on_device = st->x->ops->on_device;
  if (!first_rank(R) && I->has_next) ZZ_CHECK(zz_xchg_poke(st->x, R->recv[(R->item + 1) % ZZ_RECV_SLOTS].x));
  if (I->in.hidden_out_bytes + trail_bytes(R, step, g) > R->cap)
    return zz_error(ZZ_ERR_INVALID_ARG,
                    "stage: hidden state of step %d group %d is %zu bytes, more than steps 0 and 1 needed (%zu)", step,
                    g, I->in.hidden_out_bytes, R->cap);
  double t0 = zz_now();
  zz_status s = R->cb->compute(R->ctx, &I->in);
  if (s != ZZ_OK) return cb_fail(R, s, "compute", step, g);
  if (!last_rank(R) && trail_bytes(R, step, g)) { /* the done flags (and joins) go on behind the hidden state */
    uint8_t *t = (uint8_t *)I->in.hidden_out + I->in.hidden_out_bytes;
    memcpy(t, I->in.done, (size_t)I->in.nseq);
    if (R->refill) memcpy(t + I->in.nseq, I->in.joins, (size_t)I->in.nseq * sizeof *I->in.joins);
  }
  if (last_rank(R)) {
    s = R->cb->sample(R->ctx, &I->in, R->sids + I->in.first, R->sdone + I->in.first,
                      R->tw ? R->sextra + (size_t)I->in.first * R->tw : NULL);
    if (s != ZZ_OK) return cb_fail(R, s, "sample", step, g);
  }
  st->stats.busy_s += zz_now() - t0;
  st->stats.items++;
  st->stats.tokens += I->in.nseq;
  return ZZ_OK;
}

/* send output. Not the last rank: the hidden state to the next (rank 0 also posts
 * the receive of the tokens this item will bring back around the ring). The last
 * rank: the token message. */
static zz_status send_output(run *R, const item *I) {
  zz_stage *st = R->st;
  int step = I->in.step, g = I->in.group;
  if (last_rank(R)) return ring_send(R, I);
  ZZ_CHECK(send_hidden(R, I->out, I->in.hidden_out_bytes + trail_bytes(R, step, g), step, g));
  if (first_rank(R) && MPI_Irecv(R->tok[g], tok_words(R, I->in.nseq), MPI_INT32_T, st->size - 1,
                                 item_tag(R, ZZ_KIND_TOKENS, step, g), st->data, &R->tok_req[g]) != MPI_SUCCESS)
    return zz_error(ZZ_ERR_MPI, "stage: posting the token receive of step %d group %d", step, g);
  return ZZ_OK;
}

/* The block's items in wavefront order, each through its steps, until every group
 * has stopped here; then every send of the block is waited for, as its buffers go. */
static zz_status run_block(run *R) {
  const zz_stage_block *b = R->b;
  int step = 0, g = 0;
  if (!first_rank(R)) ZZ_CHECK(post_hidden_recv(R, 0, 0, 0));
  while (R->active > 0) {
    item I = {.in = {.block = b, .step = step, .group = g, .nseq = gsize(b, g), .first = b->group_first[g]}};
    I.has_next = next_item(R, step, g, &I.nstep, &I.ngroup);
    ZZ_CHECK(receive_input(R, &I));
    if (I.stop) {
      ZZ_CHECK(pass_stop(R, &I));
    } else {
      ZZ_CHECK(compute(R, &I));
      ZZ_CHECK(send_output(R, &I));
    }
    R->item++;
    /* again: this item may have stopped its group (then a receive posted for it, when
     * it was the last group going, is cancelled with the block's buffers) */
    if (R->active == 0 || !next_item(R, step, g, &step, &g)) break;
  }
  for (int k = 0; k < ZZ_SEND_SLOTS; k++) ZZ_CHECK(wait_send(R, &R->send[k]));
  for (int gg = 0; last_rank(R) && gg < b->ngroups; gg++)
    if (R->tok_req[gg] != MPI_REQUEST_NULL)
      ZZ_CHECK(zz_comm_wait(R->st->faults, &R->tok_req[gg], NULL, R->st->cfg.step_timeout, "stage: sending token ids",
                            0, &R->st->stats.send_wait_s));
  return ZZ_OK;
}

/* ================================================================ the loop over blocks */

/* Rank 0: the next block from the caller's feed, checked (*more = 0: none left). */
static zz_status take_block(zz_stage *st, const zz_stage_callbacks *cb, void *ctx, int64_t index, zz_stage_block *b,
                            int *more) {
  zz_status s = cb->next_block(ctx, b, more);
  if (s != ZZ_OK) {
    char cause[400];
    snprintf(cause, sizeof cause, "next_block failed at block %lld: %s", (long long)index, zz_error_message());
    zz_faults_report(st->faults, cause);
    return zz_error(s, "%s", cause);
  }
  if (!*more) {
    *b = (zz_stage_block){.index = index};
    return ZZ_OK;
  }
  b->index = index;
  if ((s = zz_block_check(b, st->cfg.groups, st->cfg.max_new_tokens)) != ZZ_OK)
    zz_faults_report(st->faults, zz_error_message());
  return s;
}

/* One block on this rank: begin_block, the items, end_block, its buffers freed. */
static zz_status one_block(zz_stage *st, const zz_stage_callbacks *cb, void *ctx, const zz_stage_block *b) {
  run R = {.st = st, .cb = cb, .ctx = ctx, .b = b, .gmax = st->cfg.groups};
  block_init(&R);
  zz_status s = ZZ_OK;
  if (cb->begin_block && (s = cb->begin_block(ctx, b)) != ZZ_OK) s = cb_fail(&R, s, "begin_block", 0, 0);
  if (s == ZZ_OK) s = block_buffers(&R);
  if (s == ZZ_OK) s = run_block(&R);
  if (s == ZZ_OK && cb->end_block && (s = cb->end_block(ctx, b)) != ZZ_OK) s = cb_fail(&R, s, "end_block", 0, 0);
  zz_status fs = block_free(&R, s == ZZ_OK);
  if (s == ZZ_OK) s = fs;
  if (s == ZZ_OK) st->stats.blocks++;
  if (s == ZZ_OK && st->cfg.verbose) {
    zz_stage_stats x;
    zz_stage_get_stats(st, &x);
    fprintf(stderr,
            "zigzag: rank %d: block %lld done: busy %.3f s, bubble %.3f s, "
            "%.0f bytes sent per token\n",
            st->rank, (long long)b->index, x.busy_s, x.bubble_s, x.bytes_per_token);
  }
  return s;
}

zz_status zz_stage_run(zz_stage *st, const zz_stage_callbacks *cb, void *ctx) {
  if (!cb || !cb->hidden_bytes || !cb->compute || (st->rank == st->size - 1 && !cb->sample) ||
      (st->rank == 0 && !cb->next_block))
    return zz_error(ZZ_ERR_INVALID_ARG, "stage: callbacks next_block (rank 0), hidden_bytes, "
                                        "compute and sample (last rank) are required");
  double t_start = zz_now();
  zz_status s = ZZ_OK;
  for (int64_t index = 0;; index++) {
    zz_stage_block b = {0};
    zz_block_bcast msg = {0};
    int more = 0;
    if (st->rank == 0) {
      s = take_block(st, cb, ctx, index, &b, &more);
      if (s == ZZ_OK) s = zz_block_bcast_send(&msg, st->data, st->cfg.groups, &b, more, &st->stats);
    } else {
      s = zz_block_bcast_recv(&msg, st->faults, st->data, st->cfg.groups, st->cfg.step_timeout, &b, &more, &st->stats);
    }
    if (s == ZZ_OK && more) s = one_block(st, cb, ctx, &b);
    s = zz_block_bcast_end(&msg, st->faults, st->data, st->cfg.step_timeout, s);
    if (s != ZZ_OK || !more) break;
  }
  /* an MPI-level failure that no fault has explained yet is this rank's to report */
  if (s != ZZ_OK && zz_faults_check(st->faults) == ZZ_OK) zz_faults_report(st->faults, zz_error_message());
  st->stats.total_s += zz_now() - t_start;
  return s;
}

/* ================================================================ agreement and stats */

#define ZZ_AGREE_MSG 480

typedef struct agree_msg {
  int32_t status;
  char msg[ZZ_AGREE_MSG];
} agree_msg;

/* A collective started non-blocking, waited for like every other wait: done, a fault
 * anywhere, or step_timeout. */
static zz_status wait_collective(zz_stage *st, MPI_Request *req, const char *what) {
  return zz_comm_wait(st->faults, req, NULL, st->cfg.step_timeout, what, st->rank, NULL);
}

zz_status zz_stage_agree(zz_stage *st, zz_status mine) {
  agree_msg me = {.status = (int32_t)mine};
  if (mine != ZZ_OK)
    snprintf(me.msg, sizeof me.msg, "%s", *zz_error_message() ? zz_error_message() : zz_status_str(mine));
  agree_msg *all = calloc((size_t)st->size, sizeof *all);
  if (!all) return zz_error(ZZ_ERR_NO_MEMORY, "stage: agreement");
  MPI_Request req;
  zz_status s = zz_mpi_status(
      MPI_Iallgather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, st->data, &req),
      "stage: agreeing on the start");
  if (s == ZZ_OK) s = wait_collective(st, &req, "stage: waiting for every rank's start");
  if (s != ZZ_OK) return s; /* all stays: MPI may still write into it; the process is ending */
  int bad = -1;
  for (int r = 0; r < st->size && bad < 0; r++)
    if (all[r].status != ZZ_OK) bad = r;
  if (bad >= 0) {
    all[bad].msg[ZZ_AGREE_MSG - 1] = '\0';
    zz_status bs = all[bad].status > 0 && all[bad].status < ZZ_STATUS_COUNT ? (zz_status)all[bad].status : ZZ_ERR_MPI;
    if (bad == st->rank) fprintf(stderr, "zigzag: rank %d (host %s): %s\n", bad, st->hosts[bad], all[bad].msg);
    else
      fprintf(stderr, "zigzag: rank %d (host %s): stopping: rank %d (host %s) reported: %s\n", st->rank,
              st->hosts[st->rank], bad, st->hosts[bad], all[bad].msg);
    s = zz_error(bs, "rank %d (host %s): %s", bad, st->hosts[bad], all[bad].msg);
  }
  free(all);
  return s;
}

zz_status zz_stage_gather_stats(zz_stage *st, const zz_stage_stats *mine, zz_stage_stats *all_out) {
  zz_stage_stats me;
  if (mine) me = *mine;
  else
    zz_stage_get_stats(st, &me);
  zz_stage_stats *all = st->rank == 0 ? all_out : NULL;
  if (st->rank == 0 && !all) return zz_error(ZZ_ERR_INVALID_ARG, "stage: gather_stats needs an array on rank 0");
  MPI_Request req;
  ZZ_MPI_CHECK(MPI_Igather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, st->data, &req),
               "stage: gathering stats");
  return wait_collective(st, &req, "stage: gathering every rank's stats");
}

zz_status zz_stage_all(zz_stage *st, bool mine, bool *all_out) {
  int me = mine, all = 0;
  MPI_Request req;
  ZZ_MPI_CHECK(MPI_Iallreduce(&me, &all, 1, MPI_INT, MPI_LAND, st->data, &req), "stage: agreeing on a flag");
  ZZ_CHECK(wait_collective(st, &req, "stage: waiting for every rank's flag"));
  *all_out = all != 0;
  return ZZ_OK;
}

zz_status zz_stage_bcast(zz_stage *st, void *buf, int bytes, int root) {
  MPI_Request req;
  ZZ_MPI_CHECK(MPI_Ibcast(buf, bytes, MPI_BYTE, root, st->data, &req), "stage: broadcasting");
  return wait_collective(st, &req, "stage: waiting for a broadcast");
}
