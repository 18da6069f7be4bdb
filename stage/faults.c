/*
 * faults.c — fault detection: liveness, the heartbeats (MPI and UDP) and the abort
 * protocol, run by a progress thread.
 *
 * A progress thread owns a communicator of its own (MPI_THREAD_MULTIPLE). It keeps
 * one receive posted per peer and sends each peer a small heartbeat every
 * `heartbeat` seconds (at most one in flight per peer, so a stopped peer never makes
 * requests pile up). Any message from a peer proves it alive; a peer silent for
 * `peer_timeout` seconds is lost (killed, stopped, or its machine cut off). A rank
 * busy in a long compute step keeps heartbeating from this thread, so it is never
 * taken for lost.
 *
 * Heartbeats also go over a channel of their own, a UDP socket per rank (addresses
 * exchanged at start): over MPI they share the TCP connection with the hidden states and
 * queue behind them, so on a slow live link (256 kbit/s: a 64 kB state takes 2 s) a peer
 * that is alive and sending would look silent. A datagram waits at most the link's queue
 * (or is dropped, and the next one counts). Either channel proves a peer alive; without
 * UDP (no socket, no address) the MPI heartbeats work as before.
 *
 * Control messages (one fixed-size struct, one tag):
 *   HB     I am alive.
 *   ABORT  I hit `text`; stop. Sent by the first rank that sees a failure (its own
 *          error or a lost peer) to every peer, which prints it, answers ACK and stops.
 *   ACK    I heard your ABORT (so the reporter can exit without cutting the message off).
 *   BYE    Clean shutdown: I am done, do not take my silence for a loss.
 * Each rank prints exactly one line (guarded by an atomic flag).
 *
 * Exit: the reporter waits for ACKs (at most exit_grace), then ends through
 * fault_exit.c (its line, the launcher's death, MPI_Abort under a watchdog). If the
 * main thread is stuck inside a long compute callback and never reaches
 * zz_stage_fail, this thread exits for it exit_grace + 1 s later.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm_impl.h"
#include "fault_exit_impl.h"

#define ZZ_CTRL_TAG 1
#define ZZ_CAUSE_LEN 400

#define ZZ_HB_ADDRS 8           /* IPv4 addresses a rank offers for datagram heartbeats */
#define ZZ_HB_MAGIC 0x7a7a6862u /* "zzhb" */

enum { CT_HB = 0, CT_ABORT, CT_ACK, CT_BYE, CT_COUNT };

/* Where a rank hears datagram heartbeats; exchanged with every rank at start. */
typedef struct hb_card {
  uint64_t nonce;             /* rank 0's: this job's, so strays from other jobs are ignored */
  uint32_t addr[ZZ_HB_ADDRS]; /* network order */
  uint16_t port;              /* network order; 0: no socket */
  uint16_t naddr;
} hb_card;

/* One datagram heartbeat. */
typedef struct hb_packet {
  uint32_t magic;
  int32_t from, to;
  uint32_t pad;
  uint64_t nonce;
} hb_packet;

typedef struct ctrl_msg {
  int32_t kind;
  int32_t origin;    /* the rank that wrote text */
  int32_t host_lost; /* ABORT: its sender lost a peer on another host (see zz_exit_end_head) */
  char text[ZZ_CAUSE_LEN];
} ctrl_msg;

typedef struct peer {
  double last_seen; /* zz_now() of the last message from it */
  int bye, lost, acked, abort_sent;
  MPI_Request recv;
  ctrl_msg in;
  MPI_Request send[CT_COUNT]; /* one slot per kind: at most one of each in flight */
  ctrl_msg out[CT_COUNT];
} peer;

