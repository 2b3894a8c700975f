/* The wrappers staged copies need beyond opens and stats: calls that
 * change a file by its path (its copy is never served again), and those
 * that name what a descriptor has open (a served copy's names its source,
 * as without us). Without staged copies loaded they only forward. */
#include "wrappers.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "redirect.h"

#define STAGED_ON() (!IDLE() && staged_loaded())

#define CHANGE_WRAPPER(name, params, args, dirfd, path)                      \
    int tfd_w_##name params                                                  \
    {                                                                        \
        int r = tfd_real_##name args;                                        \
        if (r == 0 && STAGED_ON())                                           \
            KEEP_ERRNO(redirect_written(dirfd, path));                       \
        return r;                                                            \
    }
CHANGE_WRAPPER(unlink, (const char *path), (path), AT_FDCWD, path)
CHANGE_WRAPPER(unlinkat, (int dirfd, const char *path, int flags), (dirfd, path, flags), dirfd, path)
CHANGE_WRAPPER(remove, (const char *path), (path), AT_FDCWD, path)
#define TRUNCATE_WRAPPER(name, type)                                         \
    int tfd_w_##name(const char *path, type length)                          \
    {                                                                        \
        int r = tfd_real_##name(path, length);                               \
        if (r == 0 && STAGED_ON())                                           \
            KEEP_ERRNO(redirect_truncated(path));                            \
        return r;                                                            \
    }
TRUNCATE_WRAPPER(truncate, off_t)
TRUNCATE_WRAPPER(truncate64, off64_t)

int tfd_w_renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    int r = tfd_real_renameat(olddirfd, oldpath, newdirfd, newpath);
    if (r == 0 && STAGED_ON()) {
        KEEP_ERRNO(redirect_written(olddirfd, oldpath));
        KEEP_ERRNO(redirect_written(newdirfd, newpath));
    }
    return r;
}

ssize_t tfd_w_readlink(const char *path, char *buf, size_t size)
{
    ssize_t r = tfd_real_readlink(path, buf, size);
    return r > 0 && STAGED_ON() ? redirect_readlink(AT_FDCWD, path, buf, size, r) : r;
}

ssize_t tfd_w_readlinkat(int dirfd, const char *path, char *buf, size_t size)
{
    ssize_t r = tfd_real_readlinkat(dirfd, path, buf, size);
    return r > 0 && STAGED_ON() ? redirect_readlink(dirfd, path, buf, size, r) : r;
}

/* realpath of a served copy's /proc/self/fd link: the source's realpath
 * (got: what the real call returned, into resolved or allocated) */
static char *source_realpath(const char *path, char *got, char *resolved)
{
    int e = errno;
    char buf[PATH_MAX];
    const char *source = redirect_served_source(AT_FDCWD, path);
    if (!source || !tfd_real_realpath(source, buf)) {
        errno = e;
        return got;             /* (a source that vanished: what the link names stands) */
    }
    if (resolved) {
        memcpy(resolved, buf, strlen(buf) + 1);
        return resolved;
    }
    char *r = strdup(buf);
    errno = e;
    if (!r)
        return got;
    free(got);
    return r;
}

char *tfd_w_realpath(const char *path, char *resolved)
{
    char *r = tfd_real_realpath(path, resolved);
    return r && STAGED_ON() ? source_realpath(path, r, resolved) : r;
}

char *tfd_w_canonicalize_file_name(const char *path)
{
    char *r = tfd_real_canonicalize_file_name(path);
    return r && STAGED_ON() ? source_realpath(path, r, NULL) : r;
}
