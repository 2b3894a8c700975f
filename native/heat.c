/* The heatmap's bins: where they start, how wide they are, and how a
 * thread's ring moves forward and is drained. */
#include "heat.h"

#include <sched.h>
#include <stdlib.h>

#include "public.h"

uint64_t tfd_heat_width;        /* ticks per bin */
static uint64_t heat_origin;

void heat_init(void)
{
    tfd_clock_info clock;
    tfd_clock(&clock);
    heat_origin = (uint64_t)clock.origin_ticks;
    double seconds = 0.025;     /* 25 ms bins */
    /* A test and debug knob, not a setting: narrower bins, so that a test
     * can span the ring (HEAT_RING bins) in a second or two. Read once, at
     * the first attach. */
    const char *knob = getenv("TFDARSHAN_DEBUG_HEAT_BIN_US");
    if (knob && atof(knob) > 0)
        seconds = atof(knob) * 1e-6;
    tfd_heat_width = (uint64_t)(clock.ticks_per_second * seconds);
    if (tfd_heat_width == 0)
        tfd_heat_width = 1;
}

uint64_t heat_bin_ticks(void)
{
    return tfd_heat_width;
}

/* Move the ring's newest bin forward to b, clearing the slots it reuses;
 * refuses (returns 0) if that would overwrite unreported bins. */
static int heat_advance(heat_now *n, heat_ring *h, int64_t b)
{
    if (b <= h->bin)
        return 1;
    int64_t oldest = RELAXED_LOAD(h->next);
    if (h->bin >= 0 && b - oldest >= HEAT_RING)
        return 0;
    /* a fresh ring is read from bin b on: only that slot needs clearing */
    int64_t from = h->bin < 0 ? b : b - h->bin > HEAT_RING ? b - HEAT_RING + 1 : h->bin + 1;
    if (from < 0)
        from = 0;
    for (int64_t i = from; i <= b; i++)
        memset(h->slots[i % HEAT_RING], 0, sizeof(h->slots[0]));
    if (h->bin < 0)
        RELAXED_STORE(h->next, b);
    h->bin = b;
    n->lo = heat_origin + (uint64_t)b * tfd_heat_width;
    n->row = h->slots[b % HEAT_RING];
    return 1;
}

/* heatmap_update(): spread a call's bytes over the bins it overlaps */
void heat_add_slow(heat_now *n, heat_ring *h, int kind, int64_t bytes, uint64_t t1, uint64_t t2)
{
    if (t1 < heat_origin || t2 < t1) {
        h->unbinned += bytes;
        return;
    }
    int64_t b1 = (int64_t)((t1 - heat_origin) / tfd_heat_width);
    int64_t b2 = (int64_t)((t2 - heat_origin) / tfd_heat_width);
    if (!heat_advance(n, h, b2)) {
        h->unbinned += bytes;
        return;
    }
    int64_t oldest = RELAXED_LOAD(h->next);
    if (b1 < oldest)
        b1 = oldest;   /* began before the last drain: count it from there */
    if (b1 > b2)
        b1 = b2;
    int64_t left = bytes;
    for (int64_t b = b1; b <= b2; b++) {
        int64_t part = left;
        if (b < b2 && t2 > t1) {
            uint64_t lo = heat_origin + (uint64_t)b * tfd_heat_width, hi = lo + tfd_heat_width;
            uint64_t s = t1 > lo ? t1 : lo, e = t2 < hi ? t2 : hi;
            part = (int64_t)((double)bytes * (double)(e - s) / (double)(t2 - t1) + 0.5);
            if (part > left)
                part = left;
        }
        h->slots[b % HEAT_RING][kind] += part;
        left -= part;
    }
}

/* Report the ring's bins from the oldest unreported to its newest; the
 * newest may still grow, so what was reported of it is remembered. */
int heat_drain(heat_ring *h, const uint32_t *seq, growbuf *heat, int64_t *unbinned)
{
    static int64_t copy[HEAT_RING][HEAT_KINDS];
    int64_t newest, oldest = h->next, lost;
    int64_t n = 0;
    for (long tries = 0;; tries++) {
        uint32_t a = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
        if ((a & 1) && tries < 1000000) {
            sched_yield();
            continue;
        }
        newest = RELAXED_LOAD(h->bin);
        lost = RELAXED_LOAD(h->unbinned);
        n = newest < oldest ? 0 : newest - oldest + 1;
        for (int64_t i = 0; i < n; i++)
            memcpy(copy[i], h->slots[(oldest + i) % HEAT_RING], sizeof(copy[0]));
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(seq, __ATOMIC_RELAXED) == a || tries >= 1000000)
            break;
    }
    *unbinned += lost;
    for (int64_t i = 0; i < n; i++) {
        for (int k = 0; k < HEAT_KINDS; k++) {
            int64_t v = copy[i][k] - (i == 0 ? h->reported[k] : 0);
            if (v == 0)
                continue;
            int64_t row[3] = {oldest + i, k, v};
            if (grow_push(heat, row, 3))
                return -1;
        }
    }
    if (n > 0) {
        memcpy(h->reported, copy[n - 1], sizeof(h->reported));
        RELAXED_STORE(h->next, newest);
    }
    return 0;
}
