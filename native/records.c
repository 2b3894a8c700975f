/* The recording runtime: Darshan's POSIX and STDIO counters, kept per
 * thread so the hot path takes no lock, and merged when Python collects.
 *
 * Concurrency design
 *  - A record (one per path and module) holds what Darshan keeps per file
 *    reference: the last offset, last byte read/written, last I/O type and
 *    the ends of the last read/write/metadata call. Threads share it with
 *    relaxed loads and stores; when threads race on one file the order they
 *    land in is as arbitrary as the order of Darshan's lock.
 *  - Counters live in shards, one per (thread, record), written only by
 *    their thread and guarded by a sequence count so a collector copies a
 *    consistent view without ever blocking the writer.
 *  - Time is cut into intervals (epochs). The first update of a record in an
 *    interval pushes it on that interval's dirty list, so a collect costs
 *    time proportional to the records touched since the previous one.
 *    Collect closes the interval, waits (membarrier + per-thread sequence)
 *    until no thread is still inside an update tagged with it, then merges
 *    the shards of the dirty records.
 */
#include "shim.h"

#include <errno.h>
#include <limits.h>
#include <linux/magic.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <dirent.h>
#include <fcntl.h>

/* ------------------------------------------------------------------ fields */

/* Additive counters: a window's value is later minus earlier. */
#define SUM_FIELDS(X)                                                          \
    X(OPENS) X(FILENOS) X(DUPS) X(FDOPENS) X(READS) X(WRITES) X(SEEKS)          \
    X(STATS) X(MMAPS) X(FSYNCS) X(FDSYNCS) X(FLUSHES) X(RENAME_SOURCES)         \
    X(RENAME_TARGETS) X(BYTES_READ) X(BYTES_WRITTEN) X(CONSEC_READS)            \
    X(CONSEC_WRITES) X(SEQ_READS) X(SEQ_WRITES) X(RW_SWITCHES)                  \
    X(MEM_NOT_ALIGNED) X(FILE_NOT_ALIGNED)                                      \
    X(SIZE_READ_0_100) X(SIZE_READ_100_1K) X(SIZE_READ_1K_10K)                  \
    X(SIZE_READ_10K_100K) X(SIZE_READ_100K_1M) X(SIZE_READ_1M_4M)               \
    X(SIZE_READ_4M_10M) X(SIZE_READ_10M_100M) X(SIZE_READ_100M_1G)              \
    X(SIZE_READ_1G_PLUS)                                                        \
    X(SIZE_WRITE_0_100) X(SIZE_WRITE_100_1K) X(SIZE_WRITE_1K_10K)               \
    X(SIZE_WRITE_10K_100K) X(SIZE_WRITE_100K_1M) X(SIZE_WRITE_1M_4M)            \
    X(SIZE_WRITE_4M_10M) X(SIZE_WRITE_10M_100M) X(SIZE_WRITE_100M_1G)           \
    X(SIZE_WRITE_1G_PLUS)                                                       \
    X(T_READ) X(T_WRITE) X(T_META) X(ZERO_READS)

/* Extremes: maxima, first and last timestamps. Kept for the whole run and
 * for the current interval, because a window's maximum is not a difference. */
#define EXT_FIELDS(X)                                                          \
    X(MAX_BYTE_READ) X(MAX_BYTE_WRITTEN) X(MAX_READ_TIME) X(MAX_READ_TIME_SIZE) \
    X(MAX_WRITE_TIME) X(MAX_WRITE_TIME_SIZE) X(OPEN_START) X(OPEN_END)          \
    X(READ_START) X(READ_END) X(WRITE_START) X(WRITE_END) X(CLOSE_START)        \
    X(CLOSE_END)

enum {
#define X(n) S_##n,
    SUM_FIELDS(X)
#undef X
    S_N
};
enum {
#define X(n) E_##n,
    EXT_FIELDS(X)
#undef X
    E_N
};

/* A collected row: header, sums since the start, extremes of the closed
 * interval, and per-record constants. */
enum { R_INDEX, R_MODULE, R_SUM0, R_IEXT0 = R_SUM0 + S_N,
       R_MODE = R_IEXT0 + E_N, R_RENAMED_FROM, R_MEM_ALIGNMENT, R_FILE_ALIGNMENT, R_WIDTH };

static const char *const row_fields[R_WIDTH] = {
    "INDEX", "MODULE",
#define X(n) #n,
    SUM_FIELDS(X)
#undef X
#define X(n) "I_" #n,
    EXT_FIELDS(X)
#undef X
    "MODE", "RENAMED_FROM", "MEM_ALIGNMENT", "FILE_ALIGNMENT",
};

int tfd_row_width(void) { return R_WIDTH; }
const char *tfd_row_field(int i) { return (i >= 0 && i < R_WIDTH) ? row_fields[i] : NULL; }

/* -------------------------------------------------------------- structures */

#define DARSHAN_IO_READ 1
#define DARSHAN_IO_WRITE 2
#define MEM_ALIGNMENT 8         /* Darshan's default __DARSHAN_MEM_ALIGNMENT */
#define VALUES_INLINE 4
#define VALUES_MAX 32           /* DARSHAN_COMMON_VAL_MAX_RUNTIME_COUNT */

typedef struct values_big { int64_t val[VALUES_MAX]; int64_t cnt[VALUES_MAX]; } values_big;
typedef struct values {
    int32_t n;
    int64_t val[VALUES_INLINE];
    int64_t cnt[VALUES_INLINE];
    values_big *big;            /* once set, holds all n entries */
} values;

typedef struct tfd_rec tfd_rec;
typedef struct tfd_shard tfd_shard;

typedef struct tfd_thread tfd_thread;

struct tfd_shard {
    tfd_thread *owner;          /* its sequence count guards this shard */
    int64_t epoch;              /* interval of the last update */
    tfd_rec *rec;
    tfd_shard *next_in_rec;
    tfd_shard *next_in_thread;
    int64_t sum[S_N];
    /* extremes of the interval being recorded and of the one before it,
     * by interval parity; the collector folds them into run totals */
    struct { int64_t epoch; int64_t v[E_N]; } iext[2];
    values access, stride;
};

struct tfd_rec {
    uint64_t id;
    char *path;
    int64_t index;
    int module;
    int std_stream;             /* <STDIN>/<STDOUT>/<STDERR> */
    int64_t file_alignment;
    int64_t alignment_mask;     /* file_alignment - 1 when a power of two, else -1 */
    /* Darshan's per-record reference state, shared by all threads */
    int64_t offset, last_byte_read, last_byte_written;
    int last_io_type;
    int64_t last_meta_end, last_read_end, last_write_end;
    int64_t mode, renamed_from;
    /* dirty tracking */
    int64_t dirty_epoch;
    /* by interval parity: writers of the next interval push the record
     * while the collector still walks the list of the one it closed */
    tfd_rec *dirty_next[2];
    tfd_shard *shards;
};

#define SEG_PER_CHUNK 512
/* epoch: the interval the operation was counted in, so the trace of a
 * window holds exactly the operations its counters hold */
typedef struct seg { int64_t index, op, offset, length, start, end, epoch; } seg;
typedef struct seg_chunk { struct seg_chunk *next; int32_t count; seg s[SEG_PER_CHUNK]; } seg_chunk;

/* Heatmap: bytes per fine time bin, per thread, in a ring the collector
 * drains; Python re-bins them the way Darshan's heatmap module does. */
#define HEAT_RING 2048
#define HEAT_KINDS 4            /* POSIX read, POSIX write, STDIO read, STDIO write */

#define DIR_CHUNK 1024
struct tfd_thread {
    uint32_t seq;               /* odd while inside an update (also the re-entry guard) */
    int suppressed;
    /* running totals for the cheap live pull (tfd_live) */
    int64_t tot_bytes_read, tot_bytes_written, tot_reads, tot_writes, tot_opens, tot_ticks;
    int creating;               /* inside record creation (holds create_lock) */
    tfd_shard ***dir;           /* record index -> this thread's shard */
    tfd_shard *shards;          /* all of this thread's shards */
    char *arena;                /* bump allocator for shards */
    size_t arena_left;
    /* trace: the writer appends to tail, the collector consumes from head */
    seg_chunk *trace_head, *trace_tail;
    int32_t trace_read;         /* collector's position in trace_head */
    int64_t trace_dropped;
    /* heatmap ring: the writer owns heat_bin (newest bin) and the slots,
     * the collector owns heat_next (oldest bin not yet reported) */
    int64_t heat_bin;
    uint64_t heat_lo, heat_hi;  /* tick range of heat_bin */
    int64_t heat_next;
    int64_t heat_reported[HEAT_KINDS];   /* of bin heat_next, already reported */
    int64_t heat_unbinned;
    int64_t heat[HEAT_RING][HEAT_KINDS];
    tfd_thread *next;
};

