/* The heatmap: bytes per fine time bin, per thread, in a ring the
 * collector drains; Python re-bins them the way Darshan's heatmap module
 * does. heat.c owns the bins' origin and width; a thread's ring is written
 * by that thread (adding) and the collector (draining) only, through the
 * functions here. */
#ifndef TFD_HEAT_H
#define TFD_HEAT_H
#include "base.h"

/* A thread's bins with bytes, oldest to newest: a queue, not a window of
 * time. A bin gets an entry when its first bytes arrive, and bins without
 * bytes take none, so an idle gap of any length costs nothing and the ring
 * holds HEAT_RING bins with bytes between two drains (51.2 s of reading in
 * every 25 ms bin; the collector drains every 10 s or sooner). */
#define HEAT_RING 2048
enum { HEAT_POSIX_READ, HEAT_POSIX_WRITE, HEAT_STDIO_READ, HEAT_STDIO_WRITE, HEAT_KINDS };

/* The newest bin as its writer adds to it: where it starts and its slots.
 * Kept in the writer's hottest line (threads.h), apart from the ring. */
typedef struct heat_now {
    uint64_t lo;                /* first tick of the newest bin */
    int64_t *row;               /* its slots */
} heat_now;

typedef struct heat_ring {
    /* Entry i (counted from the thread's first, ever growing) is in
     * slots[i % HEAT_RING], its bin number in bin_of[i % HEAT_RING]. The
     * writer owns made (entries made so far: the newest is made - 1) and
     * the entries; the collector owns next (the oldest entry not yet fully
     * reported) and reported. The writer never makes an entry over one
     * from next on: unreported bytes are never overwritten. */
    int64_t made;
    int64_t next;
    int64_t reported[HEAT_KINDS];   /* of entry next, already reported */
    int64_t unbinned;
    /* not zeroed when made (80 KiB): an entry is written as it is made,
     * before anyone reads it */
    int64_t slots[HEAT_RING][HEAT_KINDS];
    int64_t bin_of[HEAT_RING];
} heat_ring;

extern uint64_t tfd_heat_width TFD_HIDDEN;     /* heat.c's: ticks per bin, read by heat_add */

/* a ring no bin has reached (the rest of it zeroed already) */
static inline void heat_start(heat_now *n, heat_ring *h)
{
    n->lo = UINT64_MAX;
    n->row = NULL;
    h->made = h->next = 0;
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
/* Append a ring's entries from the oldest unreported to its newest (3
 * values each: bin, kind, bytes), copied consistently against the writer's
 * sequence count; 0, or -1 when out of memory. */
int heat_drain(heat_ring *h, const uint32_t *seq, growbuf *heat, int64_t *unbinned) TFD_HIDDEN;

#endif