struct zz_faults {
  MPI_Comm ctrl;
  int rank, size;
  const char (*hosts)[ZZ_HOST_LEN];
  double timeout, heartbeat, grace;
  peer *peers;
  int udp;        /* datagram heartbeat socket, -1 without */
  uint64_t nonce; /* the job's, from rank 0's card */
  hb_card *cards; /* [size] every rank's heartbeat addresses */
  pthread_t thread;
  int thread_started;
  atomic_int stopped;  /* a failure was seen (here or anywhere): waits return */
  atomic_int claimed;  /* a failure was taken as this rank's stop */
  atomic_int notify;   /* the thread must send ABORT(cause) to every peer */
  atomic_int notified; /* ABORTs acknowledged (or grace over): safe to exit */
  atomic_int want_bye; /* clean shutdown asked */
  atomic_int quit;     /* the thread has ended its loop */
  double stop_time;
  zz_exit exit;                    /* the exit path's state (fault_exit.c) */
  int heard_from;                  /* the rank whose ABORT stopped this one (-1: own cause) */
  char cause[ZZ_CAUSE_LEN];        /* what this rank tells its peers (written before notify) */
  char reason[ZZ_CAUSE_LEN + 160]; /* what waits return (written before stopped) */
};

/* The first failure this rank sees: print it once, make waits return. */
static int stop_once(zz_faults *f, const char *line, const char *reason) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&f->claimed, &expected, 1)) return 0;
  zz_exit_say_once(&f->exit, line);
  snprintf(f->reason, sizeof f->reason, "%s", reason);
  f->stop_time = zz_now();
  atomic_store(&f->stopped, 1);
  return 1;
}

zz_status zz_faults_check(zz_faults *f) {
  if (!atomic_load_explicit(&f->stopped, memory_order_acquire)) return ZZ_OK;
  return zz_error(ZZ_ERR_MPI, "stopped: %s", f->reason);
}

void zz_faults_report(zz_faults *f, const char *cause) {
  if (!stop_once(f, cause, cause)) return; /* a failure elsewhere came first */
  snprintf(f->cause, sizeof f->cause, "%s", cause);
  atomic_store(&f->notify, 1);
}

/* ================================================================ exit */

void zz_faults_exit(zz_faults *f, const char *cause) {
  zz_faults_report(f, cause && *cause ? cause : "failed (no message)");
  /* wait until the peers heard (the thread gives up after exit_grace) */
  double t0 = zz_now();
  while (f->thread_started && !atomic_load(&f->notified) && !atomic_load(&f->quit) && zz_now() - t0 < f->grace + 1.0) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  zz_exit_die(&f->exit, f->heard_from, f->stop_time);
}

/* ================================================================ the progress thread */

static void post_recv(zz_faults *f, int p) {
  if (MPI_Irecv(&f->peers[p].in, (int)sizeof(ctrl_msg), MPI_BYTE, p, ZZ_CTRL_TAG, f->ctrl, &f->peers[p].recv) !=
      MPI_SUCCESS)
    f->peers[p].recv = MPI_REQUEST_NULL;
}

