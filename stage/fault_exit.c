/*
 * fault_exit.c — how a failing rank ends: its one line, the launcher's death, and the
 * exit that leaves nothing behind.
 *
 * The line. Each rank prints exactly one line, `zigzag: rank R (host H): ...` (guarded
 * by an atomic flag), in one write so lines of different threads and ranks never
 * interleave; when stderr fails or the launcher is gone it also goes to
 * $TMPDIR/zigzag-job<id>-rank<R>.log, so the reason survives somewhere.
 *
 * Orphans. The launcher's process that started this rank (mpirun, orted) is its parent.
 * When it dies (kill -9 of mpirun, a daemon ended) the rank is an orphan: the progress
 * thread sees getppid() change and stops the rank, and the kernel's orphan signal
 * (PR_SET_PDEATHSIG) writes the line at once, since Open MPI may end an orphaned rank
 * within milliseconds, before the thread looks.
 *
 * Exit: the rank that saw the failure first calls MPI_Abort under a watchdog thread
 * that _exit()s if MPI_Abort hangs (it does when a host is unreachable); a rank told by
 * a peer lingers until exit_grace after it stopped, then _exit()s. Before either, the
 * job's shared-memory files on this machine go, a rank cut off from every peer ends its
 * daemon, and a rank under mpirun that lost a host ends mpirun.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "fault_exit_impl.h"
#include "launcher_impl.h"

#define ZZ_ABORT_WAIT_S 1.0 /* how long MPI_Abort may take before the watchdog _exit()s */
#define ZZ_ORPHAN_SIGNAL (SIGRTMAX - 2)
#define ZZ_LINE_LEN 640

/* ================================================================ the line */

/* A rank's line as it is printed, newline included; its length. */
static int line_of(const zz_exit *x, const char *text, char *line, size_t n) {
  int k = snprintf(line, n, "zigzag: rank %d (host %s): %s\n", x->rank, x->hosts[x->rank], text);
  return k > (int)n - 1 ? (int)n - 1 : k;
}

/* Where a line goes when stderr is gone with the launcher (a pipe to a killed mpirun),
 * so the reason survives somewhere. */
