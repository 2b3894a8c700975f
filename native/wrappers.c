/* One wrapper per hooked function. Each has the same shape: forward at once
 * when detached; otherwise time the original, record only what succeeded
 * (Darshan's rules), and hand back the original's return value and errno
 * untouched. Arguments are never read before the original has validated
 * them, so a bad pointer fails the way it would without us; the one
 * exception is the path of an open or a stat while staged copies are
 * loaded (redirect.h), read first to decide which file the call is made on
 * (a NULL path is passed on untouched). */
#include "wrappers.h"

#include <sys/mman.h>
#include <unistd.h>

#include "fdmap.h"
#include "jump_return.h"
#include "redirect.h"
#include "rules_posix.h"
#include "rules_stdio.h"

/* the recording inlined into the data wrappers (its rare cases stay out of
 * line, TFD_COLD in base.h): one call, one prologue */
#define FLAT __attribute__((flatten))
#define ALIGNED(p) (((uintptr_t)(p) % 8) == 0)

static int iov_aligned(const struct iovec *iov, int n)
{
    for (int i = 0; i < n; i++)
        if (!ALIGNED(iov[i].iov_base))
            return 0;
    return 1;
}

/* the mode argument exists only with O_CREAT or O_TMPFILE */
#define OPEN_MODE(flags, mode)                                          \
    mode_t mode = 0;                                                    \
    if (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE) {    \
        va_list ap;                                                     \
        va_start(ap, flags);                                            \
        mode = (mode_t)va_arg(ap, int);                                 \
        va_end(ap);                                                     \
    }
#define CREATED_MODE(flags, mode) (((flags) & O_CREAT) ? (int64_t)(mode) : 0)

/* ---------------------------------------------------------------- opening */

int tfd_w_open(const char *path, int flags, ...)
{
    OPEN_MODE(flags, mode);
    if (IDLE())
        return tfd_real_open(path, flags, mode);
#define CALL(p) tfd_real_open(p, flags, mode)
    STAGED_OPEN(AT_FDCWD, path, flags, CREATED_MODE(flags, mode), CALL);
#undef CALL
    TIMED(tfd_real_open(path, flags, mode));
    if (r >= 0)
        KEEP_ERRNO(tfd_posix_open(r, AT_FDCWD, path, CREATED_MODE(flags, mode), t1, t2));
    return r;
}

int tfd_w_open64(const char *path, int flags, ...)
{
    OPEN_MODE(flags, mode);
    if (IDLE())
        return tfd_real_open64(path, flags, mode);
#define CALL(p) tfd_real_open64(p, flags, mode)
    STAGED_OPEN(AT_FDCWD, path, flags, CREATED_MODE(flags, mode), CALL);
#undef CALL
    TIMED(tfd_real_open64(path, flags, mode));
    if (r >= 0)
        KEEP_ERRNO(tfd_posix_open(r, AT_FDCWD, path, CREATED_MODE(flags, mode), t1, t2));
    return r;
}

int tfd_w_openat(int dirfd, const char *path, int flags, ...)
{
    OPEN_MODE(flags, mode);
    if (IDLE())
        return tfd_real_openat(dirfd, path, flags, mode);
#define CALL(p) tfd_real_openat(dirfd, p, flags, mode)
    STAGED_OPEN(dirfd, path, flags, CREATED_MODE(flags, mode), CALL);
#undef CALL
    TIMED(tfd_real_openat(dirfd, path, flags, mode));
    if (r >= 0)
        KEEP_ERRNO(tfd_posix_open(r, dirfd, path, CREATED_MODE(flags, mode), t1, t2));
    return r;
}

int tfd_w_openat64(int dirfd, const char *path, int flags, ...)
{
    OPEN_MODE(flags, mode);
    if (IDLE())
        return tfd_real_openat64(dirfd, path, flags, mode);
#define CALL(p) tfd_real_openat64(dirfd, p, flags, mode)
    STAGED_OPEN(dirfd, path, flags, CREATED_MODE(flags, mode), CALL);
#undef CALL
    TIMED(tfd_real_openat64(dirfd, path, flags, mode));
    if (r >= 0)
        KEEP_ERRNO(tfd_posix_open(r, dirfd, path, CREATED_MODE(flags, mode), t1, t2));
    return r;
}

