/* Folding a collect's dirty shards into their records' totals, which only
 * the collector keeps, and reporting the totals of the records touched. */
#include "totals.h"

#include <sched.h>

typedef struct shard_copy {
    int64_t sum[S_N];
    int64_t iext[E_N];
    int has_iext;
    int32_t n_access, n_stride;
    int64_t access_val[VALUES_MAX], access_cnt[VALUES_MAX];
    int64_t stride_val[VALUES_MAX], stride_cnt[VALUES_MAX];
} shard_copy;

static int32_t copy_values(const trackers *tr, int k, int64_t *val, int64_t *cnt)
{
    int32_t n = tr->n[k];
    if (n > VALUES_MAX)
        n = VALUES_MAX;
    values_big *b = tr->big;
    /* big is published before n passes VALUES_INLINE */
    if (n > VALUES_INLINE && !b)
        n = VALUES_INLINE;
    if (b) {
        memcpy(val, b[k].val, (size_t)n * sizeof(int64_t));
        memcpy(cnt, b[k].cnt, (size_t)n * sizeof(int64_t));
    } else {
        for (int32_t i = 0; i < n; i++) {
            val[i] = tr->slot[tracker_slot(k, i)][0];
            cnt[i] = tr->slot[tracker_slot(k, i)][1];
        }
    }
    return n;
}

static void copy_shard(tfd_shard *s, int64_t closed, shard_copy *c)
{
    for (long tries = 0;; tries++) {
        shard_read rd;
        /* a writer never blocks inside an update; one that never finishes
         * was killed, and its last partial update is taken as it is */
        if (!shard_read_begin(s, &rd) && tries < 1000000) {
            sched_yield();
            continue;
        }
        memcpy(c->sum, s->sum, sizeof(c->sum));
        int k = (int)(closed & 1);
        c->has_iext = s->iext[k].epoch == closed;
        if (c->has_iext)
            memcpy(c->iext, s->iext[k].v, sizeof(c->iext));
        c->n_access = copy_values(&s->values, TRACK_ACCESS, c->access_val, c->access_cnt);
        c->n_stride = copy_values(&s->values, TRACK_STRIDE, c->stride_val, c->stride_cnt);
        if (shard_read_done(s, &rd) || tries >= 1000000)
            return;
    }
}

static inline void take_max(int64_t *dst, int64_t v)
{
    if (v > *dst) *dst = v;
}

static inline void take_first(int64_t *dst, int64_t v)
{
    if (v && (!*dst || v < *dst)) *dst = v;
}

/* maxima and last times take the larger, first times the earlier non-zero,
 * and the slowest call's size follows its time */
static void merge_ext(int64_t *dst, const int64_t *src)
{
    take_max(&dst[E_MAX_BYTE_READ], src[E_MAX_BYTE_READ]);
    take_max(&dst[E_MAX_BYTE_WRITTEN], src[E_MAX_BYTE_WRITTEN]);
    if (src[E_MAX_READ_TIME] > dst[E_MAX_READ_TIME]) {
        dst[E_MAX_READ_TIME] = src[E_MAX_READ_TIME];
        dst[E_MAX_READ_TIME_SIZE] = src[E_MAX_READ_TIME_SIZE];
    }
    if (src[E_MAX_WRITE_TIME] > dst[E_MAX_WRITE_TIME]) {
        dst[E_MAX_WRITE_TIME] = src[E_MAX_WRITE_TIME];
        dst[E_MAX_WRITE_TIME_SIZE] = src[E_MAX_WRITE_TIME_SIZE];
    }
    take_first(&dst[E_OPEN_START], src[E_OPEN_START]);
    take_max(&dst[E_OPEN_END], src[E_OPEN_END]);
    take_first(&dst[E_READ_START], src[E_READ_START]);
    take_max(&dst[E_READ_END], src[E_READ_END]);
    take_first(&dst[E_WRITE_START], src[E_WRITE_START]);
    take_max(&dst[E_WRITE_END], src[E_WRITE_END]);
    take_first(&dst[E_CLOSE_START], src[E_CLOSE_START]);
    take_max(&dst[E_CLOSE_END], src[E_CLOSE_END]);
}

/* total += now - seen; seen = now, two sums at a time (SSE2, NEON): this
 * loop was half of a fold */
