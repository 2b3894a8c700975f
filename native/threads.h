/* Threads and their shards, and the update protocol that lets every
 * thread count without a lock.
 *
 *  - Counters live in shards, one per (writer, record), written only by
 *    the thread that holds the shard and guarded by that thread's sequence
 *    count, so a collector copies a consistent view without ever blocking
 *    the writer.
 *  - Shards outlive threads. tf.data starts new threads for every iterator
 *    and reads each file from one of them, so a thread's first write to a
 *    file is the common case: when a thread exits its shards are released
 *    to their files, and the next thread to touch a file takes a released
 *    shard of it over, counts and all (the collector folds differences, so
 *    nothing is counted twice). A file has as many shards as threads ever
 *    held one of it at once. New shards come pre-zeroed from slabs shared by
 *    all threads, handed out by a bump pointer; a thread's structure goes
 *    to the next new thread as soon as it exits.
 *  - Time is cut into intervals (epochs). The first update of a shard in an
 *    interval pushes it on its holder's dirty list for that interval, so a
 *    collect costs time proportional to the shards written since the
 *    previous one, not to the threads that ever touched those files.
 *  - A collect closes the interval and waits (membarrier + per-thread
 *    sequence) until no thread is still inside an update tagged with it;
 *    totals.c then folds each dirty shard's change into its record's totals.
 *
 * threads.c owns the threads, the shards, their slabs, the interval number
 * and the thread-local pointer; the inline functions below are the
 * writer's side of the protocol, used by the rules. */
#ifndef TFD_THREADS_H
#define TFD_THREADS_H
#include "busy.h"
#include "fields.h"
#include "heat.h"
#include "table.h"
#include "trace.h"

#include "public.h"

typedef struct tfd_thread tfd_thread;

/* A shard's extremes of one interval, and its link in its holder's dirty
 * list of that interval: two lines of their own, all that a shard's first
 * update in an interval writes besides the shard's epoch. */
struct tfd_shard;
typedef struct shard_iext {
    int64_t epoch;
    int64_t v[E_N];
    struct tfd_shard *dirty_next;
} __attribute__((aligned(64))) shard_iext;

/* What a call reads and writes of a shard sits in few lines: the header
 * and its first sums (a read: two lines; an open, a stat or a close: the
 * third), its extremes of the interval (two lines), and the value
 * trackers' first entries (one line). */
typedef struct tfd_shard {
    tfd_thread *owner;          /* its holder, whose sequence count guards it; NULL: released */
    int64_t epoch;              /* interval of the last update */
    int64_t sum[S_N];           /* starts at byte 16: see SUM_FIELDS */
    tfd_rec *rec;
    struct tfd_shard *next_in_thread;   /* the holder's shards */
    struct tfd_shard *next_of_rec;      /* the record's shards (never unlinked) */
    /* extremes of the interval being recorded and of the one before it,
     * by interval parity; the collector folds them into run totals */
    shard_iext iext[2];
    trackers values;            /* access sizes and strides (fields.h) */
    shard_seen seen __attribute__((aligned(64)));   /* the collector's: a line of its own */
} tfd_shard;

/* record index -> shard, in chunks */
#define DIR_CHUNK 1024

/* A writer: the state of one thread, then of the next new thread after it
 * exits (its running totals, dirty lists, trace and heatmap carry on). */
enum { THREAD_ACTIVE, THREAD_EXITED };
struct tfd_thread {
    /* the first line: all a read changes here but its heatmap slot, and
     * what a call checks before it (a write also changes the second) */
    uint32_t seq;               /* odd while inside an update (also the re-entry guard);
                                 * +2 as a thread hands the structure on */
    int suppressed;
    /* running totals for the cheap live pull (tfd_live), each between
     * fields a read does not add to alike (adjacent sums get packed into
     * vector adds that cost more instructions than they save) */
    int64_t tot_ticks;
    heat_now heat_now;
    int64_t tot_bytes_read;
    busy_now busy_now;          /* the read and metadata calls' open span (busy.h) */
    int64_t tot_reads;
    /* the second line: read before every call (dir), and a write's totals */
    tfd_shard ***dir;           /* record index -> the shard this thread holds */
    int64_t tot_bytes_written, tot_writes, tot_opens;
    /* bytes moved on excluded paths (imports, libraries, system files):
     * not recorded per file, only counted, so coverage can tell them apart */
    int64_t excl_read, excl_written;
    int state;                  /* THREAD_*: set by the thread's exit and by the next thread */
    /* the rest */
    /* shards first written in an interval, by interval parity: the thread
     * pushes on one list while the collector takes the other */
    tfd_shard *dirty[2];
    tfd_shard *shards;          /* the shards this thread holds */
    tfd_thread *next;
    trace_buf trace;
    busy_state busy;            /* the rest of the open span, and its ring's counts (busy.h) */
    heat_ring heat;             /* its slots and the spans after it are not zeroed */
    busy_spans busy_spans;
};

