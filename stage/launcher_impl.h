/* launcher_impl.h — what the launcher tells a rank and leaves behind (internal). */
#ifndef ZZ_LAUNCHER_IMPL_H
#define ZZ_LAUNCHER_IMPL_H

#include "zz_stage.h"

/* A rank's host name as the ranks exchange it and name it in their lines (gethostname,
 * cut to ZZ_HOST_LEN - 1 characters). */
#define ZZ_HOST_LEN 64

/* This process's rank from the launcher's environment (Open MPI, PMIx, PMI); -1 when
 * not started by one. Readable before MPI_Init. */
int zz_launcher_rank(void);
/* How long start-up may take before a rank gives up on its peers (MPI_Init_thread with
 * every rank present, the stage's first collectives): generous, since a loaded machine
 * starts slowly; a rank known to be missing is reported after the peer timeout. */
double zz_launcher_startup_s(double peer_timeout);
/* Removes this job's Open MPI shared-memory segments on this machine (btl vader:
 * <backing dir>/vader_segment.<host>.<uid>.<job id hex>.<local rank>). Only for a job
 * that is ending: a peer still running loses nothing it has mapped, but could not
 * attach anew. */
void zz_launcher_clean_shm(void);

#endif
