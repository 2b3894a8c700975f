/* The heatmap's bins: where they start, how wide they are, and how a
 * thread's ring of bins with bytes grows and is drained. */
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
     * can idle past HEAT_RING bins, or fill the ring, in a second. Read
     * once, at the first attach. */
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

/* heatmap_update(): spread a call's bytes over the bins it overlaps.
 *
 * The bins after the newest that the call reaches get new entries, as many
 * as fit without making one over an entry from next on (unreported bytes).
 * A far jump after an idle gap is one new entry like any other, with or
 * without a drain since the bins before it. Only a ring of HEAT_RING
 * unreported entries refuses a call into unbinned, and then only until the
 * collector's next drain, which leaves one entry (the newest) unreported.
 *
 * Against a concurrent drain: this runs inside the thread's update (seq
 * odd), so a drain that copied while entries were made or added to copies
 * again. The writer's reading of next may be older than the collector's
 * latest: it then sees less room than there is, never more. A drain that
 * finished copying before this call still has entry next as it copied it
 * (plus bytes added since, which `reported` tells apart). */
void heat_add_slow(heat_now *n, heat_ring *h, int kind, int64_t bytes, uint64_t t1, uint64_t t2)
{
    if (t1 < heat_origin || t2 < t1) {
        h->unbinned += bytes;
        return;
    }
    int64_t b1 = (int64_t)((t1 - heat_origin) / tfd_heat_width);
    int64_t b2 = (int64_t)((t2 - heat_origin) / tfd_heat_width);
    int64_t made = h->made;
    int64_t newest = made > 0 ? h->bin_of[(made - 1) % HEAT_RING] : -1;
    /* a call begins where the thread's last one ended or later, so the bins
     * before the newest are complete (only a clock that stepped back, or a
     * call spanning them, lands there: its bytes count from the newest on) */
    if (b1 < newest)
        b1 = newest;
    if (b2 < newest)
        b2 = newest;
    int64_t first = b1 > newest ? b1 : newest + 1;     /* the first bin to get a new entry */
    if (b2 > newest) {
        int64_t room = HEAT_RING - (made - RELAXED_LOAD(h->next));
        if (room <= 0) {
            h->unbinned += bytes;
            return;
        }
        if (b2 - first + 1 > room)
            first = b2 - room + 1;      /* a call longer than the room: its earliest share goes to its last bin */
        for (int64_t b = first; b <= b2; b++) {
            int64_t i = (made + b - first) % HEAT_RING;
            h->bin_of[i] = b;
            memset(h->slots[i], 0, sizeof(h->slots[0]));
        }
        RELAXED_STORE(h->made, made + b2 - first + 1);
        n->lo = heat_origin + (uint64_t)b2 * tfd_heat_width;
        n->row = h->slots[(made + b2 - first) % HEAT_RING];
    }
    /* the bins with an entry: the newest before this call if it began
     * there, then first..b2 */
    int64_t left = bytes;
    for (int64_t b = b1 == newest ? newest : first;; b = b == newest ? first : b + 1) {
        int64_t *row = h->slots[(b == newest ? made - 1 : made + b - first) % HEAT_RING];
        int64_t part = left;
        if (b < b2 && t2 > t1) {
            uint64_t lo = heat_origin + (uint64_t)b * tfd_heat_width, hi = lo + tfd_heat_width;
            uint64_t s = t1 > lo ? t1 : lo, e = t2 < hi ? t2 : hi;
            part = e > s ? (int64_t)((double)bytes * (double)(e - s) / (double)(t2 - t1) + 0.5) : 0;
            if (part > left)
                part = left;
        }
        row[kind] += part;
        left -= part;
        if (b >= b2)
            break;
    }
}

/* Report the ring's entries from the oldest unreported to its newest; the
 * newest may still grow, so what was reported of it is remembered and it
 * stays the oldest unreported. */
int heat_drain(heat_ring *h, const uint32_t *seq, growbuf *heat, int64_t *unbinned)
{
    static int64_t copy[HEAT_RING][HEAT_KINDS];
    static int64_t copy_bin[HEAT_RING];
    int64_t first = h->next, lost;
    int64_t n = 0;
    for (long tries = 0;; tries++) {
        uint32_t a = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
        if ((a & 1) && tries < 1000000) {
            sched_yield();
            continue;
        }
        lost = RELAXED_LOAD(h->unbinned);
        /* the writer keeps at most HEAT_RING unreported entries; the bound
         * also holds for a copy given up on after a million tries */
        n = RELAXED_LOAD(h->made) - first;
        if (n < 0)
            n = 0;
        if (n > HEAT_RING)
            n = HEAT_RING;
        for (int64_t i = 0; i < n; i++) {
            int64_t j = (first + i) % HEAT_RING;
            copy_bin[i] = h->bin_of[j];
            memcpy(copy[i], h->slots[j], sizeof(copy[0]));
        }
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
            int64_t row[3] = {copy_bin[i], k, v};
            if (grow_push(heat, row, 3))
                return -1;
        }
    }
    if (n > 0) {
        memcpy(h->reported, copy[n - 1], sizeof(h->reported));
        RELAXED_STORE(h->next, first + n - 1);
    }
    return 0;
}
