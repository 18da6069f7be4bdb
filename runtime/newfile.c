/*
 * newfile.c — writing a file that replaces another without ever losing it or
 * writing through a link: the new content goes into a file created in the same
 * directory (O_TMPFILE: unnamed, so a kill leaves nothing behind; where the
 * filesystem lacks it, O_EXCL under a hidden name, which never follows a link),
 * and only a rename puts it at the path. Until then the old file is whole; after
 * it, the new one is. A symbolic link at the path is itself replaced; its target
 * is never opened.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "zz_jobs.h"

static void zz_newfile_dir(const char *path, char *dir, size_t len) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", path);
  snprintf(dir, len, "%s", dirname(tmp));
}

static mode_t zz_umask(void) {
  /* umask can only be read by setting it; done once, before any thread writes files */
  static int cached = -1;
  if (cached < 0) {
    mode_t m = umask(022);
    umask(m);
    cached = (int)m;
  }
  return (mode_t)cached;
}

zz_status zz_newfile_create(const char *path, zz_newfile *nf) {
  memset(nf, 0, sizeof *nf);
  nf->fd = -1;
  if (strlen(path) + 32 >= sizeof nf->path) return zz_error(ZZ_ERR_INVALID_ARG, "%.64s...: path too long", path);
  snprintf(nf->path, sizeof nf->path, "%s", path);
  char dir[4096];
  zz_newfile_dir(path, dir, sizeof dir);
  int fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
  if (fd < 0) { /* no O_TMPFILE here: a hidden name beside the path, made with O_EXCL */
    char base[4096];
    snprintf(base, sizeof base, "%s", path);
    if (snprintf(nf->tmp, sizeof nf->tmp, "%s/.%s.zz-XXXXXX", dir, basename(base)) >= (int)sizeof nf->tmp)
      return zz_error(ZZ_ERR_INVALID_ARG, "%.64s...: path too long", path);
    fd = mkostemp(nf->tmp, O_CLOEXEC);
    if (fd < 0) {
      zz_status st = zz_error(ZZ_ERR_IO, "%s: cannot create a new file in %s: %s", path, dir, strerror(errno));
      nf->tmp[0] = '\0';
      return st;
    }
    fchmod(fd, 0666 & ~zz_umask()); /* mkostemp makes 0600; a new file gets the usual mode */
  }
  nf->fd = fd;
  return ZZ_OK;
}

zz_status zz_newfile_publish(zz_newfile *nf) {
  if (nf->fd < 0) return zz_error(ZZ_ERR_INVALID_ARG, "%s: no new file to publish", nf->path);
  if (fsync(nf->fd) != 0) return zz_error(ZZ_ERR_IO, "%s: sync failed: %s", nf->path, strerror(errno));
  if (!nf->tmp[0]) { /* unnamed: a hidden name first (linkat through /proc needs no privilege) */
    char dir[4096], base[4096], proc[64];
    zz_newfile_dir(nf->path, dir, sizeof dir);
    snprintf(base, sizeof base, "%s", nf->path);
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", nf->fd);
    for (int k = 0;; k++) {
      if (snprintf(nf->tmp, sizeof nf->tmp, "%s/.%s.zz-%ld-%d", dir, basename(base), (long)getpid(), k) >=
          (int)sizeof nf->tmp)
        return zz_error(ZZ_ERR_INVALID_ARG, "%.64s...: path too long", nf->path);
      if (linkat(AT_FDCWD, proc, AT_FDCWD, nf->tmp, AT_SYMLINK_FOLLOW) == 0) break;
      if (errno != EEXIST || k > 100) {
        zz_status st = zz_error(ZZ_ERR_IO, "%s: cannot name the new file: %s", nf->path, strerror(errno));
        nf->tmp[0] = '\0';
        return st;
      }
    }
  }
  if (rename(nf->tmp, nf->path) != 0) {
    zz_status st = zz_error(ZZ_ERR_IO, "%s: cannot put the new file in place: %s", nf->path, strerror(errno));
    unlink(nf->tmp);
    nf->tmp[0] = '\0';
    return st;
  }
  nf->tmp[0] = '\0';
  char dir[4096];
  zz_newfile_dir(nf->path, dir, sizeof dir);
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) { /* the rename itself survives a crash */
    fsync(dfd);
    close(dfd);
  }
  return ZZ_OK;
}

void zz_newfile_discard(zz_newfile *nf) {
  if (nf->tmp[0]) unlink(nf->tmp);
  if (nf->fd >= 0) close(nf->fd);
  nf->tmp[0] = '\0';
  nf->fd = -1;
}

zz_status zz_file_replace(const char *path, const void *data, size_t len) {
  zz_newfile nf;
  ZZ_CHECK(zz_newfile_create(path, &nf));
  const char *p = data;
  zz_status st = ZZ_OK;
  while (len > 0) {
    ssize_t w = write(nf.fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      st = zz_error(ZZ_ERR_IO, "%s: write failed: %s", path, w < 0 ? strerror(errno) : "no space");
      break;
    }
    p += w;
    len -= (size_t)w;
  }
  if (st == ZZ_OK) st = zz_newfile_publish(&nf);
  zz_newfile_discard(&nf);
  return st;
}