static void log_path_of(const zz_exit *x, char *path, size_t n) {
  const char *tmp = getenv("TMPDIR"), *job = getenv("OMPI_MCA_ess_base_jobid");
  snprintf(path, n, "%s/zigzag-job%s-rank%d.log", tmp && *tmp ? tmp : "/tmp", job ? job : "0", x->rank);
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

void zz_exit_say_once(zz_exit *x, const char *text) {
  int expected = 0; /* the orphan signal may have printed the line already */
  if (!atomic_compare_exchange_strong(&x->printed, &expected, 1)) return;
  char line[ZZ_LINE_LEN], path[256];
  int n = line_of(x, text, line, sizeof line);
  log_path_of(x, path, sizeof path);
  put_line(line, n, path, x->parent > 1 && getppid() != x->parent);
}

/* ================================================================ orphans */

static void launcher_gone_text(const zz_exit *x, char *text, size_t n) {
  snprintf(text, n, "the launcher is gone: its process %d (%s) ended; stopping", (int)x->parent,
           x->parent_kind == 'h'   ? "mpirun"
           : x->parent_kind == 'd' ? "orted"
                                   : "parent");
}

/* The orphan signal's state: the line prepared in advance, for the handler to write
 * with plain system calls. One per process (the tracker watching). */
static struct {
  zz_exit *x;
  char line[ZZ_LINE_LEN], log[256];
  int len;
} g_orphan;

static void on_orphan(int sig) {
  (void)sig;
  zz_exit *x = g_orphan.x;
  int saved = errno, expected = 0;
  if (!x) return;
  /* the kernel re-parents the threads one by one as it signals: this one may still name
   * the launcher for a moment; a parent that stays is one whose forking thread ended */
  for (int ms = 0; getppid() == x->parent; ms++) {
    if (ms == 100) {
      errno = saved;
      return;
    }
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  if (atomic_compare_exchange_strong(&x->printed, &expected, 1)) put_line(g_orphan.line, g_orphan.len, g_orphan.log, 1);
  errno = saved;
}

static void orphan_watch(zz_exit *x) {
  if (x->parent <= 1 || g_orphan.x) return;
  char text[160];
  launcher_gone_text(x, text, sizeof text);
  g_orphan.len = line_of(x, text, g_orphan.line, sizeof g_orphan.line);
  log_path_of(x, g_orphan.log, sizeof g_orphan.log);
  g_orphan.x = x;
  struct sigaction sa = {.sa_handler = on_orphan, .sa_flags = SA_RESTART};
  sigemptyset(&sa.sa_mask);
  if (sigaction(ZZ_ORPHAN_SIGNAL, &sa, NULL) != 0 || prctl(PR_SET_PDEATHSIG, ZZ_ORPHAN_SIGNAL) != 0) return;
  if (getppid() != x->parent) raise(ZZ_ORPHAN_SIGNAL); /* it died before the request */
}

void zz_exit_unwatch(zz_exit *x) {
  if (g_orphan.x != x) return;
  prctl(PR_SET_PDEATHSIG, 0);
  g_orphan.x = NULL;
}

int zz_exit_orphaned(zz_exit *x, char *text, size_t n) {
  if (x->parent <= 1 || atomic_load(&x->launcher_gone) || getppid() == x->parent) return 0;
  atomic_store(&x->launcher_gone, 1);
  launcher_gone_text(x, text, n);
  return 1;
}

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

void zz_exit_init(zz_exit *x, MPI_Comm world, int rank, int size, const char (*hosts)[ZZ_HOST_LEN], double grace) {
  x->world = world; /* x is zeroed: its atomics start at 0 */
  x->rank = rank;
  x->size = size;
  x->hosts = hosts;
  x->grace = grace;
  x->parent = size > 1 ? getppid() : 0; /* alone: no launcher to lose */
  x->parent_kind = parent_kind(x->parent);
  /* a rank whose launcher died must live to say why, not die writing to its stderr */
  struct sigaction old_pipe;
  if (sigaction(SIGPIPE, NULL, &old_pipe) == 0 && old_pipe.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  orphan_watch(x);
}

void zz_exit_lost(zz_exit *x, int p) {
  atomic_fetch_add(&x->nlost, 1);
  if (strcmp(x->hosts[p], x->hosts[x->rank]) != 0) atomic_store(&x->host_lost, 1);
}

/* ================================================================ the exit */

static void *abort_watchdog(void *arg) {
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

void zz_exit_end_head(zz_exit *x) {
  if (x->parent_kind != 'h' || x->parent <= 1 || atomic_load(&x->launcher_gone) || !atomic_load(&x->host_lost) ||
      atomic_exchange(&x->head_ended, 1))
    return;
  pid_t head = x->parent;
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

static void leave(zz_exit *x) {
  zz_launcher_clean_shm();
  if (atomic_load(&x->launcher_gone) || x->parent <= 1) return;
  if (x->parent_kind == 'd' && x->size > 1 && atomic_load(&x->nlost) == x->size - 1) kill(x->parent, SIGTERM);
  zz_exit_end_head(x);
}

void zz_exit_die(zz_exit *x, int heard_from, double stop_time) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&x->exiting, &expected, 1)) {
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
  if (heard_from >= 0) {
    double left = stop_time + x->grace - zz_now();
    if (left > 0) {
      struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
      nanosleep(&ts, NULL);
    }
    leave(x);
    _exit(1);
  }
  leave(x);
  if (atomic_load(&x->launcher_gone)) _exit(1); /* nobody left to abort the job through */
  static double wait_s = ZZ_ABORT_WAIT_S;
  pthread_t t;
  if (pthread_create(&t, NULL, abort_watchdog, &wait_s) != 0) _exit(1);
  MPI_Abort(x->world, 1);
  _exit(1);
}
