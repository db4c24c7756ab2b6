#define _GNU_SOURCE
#include "roster_thread.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ROSTER_TSAN 1
#endif
#endif

#ifdef ROSTER_TSAN
// ThreadSanitizer's annotations (sanitizer/tsan_interface.h).
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);

void roster_lock_acquired(const void *lock) { __tsan_acquire((void *)lock); }
void roster_lock_releasing(const void *lock) { __tsan_release((void *)lock); }
#else
void roster_lock_acquired(const void *lock) { (void)lock; }
void roster_lock_releasing(const void *lock) { (void)lock; }
#endif

int roster_thread_setup(const char *name, int niceness) {
  char short_name[16];
  strncpy(short_name, name, sizeof short_name - 1);
  short_name[sizeof short_name - 1] = 0;
  pthread_setname_np(pthread_self(), short_name);
  if (niceness == 0) return 0;
  return roster_thread_set_niceness(niceness);
}

// The kernel's struct sched_attr (sched_setattr(2)); glibc has no wrapper.
struct roster_sched_attr {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
};

// Sets the nice value and the scheduler slice together. Linux 6.12's EEVDF scheduler lets a
// task ask for a shorter slice (sched_runtime, 0.1 to 100 ms; 0 is the default, 3 ms here):
// a running task with a short slice reaches its deadline soon, so a thread that wakes takes
// the CPU from it at once instead of waiting up to a whole default slice. Returns -1 where
// the kernel has no custom slices.
static int roster_set_fair(int niceness, uint64_t slice_ns) {
  struct roster_sched_attr attr = {0};
  attr.size = sizeof attr;
  attr.sched_policy = SCHED_OTHER;
  attr.sched_nice = niceness;
  attr.sched_runtime = slice_ns;
  return (int)syscall(SYS_sched_setattr, 0, &attr, 0);
}

int roster_thread_set_niceness(int niceness) {
  // 19 means the background class: the thread runs only when no ordinary thread wants the
  // CPU, and is preempted at once when one wakes. Between 1 and 18, the ordinary class at
  // that nice value with the shortest slice, so that it too is preempted at once (nice alone
  // lowers its share, not how long a waking thread waits for the CPU). 0 is the default.
  struct sched_param param = {0};
  if (niceness >= 19) {
    if (sched_getscheduler(0) != SCHED_IDLE && sched_setscheduler(0, SCHED_IDLE, &param) != 0) return -1;
    return setpriority(PRIO_PROCESS, (id_t)gettid(), niceness);
  }
  if (roster_set_fair(niceness, niceness > 0 ? 100000 : 0) == 0) return 0;
  if (sched_getscheduler(0) == SCHED_IDLE && sched_setscheduler(0, SCHED_OTHER, &param) != 0) return -1;
  return setpriority(PRIO_PROCESS, (id_t)gettid(), niceness);
}

int roster_thread_use_batch_policy(void) {
  struct sched_param param = {0};
  return sched_setscheduler(0, SCHED_BATCH, &param);
}

int roster_thread_niceness(void) {
  errno = 0;
  return getpriority(PRIO_PROCESS, (id_t)gettid());
}

void roster_thread_name(char *name, int size) {
  if (size <= 0) return;
  name[0] = 0;
  pthread_getname_np(pthread_self(), name, (size_t)size);
}

int roster_affinity_cpu_count(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  return CPU_COUNT(&set);
}
