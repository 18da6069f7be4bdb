/*
 * limits.c — the CPUs and memory this process may use after its cgroup's limits
 * (zz_limits.h). A limit set on a parent group binds its children too, so each
 * limit is the lowest found from the process's group up to the hierarchy's
 * mount. The group's directory is found as the kernel and container runtimes
 * lay it out: /proc/self/cgroup gives the path inside each hierarchy, and
 * mountinfo where that hierarchy is mounted and which of its directories the
 * mount shows (a container without a cgroup namespace sees its own group at the
 * mount point, not at the path /proc/self/cgroup names).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zz_limits.h"

#define ZZ_LIM_PATH 1024

/* ---------------------------------------------------------------- reading */

/* The first line of path (trailing white space cut) into buf; false if absent. */
static bool zz_lim_line(const char *path, char *buf, size_t len) {
  FILE *f = fopen(path, "r");
  if (!f) return false;
  bool ok = fgets(buf, (int)len, f) != NULL;
  fclose(f);
  if (!ok) buf[0] = '\0';
  size_t n = strlen(buf);
  while (n && isspace((unsigned char)buf[n - 1])) buf[--n] = '\0';
  return true;
}

/* A CPU list ("0-3,8,10-11") counted; -1 if it is not one. "" counts 0. */
static int zz_lim_cpu_count(const char *s) {
  int n = 0;
  while (*s) {
    char *e;
    long a = strtol(s, &e, 10), b = a;
    if (e == s || a < 0) return -1;
    if (*e == '-') {
      const char *t = e + 1;
      b = strtol(t, &e, 10);
      if (e == t || b < a) return -1;
    }
    if (b - a + 1 > 1 << 20) return -1;
    n += (int)(b - a + 1);
    if (*e == ',') e++;
    else if (*e)
      return -1;
    s = e;
  }
  return n;
}

static bool zz_lim_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0;
}

/* A non-negative whole number, or "max" (*none set); anything else refused. */
static zz_status zz_lim_number(const char *path, const char *text, double *out, bool *none) {
  *none = false;
  if (strcmp(text, "max") == 0) {
    *none = true;
    return ZZ_OK;
  }
  char *e;
  errno = 0;
  double v = strtod(text, &e);
  if (e == text || *e || errno || !isfinite(v))
    return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" is not a number", path, text);
  *out = v;
  return ZZ_OK;
}

/* ---------------------------------------------------------------- where the groups are */

/* One hierarchy of this process: the directory of its group (under root), and
 * the mount point, where the walk to the parents stops. */
typedef struct zz_lim_dir {
  bool found;
  char leaf[ZZ_LIM_PATH], top[ZZ_LIM_PATH];
} zz_lim_dir;

/* Whether the comma list `list` holds `word`. */
static bool zz_lim_has(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; p && *p;) {
    const char *c = strchr(p, ',');
    size_t len = c ? (size_t)(c - p) : strlen(p);
    if (len == n && strncmp(p, word, n) == 0) return true;
    p = c ? c + 1 : NULL;
  }
  return false;
}

/* The group of this process in the v1 hierarchy holding controller ctl, or (ctl
 * NULL) in the v2 one. */
