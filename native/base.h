/* The bottom of the shim: the macros every native file may use, and the
 * growing buffer a drain hands its rows back in. No state. */
#ifndef TFD_BASE_H
#define TFD_BASE_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define TFD_LIKELY(x) __builtin_expect(!!(x), 1)
#define TFD_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TFD_HIDDEN __attribute__((visibility("hidden")))
/* a rare case of a hot path: out of line, and out of the wrappers that
 * inline the common case (wrappers.c flattens the data wrappers) */
#define TFD_COLD __attribute__((noinline, cold))

#define RELAXED_LOAD(p) __atomic_load_n(&(p), __ATOMIC_RELAXED)
#define RELAXED_STORE(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELAXED)
#define BARRIER() __asm__ volatile("" ::: "memory")
/* orders a sequence count against the data (free on x86, dmb on arm) */
#define WMB() __atomic_thread_fence(__ATOMIC_RELEASE)

/* int64 rows a drain appends to; 0, or -1 when out of memory */
typedef struct growbuf { int64_t *p; int64_t n, cap; } growbuf;

static inline int grow_push(growbuf *b, const int64_t *v, int64_t k)
{
    if (b->n + k > b->cap) {
        int64_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->n + k)
            cap *= 2;
        int64_t *p = realloc(b->p, (size_t)cap * sizeof(int64_t));
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, v, (size_t)k * sizeof(int64_t));
    b->n += k;
    return 0;
}

#endif
