/*
 * disk.c — the disk tier: one file under --offload-dir opened with O_DIRECT so
 * reads and writes bypass the page cache (the point of a disk tier is that RAM is
 * full). Filesystems without O_DIRECT (tmpfs) fall back to buffered I/O plus
 * POSIX_FADV_DONTNEED, said once on stderr. The I/O threads of the schedule call
 * pread/pwrite here, so transfers run beside compute.
 */
#define _GNU_SOURCE 1 /* O_DIRECT */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "disk_impl.h"
#include "zz_engine.h" /* zz_disk_measure, zz_disk_free_bytes */

size_t zz_disk_free_bytes(const char *dir) {
  struct statvfs v;
  if (statvfs(dir, &v) != 0) return 0;
  return (size_t)v.f_bavail * v.f_frsize;
}

zz_status zz_disk_open(const char *dir, size_t size, zz_disk *out) {
  zz_disk d = {.fd = -1};
  snprintf(d.path, sizeof d.path, "%s/zigzag-offload-XXXXXX", dir);
  int fd = mkstemp(d.path);
  if (fd < 0) return zz_error(ZZ_ERR_IO, "--offload-dir %s: cannot create a file: %s", dir, strerror(errno));
  unlink(d.path);
  /* the file is private (unique name, unlinked); the lock says so to any other
   * process that reaches it (through /proc) and guards a future named file */
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    zz_status st = zz_error(ZZ_ERR_IO, "--offload-dir %s: offload file %s is locked by another job: %s", dir, d.path,
                            strerror(errno));
    close(fd);
    return st;
  }
  int fl = fcntl(fd, F_GETFL);
  d.direct = fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0;
  if (!d.direct) {
    static int said;
    if (!said++)
      fprintf(stderr, "zigzag: %s does not support O_DIRECT; disk tier uses the page cache with DONTNEED\n", dir);
  }
  d.fd = fd;
  /* reserve the blocks now: a sparse file would pass the capacity check and then
   * run out of space mid-block when another job shares the directory */
  /* fallocate, not posix_fallocate: glibc's emulation would write every byte */
  int fa = size && fallocate(d.fd, 0, 0, (off_t)size) != 0 ? errno : 0;
  if (fa != 0 && fa != EOPNOTSUPP && fa != EINVAL) {
    zz_status st = zz_error(ZZ_ERR_IO, "--offload-dir %s: cannot reserve %zu bytes for the offload file: %s", dir, size,
                            strerror(fa));
    close(d.fd);
    return st;
  }
  if (size && fa != 0 && ftruncate(d.fd, (off_t)size) != 0) {
    zz_status st = zz_error(ZZ_ERR_IO, "--offload-dir %s: cannot size the offload file to %zu bytes: %s", dir, size,
                            strerror(errno));
    close(d.fd);
    return st;
  }
  d.size = size;
  *out = d;
  return ZZ_OK;
}

void zz_disk_close(zz_disk *d) {
  if (d && d->fd >= 0) close(d->fd);
  if (d) d->fd = -1;
}

/* The whole of len bytes at off, read (buf) or written (wbuf), retried over
 * short transfers and EINTR; then the page cache is told to drop them (a
 * buffered file would otherwise keep offloaded bytes in RAM twice). */