static void zz_lim_find(const char *root, const char *ctl, zz_lim_dir *d) {
  char path[ZZ_LIM_PATH], line[2048], cg[ZZ_LIM_PATH] = "";
  bool have_cg = false;
  memset(d, 0, sizeof *d);
  snprintf(path, sizeof path, "%s/proc/self/cgroup", root);
  FILE *f = fopen(path, "r");
  if (!f) return;
  while (fgets(line, sizeof line, f)) { /* "4:memory:/a/b", "2:cpu,cpuacct:/a", "0::/a" */
    line[strcspn(line, "\n")] = '\0';
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2) continue;
    *c1 = *c2 = '\0';
    const char *ctls = c1 + 1;
    bool match = ctl ? zz_lim_has(ctls, ctl) : (strcmp(line, "0") == 0 && *ctls == '\0');
    if (match) {
      snprintf(cg, sizeof cg, "%s", c2 + 1);
      have_cg = true;
      break;
    }
  }
  fclose(f);
  if (!have_cg) return;
  snprintf(path, sizeof path, "%s/proc/self/mountinfo", root);
  if (!(f = fopen(path, "r"))) return;
  /* "36 25 0:31 /mroot /sys/fs/cgroup/memory rw,relatime shared:15 - cgroup cgroup rw,memory" */
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    char *sep = strstr(line, " - ");
    if (!sep) continue;
    *sep = '\0';
    char fstype[32] = "", opts[512] = "", mroot[ZZ_LIM_PATH] = "", mpoint[ZZ_LIM_PATH] = "";
    if (sscanf(sep + 3, "%31s %*s %511s", fstype, opts) < 1) continue;
    if (sscanf(line, "%*s %*s %*s %1023s %1023s", mroot, mpoint) != 2) continue;
    bool want = ctl ? strcmp(fstype, "cgroup") == 0 && zz_lim_has(opts, ctl) : strcmp(fstype, "cgroup2") == 0;
    if (!want) continue;
    /* the group's path below what this mount shows */
    const char *rel = cg;
    size_t rl = strlen(mroot);
    if (strcmp(mroot, "/") != 0 && strncmp(cg, mroot, rl) == 0 && (cg[rl] == '/' || cg[rl] == '\0')) rel = cg + rl;
    snprintf(d->top, sizeof d->top, "%s%s", root, mpoint);
    snprintf(d->leaf, sizeof d->leaf, "%s%s", d->top, strcmp(rel, "/") == 0 ? "" : rel);
    /* a path the mount does not show (a namespace's view): its own group is the mount */
    if (!zz_lim_exists(d->leaf)) snprintf(d->leaf, sizeof d->leaf, "%s", d->top);
    d->found = true;
    break;
  }
  fclose(f);
}

/* The parent of dir in place; false at top (or above it). */
static bool zz_lim_up(char *dir, const char *top) {
  if (strlen(dir) <= strlen(top)) return false;
  char *s = strrchr(dir, '/');
  if (!s || (size_t)(s - dir) < strlen(top)) return false;
  *s = '\0';
  return true;
}

/* ---------------------------------------------------------------- each limit */

/* The lowest CPU quota from d's leaf up, v1 files or v2's cpu.max. */
static zz_status zz_lim_cpu(const zz_lim_dir *d, bool v2, zz_limits *l) {
  char dir[ZZ_LIM_PATH], path[ZZ_LIM_PATH + 32], a[128], b[128];
  snprintf(dir, sizeof dir, "%s", d->leaf);
  do {
    double q = 0, p = 0;
    bool none = true, pnone;
    if (v2) {
      snprintf(path, sizeof path, "%s/cpu.max", dir);
      if (zz_lim_line(path, a, sizeof a)) { /* "max 100000" or "40000 100000" */
        char *sp = strchr(a, ' ');
        if (sp) *sp = '\0';
        ZZ_CHECK(zz_lim_number(path, a, &q, &none));
        p = 100000;
        if (sp) ZZ_CHECK(zz_lim_number(path, sp + 1, &p, &pnone));
      }
    } else {
      snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
      if (zz_lim_line(path, a, sizeof a)) {
        if (strcmp(a, "-1") == 0) {
          none = true;
        } else {
          ZZ_CHECK(zz_lim_number(path, a, &q, &none));
          snprintf(path, sizeof path, "%s/cpu.cfs_period_us", dir);
          p = 100000;
          if (zz_lim_line(path, b, sizeof b)) ZZ_CHECK(zz_lim_number(path, b, &p, &pnone));
        }
      }
    }
    if (!none && q > 0 && p > 0 && (l->quota_cores == 0 || q / p < l->quota_cores)) {
      l->quota_cores = q / p;
      l->period_s = p * 1e-6;
      l->version = v2 ? 2 : 1;
    }
  } while (zz_lim_up(dir, d->top));
  return ZZ_OK;
}

/* The group's CPUs: the effective list at the leaf, else the nearest non-empty
 * configured one going up (an empty cpuset.cpus inherits). */
