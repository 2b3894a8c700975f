/* The heatmap: bytes per fine time bin, per thread, in a ring the
 * collector drains; Python re-bins them the way Darshan's heatmap module
 * does. heat.c owns the bins' origin and width; a thread's ring is written
 * by that thread (adding) and the collector (draining) only, through the
 * functions here. */
#ifndef TFD_HEAT_H
#define TFD_HEAT_H
#include "base.h"

#define HEAT_RING 2048
enum { HEAT_POSIX_READ, HEAT_POSIX_WRITE, HEAT_STDIO_READ, HEAT_STDIO_WRITE, HEAT_KINDS };

/* The newest bin as its writer adds to it: where it starts and its slots.
 * Kept in the writer's hottest line (threads.h), apart from the ring. */
typedef struct heat_now {
    uint64_t lo;                /* first tick of the newest bin */
    int64_t *row;               /* its slots */
} heat_now;

typedef struct heat_ring {
    /* the writer owns bin (its newest) and the slots, the collector next
     * (the oldest bin not yet reported) */
    int64_t bin;
    int64_t next;
    int64_t reported[HEAT_KINDS];   /* of bin next, already reported */
    int64_t unbinned;
    /* not zeroed when made (64 KiB): a slot is cleared as the newest bin
     * reaches it, before anyone reads it */
    int64_t slots[HEAT_RING][HEAT_KINDS];
} heat_ring;

extern uint64_t tfd_heat_width TFD_HIDDEN;     /* heat.c's: ticks per bin, read by heat_add */

/* a ring no bin has reached (the rest of it zeroed already) */
static inline void heat_start(heat_now *n, heat_ring *h)
{
    n->lo = UINT64_MAX;
    n->row = NULL;
    h->bin = -1;
}

void heat_add_slow(heat_now *n, heat_ring *h, int kind, int64_t bytes, uint64_t t1, uint64_t t2) TFD_HIDDEN TFD_COLD;

static inline void heat_add(heat_now *n, heat_ring *h, int kind, int64_t bytes, uint64_t t1, uint64_t t2)
{
    if (TFD_UNLIKELY(bytes == 0))
        return;
    if (TFD_LIKELY(t1 >= n->lo && t2 - n->lo < tfd_heat_width))   /* inside the newest bin */
        n->row[kind] += bytes;
    else
        heat_add_slow(n, h, kind, bytes, t1, t2);
}

/* bins of 25 ms from the clock's origin (TFDARSHAN_DEBUG_HEAT_BIN_US, a
 * knob for tests only, makes them that many microseconds wide) */
void heat_init(void) TFD_HIDDEN;
uint64_t heat_bin_ticks(void) TFD_HIDDEN;
/* Append a ring's bins from the oldest unreported to its newest (3 values
 * each: bin, kind, bytes), copied consistently against the writer's
 * sequence count; 0, or -1 when out of memory. */
int heat_drain(heat_ring *h, const uint32_t *seq, growbuf *heat, int64_t *unbinned) TFD_HIDDEN;

#endif
