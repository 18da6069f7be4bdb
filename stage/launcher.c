/*
 * launcher.c — what a rank knows from its launcher before and around MPI: its rank and
 * job from the environment, a watchdog on MPI_Init_thread, and the files Open MPI
 * leaves in /dev/shm when a job is cut short.
 *
 * MPI_Init_thread cannot be timed out from inside MPI: when one rank never arrives
 * (stopped or killed right after mpirun started it, or its host unreachable), every
 * other rank waits in the start-up fence forever. So each rank starts a watchdog
 * thread first. Ranks of one machine also meet in a directory of this job in /dev/shm
 * (one file per rank: its pid), so a watchdog that fires can name the rank that never
 * arrived, or that arrived and is stopped or dead; ranks on other machines cannot be
 * seen from here and the line says so. The watchdog prints
 *   zigzag: rank R (host H): MPI_Init_thread did not complete within 5.0 s: rank 2 never
 *   arrived (stopped, killed or unreachable before MPI started)
 * and exits non-zero, which makes the launcher end the rest of the job. The clock
 * restarts whenever a rank of this machine arrives, and a rank not arrived whose
 * process is there and running (a sibling: its launcher started it here, its
 * environment names its rank) is starting, not missing: a slow start on a loaded
 * machine is not taken for a missing rank.
 *
 * Open MPI's shared-memory transport (btl vader) keeps one file per rank,
 * <backing dir>/vader_segment.<host>.<uid>.<job id in hex>.<local rank>, which the
 * launcher removes at the job's end; when the launcher itself dies (kill -9 of
 * mpirun, a daemon cut off) nobody does. zz_launcher_clean_shm removes this job's on
 * this machine; the fault path calls it just before the process ends.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launcher_impl.h"

/* ================================================================ the job */

double zz_launcher_startup_s(double peer_timeout) { return peer_timeout * 4 + 10; }

static int env_int(const char *const *names, int fallback) {
  for (; *names; names++) {
    const char *v = getenv(*names);
    if (v && *v) return atoi(v);
  }
  return fallback;
}