typedef int64_t sum_pair __attribute__((vector_size(16)));
static inline void fold_sums(int64_t *total, int64_t *seen, const int64_t *now)
{
    int f = 0;
    for (; f + 2 <= S_N; f += 2) {
        sum_pair t, w, n;
        memcpy(&t, total + f, sizeof(t));
        memcpy(&w, seen + f, sizeof(w));
        memcpy(&n, now + f, sizeof(n));
        t += n - w;
        memcpy(total + f, &t, sizeof(t));
        memcpy(seen + f, &n, sizeof(n));
    }
    for (; f < S_N; f++) {
        total[f] += now[f] - seen[f];
        seen[f] = now[f];
    }
}

/* A record's distinct sizes (or strides) over all shards: the first 2 x 32
 * seen, as many as the old per-collect merge of shards kept. */
#define TOTAL_VALUES (2 * VALUES_MAX)
typedef struct value_totals {
    int32_t n;
    int64_t val[VALUES_INLINE], cnt[VALUES_INLINE];
    int64_t *big;                           /* val[TOTAL_VALUES], cnt[TOTAL_VALUES], once n passes the inline ones */
} value_totals;

/* A record's totals over all its shards, and the extremes of the interval
 * being collected (stamped with it). */
struct rec_totals {
    int64_t sum[S_N];
    int64_t iext[E_N];
    int64_t stamp;              /* interval of iext; also "already listed" */
    tfd_rec *next_touched;
    value_totals access, stride;
};

/* Collector-only bump allocator (under collect_lock): a rec_totals for every
 * record. */
static void *collector_alloc(size_t n)
{
    static char *arena;
    static size_t left;
    n = (n + 63) & ~(size_t)63;
    if (left < n) {
        size_t block = n > (1u << 20) ? n : (1u << 20);
        /* zeroed by writing: calloc's fresh pages would be read first (the
         * shared zero page) and then written, a second fault that flushes
         * the TLB of every core running the job (an IPI, costly on a VM) */
        char *p = malloc(block);
        if (!p)
            return NULL;
        memset(p, 0, block);
        arena = p;
        left = block;
    }
    void *r = arena;
    arena += n;
    left -= n;
    return r;
}

static int add_value(value_totals *t, int64_t v, int64_t count)
{
    int64_t *val = t->big ? t->big : t->val;
    int64_t *cnt = t->big ? t->big + TOTAL_VALUES : t->cnt;
    int32_t j = 0;
    while (j < t->n && val[j] != v)
        j++;
    if (j == t->n) {
        if (t->n >= TOTAL_VALUES)
            return 0;
        if (t->n == VALUES_INLINE && !t->big) {
            if (!(t->big = collector_alloc(2 * TOTAL_VALUES * sizeof(int64_t))))
                return -1;
            memcpy(t->big, t->val, sizeof(t->val));
            memcpy(t->big + TOTAL_VALUES, t->cnt, sizeof(t->cnt));
            val = t->big;
            cnt = t->big + TOTAL_VALUES;
        }
        val[j] = v;
        cnt[j] = 0;
        t->n++;
    }
    cnt[j] += count;
    return 0;
}

/* A shard's values only ever gain entries and counts, so what it added since
 * the last fold is its counts minus the ones seen then. */
static int fold_values(value_totals *t, const int64_t *sv, const int64_t *sc, int32_t sn, shard_seen *seen, int kind)
{
    if (sn > VALUES_INLINE && !seen->big) {
        /* zeroed: entries past the inline ones have been seen at count 0 */
        if (!(seen->big = calloc(2, VALUES_MAX * sizeof(int64_t))))   /* freed with the shard */
            return -1;
        for (int k = 0; k < 2; k++)
            memcpy(seen->big[k], seen->cnt[k], sizeof(seen->cnt[k]));
    }
    int64_t *was = seen->big ? seen->big[kind] : seen->cnt[kind];
    for (int32_t i = 0; i < sn; i++) {
        if (sc[i] != was[i] && add_value(t, sv[i], sc[i] - was[i]))
            return -1;
        was[i] = sc[i];
    }
    return 0;
}

/* Fold one dirty shard into its record's totals; the record joins the
 * collect's touched list the first time one of its shards is folded. */
