/* The trace's switch, its memory budget, and the chunks' life: made by
 * the writer, drained and freed by the collector. */
#include "trace.h"

#include <sys/mman.h>

#include "pages.h"

int tfd_trace_on;
static int64_t trace_cap;
static int64_t trace_budget;    /* bytes still free for chunks */

/* Chunks come from 2 MiB regions (pages.h), handed out by a bump pointer,
 * and are used again once drained: the collector hands the chunks it has
 * drained back as a list, which the next writer needing one takes whole.
 * (Freshly allocated memory costs a fault per 4 KiB page on a VM: in a
 * process that has not yet been collected, every traced call's 56 bytes
 * would land on a fresh page.) Never given back to the system: the budget
 * bounds them. */
#define CHUNK_BYTES ((sizeof(seg_chunk) + 63) & ~(size_t)63)
typedef struct region { size_t used; } region;
static region *current_region;
static seg_chunk *returned;     /* drained chunks, pushed as lists by the collector */
static seg_chunk *drained;      /* the collector's, until trace_recycle */

static seg_chunk *carve(void)
{
    for (;;) {
        region *r = __atomic_load_n(&current_region, __ATOMIC_ACQUIRE);
        if (TFD_LIKELY(r != NULL)) {
            size_t at = __atomic_fetch_add(&r->used, CHUNK_BYTES, __ATOMIC_RELAXED);
            if (at + CHUNK_BYTES <= PAGES_REGION)
                return (seg_chunk *)((char *)r + at);
        }
        region *fresh = pages_region(0);
        if (!fresh)
            return NULL;
        fresh->used = 64;
        if (!__atomic_compare_exchange_n(&current_region, &r, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            munmap(fresh, PAGES_REGION);
    }
}

static seg_chunk *take_chunk(trace_buf *b)
{
    seg_chunk *c = b->spare;
    if (!c && __atomic_load_n(&returned, __ATOMIC_RELAXED))
        c = __atomic_exchange_n(&returned, NULL, __ATOMIC_ACQUIRE);
    if (c) {
        b->spare = c->next;
        return c;
    }
    return carve();
}

seg_chunk *trace_grow(trace_buf *b)
{
    if (__atomic_sub_fetch(&trace_budget, (int64_t)CHUNK_BYTES, __ATOMIC_RELAXED) < 0) {
        __atomic_add_fetch(&trace_budget, (int64_t)CHUNK_BYTES, __ATOMIC_RELAXED);
        b->dropped++;
        return NULL;
    }
    seg_chunk *fresh = take_chunk(b);
    if (!fresh) {
        __atomic_add_fetch(&trace_budget, (int64_t)CHUNK_BYTES, __ATOMIC_RELAXED);
        b->dropped++;
        return NULL;
    }
    fresh->next = NULL;
    fresh->count = 0;
    if (b->tail)
        __atomic_store_n(&b->tail->next, fresh, __ATOMIC_RELEASE);
    else
        __atomic_store_n(&b->head, fresh, __ATOMIC_RELEASE);
    __atomic_store_n(&b->tail, fresh, __ATOMIC_RELEASE);
    return fresh;
}

/* a chunk the writer has moved past (the collector's) */
static void give_back(seg_chunk *c)
{
    c->next = drained;
    drained = c;
    __atomic_add_fetch(&trace_budget, (int64_t)CHUNK_BYTES, __ATOMIC_RELAXED);
}

void trace_recycle(void)
{
    if (!drained)
        return;
    seg_chunk *last = drained;
    while (last->next)
        last = last->next;
    seg_chunk *head = __atomic_load_n(&returned, __ATOMIC_RELAXED);
    do
        last->next = head;
    while (!__atomic_compare_exchange_n(&returned, &head, drained, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    drained = NULL;
}

void trace_init(const tfd_config *c)
{
    if (c->trace && !tfd_trace_on)
        tfd_set_trace(1, c->trace_cap_bytes);
    else if (!c->trace)
        tfd_set_trace(0, 0);
}

void tfd_set_trace(int on, int64_t cap_bytes)
{
    if (on) {
        /* chunks still held count against the new budget when they are freed */
        trace_cap = cap_bytes;
        __atomic_store_n(&trace_budget, cap_bytes, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&tfd_trace_on, on ? 1 : 0, __ATOMIC_RELAXED);
}

int trace_drain(trace_buf *b, growbuf *segs, int64_t *dropped, int64_t closed)
{
    *dropped += RELAXED_LOAD(b->dropped);
    seg_chunk *c = __atomic_load_n(&b->head, __ATOMIC_ACQUIRE);
    while (c) {
        int32_t count = __atomic_load_n(&c->count, __ATOMIC_ACQUIRE);
        int32_t i = b->read;
        /* a thread's segments are in interval order: stop at the first
         * one counted after the interval being closed */
        for (; i < count && c->s[i].epoch <= closed; i++)
            if (grow_push(segs, (const int64_t *)&c->s[i], 6))
                return -1;
        b->read = i;
        if (i < count)
            break;
        seg_chunk *next = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE);
        /* a full chunk the writer has moved past can be released */
        if (count == SEG_PER_CHUNK && next) {
            __atomic_store_n(&b->head, next, __ATOMIC_RELEASE);
            b->read = 0;
            give_back(c);
            c = next;
        } else {
            break;
        }
    }
    return 0;
}

/* the child's threads start with no trace: the parent's chunks stay unused */
void trace_after_fork(void)
{
    trace_budget = trace_cap;
    current_region = NULL;
    returned = drained = NULL;
}
