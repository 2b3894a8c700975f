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
#include "records.h"

int64_t busy_gap;        /* ticks: calls closer than this join one span (set at init) */

void busy_push(tfd_thread *t, int64_t t1, int64_t t2)
{
    if (t->busy_hi != 0) {
        uint64_t n = t->busy_pushed;
        if (n - __atomic_load_n(&t->busy_taken, __ATOMIC_ACQUIRE) >= BUSY_RING) {
            t->busy_joined++;
            t->busy_in += t2 - t1;
            if (t2 > t->busy_hi)
                t->busy_hi = t2;
            return;
        }
        int64_t *slot = t->busy[n % BUSY_RING];
        slot[0] = t->busy_lo;
        slot[1] = t->busy_hi;
        slot[2] = t->busy_in;
        __atomic_store_n(&t->busy_pushed, n + 1, __ATOMIC_RELEASE);
    }
    t->busy_lo = t1;
    t->busy_hi = t2;
    t->busy_in = t2 - t1;
}

static int by_start(const void *a, const void *b)
{
    int64_t x = ((const int64_t *)a)[0], y = ((const int64_t *)b)[0];
    return (x > y) - (x < y);
}

/* A span's part inside [lo, hi): its ends clipped, its time in calls
 * shared out in proportion (a span that straddles two collects is seen by
 * both, each counting its own part). */
static int push_clipped(growbuf *spans, const int64_t *s, int64_t lo, int64_t hi)
{
    int64_t a = s[0] > lo ? s[0] : lo, b = s[1] < hi ? s[1] : hi;
    if (b <= a)
        return 0;
    int64_t in = s[2];
    if (a != s[0] || b != s[1])
        in = (int64_t)((double)in * (double)(b - a) / (double)(s[1] - s[0]));
    int64_t v[3] = {a, b, in};
    return grow_push(spans, v, 3);
}

/* The bound, within [window_lo, window_hi), from every thread's spans not
 * yet taken and the span each is extending (which a later collect sees
 * again: only its part inside that collect's window counts there). */
int collect_busy(int64_t window_lo, int64_t window_hi, int64_t *busy_ticks, int64_t *joined)
{
    growbuf spans = {0};
    *busy_ticks = 0;
    for (tfd_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        uint64_t from = t->busy_taken, to;
        int64_t open[3] = {0, 0, 0};
        /* the writer changes its open span inside an update: read it between updates */
        for (long tries = 0;; tries++) {
            uint32_t a = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
            if ((a & 1) && tries < 1000000) {
                sched_yield();
                continue;
            }
            to = __atomic_load_n(&t->busy_pushed, __ATOMIC_ACQUIRE);
            open[0] = RELAXED_LOAD(t->busy_lo);
            open[1] = RELAXED_LOAD(t->busy_hi);
            open[2] = RELAXED_LOAD(t->busy_in);
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (__atomic_load_n(&t->seq, __ATOMIC_RELAXED) == a || tries >= 1000000)
                break;
        }
        *joined += RELAXED_LOAD(t->busy_joined);
        int rc = 0;
        for (uint64_t i = from; i < to && rc == 0; i++)
            rc = push_clipped(&spans, t->busy[i % BUSY_RING], window_lo, window_hi);
        __atomic_store_n(&t->busy_taken, to, __ATOMIC_RELEASE);
        if (rc == 0 && open[1] > open[0])
            rc = push_clipped(&spans, open, window_lo, window_hi);
        if (rc) {
            free(spans.p);
            return -1;
        }
    }
    int64_t n = spans.n / 3;
    qsort(spans.p, (size_t)n, 3 * sizeof(int64_t), by_start);
    int64_t lo = 0, hi = -1, in = 0;
    for (int64_t i = 0; i <= n; i++) {
        const int64_t *s = i < n ? spans.p + 3 * i : NULL;
        if (s && hi >= 0 && s[0] <= hi) {          /* overlaps the stretch: merge */
            if (s[1] > hi)
                hi = s[1];
            in += s[2];
            continue;
        }
        if (hi >= 0)                               /* close the stretch */
            *busy_ticks += (hi - lo) < in ? (hi - lo) : in;
        if (s) {
            lo = s[0];
            hi = s[1];
            in = s[2];
        }
    }
    free(spans.p);
    return 0;
}
