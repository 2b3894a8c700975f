/* Busy spans: the wall time a process had read or metadata calls in
 * flight. Summed call times count parallel calls twice (tf.data reads on
 * several threads at once, so a step's summed I/O time can exceed the
 * step). Each thread extends its own span while its calls follow each
 * other closely, adding up the time inside them (no lock, no shared write
 * on the hot path), and pushes a closed span into its ring. The collector
 * takes every thread's spans and, within the interval it closes, merges the
 * overlapping ones: each merged stretch counts its length, or the time in
 * calls of its spans if that is less. That is exact for one thread and
 * never more than either the union of the spans or the summed time: an
 * upper bound on the wall time with I/O in flight. A ring that fills
 * before a collect joins the next span to the last across the gap, which
 * keeps the bound (its time in calls stays exact). */
#include "busy.h"

#include <sched.h>

#include "public.h"

int64_t tfd_busy_gap;

void busy_init(void)
{
    tfd_clock_info clock;
    tfd_clock(&clock);
    /* TensorFlow's read of a file (stat, open, pread, pread, close), or a
     * Python loop's, comes in calls microseconds apart: one span */
    tfd_busy_gap = (int64_t)(clock.ticks_per_second * 10e-6);
}

void busy_push(busy_now *n, busy_state *b, busy_spans spans, int64_t t1, int64_t t2)
{
    if (n->hi != 0) {
        uint64_t k = b->pushed;
        if (k - __atomic_load_n(&b->taken, __ATOMIC_ACQUIRE) >= BUSY_RING) {
            b->joined++;
            n->in += t2 - t1;
            if (t2 > n->hi)
                n->hi = t2;
            return;
        }
        int64_t *slot = spans[k % BUSY_RING];
        slot[0] = b->lo;
        slot[1] = n->hi;
        slot[2] = n->in;
        __atomic_store_n(&b->pushed, k + 1, __ATOMIC_RELEASE);
    }
    b->lo = t1;
    n->hi = t2;
    n->in = t2 - t1;
}

/* A span's part inside [lo, hi): its ends clipped, its time in calls
 * shared out in proportion (a span that straddles two collects is seen by
 * both, each counting its own part). */
static int push_clipped(growbuf *out, const int64_t *s, int64_t lo, int64_t hi)
{
    int64_t a = s[0] > lo ? s[0] : lo, z = s[1] < hi ? s[1] : hi;
    if (z <= a)
        return 0;
    int64_t in = s[2];
    if (a != s[0] || z != s[1])
        in = (int64_t)((double)in * (double)(z - a) / (double)(s[1] - s[0]));
    int64_t v[3] = {a, z, in};
    return grow_push(out, v, 3);
}

int busy_drain(const busy_now *n, busy_state *b, busy_spans spans, const uint32_t *seq, growbuf *out, int64_t lo, int64_t hi,
               int64_t *joined)
{
    uint64_t from = b->taken, to;
    int64_t open[3] = {0, 0, 0};
    /* the writer changes its open span inside an update: read it between updates */
    for (long tries = 0;; tries++) {
        uint32_t a = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
        if ((a & 1) && tries < 1000000) {
            sched_yield();
            continue;
        }
        to = __atomic_load_n(&b->pushed, __ATOMIC_ACQUIRE);
        open[0] = RELAXED_LOAD(b->lo);
        open[1] = RELAXED_LOAD(n->hi);
        open[2] = RELAXED_LOAD(n->in);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(seq, __ATOMIC_RELAXED) == a || tries >= 1000000)
            break;
    }
    *joined += RELAXED_LOAD(b->joined);
    int rc = 0;
    for (uint64_t i = from; i < to && rc == 0; i++)
        rc = push_clipped(out, spans[i % BUSY_RING], lo, hi);
    __atomic_store_n(&b->taken, to, __ATOMIC_RELEASE);
    if (rc == 0 && open[1] > open[0])
        rc = push_clipped(out, open, lo, hi);
    return rc;
}

static int by_start(const void *x, const void *y)
{
    int64_t a = ((const int64_t *)x)[0], b = ((const int64_t *)y)[0];
    return (a > b) - (a < b);
}

int64_t busy_merge(growbuf *spans)
{
    int64_t n = spans->n / 3, total = 0;
    qsort(spans->p, (size_t)n, 3 * sizeof(int64_t), by_start);
    int64_t lo = 0, hi = -1, in = 0;
    for (int64_t i = 0; i <= n; i++) {
        const int64_t *s = i < n ? spans->p + 3 * i : NULL;
        if (s && hi >= 0 && s[0] <= hi) {          /* overlaps the stretch: merge */
            if (s[1] > hi)
                hi = s[1];
            in += s[2];
            continue;
        }
        if (hi >= 0)                               /* close the stretch */
            total += (hi - lo) < in ? (hi - lo) : in;
        if (s) {
            lo = s[0];
            hi = s[1];
            in = s[2];
        }
    }
    return total;
}
