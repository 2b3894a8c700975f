/* Darshan's POSIX counter rules, one function per event. */
#include "records.h"

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
    tfd_rec *r = resolve_path(dirfd, path, TFD_MODULE_POSIX);
    if (!r || r == EXCLUDED) {
        /* an fd we do not track must not keep a stale mapping */
        tfd_rec **slot = posix_slot(fd, r == EXCLUDED);
        if (slot)
            __atomic_store_n(slot, r, __ATOMIC_RELEASE);
        return;
    }
    posix_open_record(r, fd, mode, 1, -1, t1, t2);
}

void tfd_posix_refopen(int oldfd, int newfd, int is_dup, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = posix_rec_any(oldfd);
    if (!r || r == EXCLUDED) {
        tfd_rec **slot = posix_slot(newfd, r == EXCLUDED);
        if (slot)
            __atomic_store_n(slot, r, __ATOMIC_RELEASE);
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

void trace_append(update *u, int op, int64_t off, int64_t len, uint64_t t1, uint64_t t2)
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


void tfd_posix_read(int fd, int64_t ret, int pflag, int64_t off, int aligned, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = posix_rec_any(fd);
    if (r)
        posix_data(r, ret, pflag, off, aligned, t1, t2, 0);
}

void tfd_posix_write(int fd, int64_t ret, int pflag, int64_t off, int aligned, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = posix_rec_any(fd);
    if (r)
        posix_data(r, ret, pflag, off, aligned, t1, t2, 1);
}

/* the data wrappers' entry: the record they looked up before the call */
void tfd_posix_read_rec(tfd_rec *r, int64_t ret, int64_t off, int flags, uint64_t t1, uint64_t t2)
{
    posix_data(r, ret, flags & TFD_AT_OFFSET, off, flags & TFD_MEM_ALIGNED, t1, t2, 0);
}

void tfd_posix_write_rec(tfd_rec *r, int64_t ret, int64_t off, int flags, uint64_t t1, uint64_t t2)
{
    posix_data(r, ret, flags & TFD_AT_OFFSET, off, flags & TFD_MEM_ALIGNED, t1, t2, 1);
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
    if (!r || r == EXCLUDED)
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
