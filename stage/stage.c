/*
 * stage.c — the wavefront driver.
 *
 * Every rank walks the same sequence of items: for each block, for step = 0, 1, ...,
 * for each group g not yet stopped: (step, g). Per item:
 *   rank 0      input = the group's prompt (step 0) or the ids of (step-1, g) from the
 *               last rank; if that message says "stop", send an empty hidden message
 *               for (step, g) instead of computing, and the group is over here.
 *   rank r > 0  input = hidden of (step, g) from r-1 (received into one of two
 *               buffers, the receive of the next item already posted); an empty
 *               message means the group stopped: pass it on, skip the compute.
 *   compute, then: not last: Isend hidden to r+1 (one of three send buffers, reused
 *               only when its previous send completed); last: sample, Isend ids, done
 *               flags and stop = (all done or max new tokens reached) to rank 0.
 * So the stop decision is taken once (by the last rank's sampler state) and reaches
 * every rank inside the message stream; no rank decides alone. With one rank the
 * same loop runs with no messages.
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

zz_status zz_stage_set_groups(zz_stage *st, int groups) {
  ZZ_CHECK(zz_tag_check(groups, st->cfg.max_new_tokens, st->tag_ub));
  st->cfg.groups = groups;
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
  slot recv[ZZ_RECV_SLOTS], send[ZZ_SEND_SLOTS];
  int next_send;
  int item; /* items walked in this block: receive slot = item % ZZ_RECV_SLOTS */
  /* rank 0: per group the token message of the last sampled step and its receive;
   * last rank: per group the token message sent and its send (reused when done) */
  int32_t **tok; /* [ngroups][2 + 2 * nseq]: stop, nseq, ids[nseq], done[nseq] */
  MPI_Request *tok_req;
  int32_t *ids;   /* [nseq of the block] rank 0's next input */
  uint8_t *done;  /* [nseq] */
  uint8_t *sdone; /* [nseq] last rank's sampler output */
  int32_t *sids;  /* [nseq] */
} run;

static int gsize(const zz_stage_block *b, int g) { return b->group_first[g + 1] - b->group_first[g]; }

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
  zz_status e = zz_xchg_isend(st->x, s->x, bytes, st->rank + 1, zz_tag_make(ZZ_KIND_HIDDEN, step, group, R->gmax));
  if (e != ZZ_OK)
    return zz_error(e, "stage: send of step %d group %d to rank %d failed: %s", step, group, st->rank + 1,
                    zz_error_message());
  st->stats.bytes_sent += bytes;
  st->stats.messages_sent++;
  return ZZ_OK;
}

