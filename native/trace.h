/* The per-operation trace (Darshan's DXT): each thread appends segments to
 * a list of chunks of its own, which the collector drains and frees.
 * trace.c owns the switch and the memory budget shared by all threads; a
 * thread's buffer is written by that thread (appending) and the collector
 * (draining) only, through the functions here. */
#ifndef TFD_TRACE_H
#define TFD_TRACE_H
#include "base.h"

#include "public.h"

#define SEG_PER_CHUNK 512
/* epoch: the interval the operation was counted in, so the trace of a
 * window holds exactly the operations its counters hold */
typedef struct seg { int64_t index, op, offset, length, start, end, epoch; } seg;
typedef struct seg_chunk { struct seg_chunk *next; int32_t count; seg s[SEG_PER_CHUNK]; } seg_chunk;

/* a thread's trace: the writer appends to tail, the collector consumes
 * from head */
typedef struct trace_buf {
    seg_chunk *head, *tail;
    int32_t read;               /* the collector's position in head */
    int64_t dropped;            /* segments dropped for lack of memory */
    seg_chunk *spare;           /* drained chunks the writer took back, to use again */
} trace_buf;

extern int tfd_trace_on TFD_HIDDEN;     /* trace.c's: read it through trace_enabled() */

static inline int trace_enabled(void)
{
    return TFD_UNLIKELY(RELAXED_LOAD(tfd_trace_on));
}

/* a fresh chunk at the tail, or NULL (over budget: the segment is dropped) */
seg_chunk *trace_grow(trace_buf *b) TFD_HIDDEN TFD_COLD;

static inline void trace_append(trace_buf *b, int64_t index, int op, int64_t off, int64_t len,
                                uint64_t t1, uint64_t t2, int64_t epoch)
{
    seg_chunk *c = b->tail;
    if (TFD_UNLIKELY(!c || c->count == SEG_PER_CHUNK) && !(c = trace_grow(b)))
        return;
    seg *s = &c->s[c->count];
    s->index = index;
    s->op = op;
    s->offset = off;
    s->length = len;
    s->start = (int64_t)t1;
    s->end = (int64_t)t2;
    s->epoch = epoch;
    __atomic_store_n(&c->count, c->count + 1, __ATOMIC_RELEASE);
}

/* attach's settings (trace on or off, and its memory) */
void trace_init(const tfd_config *c) TFD_HIDDEN;
/* Append the buffer's segments of intervals up to closed (6 values each:
 * record index, op, offset, length, start, end) and keep the chunks the
 * writer has left for it to use again; 0, or -1 when out of memory. */
int trace_drain(trace_buf *b, growbuf *segs, int64_t *dropped, int64_t closed) TFD_HIDDEN;
/* after draining every buffer: the drained chunks go back to the writers */
void trace_recycle(void) TFD_HIDDEN;
void trace_after_fork(void) TFD_HIDDEN;

#endif
