/* The descriptor and stream maps, published with release stores and read
 * without a lock. */
#include "fdmap.h"

#include <fcntl.h>

#include "table.h"

tfd_rec tfd_excluded;
tfd_rec **tfd_fd_posix[FD_TOP];
/* fd -> (stream, STDIO record) */
typedef struct stream_slot { FILE *stream; tfd_rec *rec; } stream_slot;
static stream_slot *fd_stdio[FD_TOP];

tfd_rec **posix_slot(int fd, int create)
{
    if (fd < 0 || fd >= FD_TOP * FD_CHUNK)
        return NULL;
    tfd_rec **chunk = __atomic_load_n(&tfd_fd_posix[fd / FD_CHUNK], __ATOMIC_ACQUIRE);
    if (!chunk) {
        if (!create)
            return NULL;
        tfd_rec **fresh = calloc(FD_CHUNK, sizeof(tfd_rec *));
        if (!fresh)
            return NULL;
        if (!__atomic_compare_exchange_n(&tfd_fd_posix[fd / FD_CHUNK], &chunk, fresh, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            free(fresh);
        else
            chunk = fresh;
    }
    return &chunk[fd % FD_CHUNK];
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
        if (!__atomic_compare_exchange_n(&fd_stdio[fd / FD_CHUNK], &chunk, fresh, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_ACQUIRE))
            free(fresh);
        else
            chunk = fresh;
    }
    return &chunk[fd % FD_CHUNK];
}

tfd_rec *stdio_rec_any(FILE *stream)
{
    if (!stream)
        return NULL;
    stream_slot *s = stdio_slot(stream_fd(stream), 0);
    if (!s || __atomic_load_n(&s->stream, __ATOMIC_ACQUIRE) != stream)
        return NULL;
    return RELAXED_LOAD(s->rec);
}

void stdio_map(FILE *stream, tfd_rec *r)
{
    stream_slot *s = stdio_slot(stream_fd(stream), 1);
    if (!s)
        return;
    RELAXED_STORE(s->rec, r);
    __atomic_store_n(&s->stream, stream, __ATOMIC_RELEASE);
}

void stdio_unmap_fd(int fd)
{
    stream_slot *s = stdio_slot(fd, 0);
    if (s)
        __atomic_store_n(&s->stream, NULL, __ATOMIC_RELEASE);
}

void stdio_unmap(FILE *stream)
{
    if (stream)
        stdio_unmap_fd(stream_fd(stream));
}

void fdmap_forget_all(void)
{
    for (int hi = 0; hi < FD_TOP; hi++) {
        tfd_rec **chunk = __atomic_load_n(&tfd_fd_posix[hi], __ATOMIC_ACQUIRE);
        stream_slot *streams = __atomic_load_n(&fd_stdio[hi], __ATOMIC_ACQUIRE);
        for (int lo = 0; lo < FD_CHUNK && (chunk || streams); lo++) {
            if (chunk)
                __atomic_store_n(&chunk[lo], NULL, __ATOMIC_RELEASE);
            if (streams && streams[lo].stream && fcntl(hi * FD_CHUNK + lo, F_GETFD) == -1)
                __atomic_store_n(&streams[lo].stream, NULL, __ATOMIC_RELEASE);
        }
    }
}

void fdmap_after_fork(tfd_rec **remap)
{
    for (int hi = 0; hi < FD_TOP; hi++) {
        for (int lo = 0; tfd_fd_posix[hi] && lo < FD_CHUNK; lo++) {
            tfd_rec *o = tfd_fd_posix[hi][lo];
            if (o && o != EXCLUDED)
                tfd_fd_posix[hi][lo] = remap ? remap[o->index] : NULL;
        }
        for (int lo = 0; fd_stdio[hi] && lo < FD_CHUNK; lo++) {
            tfd_rec *o = fd_stdio[hi][lo].rec;
            if (o && o != EXCLUDED)
                fd_stdio[hi][lo].rec = remap ? remap[o->index] : NULL;
        }
    }
}
