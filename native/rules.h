/* Darshan's rules that POSIX and STDIO share, written once: a seek and
 * the end of a close. */
#ifndef TFD_RULES_H
#define TFD_RULES_H
#include "threads.h"

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
