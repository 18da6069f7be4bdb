/*
 * fault_inject.c — every injected fault (ZZ_FAULT_*, environment only, rows of the
 * options table), for the kill/resume tests (tests/cli/test_cli.sh) and the pipeline
 * fault tests (tests/mpi/test_pipe.sh):
 *
 *   ZZ_FAULT_KILL_AFTER_BLOCKS=N  N blocks commit, then the fault (unset or empty: off)
 *   ZZ_FAULT_KILL_RANK=R          under mpirun the rank that fails (default 0)
 *   ZZ_FAULT_KIND=kill|stop|error how it fails (default kill)
 *
 * One process, and rank 0 of a pipeline with kind kill: the commit of block N writes
 * the first half of its first output line, flushes it and raises SIGKILL, which is
 * what a job killed in the middle of a write leaves behind. Any other rank or kind
 * fails in the middle of block N, at its first decode step: kill raises SIGKILL as a
 * crashed host would, stop raises SIGSTOP (a hung host: alive, silent), error fails
 * the step with an error as a failing disk or device would.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "fault_inject_impl.h"

zz_fault_inject zz_fault_inject_of(const zz_opts *o) {
  /* the options table checked them */
  return (zz_fault_inject){
      .after = o->fault_kill_after, .rank = o->fault_kill_rank, .kind = o->fault_kind ? o->fault_kind[0] : 'k'};
}

int64_t zz_fault_commit_block(const zz_fault_inject *fi, int rank) {
  return fi->rank == 0 && fi->kind == 'k' && rank == 0 ? fi->after : -1;
}

void zz_fault_at_commit(int64_t kill_after, int64_t committed, FILE *out, const char *line) {
  if (kill_after < 0 || committed != kill_after) return;
  if (line) fwrite(line, 1, strlen(line) / 2, out);
  fflush(out);
  fprintf(stderr, "zigzag: ZZ_FAULT_KILL_AFTER_BLOCKS: killing myself in the middle of a write\n");
  raise(SIGKILL);
  abort(); /* not reached */
}

zz_status zz_fault_at_step(const zz_fault_inject *fi, int rank, int max_new, int64_t block, int step, int group) {
  int fault_step = max_new > 1 ? 1 : 0;
  if (fi->after < 0 || rank != fi->rank || (fi->kind == 'k' && fi->rank == 0)) return ZZ_OK;
  if (block != fi->after || step != fault_step || group != 0) return ZZ_OK;
  if (fi->kind == 'e')
    return zz_error(ZZ_ERR_IO, "ZZ_FAULT_KIND=error: injected failure in block %lld", (long long)block);
  fprintf(stderr, "zigzag: rank %d: ZZ_FAULT_KILL_AFTER_BLOCKS: %s myself in block %lld\n", rank,
          fi->kind == 's' ? "stopping (SIGSTOP)" : "killing", (long long)block);
  raise(fi->kind == 's' ? SIGSTOP : SIGKILL);
  return ZZ_OK;
}