int zz_launcher_rank(void) {
  static const char *const n[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", NULL};
  return env_int(n, -1);
}

static int launcher_size(void) {
  static const char *const n[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", NULL};
  return env_int(n, 1);
}

static int launcher_local_size(void) {
  static const char *const n[] = {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", NULL};
  return env_int(n, -1);
}

/* The job's id as Open MPI names it (decimal), or PMIx's namespace; "" when unknown. */
static const char *launcher_job(void) {
  const char *v = getenv("OMPI_MCA_ess_base_jobid");
  if (!v || !*v) v = getenv("PMIX_NAMESPACE");
  return v ? v : "";
}

/* ================================================================ the arrival directory */

/* Under Open MPI <session>/zigzag-init.<job>, in the job family's session
 * directory (OMPI_MCA_orte_jobfam_session_dir), which mpirun (or the host's
 * orted) removes with everything in it when the job ends, however its ranks
 * ended: a rank that resumes from SIGSTOP when the launcher tears the job down
 * can write its arrival just before the launcher's SIGKILL, which no handler
 * sees, and in /dev/shm that file stayed (4 runs in 12 of stage_init-stop under
 * ASan on a loaded machine). Else /dev/shm/zigzag-init.<uid>.<job>; "" when the
 * job has no id (not under a launcher). */
static void arrival_dir(char *out, size_t n) {
  const char *job = launcher_job();
  out[0] = '\0';
  if (!*job) return;
  char safe[64];
  size_t k = 0;
  for (const char *c = job; *c && k + 1 < sizeof safe; c++)
    safe[k++] = (*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ? *c : '_';
  safe[k] = '\0';
  struct stat sb;
  const char *session = getenv("OMPI_MCA_orte_jobfam_session_dir");
  if (session && *session && stat(session, &sb) == 0 && S_ISDIR(sb.st_mode)) {
    snprintf(out, n, "%s/zigzag-init.%s", session, safe);
    return;
  }
  const char *base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
  snprintf(out, n, "%s/zigzag-init.%u.%s", base, (unsigned)getuid(), safe);
}

static void arrival_path(const char *dir, int rank, char *out, size_t n) { snprintf(out, n, "%s/rank%d", dir, rank); }

/* A process's state: 1 running (or sleeping), 2 stopped, 3 dead; its parent in
 * *ppid_out (0: unknown). */
static int proc_state(long pid, long *ppid_out) {
  char stat_path[64], buf[512];
  if (ppid_out) *ppid_out = 0;
  snprintf(stat_path, sizeof stat_path, "/proc/%ld/stat", pid);
  FILE *s = fopen(stat_path, "r");
  if (!s) return kill((pid_t)pid, 0) == 0 || errno == EPERM ? 1 : 3;
  size_t len = fread(buf, 1, sizeof buf - 1, s);
  fclose(s);
  buf[len] = '\0';
  const char *close_paren = strrchr(buf, ')'); /* the state follows "(comm) ", the parent after it */
  char st = close_paren && close_paren[1] ? close_paren[2] : 'R';
  if (ppid_out && close_paren && close_paren[1] && close_paren[2]) *ppid_out = strtol(close_paren + 3, NULL, 10);
  if (st == 'T' || st == 't') return 2;
  if (st == 'Z' || st == 'X') return 3;
  return 1;
}

/* A rank's state from its file: 0 no file (never arrived), 1 running, 2 stopped, 3 dead. */
static int arrival_state(const char *dir, int rank, long *pid_out) {
  char path[600];
  arrival_path(dir, rank, path, sizeof path);
  FILE *f = fopen(path, "r");
  *pid_out = 0;
  if (!f) return 0;
  long pid = 0;
  int ok = fscanf(f, "%ld", &pid) == 1;
  fclose(f);
  if (!ok || pid <= 0) return 1;
  *pid_out = pid;
  return proc_state(pid, NULL);
}

/* Newest arrival of this machine (mtime of the directory, touched by each file). */
static double arrival_newest(const char *dir) {
  struct stat sb;
  if (!*dir || stat(dir, &sb) != 0) return 0;
  struct timespec now_rt;
  clock_gettime(CLOCK_REALTIME, &now_rt);
  double age = (double)(now_rt.tv_sec - sb.st_mtim.tv_sec) + 1e-9 * (double)(now_rt.tv_nsec - sb.st_mtim.tv_nsec);
  return zz_now() - (age > 0 ? age : 0);
}

/* ================================================================ the watchdog */

typedef struct init_watch {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
  double timeout, start;
  double backstop; /* seconds after which it fires whatever it sees */
  int rank, size, local_size;
  char dir[512];
  char host[ZZ_HOST_LEN];
} init_watch;

static void say_line(const init_watch *w, const char *text) {
  char line[1024];
  int n = snprintf(line, sizeof line, "zigzag: rank %d (host %s): %s\n", w->rank, w->host, text);
  if (n > (int)sizeof line - 1) n = (int)sizeof line - 1;
  ssize_t wr = write(2, line, (size_t)n);
  (void)wr;
}

/* Appends "r" or "r (pid P)" to a list. */
static void list_add(char *list, size_t n, int r, long pid) {
  size_t len = strlen(list);
  if (pid) snprintf(list + len, n - len, "%s%d (pid %ld)", len ? ", " : "", r, pid);
  else
    snprintf(list + len, n - len, "%s%d", len ? ", " : "", r);
}

/* This rank's siblings: the other processes its launcher (the parent: mpirun, orted,
 * slurmstepd) started on this machine, by the rank their environment names:
 * pid_of[r] for rank r, 0 where none was found (not started here, gone, or started
 * through a wrapper). A rank that has not arrived yet may only be slow to start (a
 * loaded machine can take seconds to load a rank's libraries): its process is there,
 * running. */
static void siblings(const init_watch *w, long *pid_of) {
  static const char *const names[] = {"OMPI_COMM_WORLD_RANK=", "PMIX_RANK=", "PMI_RANK="};
  long parent = (long)getppid(), me = (long)getpid();
  DIR *d = parent > 1 ? opendir("/proc") : NULL;
  if (!d) return;
  struct dirent *e;
  static char env[65536]; /* the watchdog thread's alone */
  while ((e = readdir(d)) != NULL) {
    char *end = NULL;
    long pid = strtol(e->d_name, &end, 10), ppid = 0;
    if (pid <= 0 || *end || pid == me) continue;
    if (proc_state(pid, &ppid) == 3 || ppid != parent) continue;
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/environ", pid);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    size_t n = fread(env, 1, sizeof env - 1, f);
    fclose(f);
    env[n] = '\0';
    int rank = -1;
    for (size_t k = 0; k < sizeof names / sizeof *names && rank < 0; k++)
      for (size_t i = 0; i < n; i += strlen(env + i) + 1)
        if (strncmp(env + i, names[k], strlen(names[k])) == 0) {
          rank = atoi(env + i + strlen(names[k]));
          break;
        }
    if (rank >= 0 && rank < w->size && rank != w->rank) pid_of[rank] = pid;
  }
  closedir(d);
}

/* What this machine can tell about the ranks that did not finish starting; 1 when that
 * is evidence of a missing rank (one stopped or dead, one of this machine that never
 * arrived, or ranks this machine cannot see), 0 when every rank is here and running
 * (a slow start, not a missing rank). */
static int describe_missing(const init_watch *w, char *out, size_t n) {
  char never[256] = "", stopped[256] = "", dead[256] = "", starting[256] = "";
  int nnever = 0, nstopped = 0, ndead = 0, nstarting = 0;
  long *sib = *w->dir ? calloc((size_t)w->size, sizeof *sib) : NULL;
  if (sib) siblings(w, sib);
  for (int r = 0; r < w->size && *w->dir; r++) {
    long pid = 0;
    int st = r == w->rank ? 1 : arrival_state(w->dir, r, &pid);
    if (st == 0 && sib && sib[r] && proc_state(sib[r], NULL) == 1) /* not here yet, but coming */
      list_add(starting, sizeof starting, r, sib[r]), nstarting++;
    else if (st == 0)
      list_add(never, sizeof never, r, 0), nnever++;
    if (st == 2) list_add(stopped, sizeof stopped, r, pid), nstopped++;
    if (st == 3) list_add(dead, sizeof dead, r, pid), ndead++;
  }
  int all_here = w->local_size >= w->size; /* one machine runs every rank (unknown: assume not) */
  free(sib);
  int arrived_here = w->size - nnever - nstarting;
  size_t k = 0;
  out[0] = '\0';
  if (nstopped) k += (size_t)snprintf(out + k, n - k, "%s %s stopped; ", nstopped > 1 ? "ranks" : "rank", stopped);
  if (ndead && k < n) k += (size_t)snprintf(out + k, n - k, "%s %s died; ", ndead > 1 ? "ranks" : "rank", dead);
  if (!*w->dir && k < n)
    k += (size_t)snprintf(out + k, n - k, "a peer never arrived (stopped, killed or unreachable); ");
  else if (nnever && all_here && k < n)
    k += (size_t)snprintf(out + k, n - k,
                          "%s %s never arrived (stopped, killed or unreachable before MPI "
                          "started); ",
                          nnever > 1 ? "ranks" : "rank", never);
  else if (nnever && w->local_size >= 0 && arrived_here >= w->local_size && k < n)
    k += (size_t)snprintf(out + k, n - k,
                          "every rank of this host arrived; ranks %s run elsewhere and one of "
                          "them never arrived (stopped, killed or unreachable); ",
                          never);
  else if (nnever && k < n)
    k += (size_t)snprintf(out + k, n - k,
                          "not seen on this host: ranks %s (ranks of other hosts are not "
                          "visible here); ",
                          never);
  int evidence = k > 0;
  if (nstarting && k < n)
    k += (size_t)snprintf(out + k, n - k, "%s %s still starting; ", nstarting > 1 ? "ranks" : "rank", starting);
  if (k == 0) snprintf(out, n, "every rank arrived and runs, none got through; ");
  size_t len = strlen(out);
  if (len >= 2) out[len - 2] = '\0'; /* the last "; " */
  return evidence;
}

static void arrival_leave(const init_watch *w) {
  if (!*w->dir) return;
  char path[600];
  arrival_path(w->dir, w->rank, path, sizeof path);
  unlink(path);
  rmdir(w->dir); /* the last one out; ENOTEMPTY otherwise */
}

static void *init_watchdog(void *arg) {
  init_watch *w = arg;
  pthread_mutex_lock(&w->mu);
  char why[800] = "";
  double waited = w->timeout;
  for (;;) {
    if (w->done) break;
    /* the clock restarts at each arrival on this machine; after the peer timeout the
     * watchdog fires on evidence of a missing rank, and on a machine where every rank
     * is here and running (only slow: a loaded machine) at the start-up bound */
    double from = arrival_newest(w->dir), now = zz_now();
    if (from < w->start) from = w->start;
    if (now - from >= w->timeout && describe_missing(w, why, sizeof why)) break;
    if (now - w->start >= w->backstop) {
      describe_missing(w, why, sizeof why);
      waited = w->backstop;
      break;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 250000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&w->cv, &w->mu, &ts);
  }
  int done = w->done;
  pthread_mutex_unlock(&w->mu);
  if (done) return NULL;
  char text[1000];
  snprintf(text, sizeof text, "MPI_Init_thread did not complete within %.1f s: %s", waited, why);
  say_line(w, text);
  /* this rank's arrival goes, and those of ranks that can no longer remove their own */
  for (int r = 0; r < w->size && *w->dir; r++) {
    long pid = 0;
    if (r != w->rank && arrival_state(w->dir, r, &pid) >= 2) {
      char path[600];
      arrival_path(w->dir, r, path, sizeof path);
      unlink(path);
    }
  }
  arrival_leave(w);
  _exit(1); /* non-zero: the launcher ends the others */
  return NULL;
}

/* A rank the launcher ends while it waits in MPI_Init_thread (SIGTERM after another
 * rank's watchdog fired) removes its arrival first; only async-signal-safe calls. */
#define ZZ_LEAVE_SIGNALS 3
static const int g_leave_signals[ZZ_LEAVE_SIGNALS] = {SIGTERM, SIGINT, SIGHUP};
/* The handler's state: what it removes, and the actions it replaced (put back after
 * init). One per process, set before the handler is installed. */
static struct {
  char file[600], dir[512];
  struct sigaction old[ZZ_LEAVE_SIGNALS];
} g_leave;

static void leave_on_signal(int sig) {
  unlink(g_leave.file);
  rmdir(g_leave.dir);
  signal(sig, SIG_DFL);
  raise(sig);
}

zz_status zz_stage_mpi_init(double timeout_s, int *provided_out) {
  static init_watch w; /* the thread reads it until it is joined or exits the process */
  memset(&w, 0, sizeof w);
  pthread_mutex_init(&w.mu, NULL);
  pthread_cond_init(&w.cv, NULL);
  w.timeout = timeout_s > 0 ? timeout_s : 5.0;
  w.backstop = zz_launcher_startup_s(w.timeout);
  w.start = zz_now();
  w.rank = zz_launcher_rank();
  w.size = launcher_size();
  w.local_size = launcher_local_size();
  if (gethostname(w.host, sizeof w.host - 1) != 0) snprintf(w.host, sizeof w.host, "unknown");
  arrival_dir(w.dir, sizeof w.dir);
  /* the launcher's SIGTERM may come at any point (a rank resumed from SIGSTOP gets
   * SIGCONT then SIGTERM): held back until the handler that removes the arrival is in
   * place, so no file or directory is ever left without someone to remove it */
  sigset_t leave_set, old_set;
  sigemptyset(&leave_set);
  for (int i = 0; i < ZZ_LEAVE_SIGNALS; i++) sigaddset(&leave_set, g_leave_signals[i]);
  pthread_sigmask(SIG_BLOCK, &leave_set, &old_set);
  if (*w.dir && w.rank >= 0) {
    if (mkdir(w.dir, 0700) != 0 && errno != EEXIST) w.dir[0] = '\0';
    char path[600];
    arrival_path(w.dir, w.rank, path, sizeof path);
    FILE *f = *w.dir ? fopen(path, "w") : NULL;
    if (f) {
      fprintf(f, "%ld\n", (long)getpid());
      fclose(f);
    }
  } else {
    w.dir[0] = '\0';
  }
  int trapped = *w.dir != '\0';
  if (trapped) {
    snprintf(g_leave.dir, sizeof g_leave.dir, "%s", w.dir);
    arrival_path(w.dir, w.rank, g_leave.file, sizeof g_leave.file);
    struct sigaction sa = {.sa_handler = leave_on_signal};
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < ZZ_LEAVE_SIGNALS; i++) sigaction(g_leave_signals[i], &sa, &g_leave.old[i]);
  }
  pthread_sigmask(SIG_SETMASK, &old_set, NULL);
  pthread_t t;
  int watching = w.rank >= 0 && w.size > 1 && pthread_create(&t, NULL, init_watchdog, &w) == 0;
  int provided = 0;
  int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided);
  if (watching) {
    pthread_mutex_lock(&w.mu);
    w.done = 1;
    pthread_cond_signal(&w.cv);
    pthread_mutex_unlock(&w.mu);
    pthread_join(t, NULL);
  }
  /* the arrival goes before the handler that would remove it, signals held between */
  pthread_sigmask(SIG_BLOCK, &leave_set, &old_set);
  arrival_leave(&w);
  if (trapped) /* back to what was there, unless MPI put its own handler in meanwhile */
    for (int i = 0; i < ZZ_LEAVE_SIGNALS; i++) {
      struct sigaction cur;
      if (sigaction(g_leave_signals[i], NULL, &cur) == 0 && cur.sa_handler == leave_on_signal)
        sigaction(g_leave_signals[i], &g_leave.old[i], NULL);
    }
  pthread_sigmask(SIG_SETMASK, &old_set, NULL);
  if (rc != MPI_SUCCESS) return zz_error(ZZ_ERR_MPI, "rank %d (host %s): MPI_Init_thread failed", w.rank, w.host);
  if (provided_out) *provided_out = provided;
  return ZZ_OK;
}

/* ================================================================ /dev/shm */

void zz_launcher_clean_shm(void) {
  const char *job = getenv("OMPI_MCA_ess_base_jobid");
  if (!job || !*job) return;
  const char *dir = getenv("OMPI_MCA_btl_vader_backing_directory");
  if (!dir || !*dir) dir = "/dev/shm";
  /* the file name's tail: .<uid>.<job id in hex>.<local rank> */
  char tail[64];
  int n = snprintf(tail, sizeof tail, ".%u.%lx.", (unsigned)getuid(), strtoul(job, NULL, 10));
  char host[64] = {0};
  if (gethostname(host, sizeof host - 1) != 0) return;
  char *dot = strchr(host, '.'); /* Open MPI names the host without its domain */
  if (dot) *dot = '\0';
  char head[96];
  int h = snprintf(head, sizeof head, "vader_segment.%s", host);
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    const char *name = e->d_name;
    if (strncmp(name, head, (size_t)h) != 0 || strncmp(name + h, tail, (size_t)n) != 0) continue;
    const char *r = name + h + n;
    if (!*r || strspn(r, "0123456789") != strlen(r)) continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
  }
  closedir(d);
}
