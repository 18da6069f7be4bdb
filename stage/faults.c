/*
 * faults.c — liveness and the error trail.
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
 * Exit: the reporter waits for ACKs (at most exit_grace), then every rank calls
 * MPI_Abort under a watchdog thread that _exit()s if MPI_Abort hangs (it does when a
 * host is unreachable). If the main thread is stuck inside a long compute callback
 * and never reaches zz_stage_fail, this thread exits for it exit_grace + 1 s later.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm_impl.h"
#include "faults_impl.h"
#include "launcher_impl.h"

#define ZZ_CTRL_TAG 1
#define ZZ_CAUSE_LEN 400
#define ZZ_ABORT_WAIT_S 1.0 /* how long MPI_Abort may take before the watchdog _exit()s */

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
  int32_t host_lost; /* ABORT: its sender lost a peer on another host (see end_head) */
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
  MPI_Comm ctrl, world;
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
  atomic_int printed;  /* this rank's one line is out (the stop's, or the orphan signal's) */
  atomic_int notify;   /* the thread must send ABORT(cause) to every peer */
  atomic_int notified; /* ABORTs acknowledged (or grace over): safe to exit */
  atomic_int want_bye; /* clean shutdown asked */
  atomic_int quit;     /* the thread has ended its loop */
  atomic_int exiting;
  double stop_time;
  pid_t parent;     /* the launcher's process that started this rank (mpirun, orted) */
  char parent_kind; /* 'h' mpirun (the job's head), 'd' a daemon (orted), 0 other */
  /* written by the progress thread, read by whichever thread exits */
  atomic_int launcher_gone;        /* the parent ended: nobody will clean up after this rank */
  atomic_int host_lost;            /* a peer on another host was lost (unreachable, perhaps) */
  atomic_int nlost;                /* peers lost */
  atomic_int head_ended;           /* end_head has run */
  int heard_from;                  /* the rank whose ABORT stopped this one (-1: own cause) */
  char cause[ZZ_CAUSE_LEN];        /* what this rank tells its peers (written before notify) */
  char reason[ZZ_CAUSE_LEN + 160]; /* what waits return (written before stopped) */
};

/* ================================================================ lines */

/* A rank's line as it is printed, newline included; its length. */
static int line_of(const zz_faults *f, const char *text, char *line, size_t n) {
  int k = snprintf(line, n, "zigzag: rank %d (host %s): %s\n", f->rank, f->hosts[f->rank], text);
  return k > (int)n - 1 ? (int)n - 1 : k;
}

/* Where a line goes when stderr is gone with the launcher (a pipe to a killed mpirun),
 * so the reason survives somewhere. */
static void log_path_of(const zz_faults *f, char *path, size_t n) {
  const char *tmp = getenv("TMPDIR"), *job = getenv("OMPI_MCA_ess_base_jobid");
  snprintf(path, n, "%s/zigzag-job%s-rank%d.log", tmp && *tmp ? tmp : "/tmp", job ? job : "0", f->rank);
}

/* One write (lines of different threads and ranks never interleave mid-line) to stderr,
 * and appended to the log file when stderr fails or when the launcher is gone (its pipe
 * may live on in another of its children and take the line that nobody reads); plain
 * system calls, so a signal handler may call it. */
static void put_line(const char *line, int n, const char *log_path, int orphan) {
  if (write(2, line, (size_t)n) == n && !orphan) return;
  int fd = open(log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return;
  ssize_t w = write(fd, line, (size_t)n);
  (void)w;
  close(fd);
}

static void say(zz_faults *f, const char *text) {
  char line[640], path[256];
  int n = line_of(f, text, line, sizeof line);
  log_path_of(f, path, sizeof path);
  put_line(line, n, path, f->parent > 1 && getppid() != f->parent);
}

/* The first failure this rank sees: print it once, make waits return. */
static int stop_once(zz_faults *f, const char *line, const char *reason) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&f->claimed, &expected, 1)) return 0;
  expected = 0; /* the orphan signal may have printed the line already */
  if (atomic_compare_exchange_strong(&f->printed, &expected, 1)) say(f, line);
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

static void *watchdog(void *arg) {
  double s = *(double *)arg;
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  nanosleep(&ts, NULL);
  _exit(1);
  return NULL;
}

/* What a failing rank does last, so the job leaves nothing behind (issue #21 item 21):
 * the job's shared-memory files on this machine go (the launcher removes them only when
 * it ends cleanly); a rank cut off from every peer ends its daemon (orted), which
 * otherwise waits forever for an mpirun it cannot reach; a rank under mpirun that lost
 * a host ends mpirun, which otherwise waits for the unreachable host's daemon until TCP
 * gives up (~15 min). The daemons and mpirun end the job's other processes on their
 * way out. */