/* threads.c's: read them through the functions below */
extern __thread tfd_thread *tfd_self TFD_HIDDEN;
extern int64_t tfd_epoch TFD_HIDDEN;
extern int tfd_use_membarrier TFD_HIDDEN;

/* an update in progress: its thread, shard, record and interval */
typedef struct update { tfd_thread *t; tfd_shard *s; tfd_rec *r; int64_t *iext; int64_t epoch; } update;

tfd_thread *thread_self(void) TFD_HIDDEN TFD_COLD;
/* this thread's first write to r: a released shard of r, or a new one */
tfd_shard *new_shard(tfd_thread *t, tfd_rec *r) TFD_HIDDEN TFD_COLD;
void enter_interval(tfd_shard *s, int64_t e) TFD_HIDDEN TFD_COLD;
void track_value_slow(tfd_thread *t, trackers *tr, int k, int64_t v) TFD_HIDDEN TFD_COLD;

/* ------------------------------------------------- the writer's side, inline */

static inline tfd_shard *shard_for(tfd_thread *t, tfd_rec *r)
{
    uint64_t i = (uint64_t)r->index;        /* never negative: shifts, not signed division */
    tfd_shard **chunk = t->dir[i / DIR_CHUNK];
    tfd_shard *s;
    if (TFD_LIKELY(chunk && (s = chunk[i % DIR_CHUNK])))
        return s;
    return new_shard(t, r);
}

/* This thread's shard of r, looked up ahead of an update: before the call
 * whose outcome it will count, while the call has not yet pushed these
 * lines out of the cache, so the update after it finds its addresses in
 * registers. NULL when this thread does not record now (suppressed, or a
 * signal handler inside one of its updates). */
static inline __attribute__((always_inline)) tfd_shard *shard_ahead(tfd_rec *r)
{
    tfd_thread *t = tfd_self;
    if (TFD_UNLIKELY(!t) && !(t = thread_self()))
        return NULL;
    /* odd sequence: a signal handler interrupted one of our updates */
    if (TFD_UNLIKELY((t->seq & 1) | t->suppressed))
        return NULL;
    return shard_for(t, r);
}

/* Start an update of s, this thread's shard of r from shard_ahead; 0 when
 * there is none. (Between the two, only a signal handler can run on this
 * thread, and it finishes its own updates before we go on.) */
static inline __attribute__((always_inline)) int begin_ahead(update *u, tfd_rec *r, tfd_shard *s)
{
    if (TFD_UNLIKELY(!s))
        return 0;
    tfd_thread *t = s->owner;
    t->seq++;
    WMB();
    /* the collector's membarrier orders the store above before this load */
    if (TFD_UNLIKELY(!tfd_use_membarrier))
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    int64_t e = RELAXED_LOAD(tfd_epoch);
    if (TFD_UNLIKELY(s->epoch != e))
        enter_interval(s, e);
    u->t = t;
    u->s = s;
    u->r = r;
    u->iext = s->iext[e & 1].v;
    u->epoch = e;
    return 1;
}

/* Start an update of r's shard of this thread; 0 when this thread does not
 * record now. */