/* ----------------------------------------------------------------- globals */

volatile int tfd_attached;
static int initialized;
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;  /* new records only */
static pthread_mutex_t collect_lock = PTHREAD_MUTEX_INITIALIZER;

static int64_t epoch = 1;
static tfd_rec *dirty[2];
static int use_membarrier;

static int64_t record_cap;      /* per module */
static int64_t max_records;     /* all modules, index space */
static tfd_rec **rec_table;     /* open addressing on (module, id) */
static uint64_t rec_table_mask;
static tfd_rec ***rec_by_index; /* chunks of DIR_CHUNK */
static int64_t n_records;
static int64_t n_module_records[16];
static tfd_rec *overflow_rec[16];
static uint64_t *folded_ids;    /* distinct paths folded into the overflow record */
static uint64_t folded_mask;
static int64_t folded_count;

static tfd_thread *threads;
static int64_t n_threads;
static __thread tfd_thread *self;

static char **include_prefixes, **exclude_prefixes, **exclude_suffixes;
static int n_include, n_exclude, n_exclude_suffixes;

static uint64_t heat_width;    /* ticks per heatmap bin */
static uint64_t heat_origin;
static int trace_on;
static int64_t trace_cap;
static int64_t trace_budget;    /* bytes still free for trace chunks */

/* fd -> POSIX record; fd -> (stream, STDIO record). Two levels, 4096 each. */
#define FD_CHUNK 4096
#define FD_TOP 256              /* fds up to 1,048,575 are tracked */
static tfd_rec **fd_posix[FD_TOP];
typedef struct stream_slot { FILE *stream; tfd_rec *rec; } stream_slot;
static stream_slot *fd_stdio[FD_TOP];

/* ----------------------------------------------------------------- helpers */

#define RELAXED_LOAD(p) __atomic_load_n(&(p), __ATOMIC_RELAXED)
#define RELAXED_STORE(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELAXED)
#define BARRIER() __asm__ volatile("" ::: "memory")
/* orders the sequence count against the data (free on x86, dmb on arm) */
#define WMB() __atomic_thread_fence(__ATOMIC_RELEASE)

