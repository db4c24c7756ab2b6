// An LD_PRELOAD shim that fails writes and syncs with EIO on command, for the disk-fault test:
// while the file named by ROSTER_FAULTS_TRIGGER exists, every write(2), pwrite(2), fsync(2) and
// fdatasync(2) on a file under ROSTER_FAULTS_DIR fails with EIO. Without the trigger it only
// passes calls through (one access(2) per call).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static int faulting(int fd) {
  const char *trigger = getenv("ROSTER_FAULTS_TRIGGER");
  const char *dir = getenv("ROSTER_FAULTS_DIR");
  if (!trigger || !dir || access(trigger, F_OK) != 0) return 0;
  char link[64], path[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = 0;
  return strncmp(path, dir, strlen(dir)) == 0;
}

#define NEXT(name) static __typeof__(name) *next; if (!next) next = dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t count) {
  NEXT(write);
  if (faulting(fd)) { errno = EIO; return -1; }
  return next(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
  NEXT(pwrite);
  if (faulting(fd)) { errno = EIO; return -1; }
  return next(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t offset) {
  NEXT(pwrite64);
  if (faulting(fd)) { errno = EIO; return -1; }
  return next(fd, buf, count, offset);
}

int fsync(int fd) {
  NEXT(fsync);
  if (faulting(fd)) { errno = EIO; return -1; }
  return next(fd);
}

int fdatasync(int fd) {
  NEXT(fdatasync);
  if (faulting(fd)) { errno = EIO; return -1; }
  return next(fd);
}