/* The last rank's token message of (step, group) to rank 0. */
static zz_status send_tokens(run *R, int group, size_t bytes, int step) {
  zz_stage *st = R->st;
  int rc = MPI_Isend(R->tok[group], (int)bytes, MPI_BYTE, 0, zz_tag_make(ZZ_KIND_TOKENS, step, group, R->gmax),
                     st->data, &R->tok_req[group]);
  if (rc != MPI_SUCCESS)
    return zz_error(ZZ_ERR_MPI, "stage: send of the tokens of step %d group %d to rank 0 failed", step, group);
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
  zz_status e = zz_xchg_irecv(R->st->x, s->x, R->st->rank - 1, zz_tag_make(ZZ_KIND_HIDDEN, step, g, R->gmax));
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

static void block_init(run *R) {
  for (int k = 0; k < ZZ_RECV_SLOTS; k++) R->recv[k] = (slot){.x = k, .step = -1, .group = -1};
  for (int k = 0; k < ZZ_SEND_SLOTS; k++) R->send[k] = (slot){.x = ZZ_RECV_SLOTS + k, .step = -1, .group = -1};
}

static zz_status block_buffers(run *R) {
  const zz_stage_block *b = R->b;
  if (b->ngroups < 1 || b->nseq < 1) return zz_error(ZZ_ERR_INVALID_ARG, "stage: empty block");
  size_t T = (size_t)b->ngroups;
  size_t cap = 0;
  for (int g = 0; g < (int)T; g++)
    for (int s = 0; s < (b->max_new_tokens > 1 ? 2 : 1); s++) {
      size_t n = hidden_bytes(R, s, g);
      if (n == 0 || n > (size_t)INT32_MAX)
        return zz_error(ZZ_ERR_INVALID_ARG,
                        "stage: hidden state of step %d group %d is %zu "
                        "bytes (must be 1 .. 2^31-1)",
                        s, g, n);
      if (n > cap) cap = n;
    }
  R->cap = cap;
  R->stopped = calloc(T, 1);
  R->tok = calloc(T, sizeof *R->tok);
  R->tok_req = malloc(T * sizeof *R->tok_req);
  for (int g = 0; R->tok_req && g < (int)T; g++) R->tok_req[g] = MPI_REQUEST_NULL;
  R->ids = calloc((size_t)b->nseq, sizeof *R->ids);
  R->done = calloc((size_t)b->nseq, 1);
  R->sids = calloc((size_t)b->nseq, sizeof *R->sids);
  R->sdone = calloc((size_t)b->nseq, 1);
  if (!R->stopped || !R->tok || !R->tok_req || !R->ids || !R->done || !R->sids || !R->sdone)
    return zz_error(ZZ_ERR_NO_MEMORY, "stage: block of %d sequences", b->nseq);
  for (int g = 0; g < (int)T; g++) {
    if (!(R->tok[g] = calloc(2 + 2 * (size_t)gsize(b, g), sizeof(int32_t))))
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
  return s;
}

static zz_status run_block(run *R) {
  zz_stage *st = R->st;
  const zz_stage_block *b = R->b;
  int rank = st->rank, last = st->size - 1;
  double tmo = st->cfg.step_timeout;
  int active = b->ngroups;
  int step = 0, g = 0;
  if (rank > 0) ZZ_CHECK(post_hidden_recv(R, 0, 0, 0));
  while (active > 0) {
    int ns = -1, ng = -1, has_next = next_item(R, step, g, &ns, &ng);
    int n = gsize(b, g), first = b->group_first[g];
    zz_stage_item it = {.block = b, .step = step, .group = g, .nseq = n, .first = first};
    int stop_here = 0;
    if (rank == 0) {
      if (step == 0) {
        int64_t off = 0;
        for (int i = 0; i < first; i++) off += b->prompt_len[i];
        int64_t len = 0;
        for (int i = first; i < first + n; i++) len += b->prompt_len[i];
        it.ids = b->prompt_ids + off;
        it.nids = len;
      } else {
        if (st->size > 1) { /* the ring: ids of (step-1, g) from the last rank */
          MPI_Status status;
          ZZ_CHECK(zz_comm_wait(st->faults, &R->tok_req[g], &status, tmo, "stage: waiting for token ids", last,
                                &st->stats.bubble_s));
          int32_t *m = R->tok[g];
          if (m[1] != n)
            return zz_error(ZZ_ERR_MPI,
                            "stage: token message of step %d group %d holds %d "
                            "sequences, expected %d",
                            step - 1, g, m[1], n);
          st->stats.bytes_received += (2 + 2 * (uint64_t)n) * sizeof(int32_t);
          for (int i = 0; i < n; i++) {
            R->ids[first + i] = m[2 + i];
            R->done[first + i] = (uint8_t)m[2 + n + i];
          }
          stop_here = m[0];
          if (R->cb->tokens) {
            zz_status s = R->cb->tokens(R->ctx, b, step - 1, g, R->ids + first, R->done + first);
            if (s != ZZ_OK) return cb_fail(R, s, "tokens", step - 1, g);
          }
        } else {
          stop_here = R->tok[g][0]; /* one rank: set by the sampler below, last step */
        }
        it.ids = R->ids + first;
        it.nids = n;
        it.done = R->done + first;
      }
    } else {
      slot *rs = &R->recv[R->item % ZZ_RECV_SLOTS];
      if (rs->step != step || rs->group != g)
        return zz_error(ZZ_ERR_MPI, "stage: internal: step %d group %d has no receive posted", step, g);
      if (has_next) ZZ_CHECK(post_hidden_recv(R, R->item + 1, ns, ng));
      size_t got = 0;
      ZZ_CHECK(zz_xchg_wait(st->x, rs->x, "stage: waiting for hidden state", &st->stats.bubble_s, &got));
      st->stats.bytes_received += (uint64_t)got;
      if (got == 0) {
        stop_here = 1;
      } else {
        size_t want = hidden_bytes(R, step, g);
        if (got != want)
          return zz_error(ZZ_ERR_MPI,
                          "stage: hidden state of step %d group %d from rank %d is "
                          "%zu bytes, this rank expects %zu",
                          step, g, rank - 1, got, want);
        it.hidden_in = rs->buf;
        it.hidden_in_bytes = got;
      }
    }

    if (stop_here) { /* the group is over: tell the next rank, do not compute */
      if (rank < last) {
        slot *ss;
        ZZ_CHECK(take_send(R, &ss));
        ZZ_CHECK(send_hidden(R, ss, 0, step, g));
      }
      R->stopped[g] = 1;
      active--;
    } else {
      slot *ss;
      ZZ_CHECK(take_send(R, &ss));
      it.hidden_out = ss->buf;
      it.hidden_out_bytes = hidden_bytes(R, step, g);
      it.hidden_on_device = st->x->ops->on_device;
      /* the next item's hidden state may have announced itself: start moving it */
      if (rank > 0 && has_next) ZZ_CHECK(zz_xchg_poke(st->x, R->recv[(R->item + 1) % ZZ_RECV_SLOTS].x));
      if (it.hidden_out_bytes > R->cap)
        return zz_error(ZZ_ERR_INVALID_ARG,
                        "stage: hidden state of step %d group %d is %zu "
                        "bytes, more than steps 0 and 1 needed (%zu)",
                        step, g, it.hidden_out_bytes, R->cap);
      double t0 = zz_now();
      zz_status s = R->cb->compute(R->ctx, &it);
      if (s != ZZ_OK) return cb_fail(R, s, "compute", step, g);
      if (rank == last) {
        s = R->cb->sample(R->ctx, &it, R->sids + first, R->sdone + first);
        if (s != ZZ_OK) return cb_fail(R, s, "sample", step, g);
      }
      st->stats.busy_s += zz_now() - t0;
      st->stats.items++;
      st->stats.tokens += n;
      if (rank < last) {
        ZZ_CHECK(send_hidden(R, ss, it.hidden_out_bytes, step, g));
        if (rank == 0) { /* the ids of this item will come back around the ring */
          int rc = MPI_Irecv(R->tok[g], 2 + 2 * n, MPI_INT32_T, last, zz_tag_make(ZZ_KIND_TOKENS, step, g, R->gmax),
                             st->data, &R->tok_req[g]);
          if (rc != MPI_SUCCESS)
            return zz_error(ZZ_ERR_MPI, "stage: posting the token receive of step %d group %d", step, g);
        }
      } else {
        int all_done = 1;
        for (int i = 0; i < n; i++) all_done &= R->sdone[first + i] != 0;
        int stop = all_done || step + 1 >= b->max_new_tokens;
        if (R->tok_req[g] != MPI_REQUEST_NULL) /* the previous step's message of this group */
          ZZ_CHECK(zz_comm_wait(st->faults, &R->tok_req[g], NULL, tmo, "stage: sending token ids", 0,
                                &st->stats.send_wait_s));
        int32_t *m = R->tok[g];
        m[0] = stop;
        m[1] = n;
        for (int i = 0; i < n; i++) {
          m[2 + i] = R->sids[first + i];
          m[2 + n + i] = R->sdone[first + i];
        }
        if (rank == 0) { /* one rank: the ring is local */
          for (int i = 0; i < n; i++) {
            R->ids[first + i] = R->sids[first + i];
            R->done[first + i] = R->sdone[first + i];
          }
          if (R->cb->tokens) {
            s = R->cb->tokens(R->ctx, b, step, g, R->ids + first, R->done + first);
            if (s != ZZ_OK) return cb_fail(R, s, "tokens", step, g);
          }
          if (stop) {
            R->stopped[g] = 1;
            active--;
          }
        } else {
          ZZ_CHECK(send_tokens(R, g, (2 + 2 * (size_t)n) * sizeof(int32_t), step));
        }
      }
    }
    R->item++;
    /* again: this item may have stopped its group (then a receive posted for it, when
     * it was the last group going, is cancelled with the block's buffers) */
    if (active == 0 || !next_item(R, step, g, &ns, &ng)) break;
    step = ns;
    g = ng;
  }
  /* every send of this block must be delivered before its buffers go */
  for (int k = 0; k < ZZ_SEND_SLOTS; k++) ZZ_CHECK(wait_send(R, &R->send[k]));
  if (rank == last && rank > 0)
    for (int gg = 0; gg < b->ngroups; gg++)
      if (R->tok_req[gg] != MPI_REQUEST_NULL)
        ZZ_CHECK(zz_comm_wait(st->faults, &R->tok_req[gg], NULL, tmo, "stage: sending token ids", 0,
                              &st->stats.send_wait_s));
  return ZZ_OK;
}

/* ================================================================ the loop over blocks */

zz_status zz_stage_run(zz_stage *st, const zz_stage_callbacks *cb, void *ctx) {
  if (!cb || !cb->hidden_bytes || !cb->compute || (st->rank == st->size - 1 && !cb->sample) ||
      (st->rank == 0 && !cb->next_block))
    return zz_error(ZZ_ERR_INVALID_ARG, "stage: callbacks next_block (rank 0), hidden_bytes, "
                                        "compute and sample (last rank) are required");
  double t_start = zz_now();
  zz_status s = ZZ_OK;
  for (int64_t index = 0;; index++) {
    zz_stage_block b = {0};
    void *storage = NULL;
    uint64_t *words = NULL;
    MPI_Request *breq = NULL;
    int more = 0;
    if (st->rank == 0) {
      s = cb->next_block(ctx, &b, &more);
      if (s != ZZ_OK) {
        char cause[400];
        snprintf(cause, sizeof cause, "next_block failed at block %lld: %s", (long long)index, zz_error_message());
        zz_faults_report(st->faults, cause);
        s = zz_error(s, "%s", cause);
        break;
      }
      if (more) {
        b.index = index;
        if ((s = zz_block_check(&b, st->cfg.groups, st->cfg.max_new_tokens)) != ZZ_OK) {
          zz_faults_report(st->faults, zz_error_message());
          break;
        }
      } else {
        b = (zz_stage_block){.index = index};
      }
      size_t nw = more ? zz_block_words(&b) : 5;
      words = calloc(nw, sizeof *words);
      breq = malloc((size_t)st->size * sizeof *breq);
      if (!words || !breq) {
        free(words);
        free(breq);
        s = zz_error(ZZ_ERR_NO_MEMORY, "stage: block message");
        break;
      }
      if (more) zz_block_pack(&b, words);
      else
        words[0] = ZZ_BLOCK_MAGIC, words[1] = (uint64_t)index;
      for (int r = 1; r < st->size && s == ZZ_OK; r++) {
        if (MPI_Isend(words, (int)(nw * sizeof *words), MPI_BYTE, r, zz_tag_make(ZZ_KIND_BLOCK, 0, 0, st->cfg.groups),
                      st->data, &breq[r]) != MPI_SUCCESS)
          s = zz_error(ZZ_ERR_MPI, "stage: sending block %lld to rank %d", (long long)index, r);
        st->stats.bytes_sent += nw * sizeof *words;
        st->stats.messages_sent++;
      }
    } else {
      int bytes = 0;
      s = zz_comm_recv_any_size(st->faults, st->data, 0, zz_tag_make(ZZ_KIND_BLOCK, 0, 0, st->cfg.groups),
                                st->cfg.step_timeout, "stage: waiting for the next block", (void **)&words, &bytes,
                                &st->stats.bubble_s);
      if (s == ZZ_OK) {
        st->stats.bytes_received += (uint64_t)bytes;
        size_t nw = (size_t)bytes / sizeof *words;
        if (nw == 5 && words[0] == ZZ_BLOCK_MAGIC && words[2] == 0) {
          more = 0;
        } else {
          s = zz_block_unpack(words, nw, &b, &storage);
          more = 1;
        }
      }
    }
    if (s == ZZ_OK && more) {
      run R = {.st = st, .cb = cb, .ctx = ctx, .b = &b, .gmax = st->cfg.groups};
      block_init(&R);
      if (cb->begin_block && (s = cb->begin_block(ctx, &b)) != ZZ_OK) s = cb_fail(&R, s, "begin_block", 0, 0);
      if (s == ZZ_OK) s = block_buffers(&R);
      if (s == ZZ_OK) s = run_block(&R);
      if (s == ZZ_OK && cb->end_block && (s = cb->end_block(ctx, &b)) != ZZ_OK) s = cb_fail(&R, s, "end_block", 0, 0);
      zz_status fs = block_free(&R, s == ZZ_OK);
      if (s == ZZ_OK) s = fs;
      if (s == ZZ_OK) st->stats.blocks++;
      if (s == ZZ_OK && st->cfg.verbose) {
        zz_stage_stats x;
        zz_stage_get_stats(st, &x);
        fprintf(stderr,
                "zigzag: rank %d: block %lld done: busy %.3f s, bubble %.3f s, "
                "%.0f bytes sent per token\n",
                st->rank, (long long)b.index, x.busy_s, x.bubble_s, x.bytes_per_token);
      }
    }
    if (breq) {
      for (int r = 1; r < st->size; r++) {
        if (s == ZZ_OK) {
          zz_status w = zz_comm_wait(st->faults, &breq[r], NULL, st->cfg.step_timeout, "stage: sending the block", r,
                                     NULL);
          if (w != ZZ_OK) s = w;
        }
      }
    }
    if (s == ZZ_OK || !breq) free(words); /* after a failure MPI may still read it */
    free(breq);
    free(storage);
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

zz_status zz_stage_bcast(zz_stage *st, void *buf, int bytes, int root) {
  MPI_Request req;
  ZZ_MPI_CHECK(MPI_Ibcast(buf, bytes, MPI_BYTE, root, st->data, &req), "stage: broadcasting");
  return wait_collective(st, &req, "stage: waiting for a broadcast");
}