/* Sends kind to p unless one of that kind is still in flight; 0 when skipped. */
static int send_ctrl(zz_faults *f, int p, int kind, const char *text) {
  peer *pe = &f->peers[p];
  if (pe->send[kind] != MPI_REQUEST_NULL) {
    int done = 0;
    if (MPI_Test(&pe->send[kind], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) return 0;
  }
  ctrl_msg *m = &pe->out[kind];
  m->kind = kind;
  m->origin = f->rank;
  m->host_lost = atomic_load(&f->exit.host_lost);
  snprintf(m->text, sizeof m->text, "%s", text ? text : "");
  int bytes = (int)(offsetof(ctrl_msg, text) + strlen(m->text) + 1);
  if (MPI_Isend(m, bytes, MPI_BYTE, p, ZZ_CTRL_TAG, f->ctrl, &pe->send[kind]) != MPI_SUCCESS) {
    pe->send[kind] = MPI_REQUEST_NULL;
    return 0;
  }
  return 1;
}

static void lose(zz_faults *f, int p, const char *why) {
  if (f->peers[p].lost) return;
  f->peers[p].lost = 1;
  zz_exit_lost(&f->exit, p);
  char text[ZZ_CAUSE_LEN];
  snprintf(text, sizeof text, "lost rank %d (host %s): %s", p, f->hosts[p], why);
  zz_faults_report(f, text);
}

static void handle(zz_faults *f, int p, const ctrl_msg *m) {
  switch (m->kind) {
    case CT_ABORT: {
      int o = m->origin >= 0 && m->origin < f->size ? m->origin : p;
      char line[ZZ_CAUSE_LEN + 128];
      snprintf(line, sizeof line, "stopping: rank %d (host %s) reported: %.*s", o, f->hosts[o], ZZ_CAUSE_LEN - 1,
               m->text);
      if (stop_once(f, line, line + 10)) f->heard_from = p;
      if (m->host_lost) atomic_store(&f->exit.host_lost, 1);
      send_ctrl(f, p, CT_ACK, NULL);
      break;
    }
    case CT_ACK: f->peers[p].acked = 1; break;
    case CT_BYE: f->peers[p].bye = 1; break;
    default: break;
  }
}

/* ================================================================ datagram heartbeats */

static void hb_send_all(zz_faults *f) {
  if (f->udp < 0) return;
  for (int p = 0; p < f->size; p++) {
    if (p == f->rank || f->peers[p].bye || f->peers[p].lost || !f->cards[p].port) continue;
    hb_packet pk = {.magic = ZZ_HB_MAGIC, .from = f->rank, .to = p, .nonce = f->nonce};
    for (int a = 0; a < f->cards[p].naddr && a < ZZ_HB_ADDRS; a++) {
      struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = f->cards[p].port};
      to.sin_addr.s_addr = f->cards[p].addr[a];
      /* best effort: a full queue or an unreachable address is what heartbeats detect */
      ssize_t n = sendto(f->udp, &pk, sizeof pk, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&to, sizeof to);
      (void)n;
    }
  }
}

static void hb_receive(zz_faults *f, double now) {
  if (f->udp < 0) return;
  hb_packet pk;
  for (;;) {
    ssize_t n = recv(f->udp, &pk, sizeof pk, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;
    if (n != (ssize_t)sizeof pk || pk.magic != ZZ_HB_MAGIC || pk.nonce != f->nonce || pk.to != f->rank || pk.from < 0 ||
        pk.from >= f->size || pk.from == f->rank)
      continue; /* another job's or a stray datagram */
    f->peers[pk.from].last_seen = now;
  }
}

/* This rank's socket and card: every IPv4 address that is up (loopback included: ranks
 * of one machine reach each other there); the peers send to each of them. */
static void hb_open(zz_faults *f, hb_card *card) {
  memset(card, 0, sizeof *card);
  f->udp = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (f->udp < 0) return;
  struct sockaddr_in me = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
  socklen_t len = sizeof me;
  struct ifaddrs *ifs = NULL;
  if (bind(f->udp, (struct sockaddr *)&me, sizeof me) != 0 || getsockname(f->udp, (struct sockaddr *)&me, &len) != 0 ||
      getifaddrs(&ifs) != 0) {
    close(f->udp);
    f->udp = -1;
    return;
  }
  for (struct ifaddrs *i = ifs; i && card->naddr < ZZ_HB_ADDRS; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && (i->ifa_flags & IFF_UP))
      card->addr[card->naddr++] = ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr;
  freeifaddrs(ifs);
  card->port = me.sin_port;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  card->nonce = ((uint64_t)ts.tv_sec << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 16);
}

/* Every rank's card, bounded like the other start-up collectives. A failure here is
 * not fatal: the MPI heartbeats still run. */
static void hb_exchange(zz_faults *f, double deadline_s) {
  hb_card mine;
  hb_open(f, &mine);
  f->cards = calloc((size_t)f->size, sizeof *f->cards);
  MPI_Request req;
  if (!f->cards || MPI_Iallgather(&mine, (int)sizeof mine, MPI_BYTE, f->cards, (int)sizeof mine, MPI_BYTE, f->ctrl,
                                  &req) != MPI_SUCCESS)
    goto off;
  double t0 = zz_now();
  int spins = 0, done = 0;
  while (!done) {
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) goto off;
    if (!done && zz_now() - t0 > deadline_s) goto off; /* stage start-up times out too */
    if (!done) zz_comm_backoff(&spins);
  }
  f->nonce = f->cards[0].nonce;
  return;
off:
  if (f->udp >= 0) close(f->udp);
  f->udp = -1;
  free(f->cards);
  f->cards = NULL;
}

