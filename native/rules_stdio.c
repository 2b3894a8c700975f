/* Darshan's STDIO counter rules, one function per event. */
#include "rules_stdio.h"

#include <fcntl.h>

#include "fdmap.h"
#include "names.h"
#include "rules.h"

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

void tfd_stdio_open_std_streams(void)
{
    FILE *std[3] = {stdin, stdout, stderr};
    const char *names[3] = {"<STDIN>", "<STDOUT>", "<STDERR>"};
    for (int i = 0; i < 3; i++) {
        tfd_rec *r = record_for_clean(names[i], TFD_MODULE_STDIO);
        if (r && std[i])
            stdio_open_record(r, std[i], 1, 0, 0, 0);
    }
}

void tfd_stdio_open(FILE *stream, const char *path, uint64_t t1, uint64_t t2)
{
    if (stream)
        tfd_stdio_open_rec(stream, resolve_path(AT_FDCWD, path, TFD_MODULE_STDIO), t1, t2);
}

void tfd_stdio_open_rec(FILE *stream, tfd_rec *r, uint64_t t1, uint64_t t2)
{
    if (!stream)
        return;
    if (r == EXCLUDED)
        stdio_map(stream, EXCLUDED);
    else if (!r)
        stdio_unmap(stream);
    else
        stdio_open_record(r, stream, 1, 0, t1, t2);
}

void tfd_stdio_fdopen(FILE *stream, int fd, uint64_t t1, uint64_t t2)
{
    tfd_rec *p = posix_rec_any(fd);
    if (!stream || !p)
        return;
    if (p == EXCLUDED) {
        stdio_map(stream, EXCLUDED);
        return;
    }
    tfd_rec *r = record_for_clean(p->path, TFD_MODULE_STDIO);
    if (r)
        stdio_open_record(r, stream, 0, 1, t1, t2);
}

void tfd_stdio_read(FILE *stream, int64_t bytes, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = stdio_rec_any(stream);
    update u;
    if (r == EXCLUDED) {
        count_excluded(0, bytes);
        return;
    }
    if (!r || !begin(&u, r))
        return;
    rule_position(&u, r, 0, 0, bytes, E_MAX_BYTE_READ);
    u.s->sum[S_BYTES_READ] += bytes;
    u.s->sum[S_READS]++;
    thread_io_tally(&u, HEAT_STDIO_READ, 0, bytes, 1, t1, t2);
    ext_first(&u, E_READ_START, (int64_t)t1);
    ext_last(&u, E_READ_END, (int64_t)t2);
    timer_no_overlap(&u, S_T_READ, (int64_t)t1, (int64_t)t2, &r->last_read_end);
    end(&u);
}

void tfd_stdio_write(FILE *stream, int64_t bytes, int is_flush, uint64_t t1, uint64_t t2)
{
    tfd_rec *r = stdio_rec_any(stream);
    update u;
    if (r == EXCLUDED) {
        count_excluded(1, bytes);
        return;
    }
    if (!r || !begin(&u, r))
        return;
    rule_position(&u, r, 0, 0, bytes, E_MAX_BYTE_WRITTEN);
    u.s->sum[S_BYTES_WRITTEN] += bytes;
    u.s->sum[is_flush ? S_FLUSHES : S_WRITES]++;
    thread_io_tally(&u, HEAT_STDIO_WRITE, 1, bytes, !is_flush, t1, t2);
    ext_first(&u, E_WRITE_START, (int64_t)t1);
    ext_last(&u, E_WRITE_END, (int64_t)t2);
    timer_no_overlap(&u, S_T_WRITE, (int64_t)t1, (int64_t)t2, &r->last_write_end);
    end(&u);
}

void tfd_stdio_seek(FILE *stream, int64_t newoff, uint64_t t1, uint64_t t2)
{
    rule_seek(stdio_rec(stream), newoff, t1, t2);
}

/* As for close: forget the stream and its descriptor before the real
 * fclose, which frees both for reuse by other threads. */
void *tfd_stdio_close_begin(FILE *stream)
{
    int fd = stream ? stream_fd(stream) : -1;
    tfd_rec *r = stdio_rec(stream);
    stdio_unmap_fd(fd);
    /* fclose closes the descriptor inside libc: forget any POSIX mapping */
    tfd_rec **ps = posix_slot(fd, 0);
    if (ps)
        __atomic_store_n(ps, NULL, __ATOMIC_RELEASE);
    return r;
}

void tfd_stdio_close_end(void *token, uint64_t t1, uint64_t t2)
{
    rule_close(token, 0, t1, t2);
}
