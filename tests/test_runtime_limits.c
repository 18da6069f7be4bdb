/*
 * test_runtime_limits.c — zz_limits_read over fake cgroup trees: v1 (with a
 * parent's lower limit, a combined cpu,cpuacct hierarchy), v2, a container's
 * mount that shows its own group at the mount point, no limits, and a file that
 * is not a number.
 */
#include <CUnit/CUnit.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "zz_engine.h" /* zz_disk_measure */
#include "zz_limits.h"
#include "zz_tests.h"

/* Writes text to root/rel, making the directories on the way. */
static void zz_put(const char *root, const char *rel, const char *text) {
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *s = path + strlen(root) + 1; (s = strchr(s, '/')); s++) {
    *s = '\0';
    CU_ASSERT_FATAL(mkdir(path, 0755) == 0 || errno == EEXIST);
    *s = '/';
  }
  CU_ASSERT_FATAL(zz_test_write_file(path, text, strlen(text)) == 0);
}

/* A host of 8 CPUs and 16 GiB under root. */
static void zz_host(const char *root) {
  zz_put(root, "proc/meminfo", "MemTotal:       16777216 kB\nMemFree:        1 kB\n");
  zz_put(root, "sys/devices/system/cpu/online", "0-7\n");
}

static const char *zz_v1_mountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:1 - cgroup cgroup rw,cpu,cpuacct\n"
    "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

/* A cluster machine as bench/cluster.sh makes it: 0.4 CPU, CPU 3, 2 GiB in its
 * own group, and a parent group limited to 1 GiB, which binds it too. */
static void test_limits_v1(void) {
  char root[512];
  snprintf(root, sizeof root, "%s", zz_test_tmpdir());
  zz_host(root);
  zz_put(root, "proc/self/mountinfo", zz_v1_mountinfo);
  zz_put(root, "proc/self/cgroup", "5:memory:/zz/m0\n4:cpuset:/zz/m0\n2:cpu,cpuacct:/zz/m0\n0::/\n");
  zz_put(root, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  zz_put(root, "sys/fs/cgroup/cpu,cpuacct/zz/cpu.cfs_quota_us", "-1\n");
  zz_put(root, "sys/fs/cgroup/cpu,cpuacct/zz/m0/cpu.cfs_quota_us", "40000\n");
  zz_put(root, "sys/fs/cgroup/cpu,cpuacct/zz/m0/cpu.cfs_period_us", "100000\n");
  zz_put(root, "sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-7\n");
  zz_put(root, "sys/fs/cgroup/cpuset/zz/m0/cpuset.effective_cpus", "3\n");
  zz_put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  zz_put(root, "sys/fs/cgroup/memory/zz/memory.limit_in_bytes", "1073741824\n");
  zz_put(root, "sys/fs/cgroup/memory/zz/m0/memory.limit_in_bytes", "2147483648\n");
  zz_limits l;
  CU_ASSERT_EQUAL_FATAL(zz_limits_read(root, &l), ZZ_OK);
  CU_ASSERT_EQUAL(l.version, 1);
  CU_ASSERT_EQUAL(l.host_cpus, 8);
  CU_ASSERT_EQUAL(l.host_mem, (size_t)16 << 30);
  CU_ASSERT_DOUBLE_EQUAL(l.quota_cores, 0.4, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(l.period_s, 0.1, 1e-12);
  CU_ASSERT_STRING_EQUAL(l.cpuset, "3");
  CU_ASSERT_EQUAL(l.cpuset_cpus, 1);
  CU_ASSERT_EQUAL(l.mem_limit, (size_t)1 << 30);
  CU_ASSERT_EQUAL(l.cores, 1);
  CU_ASSERT_DOUBLE_EQUAL(l.cpu, 0.4, 1e-12);
  CU_ASSERT_EQUAL(l.mem, (size_t)896 << 20); /* an eighth kept for what plans do not count */
  char buf[256];
  zz_limits_str(&l, buf, sizeof buf);
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "cpuset 3 (1 CPU of 8)"));
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "quota 0.40 CPU per 100 ms"));
  CU_ASSERT_PTR_NOT_NULL(strstr(buf, "memory 896.00 MiB (limit 1.00 GiB) of 16.00 GiB"));
}