/* mpirun's first signal starts its own abort, which waits for every daemon; a second
 * makes it give up. Signals do not queue and mpirun may end this rank (SIGTERM, then
 * SIGKILL 1 s later) before a busy mpirun has handled the first, so a small helper
 * process in a session of its own (out of reach of mpirun's kill of this rank's
 * process group) sends SIGTERM every 0.25 s until mpirun is gone, for at most 10 s.
 * Once per process; only for a job that lost a host and has told every peer it could
 * reach (the progress thread calls it as soon as that is so). */
static int head_alive(pid_t pid) {
  if (kill(pid, 0) != 0) return 0;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY); /* plain syscalls: this runs in a forked child */
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char *paren = strrchr(buf, ')');
  return !(paren && paren[1] && paren[2] == 'Z'); /* a zombie has ended */
}

static void end_head(zz_faults *f) {
  if (f->parent_kind != 'h' || f->parent <= 1 || atomic_load(&f->launcher_gone) || !atomic_load(&f->host_lost) ||
      atomic_exchange(&f->head_ended, 1))
    return;
  pid_t head = f->parent;
  pid_t helper = fork();
  if (helper == 0) {
    setsid();
    for (int i = 0; i < 40 && head_alive(head); i++) {
      kill(head, SIGTERM);
      struct timespec ts = {0, 250000000};
      nanosleep(&ts, NULL);
    }
    _exit(0);
  }
  if (helper < 0) { /* no helper: two signals from here */
    kill(head, SIGTERM);
    struct timespec ts = {0, 300000000};
    nanosleep(&ts, NULL);
    kill(head, SIGTERM);
  }
}

static void leave(zz_faults *f) {
  zz_launcher_clean_shm();
  if (atomic_load(&f->launcher_gone) || f->parent <= 1) return;
  if (f->parent_kind == 'd' && f->size > 1 && atomic_load(&f->nlost) == f->size - 1) kill(f->parent, SIGTERM);
  end_head(f);
}

static void die(zz_faults *f) __attribute__((noreturn));
static void die(zz_faults *f) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&f->exiting, &expected, 1)) {
    for (;;) pause(); /* the other thread is already exiting for us */
  }
  fflush(stdout);
  fflush(stderr);
  /* The ranks that saw the failure first end the job with MPI_Abort (the launcher
   * then also reaps a stopped or stuck rank) once every peer acknowledged, i.e. has
   * printed its line; under a watchdog, since MPI_Abort hangs when a host is
   * unreachable. A rank stopped by a peer's report leaves that to the reporter and
   * exits by itself only if it is still alive exit_grace later, so no rank is cut off
   * by the launcher before it has said why it stops. */
  if (f->heard_from >= 0) {
    double left = f->stop_time + f->grace - zz_now();
    if (left > 0) {
      struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
      nanosleep(&ts, NULL);
    }
    leave(f);
    _exit(1);
  }
  leave(f);
  if (atomic_load(&f->launcher_gone)) _exit(1); /* nobody left to abort the job through */
  static double wait_s = ZZ_ABORT_WAIT_S;
  pthread_t t;
  if (pthread_create(&t, NULL, watchdog, &wait_s) != 0) _exit(1);
  MPI_Abort(f->world, 1);
  _exit(1);
}