static void *progress(void *arg) {
  zz_faults *f = arg;
  double now = zz_now(), next_hb = now, notify_time = 0;
  int notify_sent = 0, bye_sent = 0;
  for (int p = 0; p < f->size; p++) {
    f->peers[p].last_seen = now;
    if (p != f->rank) post_recv(f, p);
  }
  for (;;) {
    now = zz_now();
    char gone[160]; /* the launcher died (kill -9 of mpirun, a daemon ended): this rank is an orphan */
    if (zz_exit_orphaned(&f->exit, gone, sizeof gone)) zz_faults_report(f, gone);
    hb_receive(f, now);
    for (int p = 0; p < f->size; p++) {
      peer *pe = &f->peers[p];
      if (p == f->rank || pe->lost) continue;
      while (pe->recv != MPI_REQUEST_NULL) {
        int done = 0;
        MPI_Status status;
        int rc = MPI_Test(&pe->recv, &done, &status);
        if (rc != MPI_SUCCESS) {
          char msg[MPI_MAX_ERROR_STRING + 32];
          int len = 0;
          strcpy(msg, "connection failed: ");
          MPI_Error_string(rc, msg + strlen(msg), &len);
          lose(f, p, msg);
          break;
        }
        if (!done) break;
        pe->last_seen = now;
        ctrl_msg m = pe->in;
        if (m.kind != CT_BYE) post_recv(f, p); /* nothing follows a goodbye */
        handle(f, p, &m);
      }
      if (!pe->bye && !pe->lost && now - pe->last_seen > f->timeout) {
        char why[96];
        snprintf(why, sizeof why, "silent for %.1f s (killed, stopped or unreachable)", now - pe->last_seen);
        lose(f, p, why);
      }
    }
    if (now >= next_hb) {
      for (int p = 0; p < f->size; p++)
        if (p != f->rank && !f->peers[p].bye && !f->peers[p].lost) send_ctrl(f, p, CT_HB, NULL);
      hb_send_all(f);
      next_hb = now + f->heartbeat;
    }
    if (atomic_load(&f->notify) && !notify_sent) {
      for (int p = 0; p < f->size; p++)
        if (p != f->rank && !f->peers[p].lost && !f->peers[p].bye)
          f->peers[p].abort_sent = send_ctrl(f, p, CT_ABORT, f->cause);
      notify_sent = 1;
      notify_time = now;
    }
    if (notify_sent && !atomic_load(&f->notified)) {
      int all = 1;
      for (int p = 0; p < f->size; p++)
        if (f->peers[p].abort_sent && !f->peers[p].acked && !f->peers[p].lost) all = 0;
      if (all || now - notify_time > f->grace) atomic_store(&f->notified, 1);
    }
    if (atomic_load(&f->stopped) && !atomic_load(&f->notify) && !atomic_load(&f->notified)) {
      /* stopped by a peer's ABORT: done once our ACK is on its way (or after 0.5 s) */
      int done = 1, hf = f->heard_from;
      if (hf >= 0 && f->peers[hf].send[CT_ACK] != MPI_REQUEST_NULL)
        MPI_Test(&f->peers[hf].send[CT_ACK], &done, MPI_STATUS_IGNORE);
      if (done || now - f->stop_time > 0.5) atomic_store(&f->notified, 1);
    }
    if (atomic_load(&f->want_bye) && !bye_sent) {
      for (int p = 0; p < f->size; p++)
        if (p != f->rank && !f->peers[p].lost) send_ctrl(f, p, CT_BYE, NULL);
      bye_sent = 1;
    }
    if (bye_sent) {
      int all = 1;
      for (int p = 0; p < f->size; p++)
        if (p != f->rank && !f->peers[p].bye && !f->peers[p].lost) all = 0;
      if (all && (!atomic_load(&f->stopped) || atomic_load(&f->notified))) break;
    }
    /* a host is lost and every peer that can hear has: mpirun must not wait for it */
    if (atomic_load(&f->stopped) && atomic_load(&f->notified)) zz_exit_end_head(&f->exit);
    /* backstop: the main thread did not exit after a failure (stuck in a callback) */
    if (atomic_load(&f->stopped) && atomic_load(&f->notified) && now - f->stop_time > f->grace + 1.0 &&
        !atomic_load(&f->want_bye))
      zz_exit_die(&f->exit, f->heard_from, f->stop_time);
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  atomic_store(&f->quit, 1);
  return NULL;
}

/* ================================================================ start / stop */

zz_status zz_faults_start(MPI_Comm ctrl, MPI_Comm world, const char (*hosts)[ZZ_HOST_LEN], const zz_stage_config *cfg,
                          double startup_s, zz_faults **out) {
  zz_faults *f = calloc(1, sizeof *f);
  if (!f) return zz_error(ZZ_ERR_NO_MEMORY, "stage: fault tracker");
  f->ctrl = ctrl;
  MPI_Comm_rank(ctrl, &f->rank);
  MPI_Comm_size(ctrl, &f->size);
  f->hosts = hosts;
  f->heard_from = -1;
  f->timeout = cfg->peer_timeout;
  f->heartbeat = cfg->heartbeat > 0 ? cfg->heartbeat : cfg->peer_timeout / 10;
  f->grace = cfg->exit_grace;
  f->peers = calloc((size_t)f->size, sizeof *f->peers);
  if (!f->peers) {
    int n = f->size;
    free(f);
    return zz_error(ZZ_ERR_NO_MEMORY, "stage: %d peers", n);
  }
  for (int p = 0; p < f->size; p++) {
    f->peers[p].recv = MPI_REQUEST_NULL;
    for (int k = 0; k < CT_COUNT; k++) f->peers[p].send[k] = MPI_REQUEST_NULL;
  }
  zz_exit_init(&f->exit, world, f->rank, f->size, hosts, cfg->exit_grace);
  hb_exchange(f, startup_s);
  if (pthread_create(&f->thread, NULL, progress, f) != 0) {
    zz_faults_free(f); /* no thread yet: the rest is undone as ever */
    return zz_error(ZZ_ERR_NO_MEMORY, "stage: cannot start the progress thread");
  }
  f->thread_started = 1;
  *out = f;
  return ZZ_OK;
}

zz_status zz_faults_stop(zz_faults *f) {
  if (!f || !f->thread_started) return ZZ_OK;
  atomic_store(&f->want_bye, 1);
  pthread_join(f->thread, NULL);
  f->thread_started = 0;
  /* drop what is still posted: receives are cancelled, finished-with sends released */
  for (int p = 0; p < f->size; p++) {
    peer *pe = &f->peers[p];
    if (pe->recv != MPI_REQUEST_NULL) {
      MPI_Cancel(&pe->recv);
      if (!pe->lost) MPI_Wait(&pe->recv, MPI_STATUS_IGNORE); /* local once cancelled */
      else
        MPI_Request_free(&pe->recv);
    }
    for (int k = 0; k < CT_COUNT; k++)
      if (pe->send[k] != MPI_REQUEST_NULL) MPI_Request_free(&pe->send[k]);
  }
  return zz_faults_check(f);
}

void zz_faults_free(zz_faults *f) {
  if (!f) return;
  zz_exit_unwatch(&f->exit);
  if (f->thread_started) zz_faults_stop(f);
  if (f->udp >= 0) close(f->udp);
  free(f->cards);
  free(f->peers);
  free(f);
}
