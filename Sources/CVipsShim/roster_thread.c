#define _GNU_SOURCE
#include "roster_thread.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int roster_thread_setup(const char *name, int niceness) {
  char short_name[16];
  strncpy(short_name, name, sizeof short_name - 1);
  short_name[sizeof short_name - 1] = 0;
  pthread_setname_np(pthread_self(), short_name);
  if (niceness == 0) return 0;
  if (niceness >= 19) {
    // The background class: runs only when no ordinary thread wants the CPU, and is
    // preempted at once when one wakes (nice alone waits out the scheduler's granularity).
    struct sched_param param = {0};
    if (sched_setscheduler(0, SCHED_IDLE, &param) != 0) return -1;
  }
  return setpriority(PRIO_PROCESS, (id_t)gettid(), niceness);
}

int roster_thread_set_niceness(int niceness) {
  return setpriority(PRIO_PROCESS, (id_t)gettid(), niceness);
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