static void *alloc_zeroed(size_t n)
{
    /* large tables come from mmap so untouched pages cost nothing */
    if (n >= (1u << 20)) {
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    return calloc(1, n);
}

static char **copy_strings(const char *const *src, int n)
{
    char **dst = calloc((size_t)n + 1, sizeof(char *));
    for (int i = 0; dst && i < n; i++)
        dst[i] = strdup(src[i]);
    return dst;
}

static void free_strings(char **v, int n)
{
    for (int i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

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

/* ----------------------------------------------------------------- threads */

static tfd_thread *thread_self(void)
{
    tfd_thread *t = self;
    if (TFD_LIKELY(t != NULL))
        return t;
    int saved = errno;
    t = aligned_alloc(64, (sizeof(*t) + 63) & ~(size_t)63);   /* seq is written per call */
    if (t)
        memset(t, 0, sizeof(*t));
    errno = saved;
    if (!t)
        return NULL;
    t->heat_bin = -1;
    t->dir = calloc((size_t)(max_records / DIR_CHUNK + 1), sizeof(tfd_shard **));
    if (!t->dir) {
        free(t);
        return NULL;
    }
    tfd_thread *head = __atomic_load_n(&threads, __ATOMIC_ACQUIRE);
    do
        t->next = head;
    while (!__atomic_compare_exchange_n(&threads, &head, t, 1, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE));
    __atomic_add_fetch(&n_threads, 1, __ATOMIC_RELAXED);
    self = t;
    return t;
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

static void *arena_alloc(tfd_thread *t, size_t n)
{
    n = (n + 63) & ~(size_t)63;
    if (t->arena_left < n) {
        size_t block = n > (256u << 10) ? n : (256u << 10);
        int saved = errno;
        char *p = calloc(1, block);
        errno = saved;
        if (!p)
            return NULL;
        t->arena = p;
        t->arena_left = block;
    }
    void *r = t->arena;
    t->arena += n;
    t->arena_left -= n;
    return r;
}

static tfd_shard *new_shard(tfd_thread *t, tfd_rec *r);

static inline tfd_shard *shard_for(tfd_thread *t, tfd_rec *r)
{
    tfd_shard **chunk = t->dir[r->index / DIR_CHUNK];
    if (TFD_LIKELY(chunk && chunk[r->index % DIR_CHUNK]))
        return chunk[r->index % DIR_CHUNK];
    return new_shard(t, r);
}

static tfd_shard *new_shard(tfd_thread *t, tfd_rec *r)
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
    tfd_shard *head = __atomic_load_n(&r->shards, __ATOMIC_ACQUIRE);
    do
        s->next_in_rec = head;
    while (!__atomic_compare_exchange_n(&r->shards, &head, s, 1, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE));
    s->next_in_thread = t->shards;
    __atomic_store_n(&t->shards, s, __ATOMIC_RELEASE);
    chunk[lo] = s;
    return s;
}

/* ------------------------------------------------------- update protocol */

typedef struct update { tfd_thread *t; tfd_shard *s; tfd_rec *r; int64_t *iext; int64_t epoch; } update;

static void mark_dirty(tfd_rec *r, int64_t e)
{
    int64_t seen = RELAXED_LOAD(r->dirty_epoch);
    while (seen != e) {
        if (__atomic_compare_exchange_n(&r->dirty_epoch, &seen, e, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            tfd_rec **list = &dirty[e & 1];
            tfd_rec *head = __atomic_load_n(list, __ATOMIC_RELAXED);
            do
                r->dirty_next[e & 1] = head;
            while (!__atomic_compare_exchange_n(list, &head, r, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
            return;
        }
    }
}

/* First update of a shard in an interval: start its extremes afresh and put
 * the record on the interval's dirty list (once per record and interval). */
static void enter_interval(tfd_shard *s, tfd_rec *r, int64_t e)
{
    int k = (int)(e & 1);
    memset(s->iext[k].v, 0, sizeof(s->iext[k].v));
    s->iext[k].epoch = e;
    s->epoch = e;
    if (RELAXED_LOAD(r->dirty_epoch) != e)
        mark_dirty(r, e);
}

static inline __attribute__((always_inline)) int begin(update *u, tfd_rec *r)
{
    tfd_thread *t = self;
    if (TFD_UNLIKELY(!t) && !(t = thread_self()))
        return 0;
    /* odd sequence: a signal handler interrupted one of our updates */
    if (TFD_UNLIKELY((t->seq & 1) | t->suppressed))
        return 0;
    tfd_shard *s = shard_for(t, r);
    if (TFD_UNLIKELY(!s))
        return 0;
    t->seq++;
    WMB();
    /* the collector's membarrier orders the store above before this load */
    if (TFD_UNLIKELY(!use_membarrier))
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    int64_t e = RELAXED_LOAD(epoch);
    if (TFD_UNLIKELY(s->epoch != e))
        enter_interval(s, r, e);
    u->t = t;
    u->s = s;
    u->r = r;
    u->iext = s->iext[e & 1].v;
    u->epoch = e;
    return 1;
}

static inline __attribute__((always_inline)) void end(update *u)
{
    WMB();
    u->t->seq++;
}

/* Darshan's extremes, within the current interval. */
static inline void ext_max(update *u, int f, int64_t v)
{
    if (u->iext[f] < v) u->iext[f] = v;
}
static inline void ext_first(update *u, int f, int64_t t)
{
    if (u->iext[f] == 0 || u->iext[f] > t) u->iext[f] = t;
}
static inline void ext_last(update *u, int f, int64_t t)
{
    u->iext[f] = t;
}
static inline void ext_maxtime(update *u, int f_time, int f_size, int64_t d, int64_t size)
{
    if (u->iext[f_time] < d) { u->iext[f_time] = d; u->iext[f_size] = size; }
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
    int64_t from = t->heat_bin < 0 || b - t->heat_bin > HEAT_RING ? b - HEAT_RING + 1 : t->heat_bin + 1;
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
static void heat_add_slow(tfd_thread *t, int kind, int64_t bytes, uint64_t t1, uint64_t t2)
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

static inline void heat_add(tfd_thread *t, int kind, int64_t bytes, uint64_t t1, uint64_t t2)
{
    if (bytes == 0)
        return;
    if (TFD_LIKELY(t1 >= t->heat_lo && t2 < t->heat_hi))
        t->heat[t->heat_bin % HEAT_RING][kind] += bytes;
    else
        heat_add_slow(t, kind, bytes, t1, t2);
}

/* DARSHAN_TIMER_INC_NO_OVERLAP against the record's shared "last end" */
static inline void timer_no_overlap(update *u, int f, int64_t t1, int64_t t2, int64_t *last)
{
    if (t1 == 0 || t2 == 0)
        return;
    int64_t l = RELAXED_LOAD(*last);
    u->s->sum[f] += (t1 > l) ? (t2 - t1) : (t2 - l);
    if (t2 > l)
        RELAXED_STORE(*last, t2);
}

/* DARSHAN_BUCKET_INC */
static inline int size_bucket(int64_t v)
{
    static const int64_t limits[9] = {101, 1025, 10241, 102401, 1048577, 4194305,
                                      10485761, 104857601, 1073741825};
    int i = 0;
    while (i < 9 && v >= limits[i])
        i++;
    return i;
}

/* darshan_track_common_val_counters: count up to 32 distinct values */
static void track_value_slow(tfd_thread *t, values *vs, int64_t v);

static inline __attribute__((always_inline)) void track_value(tfd_thread *t, values *vs, int64_t v)
{
    /* the common case: the same size or stride as the first one seen */
    if (TFD_LIKELY(vs->n > 0 && !vs->big && vs->val[0] == v))
        vs->cnt[0]++;
    else
        track_value_slow(t, vs, v);
}

static void track_value_slow(tfd_thread *t, values *vs, int64_t v)
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

/* ------------------------------------------------------------------ paths */

/* darshan_clean_file_path: absolute, no "//", no "/./". Names starting
 * with '<' are Darshan's reserved names and stay as they are. */
int tfd_clean_path(const char *path, char *out, size_t out_len)
{
    if (!path || !*path)
        return -1;
    size_t need;
    if (path[0] == '<' || path[0] == '/') {
        need = strlen(path) + 1;
        if (need > out_len)
            return -1;
        memcpy(out, path, need);
        if (path[0] == '<')
            return 0;
    } else {
        if (!getcwd(out, out_len))
            return -1;
        size_t c = strlen(out), p = strlen(path);
        if (c + 1 + p + 1 > out_len)
            return -1;
        out[c] = '/';
        memcpy(out + c + 1, path, p + 1);
    }
    char *f;
    while ((f = strstr(out, "//")))
        memmove(f, f + 1, strlen(f + 1) + 1);
    while ((f = strstr(out, "/./")))
        memmove(f, f + 2, strlen(f + 2) + 1);
    return 0;
}

int tfd_path_excluded(const char *p)
{
    if (p[0] == '<')
        return 0;
    for (int i = 0; i < n_include; i++)
        if (strncmp(p, include_prefixes[i], strlen(include_prefixes[i])) == 0)
            return 0;
    for (int i = 0; i < n_exclude; i++)
        if (strncmp(p, exclude_prefixes[i], strlen(exclude_prefixes[i])) == 0)
            return 1;
    size_t n = strlen(p);
    for (int i = 0; i < n_exclude_suffixes; i++) {
        size_t k = strlen(exclude_suffixes[i]);
        if (n >= k && strcmp(p + n - k, exclude_suffixes[i]) == 0)
            return 1;
    }
    return 0;
}

/* --------------------------------------------------------------- records */

static inline uint64_t table_hash(uint64_t id, int module)
{
    uint64_t h = id ^ ((uint64_t)module * 0x9e3779b97f4a7c15ull);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

static tfd_rec *table_find(uint64_t id, int module)
{
    for (uint64_t i = table_hash(id, module) & rec_table_mask;; i = (i + 1) & rec_table_mask) {
        tfd_rec *r = __atomic_load_n(&rec_table[i], __ATOMIC_ACQUIRE);
        if (!r)
            return NULL;
        if (r->id == id && r->module == module)
            return r;
    }
}

static int64_t block_size_of(const char *path)
{
    struct statfs sf;
    if (path[0] != '/' || statfs(path, &sf) != 0)
        return -1;
#ifndef LL_SUPER_MAGIC
#define LL_SUPER_MAGIC 0x0BD00BD0
#endif
    return sf.f_type == LL_SUPER_MAGIC ? 1024 * 1024 : (int64_t)sf.f_bsize;
}

/* caller holds create_lock */
static tfd_rec *new_record(uint64_t id, int module, const char *path)
{
    if (n_records >= max_records)
        return NULL;
    /* a cache line of its own: threads write the position fields */
    tfd_rec *r = aligned_alloc(64, (sizeof(*r) + 63) & ~(size_t)63);
    if (r)
        memset(r, 0, sizeof(*r));
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return NULL;
    }
    r->id = id;
    r->module = module;
    r->index = n_records;
    r->file_alignment = block_size_of(path);
    r->alignment_mask = (r->file_alignment > 0 && !(r->file_alignment & (r->file_alignment - 1)))
                            ? r->file_alignment - 1 : -1;
    r->dirty_epoch = -1;
    r->std_stream = path[0] == '<';
    int64_t hi = r->index / DIR_CHUNK;
    if (!rec_by_index[hi] && !(rec_by_index[hi] = calloc(DIR_CHUNK, sizeof(tfd_rec *)))) {
        free(r->path);
        free(r);
        return NULL;
    }
    rec_by_index[hi][r->index % DIR_CHUNK] = r;
    uint64_t i = table_hash(id, module) & rec_table_mask;
    while (rec_table[i])
        i = (i + 1) & rec_table_mask;
    __atomic_store_n(&rec_table[i], r, __ATOMIC_RELEASE);
    __atomic_store_n(&n_records, n_records + 1, __ATOMIC_RELEASE);
    n_module_records[module & 15]++;
    return r;
}

static void note_folded(uint64_t id)
{
    for (uint64_t i = (id * 0x9e3779b97f4a7c15ull) & folded_mask;; i = (i + 1) & folded_mask) {
        if (folded_ids[i] == id)
            return;
        if (folded_ids[i] == 0) {
            if (folded_count < (int64_t)folded_mask / 2) {
                folded_ids[i] = id;
            }
            folded_count++;
            return;
        }
    }
}

/* The record for a cleaned path, created on first sight; NULL if excluded.
 * Past the cap, new paths share one overflow record per module. */
static tfd_rec *record_for_clean(const char *clean, int module)
{
    if (tfd_path_excluded(clean))
        return NULL;
    uint64_t id = tfd_hash64((const unsigned char *)clean, strlen(clean));
    tfd_rec *r = table_find(id, module);
    if (TFD_LIKELY(r != NULL))
        return r;
    /* a signal handler doing I/O while we hold the lock must not wait on it */
    tfd_thread *t = thread_self();
    if (!t || t->creating)
        return NULL;
    t->creating = 1;
    int saved = errno;
    pthread_mutex_lock(&create_lock);
    r = table_find(id, module);
    if (!r) {
        if (n_module_records[module & 15] < record_cap) {
            r = new_record(id, module, clean);
        } else {
            note_folded(id);
            r = overflow_rec[module & 15];
        }
    }
    pthread_mutex_unlock(&create_lock);
    errno = saved;
    t->creating = 0;
    return r;
}

static tfd_rec *record_for_path(int dirfd, const char *path, int module)
{
    char stackbuf[2 * PATH_MAX];
    const char *p = path;
    char joined[2 * PATH_MAX];
    if (!path || !*path)
        return NULL;
    /* openat/fstatat relative to a directory Darshan knows: join the names */
    if (path[0] != '/' && dirfd >= 0 && dirfd != AT_FDCWD) {
        tfd_rec *d = NULL;
        if (dirfd < FD_TOP * FD_CHUNK && fd_posix[dirfd / FD_CHUNK])
            d = RELAXED_LOAD(fd_posix[dirfd / FD_CHUNK][dirfd % FD_CHUNK]);
        if (d && d->path[0] == '/') {
            size_t dl = strlen(d->path), pl = strlen(path);
            if (dl + pl + 2 < sizeof(joined)) {
                memcpy(joined, d->path, dl);
                if (d->path[dl - 1] != '/')
                    joined[dl++] = '/';
                memcpy(joined + dl, path, pl + 1);
                p = joined;
            }
        }
    }
    if (tfd_clean_path(p, stackbuf, sizeof(stackbuf)) != 0)
        return NULL;
    return record_for_clean(stackbuf, module);
}

static tfd_rec **posix_slot(int fd, int create)
{
    if (fd < 0 || fd >= FD_TOP * FD_CHUNK)
        return NULL;
    tfd_rec **chunk = __atomic_load_n(&fd_posix[fd / FD_CHUNK], __ATOMIC_ACQUIRE);
    if (!chunk) {
        if (!create)
            return NULL;
        tfd_rec **fresh = calloc(FD_CHUNK, sizeof(tfd_rec *));
        if (!fresh)
            return NULL;
        if (!__atomic_compare_exchange_n(&fd_posix[fd / FD_CHUNK], &chunk, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            free(fresh);
        else
            chunk = fresh;
    }
    return &chunk[fd % FD_CHUNK];
}

static inline __attribute__((always_inline)) tfd_rec *posix_rec(int fd)
{
    tfd_rec **slot = posix_slot(fd, 0);
    return slot ? __atomic_load_n(slot, __ATOMIC_ACQUIRE) : NULL;
}

static stream_slot *stdio_slot(int fd, int create)
{
    if (fd < 0 || fd >= FD_TOP * FD_CHUNK)
        return NULL;
    stream_slot *chunk = __atomic_load_n(&fd_stdio[fd / FD_CHUNK], __ATOMIC_ACQUIRE);
    if (!chunk) {
        if (!create)
            return NULL;
        stream_slot *fresh = calloc(FD_CHUNK, sizeof(stream_slot));
        if (!fresh)
            return NULL;
        if (!__atomic_compare_exchange_n(&fd_stdio[fd / FD_CHUNK], &chunk, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            free(fresh);
        else
            chunk = fresh;
    }
    return &chunk[fd % FD_CHUNK];
}

static tfd_rec *stdio_rec(FILE *stream)
{
    if (!stream)
        return NULL;
    stream_slot *s = stdio_slot(fileno_unlocked(stream), 0);
    if (!s || __atomic_load_n(&s->stream, __ATOMIC_ACQUIRE) != stream)
        return NULL;
    return RELAXED_LOAD(s->rec);
}

static void stdio_map(FILE *stream, tfd_rec *r)
{
    stream_slot *s = stdio_slot(fileno_unlocked(stream), 1);
    if (!s)
        return;
    RELAXED_STORE(s->rec, r);
    __atomic_store_n(&s->stream, stream, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------ POSIX events */

static void posix_open_record(tfd_rec *r, int fd, int64_t mode, int reset, int ref_counter,
                              uint64_t t1, uint64_t t2)
{
    update u;
    if (!begin(&u, r))
        return;
    if (mode)
        RELAXED_STORE(r->mode, mode);
    if (reset) {
        RELAXED_STORE(r->offset, 0);
        RELAXED_STORE(r->last_byte_written, 0);
        RELAXED_STORE(r->last_byte_read, 0);
    }
    u.s->sum[S_OPENS]++;
    u.t->tot_opens++;
    u.t->tot_ticks += (int64_t)(t2 - t1);
    if (ref_counter >= 0)
        u.s->sum[ref_counter]++;
    ext_first(&u, E_OPEN_START, (int64_t)t1);
    ext_last(&u, E_OPEN_END, (int64_t)t2);
    timer_no_overlap(&u, S_T_META, (int64_t)t1, (int64_t)t2, &r->last_meta_end);
    end(&u);
    tfd_rec **slot = posix_slot(fd, 1);
    if (slot)
        __atomic_store_n(slot, r, __ATOMIC_RELEASE);
}

void tfd_posix_open(int fd, int dirfd, const char *path, int64_t mode, uint64_t t1, uint64_t t2)
{
    if (fd < 0)
        return;
    tfd_rec *r = record_for_path(dirfd, path, TFD_MODULE_POSIX);
    if (!r) {
        /* an fd we do not track must not keep a stale mapping */
        tfd_rec **slot = posix_slot(fd, 0);
        if (slot)
            __atomic_store_n(slot, NULL, __ATOMIC_RELEASE);
        return;
    }
    posix_open_record(r, fd, mode, 1, -1, t1, t2);
}

void tfd_posix_refopen(int oldfd, int newfd, int is_dup, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = posix_rec(oldfd);
    if (!r) {
        tfd_rec **slot = posix_slot(newfd, 0);
        if (slot)
            __atomic_store_n(slot, NULL, __ATOMIC_RELEASE);
        return;
    }
    posix_open_record(r, newfd, 0, 0, is_dup ? S_DUPS : S_FILENOS, t1, t2);
}

void tfd_posix_fileno(FILE *stream, int fd, uint64_t t1, uint64_t t2)
{
    tfd_rec *s = stdio_rec(stream);
    if (!s)
        return;
    tfd_rec *r = record_for_clean(s->path, TFD_MODULE_POSIX);
    if (r)
        posix_open_record(r, fd, 0, 0, S_FILENOS, t1, t2);
}

static void trace_append(update *u, int op, int64_t off, int64_t len, uint64_t t1, uint64_t t2)
{
    tfd_thread *t = u->t;
    seg_chunk *c = t->trace_tail;
    if (!c || c->count == SEG_PER_CHUNK) {
        if (__atomic_sub_fetch(&trace_budget, (int64_t)sizeof(seg_chunk), __ATOMIC_RELAXED) < 0) {
            __atomic_add_fetch(&trace_budget, (int64_t)sizeof(seg_chunk), __ATOMIC_RELAXED);
            t->trace_dropped++;
            return;
        }
        int saved = errno;
        seg_chunk *fresh = malloc(sizeof(seg_chunk));
        errno = saved;
        if (!fresh) {
            __atomic_add_fetch(&trace_budget, (int64_t)sizeof(seg_chunk), __ATOMIC_RELAXED);
            t->trace_dropped++;
            return;
        }
        fresh->next = NULL;
        fresh->count = 0;
        if (c)
            __atomic_store_n(&c->next, fresh, __ATOMIC_RELEASE);
        else
            __atomic_store_n(&t->trace_head, fresh, __ATOMIC_RELEASE);
        __atomic_store_n(&t->trace_tail, fresh, __ATOMIC_RELEASE);
        c = fresh;
    }
    seg *s = &c->s[c->count];
    s->index = u->r->index;
    s->op = op;
    s->offset = off;
    s->length = len;
    s->start = (int64_t)t1;
    s->end = (int64_t)t2;
    s->epoch = u->epoch;
    __atomic_store_n(&c->count, c->count + 1, __ATOMIC_RELEASE);
}

/* POSIX_RECORD_READ / POSIX_RECORD_WRITE in one body */
/* inlined twice, so reads and writes each get a branch-free copy */
static inline __attribute__((always_inline)) void
posix_data(int fd, int64_t ret, int pflag, int64_t off, int aligned, uint64_t t1, uint64_t t2, const int is_write)
{
    tfd_rec *r = posix_rec(fd);
    if (!r)
        return;
    update u;
    if (!begin(&u, r))
        return;
    int64_t *sum = u.s->sum;
    int64_t this_off = pflag ? off : RELAXED_LOAD(r->offset);
    int64_t *last_byte = is_write ? &r->last_byte_written : &r->last_byte_read;
    int64_t last = RELAXED_LOAD(*last_byte);
    int64_t stride;

    if (TFD_UNLIKELY(trace_on))
        trace_append(&u, is_write, this_off, ret, t1, t2);
    if (this_off > last)
        sum[is_write ? S_SEQ_WRITES : S_SEQ_READS]++;
    if (this_off == last + 1)
        sum[is_write ? S_CONSEC_WRITES : S_CONSEC_READS]++;
    stride = (this_off > 0 && this_off > last && last != 0) ? this_off - last - 1 : 0;
    RELAXED_STORE(*last_byte, this_off + ret - 1);
    RELAXED_STORE(r->offset, this_off + ret);
    ext_max(&u, is_write ? E_MAX_BYTE_WRITTEN : E_MAX_BYTE_READ, this_off + ret - 1);
    sum[is_write ? S_BYTES_WRITTEN : S_BYTES_READ] += ret;
    sum[is_write ? S_WRITES : S_READS]++;
    heat_add(u.t, is_write, ret, t1, t2);
    if (is_write) { u.t->tot_bytes_written += ret; u.t->tot_writes++; }
    else { u.t->tot_bytes_read += ret; u.t->tot_reads++; }
    u.t->tot_ticks += (int64_t)(t2 - t1);
    sum[(is_write ? S_SIZE_WRITE_0_100 : S_SIZE_READ_0_100) + size_bucket(ret)]++;
    if (!is_write && ret == 0)
        sum[S_ZERO_READS]++;
    track_value(u.t, &u.s->access, ret);
    track_value(u.t, &u.s->stride, stride);
    if (!aligned)
        sum[S_MEM_NOT_ALIGNED]++;
    if (r->alignment_mask >= 0 ? (this_off & r->alignment_mask) != 0
                               : (r->file_alignment > 0 && this_off % r->file_alignment != 0))
        sum[S_FILE_NOT_ALIGNED]++;
    int io = is_write ? DARSHAN_IO_WRITE : DARSHAN_IO_READ;
    int prev = RELAXED_LOAD(r->last_io_type);
    if (prev && prev != io)
        sum[S_RW_SWITCHES]++;
    RELAXED_STORE(r->last_io_type, io);
    ext_first(&u, is_write ? E_WRITE_START : E_READ_START, (int64_t)t1);
    ext_last(&u, is_write ? E_WRITE_END : E_READ_END, (int64_t)t2);
    ext_maxtime(&u, is_write ? E_MAX_WRITE_TIME : E_MAX_READ_TIME,
                is_write ? E_MAX_WRITE_TIME_SIZE : E_MAX_READ_TIME_SIZE, (int64_t)(t2 - t1), ret);
    timer_no_overlap(&u, is_write ? S_T_WRITE : S_T_READ, (int64_t)t1, (int64_t)t2,
                     is_write ? &r->last_write_end : &r->last_read_end);
    end(&u);
}

void tfd_posix_read(int fd, int64_t ret, int pflag, int64_t off, int aligned, uint64_t t1, uint64_t t2)
{
    posix_data(fd, ret, pflag, off, aligned, t1, t2, 0);
}

void tfd_posix_write(int fd, int64_t ret, int pflag, int64_t off, int aligned, uint64_t t1, uint64_t t2)
{
    posix_data(fd, ret, pflag, off, aligned, t1, t2, 1);
}

void tfd_posix_seek(int fd, int64_t newoff, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = posix_rec(fd);
    update u;
    if (!r || !begin(&u, r))
        return;
    RELAXED_STORE(r->offset, newoff);
    timer_no_overlap(&u, S_T_META, (int64_t)t1, (int64_t)t2, &r->last_meta_end);
    u.s->sum[S_SEEKS]++;
    end(&u);
}

static void posix_stat_record(tfd_rec *r, uint64_t t1, uint64_t t2)
{
    update u;
    if (!r || !begin(&u, r))
        return;
    u.s->sum[S_STATS]++;
    timer_no_overlap(&u, S_T_META, (int64_t)t1, (int64_t)t2, &r->last_meta_end);
    end(&u);
}

void tfd_posix_stat_path(int dirfd, const char *path, uint64_t t1, uint64_t t2)
{
    posix_stat_record(record_for_path(dirfd, path, TFD_MODULE_POSIX), t1, t2);
}

void tfd_posix_stat_fd(int fd, uint64_t t1, uint64_t t2)
{
    posix_stat_record(posix_rec(fd), t1, t2);
}

void tfd_posix_mmap(int fd)
{
    tfd_rec *r = posix_rec(fd);
    update u;
    if (!r || !begin(&u, r))
        return;
    u.s->sum[S_MMAPS]++;
    end(&u);
}

void tfd_posix_sync(int fd, int data_only, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = posix_rec(fd);
    update u;
    if (!r || !begin(&u, r))
        return;
    timer_no_overlap(&u, S_T_WRITE, (int64_t)t1, (int64_t)t2, &r->last_write_end);
    u.s->sum[data_only ? S_FDSYNCS : S_FSYNCS]++;
    end(&u);
}

/* Forget the descriptor before the real close: once closed, another thread
 * may get the same number from open() (for the same file, even) and map it,
 * and forgetting afterwards would drop that thread's mapping. Linux frees the
 * descriptor even when close fails, so forgetting first is never wrong. */
void *tfd_posix_close_begin(int fd)
{
    tfd_rec **slot = posix_slot(fd, 0);
    return slot ? __atomic_exchange_n(slot, NULL, __ATOMIC_ACQ_REL) : NULL;
}

void tfd_posix_close_end(void *token, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = token;
    if (!r)
        return;
    update u;
    if (!begin(&u, r))
        return;
    RELAXED_STORE(r->last_byte_written, 0);
    RELAXED_STORE(r->last_byte_read, 0);
    ext_first(&u, E_CLOSE_START, (int64_t)t1);
    ext_last(&u, E_CLOSE_END, (int64_t)t2);
    timer_no_overlap(&u, S_T_META, (int64_t)t1, (int64_t)t2, &r->last_meta_end);
    end(&u);
}

void tfd_posix_rename(const char *oldpath, const char *newpath, uint64_t t1, uint64_t t2)
{
    char clean[2 * PATH_MAX];
    if (tfd_clean_path(oldpath, clean, sizeof(clean)) != 0)
        return;
    if (tfd_path_excluded(clean))
        return;
    uint64_t old_id = tfd_hash64((const unsigned char *)clean, strlen(clean));
    /* Darshan counts renames only of files it already knows */
    tfd_rec *src = table_find(old_id, TFD_MODULE_POSIX);
    update u;
    if (!src || !begin(&u, src))
        return;
    u.s->sum[S_RENAME_SOURCES]++;
    timer_no_overlap(&u, S_T_META, (int64_t)t1, (int64_t)t2, &src->last_meta_end);
    end(&u);
    tfd_rec *dst = record_for_path(AT_FDCWD, newpath, TFD_MODULE_POSIX);
    if (!dst || !begin(&u, dst))
        return;
    u.s->sum[S_RENAME_TARGETS]++;
    int64_t zero = 0;
    __atomic_compare_exchange_n(&dst->renamed_from, &zero, (int64_t)old_id, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    end(&u);
}

/* ------------------------------------------------------------ STDIO events */

static void stdio_open_record(tfd_rec *r, FILE *stream, int reset, int fdopen_counter,
                              uint64_t t1, uint64_t t2)
{
    update u;
    if (!begin(&u, r))
        return;
    if (reset)
        RELAXED_STORE(r->offset, 0);
    u.s->sum[S_OPENS]++;
    if (fdopen_counter)
        u.s->sum[S_FDOPENS]++;
    if (t1) {
        ext_first(&u, E_OPEN_START, (int64_t)t1);
        ext_last(&u, E_OPEN_END, (int64_t)t2);
    }
    timer_no_overlap(&u, S_T_META, (int64_t)t1, (int64_t)t2, &r->last_meta_end);
    end(&u);
    stdio_map(stream, r);
}

void tfd_stdio_open(FILE *stream, const char *path, uint64_t t1, uint64_t t2)
{
    if (!stream)
        return;
    tfd_rec *r = record_for_path(AT_FDCWD, path, TFD_MODULE_STDIO);
    if (!r) {
        stream_slot *s = stdio_slot(fileno_unlocked(stream), 0);
        if (s)
            __atomic_store_n(&s->stream, NULL, __ATOMIC_RELEASE);
        return;
    }
    stdio_open_record(r, stream, 1, 0, t1, t2);
}

void tfd_stdio_fdopen(FILE *stream, int fd, uint64_t t1, uint64_t t2)
{
    tfd_rec *p = posix_rec(fd);
    if (!stream || !p)
        return;
    tfd_rec *r = record_for_clean(p->path, TFD_MODULE_STDIO);
    if (r)
        stdio_open_record(r, stream, 0, 1, t1, t2);
}

void tfd_stdio_read(FILE *stream, int64_t bytes, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = stdio_rec(stream);
    update u;
    if (!r || !begin(&u, r))
        return;
    int64_t off = RELAXED_LOAD(r->offset);
    RELAXED_STORE(r->offset, off + bytes);
    ext_max(&u, E_MAX_BYTE_READ, off + bytes - 1);
    u.s->sum[S_BYTES_READ] += bytes;
    u.s->sum[S_READS]++;
    heat_add(u.t, 2, bytes, t1, t2);
    u.t->tot_bytes_read += bytes;
    u.t->tot_reads++;
    u.t->tot_ticks += (int64_t)(t2 - t1);
    ext_first(&u, E_READ_START, (int64_t)t1);
    ext_last(&u, E_READ_END, (int64_t)t2);
    timer_no_overlap(&u, S_T_READ, (int64_t)t1, (int64_t)t2, &r->last_read_end);
    end(&u);
}

void tfd_stdio_write(FILE *stream, int64_t bytes, int is_flush, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = stdio_rec(stream);
    update u;
    if (!r || !begin(&u, r))
        return;
    int64_t off = RELAXED_LOAD(r->offset);
    RELAXED_STORE(r->offset, off + bytes);
    ext_max(&u, E_MAX_BYTE_WRITTEN, off + bytes - 1);
    u.s->sum[S_BYTES_WRITTEN] += bytes;
    u.s->sum[is_flush ? S_FLUSHES : S_WRITES]++;
    heat_add(u.t, 3, bytes, t1, t2);
    u.t->tot_bytes_written += bytes;
    u.t->tot_writes += !is_flush;
    u.t->tot_ticks += (int64_t)(t2 - t1);
    ext_first(&u, E_WRITE_START, (int64_t)t1);
    ext_last(&u, E_WRITE_END, (int64_t)t2);
    timer_no_overlap(&u, S_T_WRITE, (int64_t)t1, (int64_t)t2, &r->last_write_end);
    end(&u);
}

void tfd_stdio_seek(FILE *stream, int64_t newoff, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = stdio_rec(stream);
    update u;
    if (!r || !begin(&u, r))
        return;
    RELAXED_STORE(r->offset, newoff);
    timer_no_overlap(&u, S_T_META, (int64_t)t1, (int64_t)t2, &r->last_meta_end);
    u.s->sum[S_SEEKS]++;
    end(&u);
}

/* As for close: forget the stream and its descriptor before the real
 * fclose, which frees both for reuse by other threads. */
void *tfd_stdio_close_begin(FILE *stream)
{
    int fd = stream ? fileno_unlocked(stream) : -1;
    tfd_rec *r = stdio_rec(stream);
    stream_slot *s = stdio_slot(fd, 0);
    if (s)
        __atomic_store_n(&s->stream, NULL, __ATOMIC_RELEASE);
    /* fclose closes the descriptor inside libc: forget any POSIX mapping */
    tfd_rec **ps = posix_slot(fd, 0);
    if (ps)
        __atomic_store_n(ps, NULL, __ATOMIC_RELEASE);
    return r;
}

void tfd_stdio_close_end(void *token, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = token;
    update u;
    if (!r || !begin(&u, r))
        return;
    ext_first(&u, E_CLOSE_START, (int64_t)t1);
    ext_last(&u, E_CLOSE_END, (int64_t)t2);
    timer_no_overlap(&u, S_T_META, (int64_t)t1, (int64_t)t2, &r->last_meta_end);
    end(&u);
}

/* -------------------------------------------------------------- lifecycle */

static void reset_after_fork(void);

int tfd_records_init(const tfd_config *c, char *err, size_t err_len)
{
    int rc = 0;
    pthread_mutex_lock(&init_lock);
    /* filters may change at every attach */
    pthread_mutex_lock(&create_lock);
    free_strings(include_prefixes, n_include);
    free_strings(exclude_prefixes, n_exclude);
    free_strings(exclude_suffixes, n_exclude_suffixes);
    include_prefixes = copy_strings(c->include_prefixes, c->n_include);
    exclude_prefixes = copy_strings(c->exclude_prefixes, c->n_exclude);
    exclude_suffixes = copy_strings(c->exclude_suffixes, c->n_exclude_suffixes);
    n_include = include_prefixes ? c->n_include : 0;
    n_exclude = exclude_prefixes ? c->n_exclude : 0;
    n_exclude_suffixes = exclude_suffixes ? c->n_exclude_suffixes : 0;
    pthread_mutex_unlock(&create_lock);
    if (c->trace && !trace_on) {
        trace_cap = c->trace_cap_bytes;
        __atomic_store_n(&trace_budget, trace_cap, __ATOMIC_RELAXED);
        trace_on = 1;
    } else if (!c->trace) {
        trace_on = 0;
    }
    if (initialized)
        goto out;

    tfd_clock_info clock;
    tfd_clock(&clock);
    heat_origin = (uint64_t)clock.origin_ticks;
    heat_width = (uint64_t)(clock.ticks_per_second * 0.025);   /* 25 ms bins */
    if (heat_width == 0)
        heat_width = 1;
    record_cap = c->record_cap > 0 ? c->record_cap : 65536;
    max_records = 2 * record_cap + 8;  /* two modules, their overflow and std streams */
    uint64_t slots = 1;
    while (slots < (uint64_t)max_records * 2)
        slots <<= 1;
    rec_table = alloc_zeroed(slots * sizeof(tfd_rec *));
    rec_table_mask = slots - 1;
    folded_ids = alloc_zeroed(slots * sizeof(uint64_t));
    folded_mask = slots - 1;
    rec_by_index = calloc((size_t)(max_records / DIR_CHUNK + 1), sizeof(tfd_rec **));
    if (!rec_table || !folded_ids || !rec_by_index) {
        snprintf(err, err_len, "cannot allocate the record table for %lld records", (long long)record_cap);
        rc = -1;
        goto out;
    }
    use_membarrier = membarrier_register();
    pthread_mutex_lock(&create_lock);
    static const int mods[2] = {TFD_MODULE_POSIX, TFD_MODULE_STDIO};
    for (int m = 0; m < 2; m++) {
        const char *name = "<tfdarshan:other-files>";
        overflow_rec[mods[m]] = new_record(tfd_hash64((const unsigned char *)name, strlen(name)), mods[m], name);
        n_module_records[mods[m]]--;  /* does not count against the cap */
    }
    pthread_mutex_unlock(&create_lock);
    pthread_atfork(NULL, NULL, reset_after_fork);
    initialized = 1;

    /* Darshan opens the three standard streams at start-up */
    FILE *std[3] = {stdin, stdout, stderr};
    const char *names[3] = {"<STDIN>", "<STDOUT>", "<STDERR>"};
    for (int i = 0; i < 3; i++) {
        tfd_rec *r = record_for_clean(names[i], TFD_MODULE_STDIO);
        if (r && std[i])
            stdio_open_record(r, std[i], 1, 0, 0, 0);
    }
out:
    pthread_mutex_unlock(&init_lock);
    return rc;
}

/* Called by attach before any slot is patched. Descriptors may have been
 * closed and their numbers reused while we were detached, so the mappings
 * are rebuilt: every open descriptor is attributed through /proc/self/fd
 * (without counting an open Darshan never saw), and streams whose descriptor
 * is gone are forgotten. */
void tfd_records_sync_open_fds(void)
{
    for (int hi = 0; hi < FD_TOP; hi++) {
        tfd_rec **chunk = __atomic_load_n(&fd_posix[hi], __ATOMIC_ACQUIRE);
        stream_slot *streams = __atomic_load_n(&fd_stdio[hi], __ATOMIC_ACQUIRE);
        for (int lo = 0; lo < FD_CHUNK && (chunk || streams); lo++) {
            if (chunk)
                __atomic_store_n(&chunk[lo], NULL, __ATOMIC_RELEASE);
            if (streams && streams[lo].stream && fcntl(hi * FD_CHUNK + lo, F_GETFD) == -1)
                __atomic_store_n(&streams[lo].stream, NULL, __ATOMIC_RELEASE);
        }
    }
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    int self_fd = dirfd(d);
    struct dirent *e;
    char link[64], target[PATH_MAX];
    while ((e = readdir(d))) {
        char *endp;
        long fd = strtol(e->d_name, &endp, 10);
        if (*endp || fd == self_fd || fd < 0)
            continue;
        tfd_rec **slot = posix_slot((int)fd, 1);
        if (!slot || __atomic_load_n(slot, __ATOMIC_ACQUIRE))
            continue;
        snprintf(link, sizeof(link), "/proc/self/fd/%ld", fd);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        struct stat st;
        if (n <= 0 || target[0] != '/' || fstat((int)fd, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        target[n] = 0;
        char clean[2 * PATH_MAX];
        if (tfd_clean_path(target, clean, sizeof(clean)) != 0)
            continue;
        tfd_rec *r = record_for_clean(clean, TFD_MODULE_POSIX);
        if (!r)
            continue;
        off_t pos = lseek((int)fd, 0, SEEK_CUR);
        if (pos >= 0)
            RELAXED_STORE(r->offset, (int64_t)pos);
        tfd_rec *none = NULL;
        __atomic_compare_exchange_n(slot, &none, r, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    }
    closedir(d);
}

/* The child of fork() starts with empty records, as Darshan's does: it keeps
 * the descriptor mappings (the files are still open) but counts afresh. */
static void reset_after_fork(void)
{
    pthread_mutex_init(&create_lock, NULL);
    pthread_mutex_init(&collect_lock, NULL);
    pthread_mutex_init(&init_lock, NULL);
    tfd_patch_atfork_child();
    if (!initialized)
        return;
    tfd_rec **old_table = rec_table;
    uint64_t old_mask = rec_table_mask;
    tfd_rec ***old_by_index = rec_by_index;
    int64_t old_n = n_records;

    rec_table = alloc_zeroed((old_mask + 1) * sizeof(tfd_rec *));
    rec_by_index = calloc((size_t)(max_records / DIR_CHUNK + 1), sizeof(tfd_rec **));
    memset(folded_ids, 0, (folded_mask + 1) * sizeof(uint64_t));
    folded_count = 0;
    n_records = 0;
    memset(n_module_records, 0, sizeof(n_module_records));
    threads = NULL;
    n_threads = 0;
    self = NULL;
    trace_budget = trace_cap;
    dirty[0] = dirty[1] = NULL;
    if (!rec_table || !rec_by_index) {
        /* cannot count in the child: stop recording, keep forwarding */
        tfd_attached = 0;
        return;
    }
    /* remap every old record to a fresh one with the same identity */
    tfd_rec **map = calloc((size_t)old_n + 1, sizeof(tfd_rec *));
    for (int64_t i = 0; i < old_n; i++) {
        tfd_rec *o = old_by_index[i / DIR_CHUNK][i % DIR_CHUNK];
        tfd_rec *n = new_record(o->id, o->module, o->path);
        if (n) {
            n->offset = o->offset;
            if (o == overflow_rec[o->module & 15]) {
                overflow_rec[o->module & 15] = n;
                n_module_records[o->module & 15]--;
            }
        }
        if (map)
            map[i] = n;
    }
    for (int hi = 0; hi < FD_TOP; hi++) {
        for (int lo = 0; fd_posix[hi] && lo < FD_CHUNK; lo++) {
            tfd_rec *o = fd_posix[hi][lo];
            if (o)
                fd_posix[hi][lo] = map ? map[o->index] : NULL;
        }
        for (int lo = 0; fd_stdio[hi] && lo < FD_CHUNK; lo++) {
            tfd_rec *o = fd_stdio[hi][lo].rec;
            if (o)
                fd_stdio[hi][lo].rec = map ? map[o->index] : NULL;
        }
    }
    free(map);
    (void)old_table;
}

/* ---------------------------------------------------------------- collect */

static void wait_for_writers(void)
{
    if (use_membarrier)
        syscall(SYS_membarrier, 8, 0, 0);
    else
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (tfd_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
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

typedef struct shard_copy {
    int64_t sum[S_N];
    int64_t iext[E_N];
    int has_iext;
    int32_t n_access, n_stride;
    int64_t access_val[VALUES_MAX], access_cnt[VALUES_MAX];
    int64_t stride_val[VALUES_MAX], stride_cnt[VALUES_MAX];
} shard_copy;

static int32_t copy_values(const values *v, int64_t *val, int64_t *cnt)
{
    int32_t n = v->n;
    if (n > VALUES_MAX)
        n = VALUES_MAX;
    values_big *b = v->big;
    /* big is published before n passes VALUES_INLINE */
    if (n > VALUES_INLINE && !b)
        n = VALUES_INLINE;
    memcpy(val, b ? b->val : v->val, (size_t)n * sizeof(int64_t));
    memcpy(cnt, b ? b->cnt : v->cnt, (size_t)n * sizeof(int64_t));
    return n;
}

static void copy_shard(tfd_shard *s, int64_t closed, shard_copy *c)
{
    for (long tries = 0;; tries++) {
        uint32_t a = __atomic_load_n(&s->owner->seq, __ATOMIC_ACQUIRE);
        /* a writer never blocks inside an update; one that never finishes
         * was killed, and its last partial update is taken as it is */
        if ((a & 1) && tries < 1000000) {
            sched_yield();
            continue;
        }
        memcpy(c->sum, s->sum, sizeof(c->sum));
        int k = (int)(closed & 1);
        c->has_iext = s->iext[k].epoch == closed;
        if (c->has_iext)
            memcpy(c->iext, s->iext[k].v, sizeof(c->iext));
        c->n_access = copy_values(&s->access, c->access_val, c->access_cnt);
        c->n_stride = copy_values(&s->stride, c->stride_val, c->stride_cnt);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&s->owner->seq, __ATOMIC_RELAXED) == a || tries >= 1000000)
            return;
    }
}

static void merge_ext(int64_t *dst, const int64_t *src)
{
    static const char kind[E_N] = {
        /* M=max, T=max time with its size, F=first, L=last */
        'M', 'M', 'T', 0, 'T', 0, 'F', 'L', 'F', 'L', 'F', 'L', 'F', 'L'};
    for (int f = 0; f < E_N; f++) {
        switch (kind[f]) {
        case 'M':
        case 'L':
            if (src[f] > dst[f]) dst[f] = src[f];
            break;
        case 'T':
            if (src[f] > dst[f]) { dst[f] = src[f]; dst[f + 1] = src[f + 1]; }
            break;
        case 'F':
            if (src[f] && (!dst[f] || src[f] < dst[f])) dst[f] = src[f];
            break;
        }
    }
}

typedef struct growbuf { int64_t *p; int64_t n, cap; } growbuf;

static int grow_push(growbuf *b, const int64_t *v, int64_t k)
{
    if (b->n + k > b->cap) {
        int64_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->n + k)
            cap *= 2;
        int64_t *p = realloc(b->p, (size_t)cap * sizeof(int64_t));
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, v, (size_t)k * sizeof(int64_t));
    b->n += k;
    return 0;
}

static void merge_values(int64_t *val, int64_t *cnt, int32_t *n, const int64_t *sv, const int64_t *sc, int32_t sn)
{
    for (int32_t i = 0; i < sn; i++) {
        int32_t j = 0;
        while (j < *n && val[j] != sv[i])
            j++;
        if (j == *n) {
            if (*n >= 2 * VALUES_MAX)
                continue;
            val[j] = sv[i];
            cnt[j] = 0;
            (*n)++;
        }
        cnt[j] += sc[i];
    }
}

static int collect_record(tfd_rec *r, int64_t closed, growbuf *rows, growbuf *vals)
{
    int64_t row[R_WIDTH];
    memset(row, 0, sizeof(row));
    row[R_INDEX] = r->index;
    row[R_MODULE] = r->module;
    int64_t av[2 * VALUES_MAX], ac[2 * VALUES_MAX], sv[2 * VALUES_MAX], sc[2 * VALUES_MAX];
    int32_t an = 0, sn = 0;
    shard_copy c;
    for (tfd_shard *s = __atomic_load_n(&r->shards, __ATOMIC_ACQUIRE); s; s = s->next_in_rec) {
        copy_shard(s, closed, &c);
        for (int f = 0; f < S_N; f++)
            row[R_SUM0 + f] += c.sum[f];
        if (c.has_iext)
            merge_ext(row + R_IEXT0, c.iext);
        merge_values(av, ac, &an, c.access_val, c.access_cnt, c.n_access);
        merge_values(sv, sc, &sn, c.stride_val, c.stride_cnt, c.n_stride);
    }
    row[R_MODE] = RELAXED_LOAD(r->mode);
    row[R_RENAMED_FROM] = RELAXED_LOAD(r->renamed_from);
    row[R_MEM_ALIGNMENT] = r->module == TFD_MODULE_POSIX ? MEM_ALIGNMENT : 0;
    row[R_FILE_ALIGNMENT] = r->module == TFD_MODULE_POSIX ? r->file_alignment : 0;
    if (grow_push(rows, row, R_WIDTH))
        return -1;
    for (int32_t i = 0; i < an; i++) {
        int64_t v[4] = {r->index, 0, av[i], ac[i]};
        if (grow_push(vals, v, 4))
            return -1;
    }
    for (int32_t i = 0; i < sn; i++) {
        int64_t v[4] = {r->index, 1, sv[i], sc[i]};
        if (grow_push(vals, v, 4))
            return -1;
    }
    return 0;
}

/* Report each thread's bins from the oldest unreported to its newest; the
 * newest may still grow, so what was reported of it is remembered. */
static int collect_heat(growbuf *heat, int64_t *unbinned)
{
    static int64_t copy[HEAT_RING][HEAT_KINDS];
    for (tfd_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        int64_t newest, oldest = t->heat_next, lost;
        int64_t n = 0;
        for (long tries = 0;; tries++) {
            uint32_t a = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
            if ((a & 1) && tries < 1000000) {
                sched_yield();
                continue;
            }
            newest = RELAXED_LOAD(t->heat_bin);
            lost = RELAXED_LOAD(t->heat_unbinned);
            n = newest < oldest ? 0 : newest - oldest + 1;
            for (int64_t i = 0; i < n; i++)
                memcpy(copy[i], t->heat[(oldest + i) % HEAT_RING], sizeof(copy[0]));
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (__atomic_load_n(&t->seq, __ATOMIC_RELAXED) == a || tries >= 1000000)
                break;
        }
        *unbinned += lost;
        for (int64_t i = 0; i < n; i++) {
            for (int k = 0; k < HEAT_KINDS; k++) {
                int64_t v = copy[i][k] - (i == 0 ? t->heat_reported[k] : 0);
                if (v == 0)
                    continue;
                int64_t row[3] = {oldest + i, k, v};
                if (grow_push(heat, row, 3))
                    return -1;
            }
        }
        if (n > 0) {
            memcpy(t->heat_reported, copy[n - 1], sizeof(t->heat_reported));
            RELAXED_STORE(t->heat_next, newest);
        }
    }
    return 0;
}

static int collect_trace(growbuf *segs, int64_t *dropped, int64_t closed)
{
    for (tfd_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        *dropped += RELAXED_LOAD(t->trace_dropped);
        seg_chunk *c = __atomic_load_n(&t->trace_head, __ATOMIC_ACQUIRE);
        while (c) {
            int32_t count = __atomic_load_n(&c->count, __ATOMIC_ACQUIRE);
            int32_t i = t->trace_read;
            /* a thread's segments are in interval order: stop at the first
             * one counted after the interval being closed */
            for (; i < count && c->s[i].epoch <= closed; i++)
                if (grow_push(segs, (const int64_t *)&c->s[i], 6))
                    return -1;
            t->trace_read = i;
            if (i < count)
                break;
            seg_chunk *next = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE);
            /* a full chunk the writer has moved past can be released */
            if (count == SEG_PER_CHUNK && next) {
                __atomic_store_n(&t->trace_head, next, __ATOMIC_RELEASE);
                t->trace_read = 0;
                free(c);
                __atomic_add_fetch(&trace_budget, (int64_t)sizeof(seg_chunk), __ATOMIC_RELAXED);
                c = next;
            } else {
                break;
            }
        }
    }
    return 0;
}

int tfd_collect(tfd_collect_result *out)
{
    memset(out, 0, sizeof(*out));
    if (!initialized)
        return -1;
    growbuf rows = {0}, vals = {0}, segs = {0}, heat = {0};
    int rc = 0;
    pthread_mutex_lock(&collect_lock);
    int64_t closed = RELAXED_LOAD(epoch);
    __atomic_store_n(&epoch, closed + 1, __ATOMIC_SEQ_CST);
    wait_for_writers();
    tfd_rec *list = __atomic_exchange_n(&dirty[closed & 1], NULL, __ATOMIC_ACQUIRE);
    for (tfd_rec *r = list; r && rc == 0; r = r->dirty_next[closed & 1])
        rc = collect_record(r, closed, &rows, &vals);
    if (rc == 0)
        rc = collect_trace(&segs, &out->trace_dropped, closed);
    if (rc == 0)
        rc = collect_heat(&heat, &out->heat_unbinned);
    out->epoch = closed;
    out->now_ticks = (int64_t)tfd_ticks();
    out->n_records = __atomic_load_n(&n_records, __ATOMIC_ACQUIRE);
    out->folded_files = folded_count;
    out->n_threads = RELAXED_LOAD(n_threads);
    pthread_mutex_unlock(&collect_lock);
    out->rows = rows.p;
    out->n_rows = rows.n / R_WIDTH;
    out->values = vals.p;
    out->n_values = vals.n / 4;
    out->segments = segs.p;
    out->n_segments = segs.n / 6;
    out->heat = heat.p;
    out->n_heat = heat.n / 3;
    out->heat_bin_ticks = (int64_t)heat_width;
    if (rc) {
        tfd_free_collect(out);
        return -1;
    }
    return 0;
}

void tfd_free_collect(tfd_collect_result *out)
{
    free(out->rows);
    free(out->values);
    free(out->segments);
    free(out->heat);
    out->rows = out->values = out->segments = out->heat = NULL;
    out->n_rows = out->n_values = out->n_segments = out->n_heat = 0;
}

/* Totals since the first attach, from per-thread running sums, without
 * closing an interval: cheap enough to call every step. Best-effort reads. */
int tfd_live(tfd_live_totals *out)
{
    memset(out, 0, sizeof(*out));
    if (!initialized)
        return -1;
    for (tfd_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        out->bytes_read += RELAXED_LOAD(t->tot_bytes_read);
        out->bytes_written += RELAXED_LOAD(t->tot_bytes_written);
        out->reads += RELAXED_LOAD(t->tot_reads);
        out->writes += RELAXED_LOAD(t->tot_writes);
        out->opens += RELAXED_LOAD(t->tot_opens);
        out->io_ticks += RELAXED_LOAD(t->tot_ticks);
    }
    out->files = __atomic_load_n(&n_records, __ATOMIC_ACQUIRE);
    return 0;
}

int tfd_record_info(int64_t index, uint64_t *id, int *module, const char **path)
{
    if (!initialized || index < 0 || index >= __atomic_load_n(&n_records, __ATOMIC_ACQUIRE))
        return -1;
    tfd_rec *r = rec_by_index[index / DIR_CHUNK][index % DIR_CHUNK];
    if (!r)
        return -1;
    *id = r->id;
    *module = r->module;
    *path = r->path;
    return 0;
}

void tfd_set_trace(int on, int64_t cap_bytes)
{
    if (on) {
        /* chunks still held count against the new budget when they are freed */
        trace_cap = cap_bytes;
        __atomic_store_n(&trace_budget, cap_bytes, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&trace_on, on ? 1 : 0, __ATOMIC_RELAXED);
}