void zz_faults_exit(zz_faults *f, const char *cause) {
  zz_faults_report(f, cause && *cause ? cause : "failed (no message)");
  /* wait until the peers heard (the thread gives up after exit_grace) */
  double t0 = zz_now();
  while (f->thread_started && !atomic_load(&f->notified) && !atomic_load(&f->quit) && zz_now() - t0 < f->grace + 1.0) {
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  die(f);
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
  m->host_lost = atomic_load(&f->host_lost);
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
  atomic_fetch_add(&f->nlost, 1);
  if (strcmp(f->hosts[p], f->hosts[f->rank]) != 0) atomic_store(&f->host_lost, 1);
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
      if (m->host_lost) atomic_store(&f->host_lost, 1);
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

static void launcher_gone_text(const zz_faults *f, char *text, size_t n) {
  snprintf(text, n, "the launcher is gone: its process %d (%s) ended; stopping", (int)f->parent,
           f->parent_kind == 'h'   ? "mpirun"
           : f->parent_kind == 'd' ? "orted"
                                   : "parent");
}

/* The orphan signal: the kernel sends it the moment the launcher dies. Open MPI's own
 * reaction to the lost launcher (its PMIx connection closes first) may end the process
 * within milliseconds, before the progress thread's next look at getppid(), so the
 * rank's line is written here, prepared in advance; the progress thread still does the
 * stopping. One faults object per process. */
static zz_faults *g_orphan;
static char g_orphan_line[640], g_orphan_log[256];
static int g_orphan_len;
#define ZZ_ORPHAN_SIGNAL (SIGRTMAX - 2)

static void on_orphan(int sig) {
  (void)sig;
  zz_faults *f = g_orphan;
  int saved = errno, expected = 0;
  if (!f) return;
  /* the kernel re-parents the threads one by one as it signals: this one may still name
   * the launcher for a moment; a parent that stays is one whose forking thread ended */
  for (int ms = 0; getppid() == f->parent; ms++) {
    if (ms == 100) {
      errno = saved;
      return;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  if (atomic_compare_exchange_strong(&f->printed, &expected, 1)) put_line(g_orphan_line, g_orphan_len, g_orphan_log, 1);
  errno = saved;
}

static void orphan_watch(zz_faults *f) {
  if (f->parent <= 1 || g_orphan) return;
  char text[160];
  launcher_gone_text(f, text, sizeof text);
  g_orphan_len = line_of(f, text, g_orphan_line, sizeof g_orphan_line);
  log_path_of(f, g_orphan_log, sizeof g_orphan_log);
  g_orphan = f;
  struct sigaction sa = {.sa_handler = on_orphan, .sa_flags = SA_RESTART};
  sigemptyset(&sa.sa_mask);
  if (sigaction(ZZ_ORPHAN_SIGNAL, &sa, NULL) != 0 || prctl(PR_SET_PDEATHSIG, ZZ_ORPHAN_SIGNAL) != 0) return;
  if (getppid() != f->parent) raise(ZZ_ORPHAN_SIGNAL); /* it died before the request */
}

static void orphan_unwatch(zz_faults *f) {
  if (g_orphan != f) return;
  prctl(PR_SET_PDEATHSIG, 0);
  g_orphan = NULL;
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
    if (f->parent > 1 && !atomic_load(&f->launcher_gone) && getppid() != f->parent) {
      /* the launcher died (kill -9 of mpirun, a daemon ended): this rank is an orphan */
      atomic_store(&f->launcher_gone, 1);
      char text[160];
      launcher_gone_text(f, text, sizeof text);
      zz_faults_report(f, text);
    }
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
    if (atomic_load(&f->stopped) && atomic_load(&f->notified)) end_head(f);
    /* backstop: the main thread did not exit after a failure (stuck in a callback) */
    if (atomic_load(&f->stopped) && atomic_load(&f->notified) && now - f->stop_time > f->grace + 1.0 &&
        !atomic_load(&f->want_bye))
      die(f);
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
  }
  atomic_store(&f->quit, 1);
  return NULL;
}

/* ================================================================ start / stop */

/* 'h' when pid is the job's head (mpirun and its other names), 'd' a launch daemon. */
static char parent_kind(pid_t pid) {
  char path[64], name[32] = {0};
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
  FILE *c = fopen(path, "r");
  if (!c) return 0;
  if (!fgets(name, sizeof name, c)) name[0] = '\0';
  fclose(c);
  name[strcspn(name, "\n")] = '\0';
  if (!strcmp(name, "mpirun") || !strcmp(name, "mpiexec") || !strcmp(name, "orterun") || !strcmp(name, "prterun"))
    return 'h';
  if (!strcmp(name, "orted") || !strcmp(name, "prted")) return 'd';
  return 0;
}

zz_status zz_faults_start(MPI_Comm ctrl, MPI_Comm world, const char (*hosts)[ZZ_HOST_LEN], const zz_stage_config *cfg,
                          double startup_s, zz_faults **out) {
  zz_faults *f = calloc(1, sizeof *f);
  if (!f) return zz_error(ZZ_ERR_NO_MEMORY, "stage: fault tracker");
  f->ctrl = ctrl;
  f->world = world;
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
  f->parent = f->size > 1 ? getppid() : 0; /* alone: no launcher to lose */
  f->parent_kind = parent_kind(f->parent);
  /* a rank whose launcher died must live to say why, not die writing to its stderr */
  struct sigaction old_pipe;
  if (sigaction(SIGPIPE, NULL, &old_pipe) == 0 && old_pipe.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  orphan_watch(f);
  hb_exchange(f, startup_s);
  if (pthread_create(&f->thread, NULL, progress, f) != 0) {
    orphan_unwatch(f);
    if (f->udp >= 0) close(f->udp);
    free(f->cards);
    free(f->peers);
    free(f);
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
  orphan_unwatch(f);
  if (f->thread_started) zz_faults_stop(f);
  if (f->udp >= 0) close(f->udp);
  free(f->cards);
  free(f->peers);
  free(f);
}
