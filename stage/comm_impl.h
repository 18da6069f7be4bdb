/* comm_impl.h — tags, deadline-bounded waits and the block broadcast of a stage (internal). */
#ifndef ZZ_COMM_IMPL_H
#define ZZ_COMM_IMPL_H

#include <mpi.h>
#include <stdint.h>

#include "faults_impl.h"
#include "zz_stage.h"

/*
 * Tags on the data communicator: tag = (step * groups_max + group) * ZZ_KIND_COUNT + kind.
 * groups_max is the configured T (a block may use fewer groups), steps run 0 ..
 * max_new_tokens (the last one only for "group stopped" messages). The block index is
 * not in the tag: each (source, tag) pair is matched in order (MPI's non-overtaking
 * rule) and every message is received before its block ends, so blocks cannot mix.
 * The whole space must stay <= MPI_TAG_UB (2^31 - 1 with Open MPI's ob1; 32767 is all
 * the standard promises): (max_new_tokens + 1) * groups_max * 3 - 1 <= MPI_TAG_UB.
 */
typedef enum zz_kind {
  ZZ_KIND_BLOCK = 0, /* rank 0 -> every rank: the block's composition (step 0, group 0) */
  ZZ_KIND_HIDDEN,    /* rank r -> r+1: hidden state of (step, group); 0 bytes: group stopped */
  ZZ_KIND_TOKENS,    /* last rank -> rank 0: ids, done flags, stop flag of (step, group) */
  ZZ_KIND_COUNT
} zz_kind;

/* Checks that every tag of a run with these limits fits under tag_ub. */
zz_status zz_tag_check(int groups_max, int max_new_tokens, int tag_ub);
int zz_tag_make(zz_kind kind, int step, int group, int groups_max);
void zz_tag_split(int tag, int groups_max, zz_kind *kind, int *step, int *group);

/* A wait: polls MPI_Test with short sleeps until done, a fault is seen anywhere
 * (zz_faults_check), or the deadline passes. what/peer name it in the error. */
zz_status zz_comm_wait(zz_faults *f, MPI_Request *req, MPI_Status *status, double deadline_s, const char *what,
                       int peer, double *waited_out);
/* Receives a message of unknown size (MPI_Improbe + MPI_Imrecv) into a malloc'd
 * buffer, same rules. */
zz_status zz_comm_recv_any_size(zz_faults *f, MPI_Comm comm, int source, int tag, double deadline_s, const char *what,
                                void **buf_out, int *bytes_out, double *waited_out);
/* Short sleep between polls, growing from a few microseconds to 1 ms. */
void zz_comm_backoff(int *spins);

/* Block composition on the wire: uint64 words
 * [magic, index, nseq, ngroups, max_new_tokens, nslots | cont << 32,
 *  group_first[ngroups+1], prompt_len[nseq], rng[nseq], slot_seq[nslots]], and
 *  where the block has params,
 *  [params[nseq] (ZZ_SEQ_PARAMS_WORDS each), prompt_ids[sum(prompt_len)]];
 *  nseq = 0 means "no more blocks". */
#define ZZ_BLOCK_MAGIC 0x7a7a626c6f636b31ull /* "zzblock1" */
/* What a block message may carry: the counts are int32 on both sides, and every
 * word is checked against these before it is narrowed (a 64-bit word is never
 * cut to its low 32 bits). */
#define ZZ_BLOCK_MAX_SEQ (1 << 24)    /* sequences of a block */
#define ZZ_BLOCK_MAX_GROUPS (1 << 20) /* groups of a block */
#define ZZ_BLOCK_MAX_NEW (1 << 30)    /* new tokens per sequence */
size_t zz_block_words(const zz_stage_block *b);
void zz_block_pack(const zz_stage_block *b, uint64_t *words);
/* Checks and unpacks; the arrays point into storage (malloc'd, owned by the caller). */
zz_status zz_block_unpack(const uint64_t *words, size_t nwords, zz_stage_block *b, void **storage_out);
/* A block's shape is sane (groups, lengths, limits). */
zz_status zz_block_check(const zz_stage_block *b, int groups_max, int max_new_tokens);

/* The block broadcast: rank 0 sends each block's composition (or the end of the run:
 * the 6 header words, nseq 0) to every other rank without waiting, runs the block, then waits
 * for the sends; every other rank receives and unpacks it before its block starts.
 * Bytes and messages are counted in stats. */
typedef struct zz_block_bcast {
  uint64_t *words;  /* rank 0: the message, kept until every send completed */
  MPI_Request *req; /* rank 0: [size] the sends to ranks 1 .. size-1 */
  void *storage;    /* other ranks: the unpacked block's arrays */
} zz_block_bcast;
/* Rank 0: posts block b (more = 1) or the end of the run (more = 0, b's index only). */
zz_status zz_block_bcast_send(zz_block_bcast *m, MPI_Comm comm, int groups_max, const zz_stage_block *b, int more,
                              zz_stage_stats *stats);
/* Other ranks: the next message from rank 0 into *b (*more = 0: the run is over). */
zz_status zz_block_bcast_recv(zz_block_bcast *m, zz_faults *f, MPI_Comm comm, int groups_max, double deadline_s,
                              zz_stage_block *b, int *more, zz_stage_stats *stats);
/* The block is over with status s: rank 0 waits for its sends while s is ZZ_OK; then
 * frees what it may (after a failure the words stay: MPI may still read them).
 * Returns s, or the first failed wait. */
zz_status zz_block_bcast_end(zz_block_bcast *m, zz_faults *f, MPI_Comm comm, double deadline_s, zz_status s);

#endif