/* cgroup v2: cpu.max 1.5 CPUs over a cpuset of 4 (so 2 threads), memory.max from
 * the parent. */
static void test_limits_v2(void) {
  char root[512];
  snprintf(root, sizeof root, "%s", zz_test_tmpdir());
  zz_host(root);
  zz_put(root, "proc/self/mountinfo", "30 23 0:27 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
  zz_put(root, "proc/self/cgroup", "0::/box/job\n");
  zz_put(root, "sys/fs/cgroup/cpu.max", "max 100000\n");
  zz_put(root, "sys/fs/cgroup/box/cpu.max", "max 100000\n");
  zz_put(root, "sys/fs/cgroup/box/job/cpu.max", "150000 100000\n");
  zz_put(root, "sys/fs/cgroup/box/job/cpuset.cpus.effective", "0-1,4-5\n");
  zz_put(root, "sys/fs/cgroup/box/memory.max", "3221225472\n");
  zz_put(root, "sys/fs/cgroup/box/job/memory.max", "max\n");
  zz_limits l;
  CU_ASSERT_EQUAL_FATAL(zz_limits_read(root, &l), ZZ_OK);
  CU_ASSERT_EQUAL(l.version, 2);
  CU_ASSERT_DOUBLE_EQUAL(l.quota_cores, 1.5, 1e-12);
  CU_ASSERT_EQUAL(l.cpuset_cpus, 4);
  CU_ASSERT_EQUAL(l.cores, 2);
  CU_ASSERT_DOUBLE_EQUAL(l.cpu, 1.5, 1e-12);
  CU_ASSERT_EQUAL(l.mem, ((size_t)3 << 30) - ((size_t)384 << 20));
}

/* A container without a cgroup namespace: /proc/self/cgroup names /docker/abc,
 * and the mount shows that group at the mount point (mountinfo's root). */
static void test_limits_container(void) {
  char root[512];
  snprintf(root, sizeof root, "%s", zz_test_tmpdir());
  zz_host(root);
  zz_put(root, "proc/self/mountinfo",
         "40 30 0:29 /docker/abc /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
         "41 30 0:32 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
  zz_put(root, "proc/self/cgroup", "5:memory:/docker/abc\n2:cpu:/docker/abc\n");
  zz_put(root, "sys/fs/cgroup/cpu/cpu.cfs_quota_us", "250000\n");
  zz_put(root, "sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
  zz_put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "536870912\n");
  zz_limits l;
  CU_ASSERT_EQUAL_FATAL(zz_limits_read(root, &l), ZZ_OK);
  CU_ASSERT_DOUBLE_EQUAL(l.quota_cores, 2.5, 1e-12);
  CU_ASSERT_EQUAL(l.cores, 3);
  CU_ASSERT_EQUAL(l.cpuset_cpus, 0);
  CU_ASSERT_EQUAL(l.mem, (size_t)448 << 20); /* at least 64 MiB kept */
}

/* No limits anywhere: the host's figures; a garbled limit file is refused naming it. */
static void test_limits_none_and_bad(void) {
  char root[512];
  snprintf(root, sizeof root, "%s", zz_test_tmpdir());
  zz_host(root);
  zz_put(root, "proc/self/mountinfo", zz_v1_mountinfo);
  zz_put(root, "proc/self/cgroup", "5:memory:/\n4:cpuset:/\n2:cpu,cpuacct:/\n");
  zz_put(root, "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  zz_put(root, "sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-7\n");
  zz_put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  zz_limits l;
  CU_ASSERT_EQUAL_FATAL(zz_limits_read(root, &l), ZZ_OK);
  CU_ASSERT_EQUAL(l.cores, 8);
  CU_ASSERT_DOUBLE_EQUAL(l.cpu, 8, 1e-12);
  CU_ASSERT_EQUAL(l.quota_cores, 0);
  CU_ASSERT_EQUAL(l.mem, (size_t)16 << 30);
  char buf[256];
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_limits_str(&l, buf, sizeof buf), "no cgroup limits (8 CPUs"));
  zz_put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "lots\n");
  CU_ASSERT_EQUAL(zz_limits_read(root, &l), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "memory.limit_in_bytes"));
  zz_error_clear();
  zz_put(root, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  zz_put(root, "sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-x\n");
  CU_ASSERT_EQUAL(zz_limits_read(root, &l), ZZ_ERR_FORMAT);
  CU_ASSERT_PTR_NOT_NULL(strstr(zz_error_message(), "not a CPU list"));
  zz_error_clear();
}

