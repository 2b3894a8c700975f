/* Darshan's rules that POSIX and STDIO share, written once: where a read
 * or a write starts and where it leaves the file position, a seek, and
 * the end of a close. */
#ifndef TFD_RULES_H
#define TFD_RULES_H
#include "threads.h"

/* A read or write of bytes (POSIX_RECORD_READ/WRITE, STDIO_RECORD_READ/
 * WRITE): it starts at the explicit offset off (pread, pwrite) or else at
 * the file position, which it leaves just past its last byte, the highest
 * accessed if no other was higher (f_max_byte: E_MAX_BYTE_READ or
 * E_MAX_BYTE_WRITTEN). Returns where it started: the offset POSIX's
 * sequential, consecutive and stride rules compare. */
static inline __attribute__((always_inline)) int64_t
rule_position(update *u, tfd_rec *r, int explicit_offset, int64_t off, int64_t bytes, int f_max_byte)
{
    int64_t at = explicit_offset ? off : RELAXED_LOAD(r->offset);
    RELAXED_STORE(r->offset, at + bytes);
    ext_max(u, f_max_byte, at + bytes - 1);
    return at;
}

/* A read's or a write's share of its thread's running totals (the live
 * pull's) and heatmap: bytes, in calls (0: a flush), timed t1 to t2. */
static inline __attribute__((always_inline)) void
thread_io_tally(update *u, int heat_kind, int is_write, int64_t bytes, int calls, uint64_t t1, uint64_t t2)
{
    tfd_thread *t = u->t;
    heat_add(&t->heat_now, &t->heat, heat_kind, bytes, t1, t2);
    if (is_write) {
        t->tot_bytes_written += bytes;
        t->tot_writes += calls;
    } else {
        t->tot_bytes_read += bytes;
        t->tot_reads += calls;
    }
    t->tot_ticks += (int64_t)(t2 - t1);
}

/* A seek moved the file position to newoff: Darshan counts it as metadata
 * and later reads and writes start from there. */
static inline void rule_seek(tfd_rec *r, int64_t newoff, uint64_t t1, uint64_t t2)
{
    update u;
    if (!r || !begin(&u, r))
        return;
    RELAXED_STORE(r->offset, newoff);
    timer_no_overlap(&u, S_T_META, (int64_t)t1, (int64_t)t2, &r->last_meta_end);
    u.s->sum[S_SEEKS]++;
    end(&u);
}

/* A close (POSIX's also forgets the last bytes, so the next open's first
 * access counts as sequential and consecutive afresh). */
static inline void rule_close(tfd_rec *r, int forget_last_bytes, uint64_t t1, uint64_t t2)
{
    update u;
    if (!r || !begin(&u, r))
        return;
    if (forget_last_bytes) {
        RELAXED_STORE(r->last_byte_written, 0);
        RELAXED_STORE(r->last_byte_read, 0);
    }
    ext_first(&u, E_CLOSE_START, (int64_t)t1);
    ext_last(&u, E_CLOSE_END, (int64_t)t2);
    timer_no_overlap(&u, S_T_META, (int64_t)t1, (int64_t)t2, &r->last_meta_end);
    end(&u);
}

#endif
