/* Threads, their shards and arenas, and the update protocol's slow paths
 * (intervals, dirty lists, heatmap bins, value tracking). */
#include "records.h"

#include <stddef.h>

/* ----------------------------------------------------------------- state */
volatile int tfd_attached;
int initialized;
pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;  /* new records only */
pthread_mutex_t collect_lock = PTHREAD_MUTEX_INITIALIZER;
int64_t epoch = 1;
int use_membarrier;
int64_t record_cap;      /* per module */
int64_t max_records;     /* all modules, index space */
tfd_rec **rec_table;     /* open addressing on (module, id) */
uint64_t rec_table_mask;
tfd_rec ***rec_by_index; /* chunks of DIR_CHUNK */
int64_t n_records;
int64_t n_module_records[16];
tfd_rec *overflow_rec[16];
uint64_t *folded_ids;    /* distinct paths folded into the overflow record */
uint64_t folded_mask;
int64_t folded_count;
tfd_thread *threads;
int64_t n_threads;
__thread tfd_thread *self;
uint64_t heat_width;    /* ticks per heatmap bin */
uint64_t heat_origin;
int trace_on;
int64_t trace_cap;
int64_t trace_budget;    /* bytes still free for trace chunks */
/* fd -> POSIX record; fd -> (stream, STDIO record). Two levels, 4096 each. */
tfd_rec **fd_posix[FD_TOP];
stream_slot *fd_stdio[FD_TOP];



