/*
 * zz_stage.h — one pipeline stage of zigzag: this rank's place in the wavefront.
 *
 * With m ranks (one per GPU or machine), rank r owns a contiguous slice of layers.
 * A block of sequences is cut into T >= m micro-batch groups that flow through the
 * ranks as a wavefront (FlexGen §4.4): rank r computes (token i, group g) once it has
 * g's hidden state for token i from rank r-1, while rank r+1 computes group g-1.
 * Hidden states go r -> r+1; the last rank samples and sends the token ids (plus
 * per-sequence done flags and a per-group stop flag) back to rank 0, which feeds them
 * in as the input of token i+1. Rank 0 alone decides what a block holds and tells
 * every rank. Every message is tagged by (kind, token step, group); receives are
 * posted before computing, sends never wait. The driver and the messages know no
 * engine: it plugs in through zz_stage_callbacks, implemented over a zz_engine by
 * the engine adapter below (zz_engine_stage), which launch/ runs under mpirun.
 *
 * A small progress thread (MPI_THREAD_MULTIPLE, on a duplicated communicator) sends
 * heartbeats, so a rank busy in a long step is never taken for dead, while a rank
 * that is killed, stopped or cut off is noticed after `peer_timeout` seconds. Any
 * failure follows one error trail: the rank that sees it prints one line
 * `zigzag: rank R (host H): <cause>`, every other rank prints
 * `zigzag: rank R (host H): stopping: rank X (host Y) reported: <cause>` (or
 * `stopping: lost rank X (host Y): ...`) and every rank exits non-zero within a few
 * seconds (zz_stage_fail; a watchdog _exit()s if MPI_Abort hangs).
 *
 * Usage (every rank; MPI initialised with MPI_THREAD_MULTIPLE by the caller):
 *     zz_binding bind;
 *     ZZ_CHECK(zz_binding_init(comm, gpu_ordinal, &bind));   // prints where it bound
 *     zz_stage_config cfg;  zz_stage_config_default(&cfg);
 *     cfg.groups = 4;  cfg.peer_timeout = 5;
 *     zz_stage *st;
 *     ZZ_CHECK(zz_stage_create(comm, &cfg, &st));
 *     zz_stage_callbacks cb = {.next_block = my_next_block, .hidden_bytes = my_bytes,
 *                              .compute = my_compute, .sample = my_sample,
 *                              .tokens = my_tokens};
 *     zz_status s = zz_stage_run(st, &cb, my_ctx);
 *     if (s != ZZ_OK) zz_stage_fail(st, s);    // reports, stops every rank, exits
 *     zz_stage_stats stats;  zz_stage_get_stats(st, &stats);
 *     zz_stage_destroy(st);  zz_binding_free(&bind);
 */
#ifndef ZZ_STAGE_H
#define ZZ_STAGE_H

#include <mpi.h>
#include <stdint.h>

#include "zz_bind.h" /* zz_binding: hwloc, runtime/bind.c */
#include "zz_runtime.h"
#include "zz_seq.h" /* zz_seq_params: runtime/seq.c */

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ MPI errors */

/* An MPI return code on the status trail: ZZ_OK for MPI_SUCCESS, else
 * ZZ_ERR_MPI with the message "<what, printf-formatted>: <MPI's error string>".
 * Every MPI error of stage/ is reported through it (ZZ_MPI_CHECK). */