static zz_status zz_disk_io(zz_disk *d, void *buf, const void *wbuf, size_t len, size_t off) {
  size_t done = 0;
  while (done < len) {
    ssize_t r = wbuf ? pwrite(d->fd, (const char *)wbuf + done, len - done, (off_t)(off + done))
                     : pread(d->fd, (char *)buf + done, len - done, (off_t)(off + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      return zz_error(ZZ_ERR_IO, "offload file: %s of %zu bytes at %zu failed: %s", wbuf ? "write" : "read", len,
                      off + done,
                      r < 0  ? strerror(errno)
                      : wbuf ? "no progress"
                             : "end of file");
    done += (size_t)r;
  }
  if (!d->direct) posix_fadvise(d->fd, (off_t)off, (off_t)len, POSIX_FADV_DONTNEED);
  return ZZ_OK;
}

zz_status zz_disk_read(zz_disk *d, void *buf, size_t len, size_t off) {
  double t0 = zz_now();
  ZZ_CHECK(zz_disk_io(d, buf, NULL, len, off));
  __atomic_add_fetch(&d->read_bytes, len, __ATOMIC_RELAXED);
  __atomic_add_fetch(&d->read_ns, (uint64_t)((zz_now() - t0) * 1e9), __ATOMIC_RELAXED);
  return ZZ_OK;
}

zz_status zz_disk_write(zz_disk *d, const void *buf, size_t len, size_t off) {
  ZZ_CHECK(zz_disk_io(d, NULL, buf, len, off));
  __atomic_add_fetch(&d->write_bytes, len, __ATOMIC_RELAXED);
  return ZZ_OK;
}

/* Bytes per second of a pass (a pass under a nanosecond counts as one). */
static double zz_disk_rate(size_t bytes, double secs) { return (double)bytes / (secs > 1e-9 ? secs : 1e-9); }

/* The busy side of a read pass: probe->busy over and over until told to stop. */
typedef struct zz_disk_busy {
  const zz_disk_probe *probe;
  int started;   /* set by the busy thread as it begins (atomic) */
  int stop;      /* set by the reader (atomic) */
  zz_status st;  /* the first failure of busy */
  char msg[512]; /* its message (zz_error's is per thread) */
} zz_disk_busy;

/* The work runs at least once, and the reads wait for it to begin: a loaded
 * machine may start this thread only after a short pass has ended, and a loop
 * that tested stop first would then measure reads beside no work at all (and
 * miss the work's failure: a test once saw the measure succeed that way). */
static void *zz_disk_busy_main(void *arg) {
  zz_disk_busy *b = arg;
  __atomic_store_n(&b->started, 1, __ATOMIC_RELEASE);
  do b->st = b->probe->busy(b->probe->busy_arg);
  while (b->st == ZZ_OK && !__atomic_load_n(&b->stop, __ATOMIC_ACQUIRE));
  if (b->st != ZZ_OK) snprintf(b->msg, sizeof b->msg, "%s", zz_error_message());
  return NULL;
}

/* Reads bytes of d in transfers of size (the last cut at the end); seconds taken. */
static zz_status zz_disk_read_pass(zz_disk *d, void *buf, size_t bytes, size_t size, double *secs) {
  double t0 = zz_now();
  for (size_t off = 0; off < bytes;) {
    size_t len = size < bytes - off ? size : bytes - off;
    ZZ_CHECK(zz_disk_read(d, buf, len, off));
    off += len;
  }
  *secs = zz_now() - t0;
  return ZZ_OK;
}

zz_status zz_disk_measure(const char *dir, const zz_disk_probe *probe, zz_disk_rates *out) {
  size_t chunk = zz_align_up(probe->chunk ? probe->chunk : ((size_t)8 << 20), ZZ_DISK_ALIGN);
  size_t bytes = zz_align_up(probe->bytes < chunk ? chunk : probe->bytes, chunk);
  /* the busy passes' transfer sizes, block aligned; the buffer holds the largest */
  size_t sizes[ZZ_DISK_MAX_SIZES], big = chunk;
  int n_sizes = probe->busy ? probe->n_sizes : 0;
  if (n_sizes < 0 || n_sizes > ZZ_DISK_MAX_SIZES || (n_sizes > 0 && !probe->sizes))
    return zz_error(ZZ_ERR_INVALID_ARG, "disk measure: %d read sizes beside work (want 0 to %d)", n_sizes,
                    ZZ_DISK_MAX_SIZES);
  for (int i = 0; i < n_sizes; i++) {
    sizes[i] = zz_align_up(probe->sizes[i] ? probe->sizes[i] : chunk, ZZ_DISK_ALIGN);
    if (sizes[i] > big) big = sizes[i];
  }
  size_t busy_bytes = zz_align_down(probe->busy_bytes, ZZ_DISK_ALIGN); /* O_DIRECT: whole blocks */
  if (busy_bytes == 0 || busy_bytes > bytes) busy_bytes = bytes;
  void *buf = NULL;
  if (posix_memalign(&buf, ZZ_DISK_ALIGN, big) != 0) return zz_error(ZZ_ERR_NO_MEMORY, "disk measure: out of memory");
  /* bytes like a model's, not a constant a virtual disk could compress or skip */
  uint64_t x = 0x9e3779b97f4a7c15ull, *w = buf;
  for (size_t i = 0; i < chunk / sizeof *w; i++) x ^= x << 13, x ^= x >> 7, x ^= x << 17, w[i] = x;
  zz_disk d;
  zz_status st = zz_disk_open(dir, bytes, &d);
  if (st != ZZ_OK) {
    free(buf);
    return st;
  }
  /* write it all and make it durable (what a store costs), then read it back:
   * with O_DIRECT (or DONTNEED) the reads come from the disk, not the page cache */
  double t0 = zz_now();
  for (size_t off = 0; st == ZZ_OK && off < bytes; off += chunk) {
    w[0] = off; /* every chunk different */
    st = zz_disk_write(&d, buf, chunk, off);
  }
  if (st == ZZ_OK && fdatasync(d.fd) != 0) st = zz_error(ZZ_ERR_IO, "disk measure: fdatasync: %s", strerror(errno));
  double tw = zz_now() - t0;
  if (st == ZZ_OK && !d.direct) posix_fadvise(d.fd, 0, (off_t)bytes, POSIX_FADV_DONTNEED);
  /* read twice and keep the second pass: the engine reads the same file every
   * step, and a first pass right after the sync competes with the write-back a
   * virtual disk's host may still be doing (one machine read 0.9 GB/s on it and
   * 1.2-1.5 GB/s in the engine's steps) */
  double tr = 0, tb[ZZ_DISK_MAX_SIZES] = {0};
  for (int pass = 0; st == ZZ_OK && pass < 2; pass++) st = zz_disk_read_pass(&d, buf, bytes, chunk, &tr);
  /* once more per size beside the work: the reads as the engine issues them
   * during a step */
  zz_disk_busy b = {.probe = probe};
  pthread_t th;
  if (st == ZZ_OK && n_sizes > 0) {
    int e = pthread_create(&th, NULL, zz_disk_busy_main, &b);
    if (e != 0) st = zz_error(ZZ_ERR_IO, "disk measure: cannot start the busy thread: %s", strerror(e));
    if (st == ZZ_OK) {
      while (!__atomic_load_n(&b.started, __ATOMIC_ACQUIRE)) sched_yield();
      for (int i = 0; st == ZZ_OK && i < n_sizes; i++) st = zz_disk_read_pass(&d, buf, busy_bytes, sizes[i], &tb[i]);
      __atomic_store_n(&b.stop, 1, __ATOMIC_RELEASE);
      pthread_join(th, NULL);
      if (st == ZZ_OK && b.st != ZZ_OK) st = zz_error(b.st, "disk measure: the work beside the reads: %s", b.msg);
    }
  }
  zz_disk_close(&d);
  free(buf);
  if (st != ZZ_OK) return st;
  memset(out, 0, sizeof *out);
  out->write_bw = zz_disk_rate(bytes, tw);
  out->read_bw = zz_disk_rate(bytes, tr);
  for (int i = 0; i < n_sizes; i++) out->read_busy_bw[i] = zz_disk_rate(busy_bytes, tb[i]);
  return ZZ_OK;
}
