/* Threads and the shards they hold: a thread's first update, its exit
 * (its shards released to their files, its structure to the next thread),
 * the slabs new shards come from, the update protocol's slow paths (a
 * shard's first update in an interval, a new distinct value) and the
 * collector's side of it (closing an interval, taking dirty lists). */
#include "threads.h"

#include "pages.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

_Static_assert(offsetof(tfd_shard, sum[S_ZERO_READS]) < 64 && offsetof(tfd_shard, sum[S_SIZE_READ_0_100]) == 64 &&
               offsetof(tfd_shard, sum[S_SIZE_READ_10M_100M]) < 128,
               "a read of up to 100 MB, and one at the end of the file, sit in the shard's first two lines");
_Static_assert(offsetof(tfd_shard, sum[S_OPENS]) >= 128 && offsetof(tfd_shard, sum[S_SEEKS]) < 192,
               "an open's, a stat's, a seek's and a close's sums sit in its third");
_Static_assert(sizeof(shard_iext) == 128, "an interval's extremes and dirty link fill two lines");
_Static_assert(offsetof(trackers, slot[3]) == 64 && offsetof(tfd_shard, values) % 64 == 0,
               "both value trackers' headers, access's first two entries and stride's first sit in one line");
_Static_assert(offsetof(tfd_thread, tot_reads) + sizeof(int64_t) <= 64, "a read changes one line of its thread");
_Static_assert(offsetof(tfd_thread, state) + sizeof(int) <= 128, "a call reads and a write changes one more");

__thread tfd_thread *tfd_self;
int64_t tfd_epoch;              /* from 1, set by threads_init (zero-initialised, it sits with the other globals a call reads) */
int tfd_use_membarrier;
static tfd_thread *threads;
static int64_t n_threads;
/* record index -> the record's shards, linked by next_of_rec */
static tfd_shard **shards_of;

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