static int fold_shard(tfd_shard *s, int64_t closed, tfd_rec **touched)
{
    tfd_rec *r = s->rec;
    if (!r->totals && !(r->totals = collector_alloc(sizeof(rec_totals))))
        return -1;
    rec_totals *a = r->totals;
    shard_seen *seen = &s->seen;
    shard_copy c;
    copy_shard(s, closed, &c);
    if (a->stamp != closed) {
        a->stamp = closed;
        memset(a->iext, 0, sizeof(a->iext));
        a->next_touched = *touched;
        *touched = r;
    }
    fold_sums(a->sum, seen->sum, c.sum);
    if (c.has_iext)
        merge_ext(a->iext, c.iext);
    if (fold_values(&a->access, c.access_val, c.access_cnt, c.n_access, seen, 0) ||
        fold_values(&a->stride, c.stride_val, c.stride_cnt, c.n_stride, seen, 1))
        return -1;
    return 0;
}

/* The dirty shards of a collect, as an array so their memory can be
 * fetched ahead: a collect is bound by cache misses, one shard after another
 * in lists of pointers. */
typedef struct shard_list { tfd_shard **p; int64_t n, cap; } shard_list;

static int take_dirty(shard_list *l, tfd_shard *s, int k)
{
    for (; s; s = s->iext[k].dirty_next) {
        if (l->n == l->cap) {
            int64_t cap = l->cap ? 2 * l->cap : 4096;
            tfd_shard **p = realloc(l->p, (size_t)cap * sizeof(*p));
            if (!p)
                return -1;
            l->p = p;
            l->cap = cap;
        }
        l->p[l->n++] = s;
    }
    return 0;
}

#define AHEAD 8
static int fold_shards(const shard_list *l, int64_t closed, tfd_rec **touched)
{
    for (int64_t i = 0; i < l->n; i++) {
        if (i + AHEAD < l->n) {
            const char *next = (const char *)l->p[i + AHEAD];
            for (size_t off = 0; off < sizeof(tfd_shard); off += 64)
                __builtin_prefetch(next + off);
        }
        if (i + AHEAD / 2 < l->n) {
            const tfd_shard *next = l->p[i + AHEAD / 2];
            if (next->rec->totals)
                for (size_t off = 0; off < sizeof(int64_t) * S_N; off += 64)
                    __builtin_prefetch((const char *)next->rec->totals + off, 1);
        }
        if (fold_shard(l->p[i], closed, touched))
            return -1;
    }
    return 0;
}

static int emit_values(const tfd_rec *r, int kind, const value_totals *t, growbuf *vals)
{
    const int64_t *val = t->big ? t->big : t->val;
    const int64_t *cnt = t->big ? t->big + TOTAL_VALUES : t->cnt;
    for (int32_t i = 0; i < t->n; i++) {
        int64_t v[4] = {r->index, kind, val[i], cnt[i]};
        if (grow_push(vals, v, 4))
            return -1;
    }
    return 0;
}

static int emit_record(tfd_rec *r, growbuf *rows, growbuf *vals)
{
    const rec_totals *a = r->totals;
    int64_t row[R_WIDTH];
    row[R_INDEX] = r->index;
    row[R_MODULE] = r->module;
    memcpy(row + R_SUM0, a->sum, sizeof(a->sum));
    memcpy(row + R_IEXT0, a->iext, sizeof(a->iext));
    row[R_MODE] = RELAXED_LOAD(r->mode);
    row[R_RENAMED_FROM] = RELAXED_LOAD(r->renamed_from);
    row[R_MEM_ALIGNMENT] = r->module == TFD_MODULE_POSIX ? MEM_ALIGNMENT : 0;
    row[R_FILE_ALIGNMENT] = r->module == TFD_MODULE_POSIX ? r->file_alignment : 0;
    if (grow_push(rows, row, R_WIDTH))
        return -1;
    if (emit_values(r, 0, &a->access, vals) || emit_values(r, 1, &a->stride, vals))
        return -1;
    return 0;
}

int totals_fold(int64_t closed, growbuf *rows, growbuf *vals, int64_t *n_shards)
{
    int k = (int)(closed & 1), rc = 0;
    tfd_rec *touched = NULL;
    /* every list is taken even after a failure: a shard left on one would
     * be pushed again two intervals later and the list would loop */
    static shard_list dirty_shards;     /* its buffer is kept between collects */
    dirty_shards.n = 0;
    for (tfd_thread *t = threads_first(); t; t = t->next)
        if (take_dirty(&dirty_shards, threads_take_dirty(t, k), k))
            rc = -1;
    if (rc == 0)
        rc = fold_shards(&dirty_shards, closed, &touched);
    *n_shards = dirty_shards.n;
    for (tfd_rec *r = touched; r && rc == 0; r = r->totals->next_touched)
        rc = emit_record(r, rows, vals);
    return rc;
}

