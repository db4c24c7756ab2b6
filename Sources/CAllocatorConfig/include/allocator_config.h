// jemalloc's options for the `roster` executable, as the global `malloc_conf` that jemalloc
// reads at its first allocation. Nothing to call: linking this target sets them.
#ifndef ROSTER_ALLOCATOR_CONFIG_H
#define ROSTER_ALLOCATOR_CONFIG_H

extern const char *malloc_conf;

#endif
