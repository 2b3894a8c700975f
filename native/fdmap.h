/* The descriptor map: descriptor -> POSIX record, and descriptor ->
 * (stream, STDIO record). A descriptor or stream of an excluded path maps
 * to EXCLUDED, not NULL (which is "not a file we know"). fdmap.c owns and
 * writes both maps; the data wrappers read the POSIX one inline. */
#ifndef TFD_FDMAP_H
#define TFD_FDMAP_H
#include "base.h"

#include <errno.h>
#include <stdio.h>

typedef struct tfd_rec tfd_rec;

/* what a descriptor or stream of an excluded path maps to: its bytes go to
 * the thread's excluded counts */
extern tfd_rec tfd_excluded TFD_HIDDEN;
#define EXCLUDED (&tfd_excluded)

/* two levels of 4096: descriptors up to 1,048,575 are tracked */
#define FD_CHUNK 4096
#define FD_TOP 256
extern tfd_rec **tfd_fd_posix[FD_TOP] TFD_HIDDEN;     /* fdmap.c's: read it through the functions below */

/* fd -> its record, EXCLUDED or NULL */
static inline __attribute__((always_inline)) tfd_rec *tfd_posix_record(int fd)
{
    if ((unsigned)fd >= FD_TOP * FD_CHUNK)
        return NULL;
    tfd_rec **chunk = __atomic_load_n(&tfd_fd_posix[(unsigned)fd / FD_CHUNK], __ATOMIC_ACQUIRE);
    return chunk ? __atomic_load_n(&chunk[(unsigned)fd % FD_CHUNK], __ATOMIC_ACQUIRE) : NULL;
}

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

/* The descriptor's slot, to publish a mapping in or take one out of
 * (create: make its chunk if missing); NULL when out of range. */
tfd_rec **posix_slot(int fd, int create) TFD_HIDDEN;

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

/* stream -> its record, EXCLUDED or NULL */
tfd_rec *stdio_rec_any(FILE *stream) TFD_HIDDEN;

/* stream -> its record, or NULL (an excluded path has none) */
static inline tfd_rec *stdio_rec(FILE *stream)
{
    tfd_rec *r = stdio_rec_any(stream);
    return r == EXCLUDED ? NULL : r;
}

void stdio_map(FILE *stream, tfd_rec *r) TFD_HIDDEN;
/* forget the stream on its descriptor (it is closing, or was not named) */
void stdio_unmap(FILE *stream) TFD_HIDDEN;
void stdio_unmap_fd(int fd) TFD_HIDDEN;

/* Attach, before any slot is patched: descriptors may have been closed and
 * their numbers reused while detached, so every POSIX mapping goes, and
 * every stream whose descriptor is closed. */
void fdmap_forget_all(void) TFD_HIDDEN;
/* the child of fork: the same descriptors, mapped to the fresh records
 * (remap: old record index -> new record) */
void fdmap_after_fork(tfd_rec **remap) TFD_HIDDEN;

#endif
