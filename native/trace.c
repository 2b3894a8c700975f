/* The trace's switch, its memory budget, and the chunks' life: made by
 * the writer, drained and freed by the collector. */
#include "trace.h"

#include <errno.h>

int tfd_trace_on;
static int64_t trace_cap;
static int64_t trace_budget;    /* bytes still free for chunks */

seg_chunk *trace_grow(trace_buf *b)
{
    if (__atomic_sub_fetch(&trace_budget, (int64_t)sizeof(seg_chunk), __ATOMIC_RELAXED) < 0) {
        __atomic_add_fetch(&trace_budget, (int64_t)sizeof(seg_chunk), __ATOMIC_RELAXED);
        b->dropped++;
        return NULL;
    }
    int saved = errno;
    seg_chunk *fresh = malloc(sizeof(seg_chunk));
    errno = saved;
    if (!fresh) {
        __atomic_add_fetch(&trace_budget, (int64_t)sizeof(seg_chunk), __ATOMIC_RELAXED);
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

static void give_back(seg_chunk *c)
{
    free(c);
    __atomic_add_fetch(&trace_budget, (int64_t)sizeof(seg_chunk), __ATOMIC_RELAXED);
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

void trace_after_fork(void)
{
    trace_budget = trace_cap;
}
