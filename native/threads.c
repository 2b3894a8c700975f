/* Threads, their shards and arenas, and the update protocol's slow paths
 * (a thread's first update, a shard's first update in an interval, a new
 * distinct value) and the collector's side of it (closing an interval,
 * taking dirty lists, retiring exited threads). */
#include "threads.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread tfd_thread *tfd_self;
int64_t tfd_epoch = 1;
int tfd_use_membarrier;
static tfd_thread *threads;
static int64_t n_threads;

static int membarrier_register(void)
{
#ifdef SYS_membarrier
    /* MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED = 16, PRIVATE_EXPEDITED = 8 */
    long q = syscall(SYS_membarrier, 0, 0, 0);
    if (q > 0 && (q & 8) && (q & 16) && syscall(SYS_membarrier, 16, 0, 0) == 0)
        return 1;
#endif
    return 0;
}

void threads_init(void)
{
    static int done;
    if (!done)
        tfd_use_membarrier = membarrier_register();
    done = 1;
}

tfd_thread *threads_first(void) { return __atomic_load_n(&threads, __ATOMIC_ACQUIRE); }
int64_t threads_count(void) { return RELAXED_LOAD(n_threads); }

/* ----------------------------------------------------------------- threads */

static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

/* Runs as the thread exits: the collector folds what it wrote last and then
 * retires it. I/O in a later destructor gets a fresh thread (tfd_self is
 * cleared), which pthread retires on its next destructor round. */
static void thread_exited(void *p)
{
    tfd_thread *t = p;
    tfd_self = NULL;
    __atomic_store_n(&t->state, THREAD_EXITED, __ATOMIC_RELEASE);
}

static void make_exit_key(void)
{
    pthread_key_create(&exit_key, thread_exited);
}

/* a retired thread, its shards folded and its memory cleared, if any */
static tfd_thread *claim_retired(void)
{
    for (tfd_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        int free_state = THREAD_FREE;
        if (__atomic_load_n(&t->state, __ATOMIC_RELAXED) == THREAD_FREE &&
            __atomic_compare_exchange_n(&t->state, &free_state, THREAD_ACTIVE, 0, __ATOMIC_ACQUIRE,
                                        __ATOMIC_RELAXED))
            return t;
    }
    return NULL;
}

tfd_thread *thread_self(void)
{
    tfd_thread *t = tfd_self;
    if (TFD_LIKELY(t != NULL))
        return t;
    if (!table_capacity())
        return NULL;            /* not initialised: no shard could be indexed */
    int saved = errno;
    pthread_once(&exit_key_once, make_exit_key);
    if ((t = claim_retired())) {
        pthread_setspecific(exit_key, t);
        __atomic_add_fetch(&n_threads, 1, __ATOMIC_RELAXED);
        errno = saved;
        tfd_self = t;
        return t;
    }
    t = aligned_alloc(64, (sizeof(*t) + 63) & ~(size_t)63);   /* seq is written per call */
    if (t) {
        memset(t, 0, offsetof(tfd_thread, heat.slots));
        heat_ring_start(&t->heat);
        t->dir = calloc((size_t)(table_capacity() / DIR_CHUNK + 1), sizeof(tfd_shard **));
        if (!t->dir) {
            free(t);
            t = NULL;
        }
    }
    if (!t) {
        errno = saved;
        return NULL;
    }
    pthread_setspecific(exit_key, t);
    errno = saved;
    tfd_thread *head = __atomic_load_n(&threads, __ATOMIC_ACQUIRE);
    do
        t->next = head;
    while (!__atomic_compare_exchange_n(&threads, &head, t, 1, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE));
    __atomic_add_fetch(&n_threads, 1, __ATOMIC_RELAXED);
    tfd_self = t;
    return t;
}

int threads_retirable(tfd_thread *t)
{
    return __atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == THREAD_EXITED && !t->dirty[0] && !t->dirty[1];
}

/* Called by the collector, under its lock, once everything the exited
 * thread wrote has been folded (and its trace and heatmap drained): free
 * its shards and leave the structure for a new thread. Its running totals
 * stay (tfd_live sums them over structures, so they only ever grow). */
void threads_retire(tfd_thread *t)
{
    for (void *b = t->blocks, *next; b; b = next) {
        next = *(void **)b;
        free(b);
    }
    for (int64_t i = 0; i <= table_capacity() / DIR_CHUNK; i++)
        if (t->dir[i])
            memset(t->dir[i], 0, DIR_CHUNK * sizeof(tfd_shard *));
    t->shards = NULL;
    t->blocks = NULL;
    t->arena = NULL;
    t->arena_left = 0;
    t->arena_block = 0;
    t->dirty[0] = t->dirty[1] = NULL;
    t->suppressed = 0;
    __atomic_store_n(&t->state, THREAD_FREE, __ATOMIC_RELEASE);
}

int tfd_suppress(int on)
{
    tfd_thread *t = thread_self();
    if (!t)
        return -1;
    int before = t->suppressed;
    t->suppressed = on;
    return before;
}

int begin_sampled(update *u, tfd_rec *r)
{
    tfd_thread *t = tfd_self;
    if (!t && !(t = thread_self()))
        return 0;
    int suppressed = t->suppressed;
    t->suppressed = 0;
    int ok = begin(u, r);
    t->suppressed = suppressed;
    return ok;
}

