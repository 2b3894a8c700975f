#ifndef TFD_RECORDS_H
#define TFD_RECORDS_H
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
 *  - Time is cut into intervals (epochs). The first update of a shard in an
 *    interval pushes it on its thread's dirty list for that interval, so a
 *    collect costs time proportional to the shards written since the
 *    previous one, not to the threads that ever touched those files (a
 *    tf.data pipeline spreads each file over dozens of threads).
 *    Collect closes the interval, waits (membarrier + per-thread sequence)
 *    until no thread is still inside an update tagged with it, then folds
 *    each dirty shard's change since its last collect into its record's
 *    totals, which only the collector keeps.
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

/* Additive counters: a window's value is later minus earlier. Ordered by
 * who writes them (Python finds them by name): the shard's 48-byte header
 * and the first ten share two cache lines, so a read of up to 1 MB touches
 * only those two of its sums; then the rest of a read's, a write's, and
 * the rest. The size buckets stay in Darshan's order, contiguous. */
#define SUM_FIELDS(X)                                                          \
    X(READS) X(BYTES_READ) X(SEQ_READS) X(CONSEC_READS) X(T_READ)               \
    X(SIZE_READ_0_100) X(SIZE_READ_100_1K) X(SIZE_READ_1K_10K)                  \
    X(SIZE_READ_10K_100K) X(SIZE_READ_100K_1M) X(SIZE_READ_1M_4M)               \
    X(SIZE_READ_4M_10M) X(SIZE_READ_10M_100M) X(SIZE_READ_100M_1G)              \
    X(SIZE_READ_1G_PLUS) X(ZERO_READS) X(MEM_NOT_ALIGNED) X(FILE_NOT_ALIGNED)   \
    X(RW_SWITCHES)                                                              \
    X(WRITES) X(BYTES_WRITTEN) X(SEQ_WRITES) X(CONSEC_WRITES) X(T_WRITE)        \
    X(SIZE_WRITE_0_100) X(SIZE_WRITE_100_1K) X(SIZE_WRITE_1K_10K)               \
    X(SIZE_WRITE_10K_100K) X(SIZE_WRITE_100K_1M) X(SIZE_WRITE_1M_4M)            \
    X(SIZE_WRITE_4M_10M) X(SIZE_WRITE_10M_100M) X(SIZE_WRITE_100M_1G)           \
    X(SIZE_WRITE_1G_PLUS)                                                       \
    X(OPENS) X(FILENOS) X(DUPS) X(FDOPENS) X(SEEKS) X(STATS) X(MMAPS) X(FSYNCS) \
    X(FDSYNCS) X(FLUSHES) X(RENAME_SOURCES) X(RENAME_TARGETS) X(T_META)          \
    KERNEL_IO_FIELDS(X)

/* Not Darshan's: I/O its wrappers never see (records_kernel.c). Bytes a
 * kernel-side copy read from / wrote to the file and the time of those
 * calls per side; T_KC counts each call once (on its source when that is
 * recorded, else on its destination), so a sum over files is the time spent
 * in copies; the bytes each mechanism moved in or out of the file; the same
 * bytes counted as T_KC counts time, each call once (the *_ONCE fields: a
 * sum over files is what the calls returned); the bytes of the file's pages
 * the process had mapped into its page tables through mmap (an estimate). */
#define KERNEL_IO_FIELDS(X)                                                    \
    X(KC_BYTES_READ) X(KC_BYTES_WRITTEN) X(T_KC_READ) X(T_KC_WRITE) X(T_KC)     \
    X(KC_CFR_BYTES) X(KC_SENDFILE_BYTES) X(KC_SPLICE_BYTES) X(MMAP_BYTES)       \
    X(KC_CFR_ONCE) X(KC_SENDFILE_ONCE) X(KC_SPLICE_ONCE)

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


/* the update protocol's rare cases: out of line, and out of the wrappers
 * that inline the common case (wrappers.c flattens the data wrappers) */
#define TFD_COLD __attribute__((noinline, cold))

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

typedef struct rec_totals rec_totals;

/* The collector's part of a shard: what it has already folded of it (its
 * sums and value counts at the last collect that saw it written). Most
 * shards see few distinct sizes and strides, so their counts start inline. */
typedef struct shard_seen {
    int64_t sum[S_N];
    int64_t cnt[2][VALUES_INLINE];          /* access, stride */
    int64_t (*big)[VALUES_MAX];             /* [2][VALUES_MAX] (malloc), once either has more */
} shard_seen;