static zz_status zz_lim_cpuset(const zz_lim_dir *d, bool v2, zz_limits *l) {
  char dir[ZZ_LIM_PATH], path[ZZ_LIM_PATH + 32], a[sizeof l->cpuset];
  snprintf(dir, sizeof dir, "%s", d->leaf);
  const char *names[2][2] = {{"cpuset.effective_cpus", "cpuset.cpus"}, {"cpuset.cpus.effective", "cpuset.cpus"}};
  do {
    for (int i = 0; i < 2; i++) {
      snprintf(path, sizeof path, "%s/%s", dir, names[v2][i]);
      if (!zz_lim_line(path, a, sizeof a) || !*a) continue;
      int n = zz_lim_cpu_count(a);
      if (n < 0) return zz_error(ZZ_ERR_FORMAT, "%s: \"%s\" is not a CPU list", path, a);
      snprintf(l->cpuset, sizeof l->cpuset, "%s", a);
      l->cpuset_cpus = n;
      l->version = v2 ? 2 : 1;
      return ZZ_OK;
    }
  } while (zz_lim_up(dir, d->top));
  return ZZ_OK;
}

/* The lowest memory limit from d's leaf up; v1's "no limit" is a huge number. */
static zz_status zz_lim_mem(const zz_lim_dir *d, bool v2, zz_limits *l) {
  char dir[ZZ_LIM_PATH], path[ZZ_LIM_PATH + 32], a[128];
  snprintf(dir, sizeof dir, "%s", d->leaf);
  do {
    snprintf(path, sizeof path, "%s/%s", dir, v2 ? "memory.max" : "memory.limit_in_bytes");
    double v = 0;
    bool none = true;
    if (zz_lim_line(path, a, sizeof a)) ZZ_CHECK(zz_lim_number(path, a, &v, &none));
    if (!none && v > 0 && v < 0x1p60 && (l->mem_limit == 0 || (size_t)v < l->mem_limit)) {
      l->mem_limit = (size_t)v;
      l->version = v2 ? 2 : 1;
    }
  } while (zz_lim_up(dir, d->top));
  return ZZ_OK;
}

/* ---------------------------------------------------------------- the host */

static void zz_lim_host(const char *root, bool live, zz_limits *l) {
  char path[ZZ_LIM_PATH], a[512];
  snprintf(path, sizeof path, "%s/sys/devices/system/cpu/online", root);
  l->host_cpus = zz_lim_line(path, a, sizeof a) ? zz_lim_cpu_count(a) : -1;
  if (l->host_cpus <= 0) {
    long n = live ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    l->host_cpus = n > 0 ? (int)n : 1;
  }
  l->host_mem = 0;
  snprintf(path, sizeof path, "%s/proc/meminfo", root);
  FILE *f = fopen(path, "r");
  if (f) {
    unsigned long long kb;
    while (fgets(a, sizeof a, f))
      if (sscanf(a, "MemTotal: %llu kB", &kb) == 1) l->host_mem = (size_t)kb * 1024;
    fclose(f);
  }
  if (!l->host_mem) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    l->host_mem = pages > 0 && size > 0 ? (size_t)pages * (size_t)size : (size_t)1 << 34;
  }
}

/* ---------------------------------------------------------------- all */

/* Of a memory limit, what plans may fill: the memory plan counts the engine's
 * buffers, not the program, its libraries, MPI's buffers or the allocator's
 * slack, and the kernel kills the group at the limit, so an eighth of it (at
 * least 64 MiB) is left for those. A plan sized to the whole limit was killed. */
#define ZZ_LIM_SLACK_MIN ((size_t)64 << 20)
static size_t zz_lim_usable(size_t limit) {
  size_t slack = limit / 8 > ZZ_LIM_SLACK_MIN ? limit / 8 : ZZ_LIM_SLACK_MIN;
  return limit > 2 * slack ? limit - slack : limit / 2;
}

/* set as a CPU list ("0-1,4"). */
static void zz_lim_list(const cpu_set_t *set, char *buf, size_t len) {
  size_t off = 0;
  buf[0] = '\0';
  for (int c = 0; c < CPU_SETSIZE && off < len; c++) {
    if (!CPU_ISSET(c, set)) continue;
    int e = c;
    while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, set)) e++;
    int n = e > c ? snprintf(buf + off, len - off, "%s%d-%d", off ? "," : "", c, e)
                  : snprintf(buf + off, len - off, "%s%d", off ? "," : "", c);
    if (n < 0) break;
    off += (size_t)n;
    c = e;
  }
}

