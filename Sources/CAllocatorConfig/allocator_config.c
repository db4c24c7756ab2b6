#include "allocator_config.h"

// jemalloc's options for the `roster` executable (jemalloc replaces malloc there; see
// Package.swift). jemalloc reads this string at its first allocation; the MALLOC_CONF
// environment variable, read after it, still overrides each option.
//
// dirty_decay_ms:1000: pages a thread's arena freed go back to the system after about a second
// instead of jemalloc's default ten. With an event loop per CPU, each loop's arena kept up to
// ten seconds of freed pages: RSS after a load is smaller with this, at the same calls per
// second (docs/performance.md, "What each part saved").
const char *malloc_conf = "dirty_decay_ms:1000";