struct tfd_shard {
    tfd_thread *owner;          /* its sequence count guards this shard */
    int64_t epoch;              /* interval of the last update */
    tfd_rec *rec;
    /* by interval parity, as the records' iext below */
    tfd_shard *dirty_next[2];
    tfd_shard *next_in_thread;
    int64_t sum[S_N];           /* starts at byte 48: see SUM_FIELDS */
    /* extremes of the interval being recorded and of the one before it,
     * by interval parity; the collector folds them into run totals */
    struct { int64_t epoch; int64_t v[E_N]; } iext[2];
    values access, stride;
    shard_seen seen __attribute__((aligned(64)));   /* written by the collector: a line of its own */
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
    rec_totals *totals;         /* the collector's: sums over all shards */
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

/* Busy spans: the wall time this thread spent inside read and metadata
 * calls, as spans (calls less than busy_gap apart join one span, which
 * keeps the time spent in its calls), in a ring the collector drains; from
 * all threads' spans of an interval it bounds the time the process had
 * input I/O in flight (records_busy.c). */
#define BUSY_RING 2048

#define DIR_CHUNK 1024
/* A thread's state. tf.data starts new threads for every iterator (every
 * epoch), so the shards of exited threads are folded and their memory
 * reused, or a long job would grow by a shard per file and epoch. */
enum { THREAD_ACTIVE, THREAD_EXITED, THREAD_FREE };
struct tfd_thread {
    uint32_t seq;               /* odd while inside an update (also the re-entry guard) */
    int suppressed;
    int state;                  /* THREAD_*: set by the thread's exit, the collector and a new thread */
    /* running totals for the cheap live pull (tfd_live) */
    int64_t tot_bytes_read, tot_bytes_written, tot_reads, tot_writes, tot_opens, tot_ticks;
    /* bytes moved on excluded paths (imports, libraries, system files):
     * not recorded per file, only counted, so coverage can tell them apart */
    int64_t excl_read, excl_written;
    int creating;               /* inside record creation (holds create_lock) */
    tfd_shard ***dir;           /* record index -> this thread's shard */
    /* shards first written in an interval, by interval parity: the thread
     * pushes on one list while the collector takes the other */
    tfd_shard *dirty[2];
    tfd_shard *shards;          /* all of this thread's shards */
    char *arena;                /* bump allocator for shards */
    size_t arena_left;
    size_t arena_block;         /* size of the newest block */
    void *blocks;               /* the arena's blocks, freed when the thread is retired */
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
    /* busy spans: the writer owns busy_lo/busy_hi (the span it extends) and
     * busy_pushed; the collector owns busy_taken (spans reported) */
    int64_t busy_lo, busy_hi, busy_in;  /* the open span: first call's start, last call's end, time in calls */
    uint64_t busy_pushed, busy_taken;
    int64_t busy_joined;        /* spans joined across a gap because the ring was full */
    int64_t heat[HEAT_RING][HEAT_KINDS];
    int64_t busy[BUSY_RING][3]; /* lo, hi, in; not zeroed: a slot is written before it is counted */
    tfd_thread *next;
};

/* ----------------------------------------------------------- shared state (defined in records_shards.c) */
extern int initialized TFD_HIDDEN;
extern pthread_mutex_t init_lock TFD_HIDDEN;
extern pthread_mutex_t create_lock TFD_HIDDEN;
extern pthread_mutex_t collect_lock TFD_HIDDEN;
extern int64_t epoch TFD_HIDDEN;
extern int use_membarrier TFD_HIDDEN;
extern int64_t record_cap TFD_HIDDEN;
extern int64_t max_records TFD_HIDDEN;
extern tfd_rec **rec_table TFD_HIDDEN;
extern uint64_t rec_table_mask TFD_HIDDEN;
extern tfd_rec ***rec_by_index TFD_HIDDEN;
extern int64_t n_records TFD_HIDDEN;
extern int64_t n_module_records[16] TFD_HIDDEN;
extern tfd_rec *overflow_rec[16] TFD_HIDDEN;
extern uint64_t *folded_ids TFD_HIDDEN;
extern uint64_t folded_mask TFD_HIDDEN;
extern int64_t folded_count TFD_HIDDEN;
extern tfd_thread *threads TFD_HIDDEN;
extern int64_t n_threads TFD_HIDDEN;
extern __thread tfd_thread *self TFD_HIDDEN;
extern uint64_t heat_width TFD_HIDDEN;
extern uint64_t heat_origin TFD_HIDDEN;
extern int trace_on TFD_HIDDEN;
extern int64_t busy_gap TFD_HIDDEN;
extern int64_t trace_cap TFD_HIDDEN;
extern int64_t trace_budget TFD_HIDDEN;
/* fd -> POSIX record (shim.h); fd -> (stream, STDIO record). */
typedef struct stream_slot { FILE *stream; tfd_rec *rec; } stream_slot;
extern stream_slot *fd_stdio[FD_TOP] TFD_HIDDEN;
/* What a descriptor or stream of an excluded path maps to (not NULL, which
 * is "not a file we know"): its bytes go to the thread's excl_* counts. */
#define EXCLUDED (&tfd_excluded)          /* declared in shim.h */

/* ----------------------------------------------------------------- helpers */
#define RELAXED_LOAD(p) __atomic_load_n(&(p), __ATOMIC_RELAXED)
#define RELAXED_STORE(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELAXED)
#define BARRIER() __asm__ volatile("" ::: "memory")
/* orders the sequence count against the data (free on x86, dmb on arm) */
#define WMB() __atomic_thread_fence(__ATOMIC_RELEASE)

/* an update in progress: its thread, shard, record and interval */
typedef struct update { tfd_thread *t; tfd_shard *s; tfd_rec *r; int64_t *iext; int64_t epoch; } update;

/* --------------------------------------------------- across the records_*.c files */
void *alloc_zeroed(size_t n) TFD_HIDDEN;
void enter_interval(tfd_shard *s, int64_t e) TFD_HIDDEN TFD_COLD;
int set_rules(const tfd_config *c) TFD_HIDDEN;
void forget_paths(void) TFD_HIDDEN;
void heat_add_slow(tfd_thread *t, int kind, int64_t bytes, uint64_t t1, uint64_t t2) TFD_HIDDEN TFD_COLD;
void busy_push(tfd_thread *t, int64_t t1, int64_t t2) TFD_HIDDEN __attribute__((noinline));
int collect_busy(int64_t window_lo, int64_t window_hi, int64_t *busy_ticks, int64_t *joined) TFD_HIDDEN;
int membarrier_register(void) TFD_HIDDEN;
tfd_shard *new_shard(tfd_thread *t, tfd_rec *r) TFD_HIDDEN TFD_COLD;
tfd_thread *thread_self(void) TFD_HIDDEN TFD_COLD;
void retire_thread(tfd_thread *t) TFD_HIDDEN;
typedef struct growbuf { int64_t *p; int64_t n, cap; } growbuf;
int grow_push(growbuf *b, const int64_t *v, int64_t k) TFD_HIDDEN;
int fold_dirty_shards(int64_t closed, growbuf *rows, growbuf *vals, int64_t *n_shards) TFD_HIDDEN;
void track_value_slow(tfd_thread *t, values *vs, int64_t v) TFD_HIDDEN TFD_COLD;
tfd_rec *new_record(uint64_t id, int module, const char *path) TFD_HIDDEN;
tfd_rec **posix_slot(int fd, int create) TFD_HIDDEN;
tfd_rec *record_for_clean(const char *clean, int module) TFD_HIDDEN;
tfd_rec *record_for_path(int dirfd, const char *path, int module) TFD_HIDDEN;
int clean_path_at(int dirfd, const char *path, char *out, size_t out_len) TFD_HIDDEN;
tfd_rec *resolve_path(int dirfd, const char *path, int module) TFD_HIDDEN;
tfd_rec *stdio_rec_any(FILE *stream) TFD_HIDDEN;
void stdio_map(FILE *stream, tfd_rec *r) TFD_HIDDEN;
tfd_rec *stdio_rec(FILE *stream) TFD_HIDDEN;
stream_slot *stdio_slot(int fd, int create) TFD_HIDDEN;
tfd_rec *table_find(uint64_t id, int module) TFD_HIDDEN;
void trace_append(update *u, int op, int64_t off, int64_t len, uint64_t t1, uint64_t t2) TFD_HIDDEN __attribute__((noinline));
void tfd_mapped_prepare_fork(void) TFD_HIDDEN;
void tfd_mapped_parent_fork(void) TFD_HIDDEN;
void tfd_mapped_after_fork(tfd_rec **remap) TFD_HIDDEN;
void stdio_open_record(tfd_rec *r, FILE *stream, int reset, int fdopen_counter, uint64_t t1, uint64_t t2) TFD_HIDDEN;

/* ------------------------------------------------------------- the hot path, inlined */
static inline tfd_shard *shard_for(tfd_thread *t, tfd_rec *r)
{
    uint64_t i = (uint64_t)r->index;        /* never negative: shifts, not signed division */
    tfd_shard **chunk = t->dir[i / DIR_CHUNK];
    tfd_shard *s;
    if (TFD_LIKELY(chunk && (s = chunk[i % DIR_CHUNK])))
        return s;
    return new_shard(t, r);
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
        enter_interval(s, e);
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

static inline void heat_add(tfd_thread *t, int kind, int64_t bytes, uint64_t t1, uint64_t t2)
{
    if (bytes == 0)
        return;
    if (TFD_LIKELY(t1 >= t->heat_lo && t2 < t->heat_hi))   /* then heat_bin >= 0 */
        t->heat[(uint64_t)t->heat_bin % HEAT_RING][kind] += bytes;
    else
        heat_add_slow(t, kind, bytes, t1, t2);
}

/* A read or metadata call from t1 to t2 on this thread: it extends the
 * thread's busy span, or (after a gap) closes it and starts another. */
static inline void busy_add(tfd_thread *t, int64_t t1, int64_t t2)
{
    if (TFD_LIKELY(t1 <= t->busy_hi + busy_gap)) {
        t->busy_in += t2 - t1;
        if (t2 > t->busy_hi)
            t->busy_hi = t2;
    } else {
        busy_push(t, t1, t2);
    }
}

/* DARSHAN_TIMER_INC_NO_OVERLAP against the record's shared "last end";
 * reads and metadata also mark the thread busy (writes are not input) */
static inline void timer_no_overlap(update *u, int f, int64_t t1, int64_t t2, int64_t *last)
{
    if (t1 == 0 || t2 == 0)
        return;
    if (f != S_T_WRITE)
        busy_add(u->t, t1, t2);
    int64_t l = RELAXED_LOAD(*last);
    u->s->sum[f] += (t1 > l) ? (t2 - t1) : (t2 - l);
    if (t2 > l)
        RELAXED_STORE(*last, t2);
}

/* DARSHAN_BUCKET_INC. Its limits (101, 1025, ... 1G + 1) lie in different
 * binary orders of magnitude, so a size's bucket is the number of limits
 * of lower orders plus one if it reaches the limit of its own order
 * (records_shards.c fills the two tables from the limits). */
extern uint8_t size_buckets_below[64] TFD_HIDDEN;
extern int64_t size_limit_of_order[64] TFD_HIDDEN;
static inline int size_bucket(int64_t v)
{
    int order = 64 - __builtin_clzll((uint64_t)v | 1);     /* v >= 0: 1..63 */
    return size_buckets_below[order] + (v >= size_limit_of_order[order]);
}

static inline __attribute__((always_inline)) void track_value(tfd_thread *t, values *vs, int64_t v)
{
    /* the common case: the same size or stride as the first one seen */
    if (TFD_LIKELY(vs->n > 0 && !vs->big && vs->val[0] == v))
        vs->cnt[0]++;
    else
        track_value_slow(t, vs, v);
}

static inline uint64_t table_hash(uint64_t id, int module)
{
    uint64_t h = id ^ ((uint64_t)module * 0x9e3779b97f4a7c15ull);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

/* A stream's descriptor, from glibc's public struct _IO_FILE. Not
 * fileno_unlocked(): it sets errno to EBADF for a memory stream (fmemopen,
 * open_memstream), and the data wrappers leave errno alone. */
static inline int stream_fd(FILE *stream)
{
#ifdef __GLIBC__
    return stream->_fileno;
#else
    int saved = errno, fd = fileno_unlocked(stream);
    errno = saved;
    return fd;
#endif
}

/* fd -> its record, EXCLUDED or NULL */
static inline __attribute__((always_inline)) tfd_rec *posix_rec_any(int fd)
{
    return tfd_posix_record(fd);
}

/* fd -> its record, or NULL (an excluded path has none) */
static inline __attribute__((always_inline)) tfd_rec *posix_rec(int fd)
{
    tfd_rec *r = posix_rec_any(fd);
    return r == EXCLUDED ? NULL : r;
}

/* Bytes on an excluded path: counted by the thread, outside any update. */
static inline void count_excluded(int is_write, int64_t bytes)
{
    tfd_thread *t = self;
    if (TFD_UNLIKELY(!t) && !(t = thread_self()))
        return;
    if ((t->seq & 1) | t->suppressed)
        return;
    if (is_write)
        RELAXED_STORE(t->excl_written, t->excl_written + bytes);
    else
        RELAXED_STORE(t->excl_read, t->excl_read + bytes);
}

/* POSIX_RECORD_READ / POSIX_RECORD_WRITE in one body */
/* inlined twice, so reads and writes each get a branch-free copy */
static inline __attribute__((always_inline)) void
posix_data(tfd_rec *r, int64_t ret, int pflag, int64_t off, int aligned, uint64_t t1, uint64_t t2, const int is_write)
{
    if (TFD_UNLIKELY(r == EXCLUDED)) {
        count_excluded(is_write, ret);
        return;
    }
    update u;
    if (!begin(&u, r))
        return;
    int64_t *sum = u.s->sum;
    int64_t this_off = pflag ? off : RELAXED_LOAD(r->offset);
    int64_t *last_byte = is_write ? &r->last_byte_written : &r->last_byte_read;
    int64_t last = RELAXED_LOAD(*last_byte);
    int64_t stride;

    if (TFD_UNLIKELY(trace_on)) {
        update copy = u;        /* u itself never has its address taken: it stays in registers */
        trace_append(&copy, is_write, this_off, ret, t1, t2);
    }
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

#endif