/* untouched pages cost nothing */
static void *map_zeroed(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void slab_ready(void);

int threads_init(void)
{
    if (shards_of)
        return 0;
    if (!tfd_epoch)
        tfd_epoch = 1;
    tfd_use_membarrier = membarrier_register();
    shards_of = map_zeroed((size_t)table_capacity() * sizeof(tfd_shard *));
    slab_ready();
    return shards_of ? 0 : -1;
}

tfd_thread *threads_first(void) { return __atomic_load_n(&threads, __ATOMIC_ACQUIRE); }
int64_t threads_count(void) { return RELAXED_LOAD(n_threads); }

/* ------------------------------------------------------------------ slabs */

/* New shards (and their spill of common values) come from slabs shared by
 * all threads (pages.h): zero already, handed out by a bump pointer, never
 * freed (a shard outlives its threads). The collector keeps a spare slab
 * with its pages faulted in, so writers neither zero memory nor fault. */
#define SLAB_BYTES PAGES_REGION
typedef struct slab { size_t used; } slab;
static slab *current_slab;
static slab *spare_slab;

static slab *slab_new(int populate)
{
    slab *s = pages_region(populate);
    if (s)
        s->used = 64;
    return s;
}

static void *slab_alloc(size_t n)
{
    n = (n + 63) & ~(size_t)63;
    for (;;) {
        slab *s = __atomic_load_n(&current_slab, __ATOMIC_ACQUIRE);
        if (TFD_LIKELY(s != NULL)) {
            size_t at = __atomic_fetch_add(&s->used, n, __ATOMIC_RELAXED);
            if (TFD_LIKELY(at + n <= SLAB_BYTES))
                return (char *)s + at;
        }
        /* full: the spare, else a slab of our own, unless another thread
         * has put one in already */
        slab *fresh = __atomic_exchange_n(&spare_slab, NULL, __ATOMIC_ACQ_REL);
        if (!fresh && !(fresh = slab_new(0)))
            return NULL;
        if (!__atomic_compare_exchange_n(&current_slab, &s, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            slab *none = NULL;
            if (!__atomic_compare_exchange_n(&spare_slab, &none, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                munmap(fresh, SLAB_BYTES);
        }
    }
}

/* a spare slab, its pages mapped in, once the current one is half used */
static void slab_ready(void)
{
    slab *s = __atomic_load_n(&current_slab, __ATOMIC_ACQUIRE);
    if (!s) {
        slab *fresh = slab_new(1), *none = NULL;
        if (fresh && !__atomic_compare_exchange_n(&current_slab, &none, fresh, 0, __ATOMIC_ACQ_REL,
                                                  __ATOMIC_RELAXED))
            munmap(fresh, SLAB_BYTES);
        return;
    }
    if (__atomic_load_n(&spare_slab, __ATOMIC_ACQUIRE) || __atomic_load_n(&s->used, __ATOMIC_RELAXED) < SLAB_BYTES / 2)
        return;
    slab *fresh = slab_new(1), *none = NULL;
    if (fresh && !__atomic_compare_exchange_n(&spare_slab, &none, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        munmap(fresh, SLAB_BYTES);
}

void threads_prepare(void)
{
    slab_ready();
}

/* ----------------------------------------------------------------- threads */

static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

/* Runs as the thread exits: each shard it holds is released to its file
 * (the next thread to touch the file takes it over), and the structure to
 * the next new thread. What it wrote last stays on its dirty lists for the
 * collector. I/O in a later destructor gets a structure afresh (tfd_self
 * is cleared), which pthread hands on at its next destructor round. */
static void thread_exited(void *p)
{
    tfd_thread *t = p;
    tfd_self = NULL;
    for (tfd_shard *s = t->shards; s; s = s->next_in_thread) {
        uint64_t i = (uint64_t)s->rec->index;
        t->dir[i / DIR_CHUNK][i % DIR_CHUNK] = NULL;
        __atomic_store_n(&s->owner, NULL, __ATOMIC_RELEASE);
    }
    t->shards = NULL;
    /* a collector that saw this structure hold a shard sees it changed hands */
    __atomic_store_n(&t->seq, t->seq + 2, __ATOMIC_RELEASE);
    __atomic_store_n(&t->state, THREAD_EXITED, __ATOMIC_RELEASE);
}

static void make_exit_key(void)
{
    pthread_key_create(&exit_key, thread_exited);
}

/* the structure of an exited thread, if any */
static tfd_thread *claim_exited(void)
{
    for (tfd_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        int exited = THREAD_EXITED;
        if (__atomic_load_n(&t->state, __ATOMIC_RELAXED) == THREAD_EXITED &&
            __atomic_compare_exchange_n(&t->state, &exited, THREAD_ACTIVE, 0, __ATOMIC_ACQUIRE,
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
    if (!shards_of)
        return NULL;            /* not initialised: no shard could be indexed */
    int saved = errno;
    pthread_once(&exit_key_once, make_exit_key);
    if ((t = claim_exited())) {
        t->suppressed = 0;
        pthread_setspecific(exit_key, t);
        __atomic_add_fetch(&n_threads, 1, __ATOMIC_RELAXED);
        errno = saved;
        tfd_self = t;
        return t;
    }
    t = aligned_alloc(64, (sizeof(*t) + 63) & ~(size_t)63);   /* seq is written per call */
    if (t) {
        memset(t, 0, offsetof(tfd_thread, heat.slots));
        heat_start(&t->heat_now, &t->heat);
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

/* The child of fork counts afresh, in threads and shards of its own (the
 * parent's stay in its memory, unused). */
void threads_after_fork(void)
{
    threads = NULL;
    n_threads = 0;
    tfd_self = NULL;
    current_slab = spare_slab = NULL;     /* the next shard maps a slab of the child's */
    shards_of = map_zeroed((size_t)table_capacity() * sizeof(tfd_shard *));
}

/* ----------------------------------------------------------------- shards */

/* a released shard of the record, now held by t */
static tfd_shard *take_released(tfd_thread *t, tfd_rec *r)
{
    for (tfd_shard *s = __atomic_load_n(&shards_of[r->index], __ATOMIC_ACQUIRE); s; s = s->next_of_rec) {
        tfd_thread *none = NULL;
        if (!__atomic_load_n(&s->owner, __ATOMIC_RELAXED) &&
            __atomic_compare_exchange_n(&s->owner, &none, t, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return s;
    }
    return NULL;
}

static tfd_shard *make_shard(tfd_thread *t, tfd_rec *r)
{
    tfd_shard *s = slab_alloc(sizeof(tfd_shard));
    if (!s)
        return NULL;
    s->rec = r;
    s->owner = t;
    s->epoch = -1;
    s->iext[0].epoch = s->iext[1].epoch = -1;
    tfd_shard **head = &shards_of[r->index];
    s->next_of_rec = __atomic_load_n(head, __ATOMIC_ACQUIRE);
    while (!__atomic_compare_exchange_n(head, &s->next_of_rec, s, 1, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE))
        ;
    return s;
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
    tfd_shard *s = take_released(t, r);
    if (!s && !(s = make_shard(t, r)))
        return NULL;
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
    s->iext[k].dirty_next = RELAXED_LOAD(t->dirty[k]);
    __atomic_store_n(&t->dirty[k], s, __ATOMIC_RELEASE);
}

/* darshan_track_common_val_counters: count up to 32 distinct values */
void track_value_slow(tfd_thread *t, trackers *tr, int k, int64_t v)
{
    (void)t;
    int n = tr->n[k];
    values_big *b = tr->big;
    for (int i = 0; i < n; i++) {
        int64_t *e = b ? NULL : tr->slot[tracker_slot(k, i)];
        if (b ? b[k].val[i] == v : e[0] == v) {
            if (b)
                b[k].cnt[i]++;
            else
                e[1]++;
            return;
        }
    }
    if (n >= VALUES_MAX)
        return;
    if (n == VALUES_INLINE && !b) {
        /* both trackers move out together: one pointer in the shared line */
        if (!(b = slab_alloc(2 * sizeof(values_big))))
            return;
        for (int kind = 0; kind < 2; kind++)
            for (int i = 0; i < tr->n[kind] && i < VALUES_INLINE; i++) {
                b[kind].val[i] = tr->slot[tracker_slot(kind, i)][0];
                b[kind].cnt[i] = tr->slot[tracker_slot(kind, i)][1];
            }
        BARRIER();
        tr->big = b;
    }
    if (b) {
        b[k].val[n] = v;
        b[k].cnt[n] = 1;
    } else {
        tr->slot[tracker_slot(k, n)][0] = v;
        tr->slot[tracker_slot(k, n)][1] = 1;
    }
    BARRIER();
    tr->n[k] = n + 1;
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