zz_status zz_mpi_status(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define ZZ_MPI_CHECK(call, ...) ZZ_CHECK(zz_mpi_status((call), __VA_ARGS__))

/* ================================================================ binding */

/* Binds the calling process to the NUMA node nearest CUDA device gpu_ordinal (when
 * >= 0 and found), else spreads this machine's ranks over its NUMA nodes; ranks on a
 * node get disjoint cores (shared, and said so, when too few). Collective over comm
 * (MPI_COMM_TYPE_SHARED). Prints `zigzag: rank R (host H): bound to cores ..., NUMA node ...`. */
zz_status zz_binding_init(MPI_Comm comm, int gpu_ordinal, zz_binding *out);
/* (zz_binding_free, and a process alone: zz_binding_init_local, in zz_bind.h) */

/* ================================================================ the stage */

/* The block rank 0 hands out; every rank sees the same one in begin_block. Groups
 * are contiguous runs of sequences: group g holds [group_first[g], group_first[g+1]). */
typedef struct zz_stage_block {
  int64_t index;               /* 0, 1, ... in the order rank 0 issued blocks */
  int32_t nseq;                /* sequences in the block */
  int32_t ngroups;             /* T micro-batch groups, 1 <= T <= nseq */
  int32_t max_new_tokens;      /* tokens to generate per sequence, >= 1 */
  const int32_t *group_first;  /* [ngroups + 1] first sequence of each group */
  const int32_t *prompt_len;   /* [nseq] prompt tokens per sequence, >= 1 */
  const uint64_t *rng;         /* [nseq] sampler stream (seed) per sequence */
  const int32_t *prompt_ids;   /* rank 0, and every rank when params is set (the last
                                 rank's repetition penalty reads them); NULL elsewhere:
                                 the prompts one after another, sum(prompt_len) ids */
  const zz_seq_params *params; /* [nseq] each sequence's own settings (the last rank
                                  samples with them), or NULL: the engine's */
  /* Refill (nslots > 0): the nseq sequences take turns in nslots <= nseq slots. The
   * groups are then runs of slots (group_first over 0 .. nslots), every per-group
   * array of an item (ids, done, the token message) is by slot, and slot i begins
   * the block with sequence slot_seq[i]. At each step > 0 rank 0 may put a waiting
   * sequence into a slot whose sequence has ended (callbacks.refill); a group stops
   * when its slots have all ended and none was refilled, as rank 0 alone decides
   * (steps may pass max_new_tokens). cont: the block goes on with the previous
   * block's sequences (their tokens so far kept): a request whose sequences did not
   * all find a slot. 0: no refill, the slots are the sequences. */
  int32_t nslots;
  int32_t cont;
  const int32_t *slot_seq; /* [nslots] */
} zz_stage_block;

/* One (token step, group) work item, given to compute and sample. */
typedef struct zz_stage_item {
  const zz_stage_block *block;
  int32_t step;  /* token step: 0 = prefill, i = the i-th generated token's input */
  int32_t group; /* micro-batch group g */
  int32_t nseq;  /* sequences in the group */
  int32_t first; /* block index of the group's first sequence */
  /* Rank 0's input: step 0: the group's prompt ids one after another (NULL in a
   * refill block: the slots' prompts are the caller's); step > 0: one id per
   * sequence (the token sampled at step-1). NULL on other ranks. */
  const int32_t *ids;
  int64_t nids;
  /* step > 0: [nseq] sequence finished, as rank 0 knows it (the sampler's flags and
   * its own), the pad token its input; on rank 0, and on every rank when hidden
   * states go over MPI (they travel behind the hidden state); else NULL */
  const uint8_t *done;
  /* refill blocks, step > 0: [nseq] the sequence that joins each slot of the group
   * at this item (-1: none), on every rank: after the step, its prompt step runs
   * alone into the slot (its hidden state follows the step's in hidden_in and
   * hidden_out, join_bytes each, in slot order), and the last rank samples its first
   * token, which goes to rank 0 as the slot's token; NULL otherwise */
  const int32_t *joins;
  /* Other ranks' input: the hidden state rank r-1 produced (NULL on rank 0). */
  const void *hidden_in;
  size_t hidden_in_bytes;
  /* Output: the hidden state for rank r+1 (on the last rank: whatever sample reads).
   * compute must write exactly hidden_out_bytes = hidden_bytes(step, group). */
  void *hidden_out;
  size_t hidden_out_bytes;
  /* hidden_in and hidden_out are device memory of the exchange's device (--comm
   * nccl), not host memory */
  bool hidden_on_device;
} zz_stage_item;

/*
 * The engine's side. Every callback gets the ctx given to zz_stage_run and returns
 * ZZ_OK or a zz_status with zz_error() set; an error stops the whole pipeline (the
 * message becomes the cause every rank prints). Callbacks run on the calling thread
 * of zz_stage_run, one at a time, in wavefront order: for each block, for each step,
 * for each group not yet stopped. Items of different groups interleave, so the engine
 * keeps a KV cache per group.
 */
typedef struct zz_stage_callbacks {
  /* Rank 0 only: the next block, or *more_out = 0 when there is none. The arrays it
   * points to must stay valid until end_block of that block returns. */
  zz_status (*next_block)(void *ctx, zz_stage_block *out, int *more_out);
  /* All ranks, optional: a block starts (size caches, reset per-group state). */
  zz_status (*begin_block)(void *ctx, const zz_stage_block *block);
  /* All ranks: bytes of the hidden state this rank sends for (step, group). Must be
   * > 0, and no step > 1 may need more than steps 0 and 1 (prefill and decode). */
  size_t (*hidden_bytes)(void *ctx, const zz_stage_block *block, int32_t step, int32_t group);
  /* All ranks: run this rank's layers on one item (see zz_stage_item). */
  zz_status (*compute)(void *ctx, const zz_stage_item *item);
  /* Last rank: from the item's hidden_out, the next token per sequence (ids_out
   * [nseq]) and whether each sequence is finished (done_out [nseq]: 0, or any other
   * value the sampler gives it meaning, such as why). On entry done_out holds the
   * group's flags of the previous step (all 0 at step 0), so a sampler can keep them
   * sticky. extra_out: [nseq x zz_block_token_words(block)] words that travel to rank
   * 0 with the ids (NULL when that is 0). The group stops after this step when every
   * flag is set or step + 1 == max_new_tokens. */
  zz_status (*sample)(void *ctx, const zz_stage_item *item, int32_t *ids_out, uint8_t *done_out, int32_t *extra_out);
  /* Rank 0, optional: the tokens sampled at (step, group) have arrived, with the
   * sampler's done flags and extra words (NULL when none). It may set more done
   * flags (a sequence rank 0 ends itself, e.g. at a stop string: its next input is
   * the pad token); a group whose flags are then all set stops here, and the stop
   * is passed down the ranks as any other. */
  zz_status (*tokens)(void *ctx, const zz_stage_block *block, int32_t step, int32_t group, const int32_t *ids,
                      uint8_t *done, const int32_t *extra);
  /* Rank 0, refill blocks: at a step > 0 item of group g, once its tokens are in
   * (tokens): the sequence each slot takes, joins_out [nseq] (-1: none); done holds
   * the slots' flags (set: the slot's sequence has ended). */
  zz_status (*refill)(void *ctx, const zz_stage_block *block, int32_t step, int32_t group, const uint8_t *done,
                      int32_t *joins_out);
  /* All ranks, refill blocks: bytes of sequence seq's prompt-step hidden state,
   * what its join adds to an item's hidden state. */
  size_t (*join_bytes)(void *ctx, const zz_stage_block *block, int32_t seq);
  /* All ranks, optional: the block is over on this rank. */
  zz_status (*end_block)(void *ctx, const zz_stage_block *block);
} zz_stage_callbacks;

typedef struct zz_stage_config {
  int groups;          /* T micro-batch groups per block (upper bound rank 0 may use) */
  double peer_timeout; /* seconds of silence after which a peer is lost (default 5) */
  double heartbeat;    /* seconds between heartbeats (default peer_timeout / 10) */
  double exit_grace;   /* seconds a failing rank waits for peers to hear it (default 2) */
  double step_timeout; /* seconds any one wait may last although every peer is alive
                            (a live but stuck peer; default 900) */
  int max_new_tokens;  /* largest max_new_tokens a block may ask (sizes the tag space) */
  int verbose;         /* 1: one line per block with its stats */
} zz_stage_config;

void zz_stage_config_default(zz_stage_config *cfg);

/* Per-rank counters over all blocks run so far. */
typedef struct zz_stage_stats {
  double total_s;      /* wall time inside zz_stage_run */
  double busy_s;       /* inside compute and sample */
  double bubble_s;     /* waiting for an input (hidden state, token ids, block) */
  double send_wait_s;  /* waiting for a send buffer to come free (should be ~0) */
  uint64_t bytes_sent; /* hidden states, token ids and block messages */
  uint64_t bytes_received;
  uint64_t messages_sent;
  int64_t items;  /* (step, group) items computed */
  int64_t tokens; /* tokens generated (sequences x steps) in items computed */
  int64_t blocks;
  double bytes_per_token; /* bytes_sent / tokens */
} zz_stage_stats;

typedef struct zz_stage zz_stage;

/* MPI_Init_thread(MPI_THREAD_MULTIPLE) under a watchdog (stage/launcher.c): not done
 * within timeout_s (restarted when a rank of this machine arrives), the rank prints
 * `zigzag: rank R (host H): MPI_Init_thread did not complete within T s: rank X never
 * arrived (...)` and exits 1, so the launcher ends the job. */
zz_status zz_stage_mpi_init(double timeout_s, int *provided_out);

/* Collective over comm: duplicates it (data and control), exchanges host names,
 * checks the thread level and starts the progress thread. */
zz_status zz_stage_create(MPI_Comm comm, const zz_stage_config *cfg, zz_stage **out);
/* Runs blocks until rank 0's next_block has no more: ZZ_OK on every rank, or an error
 * (the cause, or ZZ_ERR_MPI "stopped: ...") once the trail is printed: zz_stage_fail. */
zz_status zz_stage_run(zz_stage *st, const zz_stage_callbacks *cb, void *ctx);
/* Ends the process after a failure: reports it (if first to see it), waits up to
 * exit_grace for peers to hear, MPI_Abort (a watchdog _exit()s if that hangs). */
void zz_stage_fail(zz_stage *st, zz_status status) __attribute__((noreturn));
void zz_stage_get_stats(const zz_stage *st, zz_stage_stats *out);
int zz_stage_rank(const zz_stage *st);
int zz_stage_size(const zz_stage *st);
/* The configured number of groups (the most a block may use). */
int zz_stage_groups(const zz_stage *st);
/* Every rank, the same limits, before zz_stage_run: the T a plan chose after the
 * stage was made (its agreement carried the plan) and the most new tokens a block
 * may ask (rank 0's job: a line may ask more than --max-new-tokens). The tag space is
 * checked again. */
zz_status zz_stage_set_limits(zz_stage *st, int groups, int max_new_tokens);
/* 32-bit words each sequence's token message carries beside its id and done flag,
 * from the last rank to rank 0 (sample writes them, tokens reads them): a block
 * whose sequences ask log-probabilities (params, logprobs k >= 0) sends each token's
 * log p and the k most likely (id, log p) pairs, for the block's largest k: 1 + 2k.
 * 0 otherwise. */
int zz_block_token_words(const zz_stage_block *b);
/* How hidden states travel between ranks (--comm). Token ids, block messages and
 * control messages always go over MPI. */
typedef enum zz_stage_comm {
  ZZ_STAGE_COMM_MPI = 0, /* host buffers, MPI_Isend / MPI_Irecv */
  ZZ_STAGE_COMM_NCCL,    /* device buffers, ncclSend / ncclRecv on their own stream */
  ZZ_STAGE_COMM_COUNT
} zz_stage_comm;
/* "mpi" or "nccl"; anything else is ZZ_ERR_INVALID_ARG naming it. */
zz_status zz_stage_comm_parse(const char *name, zz_stage_comm *out);
const char *zz_stage_comm_name(zz_stage_comm comm);
/* Whether this build and this rank's device can use `comm`, alone and before
 * anything loads: NCCL needs an NCCL build and a GPU device (ZZ_ERR_UNSUPPORTED
 * with the reason otherwise). */
zz_status zz_stage_comm_check(zz_stage_comm comm, const zz_device *dev);
/* Collective: hidden states go by `comm`, kept across blocks. MPI: through dev's
 * host memory (pinned on CUDA: the engine's copies are DMA, MPI reads in place), or
 * malloc when dev is NULL; grown as blocks need. NCCL: through buffers of
 * max_hidden_bytes each in dev's memory, reserved on the device so later memory
 * plans leave room; every rank's GPU is compared first (two ranks on one GPU:
 * refused on every rank), then the communicator is bootstrapped, bounded by a
 * deadline. Call before zz_stage_run; dev must outlive the stage. */
zz_status zz_stage_use_comm(zz_stage *st, zz_stage_comm comm, zz_device *dev, size_t max_hidden_bytes);
/* zz_stage_use_comm(MPI, dev) unless the stage already exchanges over dev. */
zz_status zz_stage_use_device(zz_stage *st, zz_device *dev);
/* Clean shutdown, collective: says goodbye to every peer (so nobody takes this rank
 * for lost), stops the progress thread, frees the communicators. NULL is fine. */
void zz_stage_destroy(zz_stage *st);

/* Collective agreement on a step every rank takes before the pipeline runs
 * (planning, opening files, loading): each rank passes its status (reason:
 * zz_error_message()). ZZ_OK everywhere when all were OK; else every rank gets the
 * first failing rank's status, "rank R (host H): <reason>", after that rank printed
 * `zigzag: rank R (host H): <reason>` and every other `zigzag: rank Q (host G):
 * stopping: rank R (host H) reported: <reason>`; the ranks then leave cleanly.
 * Bounded: a lost peer or step_timeout ends the wait. */
zz_status zz_stage_agree(zz_stage *st, zz_status mine);
/* Collective: every rank's stats (mine, or NULL for zz_stage_get_stats now) into
 * rank 0's all_out [size] (other ranks may pass NULL). Bounded like zz_stage_agree. */
zz_status zz_stage_gather_stats(zz_stage *st, const zz_stage_stats *mine, zz_stage_stats *all_out);
/* Collective: whether `mine` holds on every rank (a logical and). Bounded like
 * zz_stage_agree. */
zz_status zz_stage_all(zz_stage *st, bool mine, bool *all_out);
/* Collective: root's `bytes` of buf to every rank (what only rank 0 knows). Bounded
 * like zz_stage_agree. */
zz_status zz_stage_bcast(zz_stage *st, void *buf, int bytes, int root);

#ifdef __cplusplus
}
#endif

/* the engine adapter: the stage over a zz_engine */
#include "zz_stage_engine.h"
#endif
