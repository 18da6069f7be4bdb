/* disk_impl.h — the disk tier's file (internal to runtime/). */
#ifndef ZZ_DISK_IMPL_H
#define ZZ_DISK_IMPL_H
#include "zz_base.h"


typedef struct zz_disk {
  int fd;
  bool direct; /* O_DIRECT: page cache bypassed */
  char path[4096];
  size_t size;
  /* traffic, updated by the I/O threads */
  uint64_t read_bytes, write_bytes;
  uint64_t read_ns;
} zz_disk;

/* Creates an unnamed file of `size` bytes under dir (removed from the directory at
 * once, so a killed run leaves nothing behind). */
zz_status zz_disk_open(const char *dir, size_t size, zz_disk *out);
void zz_disk_close(zz_disk *d);
/* Whole transfers; with O_DIRECT, buf, len and off must be multiples of ZZ_DISK_ALIGN. */
zz_status zz_disk_read(zz_disk *d, void *buf, size_t len, size_t off);
zz_status zz_disk_write(zz_disk *d, const void *buf, size_t len, size_t off);

#endif
