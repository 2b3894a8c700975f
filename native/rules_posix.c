/* Darshan's POSIX counter rules, one function per event. */
#include "rules_posix.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "darshan_hash.h"
#include "fdmap.h"
#include "names.h"
#include "rules.h"

/* ------------------------------------------------------------ size buckets */

/* DARSHAN_BUCKET_INC. Its limits (101, 1025, ... 1G + 1) lie in different
 * binary orders of magnitude, so a size's bucket is the number of limits
 * of lower orders plus one if it reaches the limit of its own order: one
 * word per order (the limit above 8 bits, the count below), one line read. */
static int64_t size_order[64];

__attribute__((constructor)) static void fill_size_buckets(void)
{
    static const int64_t limits[9] = {101, 1025, 10241, 102401, 1048577, 4194305,
                                      10485761, 104857601, 1073741825};
    int64_t limit[64], below[64] = {0};
    int last = 64 - __builtin_clzll((uint64_t)limits[8]);
    /* an order without a limit of its own: up to the last, one never
     * reached; past it, one every size reaches (with one fewer below), so
     * no size counts past the last bucket */
    for (int order = 0; order < 64; order++)
        limit[order] = order < last ? INT64_MAX >> 8 : 0;
    for (int i = 0; i < 9; i++) {
        int order = 64 - __builtin_clzll((uint64_t)limits[i]);
        limit[order] = limits[i];
        for (int o = order + 1; o < 64; o++)
            below[o]++;
    }
    for (int order = 0; order < 64; order++)
        size_order[order] = limit[order] << 8 | (below[order] - (order > last));
}

static inline int size_bucket(int64_t v)
{
    int64_t w = size_order[64 - __builtin_clzll((uint64_t)v | 1)];     /* v >= 0: orders 1..63 */
    return (int)(w & 0xff) + (v >= w >> 8);
}

/* ------------------------------------------------------------ reads, writes */

/* POSIX_RECORD_READ / POSIX_RECORD_WRITE in one body, inlined twice, so
 * reads and writes each get a branch-free copy */
