/* fault_exit_impl.h — how a failing rank says why and ends (internal to the fault
 * tracker: stage/faults.c holds one, stage/fault_exit.c is its code). */
#ifndef ZZ_FAULT_EXIT_IMPL_H
#define ZZ_FAULT_EXIT_IMPL_H

#include <mpi.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "launcher_impl.h"

/* What the exit path knows: who this rank is, who launched it, what was lost. Set up
 * by zz_exit_init; the atomics are written by the progress thread and read by
 * whichever thread exits. */
typedef struct zz_exit {
  MPI_Comm world; /* MPI_Abort's */
  int rank, size;
  const char (*hosts)[ZZ_HOST_LEN];
  double grace;             /* exit_grace: how long a told rank lingers */
  pid_t parent;             /* the launcher's process that started this rank (mpirun, orted); 0 alone */
  char parent_kind;         /* 'h' mpirun (the job's head), 'd' a daemon (orted), 0 other */
  atomic_int printed;       /* this rank's one line is out (the stop's, or the orphan signal's) */
  atomic_int exiting;       /* a thread is on its way out */
  atomic_int launcher_gone; /* the parent ended: nobody will clean up after this rank */
  atomic_int host_lost;     /* a peer on another host was lost (unreachable, perhaps) */
  atomic_int nlost;         /* peers lost */
  atomic_int head_ended;    /* zz_exit_end_head has run */
} zz_exit;

/* Fills x (zeroed by the caller), finds the launcher (parent) and starts watching for its death (the orphan
 * signal, one tracker per process); SIGPIPE ignored, so a rank whose launcher died
 * lives to say why. */
void zz_exit_init(zz_exit *x, MPI_Comm world, int rank, int size, const char (*hosts)[ZZ_HOST_LEN], double grace);
/* Stops watching for the launcher's death. */
void zz_exit_unwatch(zz_exit *x);
/* Prints `zigzag: rank R (host H): text` unless this rank's line is out already. */
void zz_exit_say_once(zz_exit *x, const char *text);
/* 1 once, when the launcher has just been seen gone (the progress thread polls it),
 * with the line that says so in text. */
int zz_exit_orphaned(zz_exit *x, char *text, size_t n);
/* Peer p is lost (counted; a peer of another host marks the host lost). */
void zz_exit_lost(zz_exit *x, int p);
/* A job that lost a host: mpirun is ended (it would wait for the unreachable host's
 * daemon), once per process; only once every peer that can hear has heard. */
void zz_exit_end_head(zz_exit *x);
/* The end: heard_from >= 0 (a peer's ABORT stopped this rank) lingers until
 * stop_time + grace and _exit()s; the rank that saw the failure first calls MPI_Abort
 * under a watchdog. Either way the job's leftovers go first. */
void zz_exit_die(zz_exit *x, int heard_from, double stop_time) __attribute__((noreturn));

#endif