void *alloc_zeroed(size_t n)
{
    /* large tables come from mmap so untouched pages cost nothing */
    if (n >= (1u << 20)) {
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    return calloc(1, n);
}

int membarrier_register(void)
{
#ifdef SYS_membarrier
    /* MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED = 16, PRIVATE_EXPEDITED = 8 */
    long q = syscall(SYS_membarrier, 0, 0, 0);
    if (q > 0 && (q & 8) && (q & 16) && syscall(SYS_membarrier, 16, 0, 0) == 0)
        return 1;
#endif
    return 0;
}

/* ----------------------------------------------------------------- threads */

static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

/* Runs as the thread exits: the collector folds what it wrote last and then
 * retires it. I/O in a later destructor gets a fresh thread (self is
 * cleared), which pthread retires on its next destructor round. */
static void thread_exited(void *p)
{
    tfd_thread *t = p;
    self = NULL;
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
    tfd_thread *t = self;
    if (TFD_LIKELY(t != NULL))
        return t;
    int saved = errno;
    pthread_once(&exit_key_once, make_exit_key);
    if ((t = claim_retired())) {
        pthread_setspecific(exit_key, t);
        __atomic_add_fetch(&n_threads, 1, __ATOMIC_RELAXED);
        errno = saved;
        self = t;
        return t;
    }
    t = aligned_alloc(64, (sizeof(*t) + 63) & ~(size_t)63);   /* seq is written per call */
    /* the heatmap ring (64 KiB) is not zeroed: a slot is cleared as the
     * thread's newest bin reaches it, before anyone reads it */
    if (t) {
        memset(t, 0, offsetof(tfd_thread, heat));
        t->next = NULL;
    }
    errno = saved;
    if (!t)
        return NULL;
    t->heat_bin = -1;
    t->dir = calloc((size_t)(max_records / DIR_CHUNK + 1), sizeof(tfd_shard **));
    if (!t->dir) {
        free(t);
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
    self = t;
    return t;
}

/* Called by the collector, under its lock, once everything the exited
 * thread wrote has been folded: free its shards and trace, and leave the
 * structure for a new thread. Its running totals stay (tfd_live sums them
 * over structures, so they only ever grow). */
void retire_thread(tfd_thread *t)
{
    for (tfd_shard *s = t->shards; s; s = s->next_in_thread)
        free(s->seen.big);
    for (void *b = t->blocks, *next; b; b = next) {
        next = *(void **)b;
        free(b);
    }
    for (int64_t i = 0; i <= max_records / DIR_CHUNK; i++)
        if (t->dir[i])
            memset(t->dir[i], 0, DIR_CHUNK * sizeof(tfd_shard *));
    for (seg_chunk *c = t->trace_head, *next; c; c = next) {
        next = c->next;
        free(c);
        __atomic_add_fetch(&trace_budget, (int64_t)sizeof(seg_chunk), __ATOMIC_RELAXED);
    }
    t->shards = NULL;
    t->blocks = NULL;
    t->arena = NULL;
    t->arena_left = 0;
    t->arena_block = 0;
    t->dirty[0] = t->dirty[1] = NULL;
    t->trace_head = t->trace_tail = NULL;
    t->trace_read = 0;
    t->suppressed = 0;
    t->creating = 0;
    t->heat_bin = -1;
    t->heat_lo = t->heat_hi = 0;
    t->heat_next = 0;
    memset(t->heat_reported, 0, sizeof(t->heat_reported));
    t->busy_lo = t->busy_hi = t->busy_in = 0;
    t->busy_pushed = t->busy_taken = 0;
    t->busy_joined = 0;
    __atomic_store_n(&t->state, THREAD_FREE, __ATOMIC_RELEASE);
}

int tfd_recording(void)
{
    if (!RELAXED_LOAD(tfd_attached))
        return 0;
    tfd_thread *t = self;
    return !(t && (t->suppressed || (t->seq & 1) || t->creating));
}

int tfd_suppress(int on)
{
    tfd_thread *t = initialized ? thread_self() : NULL;
    if (!t)
        return -1;
    int before = t->suppressed;
    t->suppressed = on;
    return before;
}

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

uint8_t size_buckets_below[64];
int64_t size_limit_of_order[64];

__attribute__((constructor)) static void fill_size_buckets(void)
{
    static const int64_t limits[9] = {101, 1025, 10241, 102401, 1048577, 4194305,
                                      10485761, 104857601, 1073741825};
    for (int order = 0; order < 64; order++)
        size_limit_of_order[order] = INT64_MAX;
    for (int i = 0; i < 9; i++) {
        int order = 64 - __builtin_clzll((uint64_t)limits[i]);
        size_limit_of_order[order] = limits[i];
        for (int o = order + 1; o < 64; o++)
            size_buckets_below[o]++;
    }
}


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




/* Move the thread's newest heatmap bin forward to b, clearing the slots it
 * reuses; refuses (returns 0) if that would overwrite unreported bins. */
static int heat_advance(tfd_thread *t, int64_t b)
{
    if (b <= t->heat_bin)
        return 1;
    int64_t oldest = RELAXED_LOAD(t->heat_next);
    if (t->heat_bin >= 0 && b - oldest >= HEAT_RING)
        return 0;
    /* a fresh ring is read from bin b on: only that slot needs clearing */
    int64_t from = t->heat_bin < 0 ? b : b - t->heat_bin > HEAT_RING ? b - HEAT_RING + 1 : t->heat_bin + 1;
    if (from < 0)
        from = 0;
    for (int64_t i = from; i <= b; i++)
        memset(t->heat[i % HEAT_RING], 0, sizeof(t->heat[0]));
    if (t->heat_bin < 0)
        RELAXED_STORE(t->heat_next, b);
    t->heat_bin = b;
    t->heat_lo = heat_origin + (uint64_t)b * heat_width;
    t->heat_hi = t->heat_lo + heat_width;
    return 1;
}

/* heatmap_update(): spread a call's bytes over the bins it overlaps */
void heat_add_slow(tfd_thread *t, int kind, int64_t bytes, uint64_t t1, uint64_t t2)
{
    if (t1 < heat_origin || t2 < t1) {
        t->heat_unbinned += bytes;
        return;
    }
    int64_t b1 = (int64_t)((t1 - heat_origin) / heat_width);
    int64_t b2 = (int64_t)((t2 - heat_origin) / heat_width);
    if (!heat_advance(t, b2)) {
        t->heat_unbinned += bytes;
        return;
    }
    int64_t oldest = RELAXED_LOAD(t->heat_next);
    if (b1 < oldest)
        b1 = oldest;   /* began before the last drain: count it from there */
    if (b1 > b2)
        b1 = b2;
    int64_t left = bytes;
    for (int64_t b = b1; b <= b2; b++) {
        int64_t part = left;
        if (b < b2 && t2 > t1) {
            uint64_t lo = heat_origin + (uint64_t)b * heat_width, hi = lo + heat_width;
            uint64_t s = t1 > lo ? t1 : lo, e = t2 < hi ? t2 : hi;
            part = (int64_t)((double)bytes * (double)(e - s) / (double)(t2 - t1) + 0.5);
            if (part > left)
                part = left;
        }
        t->heat[b % HEAT_RING][kind] += part;
        left -= part;
    }
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
