/* fault_inject_impl.h — the ZZ_FAULT_* hooks of the kill/resume and pipeline fault
 * tests (internal to launch/; launch/fault_inject.c). */
#ifndef ZZ_FAULT_INJECT_IMPL_H
#define ZZ_FAULT_INJECT_IMPL_H

#include <stdint.h>
#include <stdio.h>

#include "zz_opts.h"

/* What to inject, as the options table read it from the environment. */
typedef struct zz_fault_inject {
  int64_t after; /* ZZ_FAULT_KILL_AFTER_BLOCKS: blocks committed before the fault; -1: off */
  int rank;      /* ZZ_FAULT_KILL_RANK: the rank that fails (mpirun) */
  char kind;     /* ZZ_FAULT_KIND: 'k' kill, 's' stop, 'e' error */
} zz_fault_inject;

zz_fault_inject zz_fault_inject_of(const zz_opts *o);
/* Where a commit dies (the block count; -1: none) on a pipeline's rank: rank 0 with
 * kind kill only; every other fault fails a step instead (zz_fault_at_step). */
int64_t zz_fault_commit_block(const zz_fault_inject *fi, int rank);
/* A commit about to write line after `committed` blocks: at kill_after (>= 0) the
 * first half of the line is written and flushed, then SIGKILL; else nothing. */
void zz_fault_at_commit(int64_t kill_after, int64_t committed, FILE *out, const char *line);
/* A pipeline rank's step (block, step, group): the injected fault of this rank, at
 * its first decode step (step 0 when max_new is 1) of group 0 of block `after`:
 * kill raises SIGKILL, stop SIGSTOP, error returns ZZ_ERR_IO. ZZ_OK elsewhere. */
zz_status zz_fault_at_step(const zz_fault_inject *fi, int rank, int max_new, int64_t block, int step, int group);

#endif