static inline __attribute__((always_inline)) int begin(update *u, tfd_rec *r)
{
    return begin_ahead(u, r, shard_ahead(r));
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

/* DARSHAN_TIMER_INC_NO_OVERLAP against the record's shared "last end";
 * reads and metadata also mark the thread busy (writes are not input) */
static inline void timer_no_overlap(update *u, int f, int64_t t1, int64_t t2, int64_t *last)
{
    if (TFD_UNLIKELY(t1 == 0 || t2 == 0))
        return;
    if (f != S_T_WRITE)
        busy_add(&u->t->busy_now, &u->t->busy, u->t->busy_spans, t1, t2);
    int64_t l = RELAXED_LOAD(*last);
    u->s->sum[f] += (t1 > l) ? (t2 - t1) : (t2 - l);
    if (t2 > l)
        RELAXED_STORE(*last, t2);
}

static inline __attribute__((always_inline)) void track_value(tfd_thread *t, trackers *tr, const int k, int64_t v)
{
    /* the common case: the same size or stride as the first one seen; then
     * access's second (tf.io.read_file's zero-length read at the end), in
     * the same line */
    if (TFD_LIKELY(!tr->big)) {
        int64_t *first = tr->slot[tracker_slot(k, 0)];
        if (TFD_LIKELY(tr->n[k] > 0 && first[0] == v)) {
            first[1]++;
            return;
        }
        int64_t *second = tr->slot[tracker_slot(k, 1)];
        if (k == TRACK_ACCESS && tr->n[k] > 1 && second[0] == v) {
            second[1]++;
            return;
        }
    }
    track_value_slow(t, tr, k, v);
}

/* Bytes on an excluded path: counted by the thread, outside any update. */
static inline void count_excluded(int is_write, int64_t bytes)
{
    tfd_thread *t = tfd_self;
    if (TFD_UNLIKELY(!t) && !(t = thread_self()))
        return;
    if ((t->seq & 1) | t->suppressed)
        return;
    if (is_write)
        RELAXED_STORE(t->excl_written, t->excl_written + bytes);
    else
        RELAXED_STORE(t->excl_read, t->excl_read + bytes);
}

/* this thread's I/O is tfdarshan's own now (tfd_suppress): not served from staged copies either */
static inline int thread_suppressed(void)
{
    tfd_thread *t = tfd_self;
    return t && t->suppressed;
}

/* what a sample the shim takes for the whole process (not the calling
 * thread's own I/O) is counted under: suppression does not apply */
int begin_sampled(update *u, tfd_rec *r) TFD_HIDDEN;

/* ------------------------------------------------- the collector's side */

/* 0, or -1 when out of memory (records are indexed up to table_capacity()) */
int threads_init(void) TFD_HIDDEN;
tfd_thread *threads_first(void) TFD_HIDDEN;
int64_t threads_count(void) TFD_HIDDEN;         /* threads that ever recorded */
/* Close the current interval: no update tagged with it is in flight when
 * this returns. Returns the interval closed. */
int64_t threads_close_interval(void) TFD_HIDDEN;
/* the thread's dirty list of interval parity k, taken (linked by iext[k].dirty_next) */
tfd_shard *threads_take_dirty(tfd_thread *t, int k) TFD_HIDDEN;
/* Reading a shard consistently while its holder may write it: copy
 * between shard_read_begin (0: a write is in flight, try again) and
 * shard_read_done (0: the holder wrote, or the shard changed hands,
 * meanwhile: copy again). A released shard has no writer until a thread
 * takes it, which changes its owner. A holder's sequence count moves by 2
 * when it hands its structure on, so an owner seen twice with one count
 * held the shard throughout. */
typedef struct shard_read { tfd_thread *owner; uint32_t seq; } shard_read;

static inline int shard_read_begin(const tfd_shard *s, shard_read *rd)
{
    rd->owner = __atomic_load_n(&s->owner, __ATOMIC_ACQUIRE);
    rd->seq = rd->owner ? __atomic_load_n(&rd->owner->seq, __ATOMIC_ACQUIRE) : 0;
    return !(rd->seq & 1);
}

static inline int shard_read_done(const tfd_shard *s, const shard_read *rd)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    if (__atomic_load_n(&s->owner, __ATOMIC_RELAXED) != rd->owner)
        return 0;
    return !rd->owner || __atomic_load_n(&rd->owner->seq, __ATOMIC_RELAXED) == rd->seq;
}
/* at a collect: a slab of new shards ready before writers need it */
void threads_prepare(void) TFD_HIDDEN;
void threads_live(tfd_live_totals *out) TFD_HIDDEN;
void threads_after_fork(void) TFD_HIDDEN;

#endif