void threads_live(tfd_live_totals *out)
{
    for (tfd_thread *t = threads_first(); t; t = t->next) {
        out->bytes_read += RELAXED_LOAD(t->tot_bytes_read);
        out->bytes_written += RELAXED_LOAD(t->tot_bytes_written);
        out->reads += RELAXED_LOAD(t->tot_reads);
        out->writes += RELAXED_LOAD(t->tot_writes);
        out->opens += RELAXED_LOAD(t->tot_opens);
        out->io_ticks += RELAXED_LOAD(t->tot_ticks);
        out->excluded_read += RELAXED_LOAD(t->excl_read);
        out->excluded_written += RELAXED_LOAD(t->excl_written);
    }
}

/* The child of fork counts afresh, in threads of its own. */
void threads_after_fork(void)
{
    threads = NULL;
    n_threads = 0;
    tfd_self = NULL;
}

/* ----------------------------------------------------------------- shards */

/* A thread's blocks double from 16 KiB to 256 KiB: tf.data's threads are
 * short-lived and touch tens of files each, and every block is zeroed. */
#define ARENA_FIRST (16u << 10)
#define ARENA_MAX (256u << 10)

static void *(*volatile zero_fill)(void *, int, size_t) = memset;

static void *arena_alloc(tfd_thread *t, size_t n)
{
    n = (n + 63) & ~(size_t)63;
    if (t->arena_left < n) {
        /* a block starts with the link to the thread's previous block */
        size_t want = t->arena_block ? t->arena_block * 2 : ARENA_FIRST;
        if (want > ARENA_MAX)
            want = ARENA_MAX;
        t->arena_block = want;
        size_t block = n + 64 > want ? n + 64 : want;
        int saved = errno;
        char *p = malloc(block);
        errno = saved;
        if (!p)
            return NULL;
        /* zeroed by writing, all at once: the collector writes its part of a
         * shard (seen) that may lie on a page the thread has not touched, and
         * a fault there would first map the zero page, then flush the TLB.
         * Through a volatile pointer: GCC turns malloc + memset into calloc,
         * which skips memory it knows is fresh and leaves it untouched. */
        zero_fill(p, 0, block);
        *(void **)p = t->blocks;
        t->blocks = p;
        t->arena = p + 64;
        t->arena_left = block - 64;
    }
    void *r = t->arena;
    t->arena += n;
    t->arena_left -= n;
    return r;
}

tfd_shard *new_shard(tfd_thread *t, tfd_rec *r)
{
    int64_t hi = r->index / DIR_CHUNK, lo = r->index % DIR_CHUNK;
    tfd_shard **chunk = t->dir[hi];
    if (!chunk) {
        int saved = errno;
        chunk = calloc(DIR_CHUNK, sizeof(tfd_shard *));
        errno = saved;
        if (!chunk)
            return NULL;
        t->dir[hi] = chunk;
    }
    tfd_shard *s = arena_alloc(t, sizeof(tfd_shard));
    if (!s)
        return NULL;
    s->rec = r;
    s->owner = t;
    s->epoch = -1;
    s->iext[0].epoch = s->iext[1].epoch = -1;
    s->next_in_thread = t->shards;
    t->shards = s;
    chunk[lo] = s;
    return s;
}

/* ------------------------------------------------------- update protocol */

/* First update of a shard in an interval: start its extremes afresh and put
 * it on its thread's dirty list for the interval (once per interval). */
void enter_interval(tfd_shard *s, int64_t e)
{
    int k = (int)(e & 1);
    tfd_thread *t = s->owner;
    memset(s->iext[k].v, 0, sizeof(s->iext[k].v));
    s->iext[k].epoch = e;
    s->epoch = e;
    /* the collector emptied list k before it opened interval e: read the
     * list after the interval number */
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    s->dirty_next[k] = RELAXED_LOAD(t->dirty[k]);
    __atomic_store_n(&t->dirty[k], s, __ATOMIC_RELEASE);
}

/* darshan_track_common_val_counters: count up to 32 distinct values */
void track_value_slow(tfd_thread *t, values *vs, int64_t v)
{
    int n = vs->n;
    int64_t *val = vs->big ? vs->big->val : vs->val;
    int64_t *cnt = vs->big ? vs->big->cnt : vs->cnt;
    for (int i = 0; i < n; i++)
        if (val[i] == v) {
            cnt[i]++;
            return;
        }
    if (n >= VALUES_MAX)
        return;
    if (n == VALUES_INLINE && !vs->big) {
        values_big *b = arena_alloc(t, sizeof(values_big));
        if (!b)
            return;
        memcpy(b->val, vs->val, sizeof(vs->val));
        memcpy(b->cnt, vs->cnt, sizeof(vs->cnt));
        BARRIER();
        vs->big = b;
        val = b->val;
        cnt = b->cnt;
    }
    val[n] = v;
    cnt[n] = 1;
    BARRIER();
    vs->n = n + 1;
}

/* ------------------------------------------------------- the collector */

static void wait_for_writers(void)
{
    if (tfd_use_membarrier)
        syscall(SYS_membarrier, 8, 0, 0);
    else
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (tfd_thread *t = threads_first(); t; t = t->next) {
        uint32_t s = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
        if (!(s & 1))
            continue;
        /* inside an update, which never blocks: wait for it to finish */
        for (long spins = 0; __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE) == s; spins++) {
            if (spins > 64)
                sched_yield();
            if (spins > 2000000)
                break;  /* a thread stopped mid-update (killed); do not hang */
        }
    }
}

int64_t threads_close_interval(void)
{
    int64_t closed = RELAXED_LOAD(tfd_epoch);
    __atomic_store_n(&tfd_epoch, closed + 1, __ATOMIC_SEQ_CST);
    wait_for_writers();
    return closed;
}

tfd_shard *threads_take_dirty(tfd_thread *t, int k)
{
    return __atomic_exchange_n(&t->dirty[k], NULL, __ATOMIC_ACQ_REL);
}
