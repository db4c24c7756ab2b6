// Thread naming and per-thread priority, which need _GNU_SOURCE (gettid, pthread_setname_np)
// that Swift's Glibc module does not expose; and ThreadSanitizer's view of `RosterLocks.Locked`,
// which only C compiled with TSan can tell apart from a build without it.
#ifndef ROSTER_THREAD_H
#define ROSTER_THREAD_H

#ifdef __cplusplus
extern "C" {
#endif

/// Names the calling thread (at most 15 bytes are kept) and, when `niceness` is not 0, sets
/// its nice value alone (Linux applies PRIO_PROCESS with a thread id to that thread); 19 or
/// more also puts it in the SCHED_IDLE class.
/// Returns 0, or -1 when the priority could not be set.
int roster_thread_setup(const char *name, int niceness);

/// Puts the calling thread (at nice 0) in the SCHED_BATCH class: it gets the same share of
/// the CPU, but waking it never preempts the thread that woke it.
/// Returns 0, or -1 when the class could not be set.
int roster_thread_use_batch_policy(void);

/// Sets the calling thread's nice value alone; 19 or more also puts it in the SCHED_IDLE
/// class, and less takes it back out. Returns 0, or -1 when it could not be set.
int roster_thread_set_niceness(int niceness);

/// The calling thread's nice value.
int roster_thread_niceness(void);

/// Copies the calling thread's name into `name` (at least 16 bytes).
void roster_thread_name(char *name, int size);

/// Tells ThreadSanitizer that the lock at `lock` was just acquired, or is about to be
/// released (`RosterLocks.Locked`): TSan does not see the standard library's `Mutex` on
/// Linux. Nothing in a build without TSan.
void roster_lock_acquired(const void *lock);
void roster_lock_releasing(const void *lock);

/// How many CPUs the calling thread may run on (its affinity mask, as `taskset` sets it);
/// -1 when it cannot be read.
int roster_affinity_cpu_count(void);

#ifdef __cplusplus
}
#endif

#endif