static inline __attribute__((always_inline)) void
posix_data(tfd_rec *r, void *ahead, int64_t ret, int pflag, int64_t off, int aligned, uint64_t t1, uint64_t t2,
           const int is_write)
{
    if (TFD_UNLIKELY(r == EXCLUDED)) {
        count_excluded(is_write, ret);
        return;
    }
    update u;
    if (!begin_ahead(&u, r, ahead))
        return;
    int64_t *sum = u.s->sum;
    int64_t *last_byte = is_write ? &r->last_byte_written : &r->last_byte_read;
    int64_t last = RELAXED_LOAD(*last_byte);
    int64_t this_off = rule_position(&u, r, pflag, off, ret, is_write ? E_MAX_BYTE_WRITTEN : E_MAX_BYTE_READ);

    if (trace_enabled())
        trace_append(&u.t->trace, r->index, is_write, this_off, ret, t1, t2, u.epoch);
    if (this_off > last)
        sum[is_write ? S_SEQ_WRITES : S_SEQ_READS]++;
    if (this_off == last + 1)
        sum[is_write ? S_CONSEC_WRITES : S_CONSEC_READS]++;
    int64_t stride = (this_off > 0 && this_off > last && last != 0) ? this_off - last - 1 : 0;
    RELAXED_STORE(*last_byte, this_off + ret - 1);
    sum[is_write ? S_BYTES_WRITTEN : S_BYTES_READ] += ret;
    sum[is_write ? S_WRITES : S_READS]++;
    thread_io_tally(&u, is_write ? HEAT_POSIX_WRITE : HEAT_POSIX_READ, is_write, ret, 1, t1, t2);
    sum[(is_write ? S_SIZE_WRITE_0_100 : S_SIZE_READ_0_100) + size_bucket(ret)]++;
    /* TensorFlow ends every whole-file read with one at the end of the
     * file: counted without a branch, in the line the read writes anyway */
    if (!is_write)
        sum[S_ZERO_READS] += ret == 0;
    track_value(u.t, &u.s->values, TRACK_ACCESS, ret);
    track_value(u.t, &u.s->values, TRACK_STRIDE, stride);
    if (TFD_UNLIKELY(!aligned))
        sum[S_MEM_NOT_ALIGNED]++;
    if (TFD_UNLIKELY(r->alignment_mask >= 0 ? (this_off & r->alignment_mask) != 0
                                            : (r->file_alignment > 0 && this_off % r->file_alignment != 0)))
        sum[S_FILE_NOT_ALIGNED]++;
    int io = is_write ? DARSHAN_IO_WRITE : DARSHAN_IO_READ;
    int prev = RELAXED_LOAD(r->last_io_type);
    if (TFD_UNLIKELY(prev && prev != io))
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

void *tfd_posix_data_ahead(tfd_rec *r)
{
    return shard_ahead(r);
}

/* the data wrappers' entry: the record and shard they looked up before the call */
void tfd_posix_read_rec(tfd_rec *r, void *ahead, int64_t ret, int64_t off, int flags, uint64_t t1, uint64_t t2)
{
    posix_data(r, ahead, ret, flags & TFD_AT_OFFSET, off, flags & TFD_MEM_ALIGNED, t1, t2, 0);
}

void tfd_posix_write_rec(tfd_rec *r, void *ahead, int64_t ret, int64_t off, int flags, uint64_t t1, uint64_t t2)
{
    posix_data(r, ahead, ret, flags & TFD_AT_OFFSET, off, flags & TFD_MEM_ALIGNED, t1, t2, 1);
}

/* ------------------------------------------------------------ opening */

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

/* an fd we do not track must not keep a stale mapping */
static void map_untracked(int fd, tfd_rec *r)
{
    tfd_rec **slot = posix_slot(fd, r == EXCLUDED);
    if (slot)
        __atomic_store_n(slot, r, __ATOMIC_RELEASE);
}

void tfd_posix_open_rec(int fd, tfd_rec *r, int64_t mode, uint64_t t1, uint64_t t2)
{
    if (fd < 0)
        return;
    if (!r || r == EXCLUDED)
        map_untracked(fd, r);
    else
        posix_open_record(r, fd, mode, 1, -1, t1, t2);
}

void tfd_posix_open(int fd, int dirfd, const char *path, int64_t mode, uint64_t t1, uint64_t t2)
{
    if (fd >= 0)
        tfd_posix_open_rec(fd, resolve_path(dirfd, path, TFD_MODULE_POSIX), mode, t1, t2);
}

void tfd_posix_refopen(int oldfd, int newfd, int is_dup, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = posix_rec_any(oldfd);
    if (!r || r == EXCLUDED)
        map_untracked(newfd, r);
    else
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

void tfd_posix_sync_open_fds(void)
{
    fdmap_forget_all();
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
        tfd_rec *r = tfd_path_excluded(clean) ? EXCLUDED : record_for_clean(clean, TFD_MODULE_POSIX);
        if (!r)
            continue;
        off_t pos = r == EXCLUDED ? -1 : lseek((int)fd, 0, SEEK_CUR);
        if (pos >= 0)
            RELAXED_STORE(r->offset, (int64_t)pos);
        tfd_rec *none = NULL;
        __atomic_compare_exchange_n(slot, &none, r, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    }
    closedir(d);
}

/* ------------------------------------------------------------ metadata */

void tfd_posix_seek(int fd, int64_t newoff, uint64_t t1, uint64_t t2)
{
    rule_seek(posix_rec(fd), newoff, t1, t2);
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

void tfd_posix_stat_rec(tfd_rec *r, uint64_t t1, uint64_t t2)
{
    posix_stat_record(r == EXCLUDED ? NULL : r, t1, t2);
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
    if (r != EXCLUDED)
        rule_close(r, 1, t1, t2);
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
