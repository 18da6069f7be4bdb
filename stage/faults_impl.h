/* faults_impl.h — heartbeats, the error trail and the exit path of a stage (internal). */
#ifndef ZZ_FAULTS_IMPL_H
#define ZZ_FAULTS_IMPL_H

#include <mpi.h>

#include "launcher_impl.h"
#include "zz_stage.h"

typedef struct zz_faults zz_faults;

/* Starts the progress thread on ctrl (a communicator of its own), after exchanging
 * every rank's datagram heartbeat address over it (collective, at most startup_s).
 * hosts: [size] names, kept by pointer. world: the communicator MPI_Abort is called on. */
zz_status zz_faults_start(MPI_Comm ctrl, MPI_Comm world, const char (*hosts)[ZZ_HOST_LEN], const zz_stage_config *cfg,
                          double startup_s, zz_faults **out);
/* ZZ_OK while nothing went wrong anywhere; else ZZ_ERR_MPI with the reason set. Cheap
 * (one atomic load): called on every poll of every wait. */
zz_status zz_faults_check(zz_faults *f);
/* This rank hit an error: prints `zigzag: rank R (host H): cause` (unless a fault
 * was already seen) and has the progress thread tell every peer. */
void zz_faults_report(zz_faults *f, const char *cause);
/* Reports cause if nothing was reported yet, waits for peers to hear, exits. */
void zz_faults_exit(zz_faults *f, const char *cause) __attribute__((noreturn));
/* Clean shutdown: goodbyes to every peer, then the thread ends. Returns non-OK if a
 * fault happened meanwhile (the caller then exits through zz_faults_exit). */
zz_status zz_faults_stop(zz_faults *f);
void zz_faults_free(zz_faults *f);

#endif