/* the fortified opens (_FORTIFY_SOURCE) and creat: fixed arguments; a
 * staged source is opened as an open would (STAGED: the hook, or nothing) */
#define OPEN_FIXED_STAGED(name, params, args, dirfd, path, mode, STAGED)      \
    int tfd_w_##name params                                                  \
    {                                                                        \
        if (IDLE())                                                          \
            return tfd_real_##name args;                                     \
        STAGED;                                                              \
        TIMED(tfd_real_##name args);                                         \
        if (r >= 0)                                                          \
            KEEP_ERRNO(tfd_posix_open(r, dirfd, path, mode, t1, t2));        \
        return r;                                                            \
    }
#define OPEN_FIXED(name, params, args, dirfd, path, mode) OPEN_FIXED_STAGED(name, params, args, dirfd, path, mode, )
#define OPEN2(name, p) tfd_real_##name(p, flags)
#define OPENAT2(name, p) tfd_real_##name(dirfd, p, flags)
#define CALL_OPEN2(p) OPEN2(__open_2, p)
#define CALL_OPEN64_2(p) OPEN2(__open64_2, p)
#define CALL_OPENAT2(p) OPENAT2(__openat_2, p)
#define CALL_OPENAT64_2(p) OPENAT2(__openat64_2, p)
OPEN_FIXED_STAGED(__open_2, (const char *path, int flags), (path, flags), AT_FDCWD, path, 0,
                  STAGED_OPEN(AT_FDCWD, path, flags, 0, CALL_OPEN2))
OPEN_FIXED_STAGED(__open64_2, (const char *path, int flags), (path, flags), AT_FDCWD, path, 0,
                  STAGED_OPEN(AT_FDCWD, path, flags, 0, CALL_OPEN64_2))
OPEN_FIXED_STAGED(__openat_2, (int dirfd, const char *path, int flags), (dirfd, path, flags), dirfd, path, 0,
                  STAGED_OPEN(dirfd, path, flags, 0, CALL_OPENAT2))
OPEN_FIXED_STAGED(__openat64_2, (int dirfd, const char *path, int flags), (dirfd, path, flags), dirfd, path, 0,
                  STAGED_OPEN(dirfd, path, flags, 0, CALL_OPENAT64_2))
#define CREAT_FLAGS (O_CREAT | O_WRONLY | O_TRUNC)
#define CALL_CREAT(p) tfd_real_creat(p, mode)
#define CALL_CREAT64(p) tfd_real_creat64(p, mode)
OPEN_FIXED_STAGED(creat, (const char *path, mode_t mode), (path, mode), AT_FDCWD, path, (int64_t)mode,
                  STAGED_OPEN(AT_FDCWD, path, CREAT_FLAGS, (int64_t)mode, CALL_CREAT))
OPEN_FIXED_STAGED(creat64, (const char *path, mode_t mode), (path, mode), AT_FDCWD, path, (int64_t)mode,
                  STAGED_OPEN(AT_FDCWD, path, CREAT_FLAGS, (int64_t)mode, CALL_CREAT64))
/* mkstemp and friends fill in the template: record the name they chose */
OPEN_FIXED(mkstemp, (char *tmpl), (tmpl), AT_FDCWD, tmpl, 0)
OPEN_FIXED(mkostemp, (char *tmpl, int flags), (tmpl, flags), AT_FDCWD, tmpl, 0)
OPEN_FIXED(mkstemps, (char *tmpl, int suffixlen), (tmpl, suffixlen), AT_FDCWD, tmpl, 0)
OPEN_FIXED(mkostemps, (char *tmpl, int suffixlen, int flags), (tmpl, suffixlen, flags), AT_FDCWD, tmpl, 0)

int tfd_w_close(int fd)
{
    void *token;                /* none or excluded: nothing to time */
    if (IDLE() || !(token = tfd_posix_close_begin(fd)) || token == (void *)EXCLUDED)
        return tfd_real_close(fd);
    TIMED(tfd_real_close(fd));
    HOT(tfd_posix_close_end(token, t1, t2));
    return r;
}

#define DUP_WRAPPER(name, params, args, oldfd)                               \
    int tfd_w_##name params                                                  \
    {                                                                        \
        if (IDLE())                                                          \
            return tfd_real_##name args;                                     \
        TIMED(tfd_real_##name args);                                         \
        if (r >= 0)                                                          \
            KEEP_ERRNO(tfd_posix_refopen(oldfd, r, 1, t1, t2));              \
        return r;                                                            \
    }
DUP_WRAPPER(dup, (int fd), (fd), fd)
DUP_WRAPPER(dup2, (int fd, int newfd), (fd, newfd), fd)
DUP_WRAPPER(dup3, (int fd, int newfd, int flags), (fd, newfd, flags), fd)

/* fcntl's third argument is an int or a pointer depending on cmd; like
 * Darshan we always fetch one word and pass it on (same register either
 * way on the ABIs we support). Python duplicates fds with F_DUPFD_CLOEXEC. */
#define FCNTL_WRAPPER(name)                                                  \
    int tfd_w_##name(int fd, int cmd, ...)                                   \
    {                                                                        \
        va_list ap;                                                          \
        va_start(ap, cmd);                                                   \
        void *arg = va_arg(ap, void *);                                      \
        va_end(ap);                                                          \
        if (IDLE() || (cmd != F_DUPFD && cmd != F_DUPFD_CLOEXEC))            \
            return tfd_real_##name(fd, cmd, arg);                            \
        TIMED(tfd_real_##name(fd, cmd, arg));                                \
        if (r >= 0)                                                          \
            KEEP_ERRNO(tfd_posix_refopen(fd, r, 1, t1, t2));                 \
        return r;                                                            \
    }
FCNTL_WRAPPER(fcntl)
FCNTL_WRAPPER(fcntl64)

int tfd_w_fileno(FILE *stream)
{
    if (IDLE())
        return tfd_real_fileno(stream);
    TIMED(tfd_real_fileno(stream));
    if (r >= 0)
        KEEP_ERRNO(tfd_posix_fileno(stream, r, t1, t2));
    return r;
}

/* ------------------------------------------------------------------- data */

/* POSIX_RECORD_READ/WRITE for one call: pflag says the offset is explicit.
 * A descriptor with no record (socket, pipe, excluded file) goes untimed.
 * These originals always enter the kernel: back by a jump where that saves
 * a mispredicted return (jump_return.h). */
#define DATA_WRAPPER(kind, name, params, args, fd, pflag, offset, aligned)    \
    FLAT ssize_t tfd_w_##name params                                         \
    {                                                                        \
        tfd_rec *rec;                                                        \
        if (IDLE() || !(rec = tfd_posix_record(fd)))                         \
            return tfd_real_##name args;                                     \
        if (TFD_UNLIKELY(rec == EXCLUDED)) {  /* its bytes, untimed */       \
            ssize_t r = tfd_real_##name args;                                \
            if (r > 0)                                                       \
                HOT(tfd_posix_##kind##_rec(rec, NULL, r, 0, 0, 0, 0));       \
            RETURN_AFTER_KERNEL(r);                                          \
        }                                                                    \
        void *ahead = tfd_posix_data_ahead(rec);                             \
        TIMED(tfd_real_##name args);                                         \
        if (r >= 0)                                                          \
            HOT(tfd_posix_##kind##_rec(rec, ahead, r, (pflag) ? (offset) : 0, TFD_DATA_FLAGS(pflag, aligned), t1, t2)); \
        RETURN_AFTER_KERNEL(r);                                              \
    }

DATA_WRAPPER(read, read, (int fd, void *buf, size_t n), (fd, buf, n), fd, 0, 0, ALIGNED(buf))
DATA_WRAPPER(read, __read_chk, (int fd, void *buf, size_t n, size_t buflen), (fd, buf, n, buflen), fd, 0, 0, ALIGNED(buf))
DATA_WRAPPER(read, pread, (int fd, void *buf, size_t n, off_t off), (fd, buf, n, off), fd, 1, off, ALIGNED(buf))
DATA_WRAPPER(read, pread64, (int fd, void *buf, size_t n, off64_t off), (fd, buf, n, off), fd, 1, off, ALIGNED(buf))
DATA_WRAPPER(read, __pread_chk, (int fd, void *buf, size_t n, off_t off, size_t buflen), (fd, buf, n, off, buflen), fd, 1, off, ALIGNED(buf))
DATA_WRAPPER(read, __pread64_chk, (int fd, void *buf, size_t n, off64_t off, size_t buflen), (fd, buf, n, off, buflen), fd, 1, off, ALIGNED(buf))
DATA_WRAPPER(read, readv, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt), fd, 0, 0, iov_aligned(iov, cnt))
DATA_WRAPPER(read, preadv, (int fd, const struct iovec *iov, int cnt, off_t off), (fd, iov, cnt, off), fd, 1, off, iov_aligned(iov, cnt))
DATA_WRAPPER(read, preadv64, (int fd, const struct iovec *iov, int cnt, off64_t off), (fd, iov, cnt, off), fd, 1, off, iov_aligned(iov, cnt))
/* preadv2/pwritev2 with offset -1 use and move the file position */
DATA_WRAPPER(read, preadv2, (int fd, const struct iovec *iov, int cnt, off_t off, int fl), (fd, iov, cnt, off, fl), fd, off != -1, off, iov_aligned(iov, cnt))
DATA_WRAPPER(read, preadv64v2, (int fd, const struct iovec *iov, int cnt, off64_t off, int fl), (fd, iov, cnt, off, fl), fd, off != -1, off, iov_aligned(iov, cnt))
DATA_WRAPPER(write, write, (int fd, const void *buf, size_t n), (fd, buf, n), fd, 0, 0, ALIGNED(buf))
DATA_WRAPPER(write, pwrite, (int fd, const void *buf, size_t n, off_t off), (fd, buf, n, off), fd, 1, off, ALIGNED(buf))
DATA_WRAPPER(write, pwrite64, (int fd, const void *buf, size_t n, off64_t off), (fd, buf, n, off), fd, 1, off, ALIGNED(buf))
DATA_WRAPPER(write, writev, (int fd, const struct iovec *iov, int cnt), (fd, iov, cnt), fd, 0, 0, iov_aligned(iov, cnt))
DATA_WRAPPER(write, pwritev, (int fd, const struct iovec *iov, int cnt, off_t off), (fd, iov, cnt, off), fd, 1, off, iov_aligned(iov, cnt))
DATA_WRAPPER(write, pwritev64, (int fd, const struct iovec *iov, int cnt, off64_t off), (fd, iov, cnt, off), fd, 1, off, iov_aligned(iov, cnt))
DATA_WRAPPER(write, pwritev2, (int fd, const struct iovec *iov, int cnt, off_t off, int fl), (fd, iov, cnt, off, fl), fd, off != -1, off, iov_aligned(iov, cnt))
DATA_WRAPPER(write, pwritev64v2, (int fd, const struct iovec *iov, int cnt, off64_t off, int fl), (fd, iov, cnt, off, fl), fd, off != -1, off, iov_aligned(iov, cnt))

#define SEEK_WRAPPER(name, type)                                             \
    type tfd_w_##name(int fd, type off, int whence)                          \
    {                                                                        \
        if (IDLE())                                                          \
            return tfd_real_##name(fd, off, whence);                         \
        TIMED(tfd_real_##name(fd, off, whence));                             \
        if (r >= 0)                                                          \
            HOT(tfd_posix_seek(fd, r, t1, t2));                       \
        return r;                                                            \
    }
SEEK_WRAPPER(lseek, off_t)
SEEK_WRAPPER(lseek64, off64_t)

#define SYNC_WRAPPER(name, data_only)                                        \
    int tfd_w_##name(int fd)                                                 \
    {                                                                        \
        if (IDLE())                                                          \
            return tfd_real_##name(fd);                                      \
        TIMED(tfd_real_##name(fd));                                          \
        if (r == 0)                                                          \
            KEEP_ERRNO(tfd_posix_sync(fd, data_only, t1, t2));               \
        return r;                                                            \
    }
SYNC_WRAPPER(fsync, 0)
SYNC_WRAPPER(fdatasync, 1)

/* Darshan keeps no counter for fadvise; the hook is there so the call is
 * seen (and can be traced) without changing it. */
int tfd_w_posix_fadvise(int fd, off_t off, off_t len, int advice)
{
    return tfd_real_posix_fadvise(fd, off, len, advice);
}

int tfd_w_posix_fadvise64(int fd, off64_t off, off64_t len, int advice)
{
    return tfd_real_posix_fadvise64(fd, off, len, advice);
}

/* --------------------------------------------------------------- metadata */

/* Darshan counts stats of regular files only. A staged source's stat is
 * answered for its copy (CALL_name below: the call with another path). */
#define STAT_PATH_WRAPPER(name, params, args, nofollow, dirfd, path, mode)   \
    int tfd_w_##name params                                                  \
    {                                                                        \
        if (IDLE())                                                          \
            return tfd_real_##name args;                                     \
        STAGED_STAT(dirfd, path, nofollow, CALL_##name, mode);              \
        TIMED(tfd_real_##name args);                                         \
        if (r == 0 && S_ISREG(mode))                                         \
            KEEP_ERRNO(tfd_posix_stat_path(dirfd, path, t1, t2));            \
        return r;                                                            \
    }
#define STAT_FD_WRAPPER(name, params, args, fd, mode)                        \
    int tfd_w_##name params                                                  \
    {                                                                        \
        if (IDLE())                                                          \
            return tfd_real_##name args;                                     \
        TIMED(tfd_real_##name args);                                         \
        if (r == 0 && S_ISREG(mode))                                         \
            HOT(tfd_posix_stat_fd(fd, t1, t2));                       \
        return r;                                                            \
    }
/* fstatat with AT_EMPTY_PATH and "" is an fstat of dirfd */
#define STAT_AT_WRAPPER(name, params, args, dirfd, path, flags, mode)        \
    int tfd_w_##name params                                                  \
    {                                                                        \
        if (IDLE())                                                          \
            return tfd_real_##name args;                                     \
        if (!((flags) & AT_EMPTY_PATH) || (path && path[0]))                 \
            STAGED_STAT(dirfd, path, (flags) & AT_SYMLINK_NOFOLLOW, CALL_##name, mode); \
        TIMED(tfd_real_##name args);                                         \
        if (r == 0 && S_ISREG(mode)) {                                       \
            if (((flags) & AT_EMPTY_PATH) && path && !path[0])               \
                KEEP_ERRNO(tfd_posix_stat_fd(dirfd, t1, t2));                \
            else                                                             \
                KEEP_ERRNO(tfd_posix_stat_path(dirfd, path, t1, t2));        \
        }                                                                    \
        return r;                                                            \
    }

/* each path wrapper's call with the path replaced (the staged hook's CALL) */
#define CALL_stat(q) tfd_real_stat(q, b)
#define CALL_lstat(q) tfd_real_lstat(q, b)
#define CALL_stat64(q) tfd_real_stat64(q, b)
#define CALL_lstat64(q) tfd_real_lstat64(q, b)
#define CALL___xstat(q) tfd_real___xstat(v, q, b)
#define CALL___lxstat(q) tfd_real___lxstat(v, q, b)
#define CALL___xstat64(q) tfd_real___xstat64(v, q, b)
#define CALL___lxstat64(q) tfd_real___lxstat64(v, q, b)
#define CALL_fstatat(q) tfd_real_fstatat(d, q, b, f)
#define CALL_fstatat64(q) tfd_real_fstatat64(d, q, b, f)
#define CALL_newfstatat(q) tfd_real_newfstatat(d, q, b, f)
#define CALL___fxstatat(q) tfd_real___fxstatat(v, d, q, b, f)
#define CALL___fxstatat64(q) tfd_real___fxstatat64(v, d, q, b, f)
#define CALL_statx(q) tfd_real_statx(d, q, f, m, b)
STAT_PATH_WRAPPER(stat, (const char *p, struct stat *b), (p, b), 0, AT_FDCWD, p, b->st_mode)
STAT_PATH_WRAPPER(lstat, (const char *p, struct stat *b), (p, b), 1, AT_FDCWD, p, b->st_mode)
STAT_PATH_WRAPPER(stat64, (const char *p, struct stat64 *b), (p, b), 0, AT_FDCWD, p, b->st_mode)
STAT_PATH_WRAPPER(lstat64, (const char *p, struct stat64 *b), (p, b), 1, AT_FDCWD, p, b->st_mode)
STAT_PATH_WRAPPER(__xstat, (int v, const char *p, struct stat *b), (v, p, b), 0, AT_FDCWD, p, b->st_mode)
STAT_PATH_WRAPPER(__lxstat, (int v, const char *p, struct stat *b), (v, p, b), 1, AT_FDCWD, p, b->st_mode)
STAT_PATH_WRAPPER(__xstat64, (int v, const char *p, struct stat64 *b), (v, p, b), 0, AT_FDCWD, p, b->st_mode)
STAT_PATH_WRAPPER(__lxstat64, (int v, const char *p, struct stat64 *b), (v, p, b), 1, AT_FDCWD, p, b->st_mode)
STAT_FD_WRAPPER(fstat, (int fd, struct stat *b), (fd, b), fd, b->st_mode)
STAT_FD_WRAPPER(fstat64, (int fd, struct stat64 *b), (fd, b), fd, b->st_mode)
STAT_FD_WRAPPER(__fxstat, (int v, int fd, struct stat *b), (v, fd, b), fd, b->st_mode)
STAT_FD_WRAPPER(__fxstat64, (int v, int fd, struct stat64 *b), (v, fd, b), fd, b->st_mode)
STAT_AT_WRAPPER(fstatat, (int d, const char *p, struct stat *b, int f), (d, p, b, f), d, p, f, b->st_mode)
STAT_AT_WRAPPER(fstatat64, (int d, const char *p, struct stat64 *b, int f), (d, p, b, f), d, p, f, b->st_mode)
STAT_AT_WRAPPER(newfstatat, (int d, const char *p, struct stat *b, int f), (d, p, b, f), d, p, f, b->st_mode)
STAT_AT_WRAPPER(__fxstatat, (int v, int d, const char *p, struct stat *b, int f), (v, d, p, b, f), d, p, f, b->st_mode)
STAT_AT_WRAPPER(__fxstatat64, (int v, int d, const char *p, struct stat64 *b, int f), (v, d, p, b, f), d, p, f, b->st_mode)
STAT_AT_WRAPPER(statx, (int d, const char *p, int f, unsigned int m, struct statx *b), (d, p, f, m, b), d, p, f,
                (b->stx_mask & STATX_TYPE) ? b->stx_mode : 0)

int tfd_w_rename(const char *oldpath, const char *newpath)
{
    if (IDLE())
        return tfd_real_rename(oldpath, newpath);
    TIMED(tfd_real_rename(oldpath, newpath));
    if (r == 0) {
        KEEP_ERRNO(tfd_posix_rename(oldpath, newpath, t1, t2));
        STAGED_WRITTEN(AT_FDCWD, oldpath);
        STAGED_WRITTEN(AT_FDCWD, newpath);
    }
    return r;
}

/* ------------------------------------------------------------------ STDIO */

#define CALL_fopen(p) tfd_real_fopen(p, mode)
#define CALL_fopen64(p) tfd_real_fopen64(p, mode)
#define FOPEN_WRAPPER(name)                                                  \
    FILE *tfd_w_##name(const char *path, const char *mode)                   \
    {                                                                        \
        if (IDLE())                                                          \
            return tfd_real_##name(path, mode);                              \
        STAGED_FOPEN(path, mode, CALL_##name);                               \
        TIMED(tfd_real_##name(path, mode));                                  \
        if (r)                                                               \
            KEEP_ERRNO(tfd_stdio_open(r, path, t1, t2));                     \
        return r;                                                            \
    }
FOPEN_WRAPPER(fopen)
FOPEN_WRAPPER(fopen64)

/* a stream served from a copy, reopened by freopen(NULL, ...), reopens its source */
#define FREOPEN_WRAPPER(name)                                                \
    FILE *tfd_w_##name(const char *path, const char *mode, FILE *stream)     \
    {                                                                        \
        if (IDLE())                                                          \
            return tfd_real_##name(path, mode, stream);                      \
        char source_[PATH_MAX];                                              \
        if (!path && staged_loaded())                                        \
            path = redirect_reopened_source(stream, mode, source_, sizeof(source_)); \
        TIMED(tfd_real_##name(path, mode, stream));                          \
        if (r && path)                                                       \
            KEEP_ERRNO(tfd_stdio_open(r, path, t1, t2));                     \
        if (r && staged_loaded()) {                                          \
            STAGED_WRITTEN(AT_FDCWD, mode && (mode[0] != 'r' || strchr(mode, '+')) ? path : NULL); \
            KEEP_ERRNO(redirect_stream_written(r, mode));                    \
        }                                                                    \
        return r;                                                            \
    }
FREOPEN_WRAPPER(freopen)
FREOPEN_WRAPPER(freopen64)

FILE *tfd_w_fdopen(int fd, const char *mode)
{
    if (IDLE())
        return tfd_real_fdopen(fd, mode);
    TIMED(tfd_real_fdopen(fd, mode));
    if (r)
        KEEP_ERRNO(tfd_stdio_fdopen(r, fd, t1, t2));
    return r;
}

int tfd_w_fclose(FILE *stream)
{
    void *token;
    if (IDLE() || !(token = tfd_stdio_close_begin(stream)))
        return tfd_real_fclose(stream);
    TIMED(tfd_real_fclose(stream));
    HOT(tfd_stdio_close_end(token, t1, t2));
    return r;
}

FLAT size_t tfd_w_fread(void *ptr, size_t size, size_t nmemb, FILE *stream)
{
    if (IDLE())
        return tfd_real_fread(ptr, size, nmemb, stream);
    TIMED(tfd_real_fread(ptr, size, nmemb, stream));
    if (r > 0)
        HOT(tfd_stdio_read(stream, (int64_t)(size * r), t1, t2));
    return r;
}

FLAT size_t tfd_w___fread_chk(void *ptr, size_t buflen, size_t size, size_t nmemb, FILE *stream)
{
    if (IDLE())
        return tfd_real___fread_chk(ptr, buflen, size, nmemb, stream);
    TIMED(tfd_real___fread_chk(ptr, buflen, size, nmemb, stream));
    if (r > 0)
        HOT(tfd_stdio_read(stream, (int64_t)(size * r), t1, t2));
    return r;
}

FLAT size_t tfd_w_fwrite(const void *ptr, size_t size, size_t nmemb, FILE *stream)
{
    if (IDLE())
        return tfd_real_fwrite(ptr, size, nmemb, stream);
    TIMED(tfd_real_fwrite(ptr, size, nmemb, stream));
    if (r > 0)
        HOT(tfd_stdio_write(stream, (int64_t)(size * r), 0, t1, t2));
    return r;
}

/* Darshan's stream offset after a seek is what ftell reports */
#define FSEEK_WRAPPER(name, type)                                            \
    int tfd_w_##name(FILE *stream, type off, int whence)                     \
    {                                                                        \
        if (IDLE())                                                          \
            return tfd_real_##name(stream, off, whence);                     \
        TIMED(tfd_real_##name(stream, off, whence));                         \
        if (r >= 0)                                                          \
            KEEP_ERRNO(tfd_stdio_seek(stream, (int64_t)ftello(stream), t1, t2)); \
        return r;                                                            \
    }
FSEEK_WRAPPER(fseek, long)
FSEEK_WRAPPER(fseeko, off_t)
FSEEK_WRAPPER(fseeko64, off64_t)

/* Darshan does not count ftell */
long tfd_w_ftell(FILE *stream)
{
    return tfd_real_ftell(stream);
}

void tfd_w_rewind(FILE *stream)
{
    if (IDLE()) {
        tfd_real_rewind(stream);
        return;
    }
    uint64_t t1 = tfd_ticks();
    tfd_real_rewind(stream);
    uint64_t t2 = tfd_ticks();
    KEEP_ERRNO(tfd_stdio_seek(stream, 0, t1, t2));
}

int tfd_w_fflush(FILE *stream)
{
    if (IDLE())
        return tfd_real_fflush(stream);
    TIMED(tfd_real_fflush(stream));
    if (r >= 0)
        HOT(tfd_stdio_write(stream, 0, 1, t1, t2));
    return r;
}

char *tfd_w_fgets(char *s, int size, FILE *stream)
{
    if (IDLE())
        return tfd_real_fgets(s, size, stream);
    TIMED(tfd_real_fgets(s, size, stream));
    if (r)
        HOT(tfd_stdio_read(stream, (int64_t)strlen(r), t1, t2));
    return r;
}

int tfd_w_fputs(const char *s, FILE *stream)
{
    if (IDLE())
        return tfd_real_fputs(s, stream);
    TIMED(tfd_real_fputs(s, stream));
    if (r != EOF && r > 0)
        HOT(tfd_stdio_write(stream, (int64_t)strlen(s), 0, t1, t2));
    return r;
}

#define GETC_WRAPPER(name)                                                   \
    int tfd_w_##name(FILE *stream)                                           \
    {                                                                        \
        if (IDLE())                                                          \
            return tfd_real_##name(stream);                                  \
        TIMED(tfd_real_##name(stream));                                      \
        if (r != EOF)                                                        \
            HOT(tfd_stdio_read(stream, 1, t1, t2));                   \
        return r;                                                            \
    }
GETC_WRAPPER(fgetc)
GETC_WRAPPER(getc)
GETC_WRAPPER(_IO_getc)

#define PUTC_WRAPPER(name)                                                   \
    int tfd_w_##name(int c, FILE *stream)                                    \
    {                                                                        \
        if (IDLE())                                                          \
            return tfd_real_##name(c, stream);                               \
        TIMED(tfd_real_##name(c, stream));                                   \
        if (r != EOF)                                                        \
            HOT(tfd_stdio_write(stream, 1, 0, t1, t2));               \
        return r;                                                            \
    }
PUTC_WRAPPER(fputc)
PUTC_WRAPPER(putc)
PUTC_WRAPPER(_IO_putc)

int tfd_w_vfprintf(FILE *stream, const char *format, va_list ap)
{
    if (IDLE())
        return tfd_real_vfprintf(stream, format, ap);
    TIMED(tfd_real_vfprintf(stream, format, ap));
    if (r > 0)
        HOT(tfd_stdio_write(stream, r, 0, t1, t2));
    return r;
}

int tfd_w_fprintf(FILE *stream, const char *format, ...)
{
    va_list ap;
    va_start(ap, format);
    int r = tfd_w_vfprintf(stream, format, ap);
    va_end(ap);
    return r;
}
