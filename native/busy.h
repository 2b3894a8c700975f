/* Busy spans: the wall time a process had read or metadata calls in
 * flight (a step's io_wall). busy.c owns the gap that joins calls into a
 * span; a thread's span and ring are written by that thread (extending,
 * pushing) and the collector (draining) only, through the functions here. */
#ifndef TFD_BUSY_H
#define TFD_BUSY_H
#include "base.h"

#define BUSY_RING 2048

/* The writer's open span as each call extends it: its last call's end and
 * the time in its calls. Kept in the writer's hottest line (threads.h),
 * with what else a read changes there. */
typedef struct busy_now {
    int64_t hi, in;
} busy_now;

/* The rest of the writer's span and its ring's counts (zeroed when a
 * thread is made; the spans themselves are not: a slot is written before
 * it counts). The writer owns lo and pushed, the collector taken. */
typedef struct busy_state {
    int64_t lo;                 /* the open span's first call's start */
    uint64_t pushed, taken;
    int64_t joined;             /* spans joined across a gap because the ring was full */
} busy_state;

typedef int64_t busy_spans[BUSY_RING][3];   /* lo, hi, in */

extern int64_t tfd_busy_gap TFD_HIDDEN;      /* busy.c's: ticks; calls closer than this join one span */

void busy_push(busy_now *n, busy_state *b, busy_spans spans, int64_t t1, int64_t t2) TFD_HIDDEN TFD_COLD;

/* A read or metadata call from t1 to t2 on this thread: it extends the
 * thread's span, or (after a gap) closes it and starts another. */
static inline void busy_add(busy_now *n, busy_state *b, busy_spans spans, int64_t t1, int64_t t2)
{
    int64_t hi = n->hi;
    if (TFD_LIKELY(t1 <= hi + tfd_busy_gap)) {
        n->in += t2 - t1;
        if (t2 > hi)
            n->hi = t2;
    } else {
        busy_push(n, b, spans, t1, t2);
    }
}

/* calls microseconds apart are one span */
void busy_init(void) TFD_HIDDEN;
/* Append a thread's spans not yet taken, and its open span, clipped to
 * [lo, hi) (3 values each), read consistently against its sequence count;
 * 0, or -1 when out of memory. */
int busy_drain(const busy_now *n, busy_state *b, busy_spans spans, const uint32_t *seq, growbuf *out, int64_t lo, int64_t hi,
               int64_t *joined) TFD_HIDDEN;
/* The bound on wall time with a call in flight, from every thread's
 * drained spans (sorted and merged here). */
int64_t busy_merge(growbuf *spans) TFD_HIDDEN;

#endif
