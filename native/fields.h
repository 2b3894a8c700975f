/* What a record counts: Darshan's POSIX and STDIO counters, our kernel-side
 * fields, the extremes kept per interval, the common-value trackers and the
 * layout of a collected row. Definitions only, shared by the rules (which
 * write a shard's fields), the totals (which fold them) and the collect
 * (which names them for Python). */
#ifndef TFD_FIELDS_H
#define TFD_FIELDS_H
#include "base.h"

/* Additive counters: a window's value is later minus earlier. Ordered by
 * who writes them (Python finds them by name), so that a file read once,
 * as tf.io.read_file reads it (stat, open, a read, a zero-length read at
 * the end, close), touches three cache lines of its shard, not six: in a
 * real input pipeline each file is read once an epoch by a thread new to
 * it, so every line it touches is a miss. A shard's 16-byte header and a
 * read's sums (zero-length reads too) fill the first line; the read size
 * buckets up to 100 MB the second; the larger buckets and what an open, a
 * stat, a seek and a close count the third; then a write's, and the rest.
 * The size buckets stay in Darshan's order, contiguous. */
#define SUM_FIELDS(X)                                                          \
    X(READS) X(BYTES_READ) X(SEQ_READS) X(CONSEC_READS) X(T_READ) X(ZERO_READS) \
    X(SIZE_READ_0_100) X(SIZE_READ_100_1K) X(SIZE_READ_1K_10K)                  \
    X(SIZE_READ_10K_100K) X(SIZE_READ_100K_1M) X(SIZE_READ_1M_4M)               \
    X(SIZE_READ_4M_10M) X(SIZE_READ_10M_100M) X(SIZE_READ_100M_1G)              \
    X(SIZE_READ_1G_PLUS) X(OPENS) X(STATS) X(T_META) X(SEEKS)                   \
    X(MEM_NOT_ALIGNED) X(FILE_NOT_ALIGNED)                                      \
    X(RW_SWITCHES)                                                              \
    X(WRITES) X(BYTES_WRITTEN) X(SEQ_WRITES) X(CONSEC_WRITES) X(T_WRITE)        \
    X(SIZE_WRITE_0_100) X(SIZE_WRITE_100_1K) X(SIZE_WRITE_1K_10K)               \
    X(SIZE_WRITE_10K_100K) X(SIZE_WRITE_100K_1M) X(SIZE_WRITE_1M_4M)            \
    X(SIZE_WRITE_4M_10M) X(SIZE_WRITE_10M_100M) X(SIZE_WRITE_100M_1G)           \
    X(SIZE_WRITE_1G_PLUS)                                                       \
    X(FILENOS) X(DUPS) X(FDOPENS) X(MMAPS) X(FSYNCS) X(FDSYNCS) X(FLUSHES)      \
    X(RENAME_SOURCES) X(RENAME_TARGETS)                                         \
    KERNEL_IO_FIELDS(X)

/* Not Darshan's: I/O its wrappers never see (rules_kernel.c). Bytes a
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
 * for the current interval, because a window's maximum is not a difference.
 * A read's five come first, together, then a write's (a slowest call's
 * size right after its time); Python finds them by name. */
#define EXT_FIELDS(X)                                                          \
    X(MAX_BYTE_READ) X(MAX_READ_TIME) X(MAX_READ_TIME_SIZE) X(READ_START)       \
    X(READ_END) X(MAX_BYTE_WRITTEN) X(MAX_WRITE_TIME) X(MAX_WRITE_TIME_SIZE)    \
    X(WRITE_START) X(WRITE_END) X(OPEN_START) X(OPEN_END) X(CLOSE_START)        \
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

#define DARSHAN_IO_READ 1
#define DARSHAN_IO_WRITE 2
#define MEM_ALIGNMENT 8         /* Darshan's default __DARSHAN_MEM_ALIGNMENT */

/* darshan_track_common_val_counters: up to 32 distinct values (access
 * sizes, strides) with their counts. A shard's two trackers share one
 * header and a line: a read reads and writes both (its size and its
 * stride), and a file read once, as tf.io.read_file reads it (its size,
 * then 0 at the end of the file; stride 0 both times), touches only that
 * line. Each tracker keeps its first 4 entries inline, in slots: access's
 * first two and stride's first in the first line, the rest after; once
 * either has more, both move to `big`. */
#define VALUES_INLINE 4
#define VALUES_MAX 32           /* DARSHAN_COMMON_VAL_MAX_RUNTIME_COUNT */
enum { TRACK_ACCESS, TRACK_STRIDE };
typedef struct values_big { int64_t val[VALUES_MAX]; int64_t cnt[VALUES_MAX]; } values_big;
typedef struct trackers {
    int32_t n[2];               /* entries of access, stride */
    values_big *big;            /* [2], once set, holds all n[k] entries of both */
    int64_t slot[2 * VALUES_INLINE][2];     /* {value, count} */
} __attribute__((aligned(64))) trackers;

/* the slot of tracker k's inline entry i */
static inline int tracker_slot(int k, int i)
{
    static const int8_t slots[2][VALUES_INLINE] = {{0, 1, 3, 4}, {2, 5, 6, 7}};
    return slots[k][i];
}

/* What the collector has already folded of a shard: its sums and value
 * counts at the last collect that saw it written. Most shards see few
 * distinct sizes and strides, so their counts start inline. Part of each
 * shard (threads.h), written by the collector only (totals.c). */
typedef struct shard_seen {
    int64_t sum[S_N];
    int64_t cnt[2][VALUES_INLINE];          /* access, stride */
    int64_t (*big)[VALUES_MAX];             /* [2][VALUES_MAX] (malloc), once either has more */
} shard_seen;

#endif