zz_status zz_limits_read(const char *root, zz_limits *out) {
  bool live = !root || !*root;
  if (live) root = "";
  zz_limits l;
  memset(&l, 0, sizeof l);
  zz_lim_host(root, live, &l);
  /* each controller from its v1 hierarchy where one is mounted, else from v2 */
  static const char *const ctls[] = {"cpu", "cpuset", "memory"};
  zz_lim_dir v2;
  zz_lim_find(root, NULL, &v2);
  for (int i = 0; i < 3; i++) {
    zz_lim_dir d;
    zz_lim_find(root, ctls[i], &d);
    bool is_v2 = !d.found;
    if (is_v2) d = v2;
    if (!d.found) continue;
    if (i == 0) ZZ_CHECK(zz_lim_cpu(&d, is_v2, &l));
    if (i == 1) ZZ_CHECK(zz_lim_cpuset(&d, is_v2, &l));
    if (i == 2) ZZ_CHECK(zz_lim_mem(&d, is_v2, &l));
  }
  if (live) { /* the affinity mask (taskset, a binding) narrows the cpuset further */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
      int n = CPU_COUNT(&set);
      if (n > 0 && n < l.host_cpus && (l.cpuset_cpus == 0 || n < l.cpuset_cpus)) {
        l.cpuset_cpus = n;
        zz_lim_list(&set, l.cpuset, sizeof l.cpuset);
      }
    }
  }
  int cpus = l.cpuset_cpus > 0 && l.cpuset_cpus < l.host_cpus ? l.cpuset_cpus : l.host_cpus;
  l.cores = cpus;
  l.cpu = cpus;
  if (l.quota_cores > 0) {
    int q = (int)ceil(l.quota_cores - 1e-9);
    if (q < l.cores) l.cores = q < 1 ? 1 : q;
    if (l.quota_cores < l.cpu) l.cpu = l.quota_cores;
  }
  size_t usable = zz_lim_usable(l.mem_limit);
  l.mem = l.mem_limit && usable < l.host_mem ? usable : l.host_mem;
  *out = l;
  return ZZ_OK;
}

static zz_limits zz_lim_here;
static pthread_once_t zz_lim_once = PTHREAD_ONCE_INIT;

static void zz_lim_init(void) {
  if (zz_limits_read(NULL, &zz_lim_here) == ZZ_OK) return;
  /* a cgroup file that cannot be read as one: the host's figures, said once */
  fprintf(stderr, "zigzag: cgroup limits not read (%s): using the host's CPUs and memory\n", zz_error_message());
  zz_error_clear();
  memset(&zz_lim_here, 0, sizeof zz_lim_here);
  zz_lim_host("", true, &zz_lim_here);
  zz_lim_here.cores = zz_lim_here.host_cpus;
  zz_lim_here.cpu = zz_lim_here.host_cpus;
  zz_lim_here.mem = zz_lim_here.host_mem;
}

const zz_limits *zz_limits_here(void) {
  pthread_once(&zz_lim_once, zz_lim_init);
  return &zz_lim_here;
}

const char *zz_limits_str(const zz_limits *l, char *buf, size_t len) {
  char m[32], h[32];
  bool narrow = l->cpuset_cpus > 0 && l->cpuset_cpus < l->host_cpus; /* a cpuset of every CPU limits nothing */
  if (!narrow && l->quota_cores == 0 && l->mem == l->host_mem) {
    snprintf(buf, len, "no cgroup limits (%d CPU%s, %s)", l->host_cpus, l->host_cpus == 1 ? "" : "s",
             zz_format_bytes(l->host_mem, m, sizeof m));
    return buf;
  }
  char cs[192] = "", q[64] = "";
  if (narrow)
    snprintf(cs, sizeof cs, " cpuset %s (%d CPU%s of %d),", *l->cpuset ? l->cpuset : "?", l->cpuset_cpus,
             l->cpuset_cpus == 1 ? "" : "s", l->host_cpus);
  if (l->quota_cores > 0) snprintf(q, sizeof q, " quota %.2f CPU per %.0f ms,", l->quota_cores, l->period_s * 1e3);
  char lim[96] = "";
  if (l->mem_limit && l->mem < l->host_mem)
    snprintf(lim, sizeof lim, " (limit %s)", zz_format_bytes(l->mem_limit, (char[32]){0}, 32));
  snprintf(buf, len, "cgroup v%d:%s%s memory %s%s of %s", l->version ? l->version : 1, cs, q,
           zz_format_bytes(l->mem, m, sizeof m), lim, zz_format_bytes(l->host_mem, h, sizeof h));
  return buf;
}