/* This process: whatever its limits, what the defaults use is within the host's. */
static void test_limits_here(void) {
  const zz_limits *l = zz_limits_here();
  CU_ASSERT(l->cores >= 1 && l->cores <= l->host_cpus);
  CU_ASSERT(l->cpu > 0 && l->cpu <= l->cores);
  CU_ASSERT(l->mem > 0 && l->mem <= l->host_mem);
  CU_ASSERT_EQUAL(zz_host_memory_bytes(), l->mem);
}

/* The disk measure's pass beside work (what profile records as
 * disk_read_busy_bytes_per_s): the work runs during the pass, on its own
 * thread, and its failure is the measure's. */
typedef struct {
  int calls, fail_at;
  volatile double sink;
} zz_busy_count;
static zz_status zz_busy_spin(void *arg) {
  zz_busy_count *b = arg;
  if (b->fail_at && b->calls + 1 >= b->fail_at) return zz_error(ZZ_ERR_IO, "busy: made to fail");
  double x = 1;
  for (int i = 0; i < 100000; i++) x = x * 1.0000001 + 1e-9;
  b->sink = x;
  b->calls++;
  return ZZ_OK;
}
static void test_disk_measure_busy(void) {
  const char *dir = getenv("TMPDIR");
  if (!dir || !*dir) dir = "/tmp";
  const size_t MiB = (size_t)1 << 20, sizes[] = {1 * MiB, 3 * MiB};
  zz_busy_count b = {0};
  zz_disk_probe p = {.bytes = 16 * MiB, .chunk = 4 * MiB};
  zz_disk_rates r = {0};
  CU_ASSERT_EQUAL_FATAL(zz_disk_measure(dir, &p, &r), ZZ_OK);
  CU_ASSERT(r.read_bw > 0 && r.write_bw > 0);
  CU_ASSERT_EQUAL(r.read_busy_bw[0], 0); /* no work: no such pass */
  p.busy = zz_busy_spin, p.busy_arg = &b, p.busy_bytes = 8 * MiB + 1000, /* cut to whole blocks */ p.sizes = sizes,
  p.n_sizes = 2;
  CU_ASSERT_EQUAL_FATAL(zz_disk_measure(dir, &p, &r), ZZ_OK);
  CU_ASSERT(r.read_busy_bw[0] > 0 && r.read_busy_bw[1] > 0); /* one rate per size */
  CU_ASSERT_EQUAL(r.read_busy_bw[2], 0);
  CU_ASSERT(b.calls > 0);            /* at least once however late its thread starts */
  b = (zz_busy_count){.fail_at = 1}; /* its first call fails: whatever the timing, the measure does */
  CU_ASSERT_NOT_EQUAL(zz_disk_measure(dir, &p, &r), ZZ_OK);
  CU_ASSERT(strstr(zz_error_message(), "made to fail") != NULL);
  zz_error_clear();
  p.n_sizes = 99; /* more sizes than it takes: refused, not overrun */
  CU_ASSERT_NOT_EQUAL(zz_disk_measure(dir, &p, &r), ZZ_OK);
  CU_ASSERT(strstr(zz_error_message(), "read sizes") != NULL);
  zz_error_clear();
}

void zz_test_limits_register(void) {
  CU_pSuite s = CU_add_suite("limits", NULL, NULL);
  CU_add_test(s, "cgroup v1: quota, cpuset, a parent's lower memory limit", test_limits_v1);
  CU_add_test(s, "cgroup v2: cpu.max, cpuset.cpus.effective, memory.max", test_limits_v2);
  CU_add_test(s, "a container's own group at the mount point", test_limits_container);
  CU_add_test(s, "no limits; a garbled file refused naming it", test_limits_none_and_bad);
  CU_add_test(s, "this process", test_limits_here);
  CU_add_test(s, "disk measure: reads beside work on a thread of its own", test_disk_measure_busy);
}
