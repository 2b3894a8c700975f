/* Serving staged copies: per call, whether to make it on the copy, and the
 * recording and counting that follow either way. errno is left as the
 * program's own call left it. */
#include "redirect.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "paths.h"
#include "rules_posix.h"
#include "rules_stdio.h"
#include "threads.h"

/* The path's staged copy and record, from the path cache when it has the
 * path, else from the table (first sight: the record is made after the
 * call, as without staged copies). Paths relative to a directory other
 * than the working one are never served: the name the shim knows that
 * directory by may no longer be true. */
static void look_up(tfd_serving *sv, int dirfd, const char *path, int module)
{
    sv->entry = NULL;
    sv->rec = NULL;
    sv->path = path;
    sv->dirfd = dirfd;
    sv->source_count = -1;
    sv->writes = 0;
    if (!path || !*path || thread_suppressed())
        return;
    const char *p = path;
    if (path[0] != '/') {
        if (dirfd != AT_FDCWD || tfd_clean_path(path, sv->clean, sizeof(sv->clean)) != 0)
            return;
        p = sv->path = sv->clean;
        sv->dirfd = AT_FDCWD;
    }
    path_key key;
    size_t n = strlen(p);
    tfd_rec *r = paths_cached(p, n, module, &key);
    if (TFD_LIKELY(r != NULL)) {
        sv->rec = r;
        sv->entry = key.staged;
        return;
    }
    if (p == path && tfd_clean_path(path, sv->clean, sizeof(sv->clean)) != 0)
        return;
    sv->entry = staged_find(sv->clean, strlen(sv->clean));
}

/* --------------------------------------------------------------- opening */

/* A descriptor opened for writing: if its file is a source being served
 * (by whichever name it was opened), that source is never served again. */
static void written_descriptor(int fd)
{
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        staged_written_inode((uint64_t)st.st_dev, (uint64_t)st.st_ino);
}

const char *redirect_open_begin(tfd_serving *sv, int dirfd, const char *path, int flags)
{
    int e = errno;
    const char *copy = NULL;
    look_up(sv, dirfd, path, TFD_MODULE_POSIX);
    sv->writes = path && ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC));
    if (sv->entry) {
        sv->source_count = STAGED_SOURCE_OPENS;
        if (sv->writes)
            staged_written(sv->entry);                      /* never redirected, never served again */
        else if (!(flags & (O_CREAT | O_APPEND | O_DIRECTORY | O_PATH)))   /* (O_TMPFILE holds O_DIRECTORY) */
            copy = staged_copy_to_serve(sv->entry, sv->copy, sizeof(sv->copy), flags & O_NOFOLLOW);
        else if (flags & (O_DIRECTORY | O_PATH))
            sv->source_count = -1;                          /* reads nothing: not counted */
    }
    sv->errno_before = e;
    errno = e;
    return copy;
}

int redirect_opened_copy(tfd_serving *sv, int fd, uint64_t t1, uint64_t t2)
{
    int e = errno;
    if (fd < 0) {
        staged_copy_failed(sv->entry, STAGED_FALLBACK_OPENS, e);
        sv->source_count = -1;          /* counted as a fallback */
        errno = sv->errno_before;
        return 0;
    }
    if (sv->rec)
        tfd_posix_open_rec(fd, sv->rec, 0, t1, t2);
    else
        tfd_posix_open(fd, sv->dirfd, sv->path, 0, t1, t2);
    staged_count(sv->entry, STAGED_SERVED_OPENS);
    errno = e;
    return 1;
}

void redirect_opened_source(tfd_serving *sv, int fd, int64_t mode, uint64_t t1, uint64_t t2)
{
    if (fd < 0)
        return;
    int e = errno;
    if (sv->writes)
        written_descriptor(fd);
    if (sv->rec)
        tfd_posix_open_rec(fd, sv->rec, mode, t1, t2);
    else
        tfd_posix_open(fd, sv->dirfd, sv->path, mode, t1, t2);
    if (sv->entry && sv->source_count >= 0)
        staged_count(sv->entry, sv->source_count);
    errno = e;
}

const char *redirect_fopen_begin(tfd_serving *sv, const char *path, const char *mode)
{
    int e = errno;
    const char *copy = NULL;
    look_up(sv, AT_FDCWD, mode ? path : NULL, TFD_MODULE_STDIO);
    sv->writes = path && mode && (mode[0] != 'r' || strchr(mode, '+'));
    if (sv->entry) {
        sv->source_count = STAGED_SOURCE_OPENS;
        if (sv->writes)
            staged_written(sv->entry);
        else
            copy = staged_copy_to_serve(sv->entry, sv->copy, sizeof(sv->copy), 0);
    }
    sv->errno_before = e;
    errno = e;
    return copy;
}

int redirect_fopened_copy(tfd_serving *sv, FILE *f, uint64_t t1, uint64_t t2)
{
    int e = errno;
    if (!f) {
        staged_copy_failed(sv->entry, STAGED_FALLBACK_OPENS, e);
        sv->source_count = -1;
        errno = sv->errno_before;
        return 0;
    }
    if (sv->rec)
        tfd_stdio_open_rec(f, sv->rec, t1, t2);
    else
        tfd_stdio_open(f, sv->path, t1, t2);
    staged_count(sv->entry, STAGED_SERVED_FOPENS);
    errno = e;
    return 1;
}

void redirect_fopened_source(tfd_serving *sv, FILE *f, uint64_t t1, uint64_t t2)
{
    if (!f)
        return;
    int e = errno;
    if (sv->writes)
        written_descriptor(fileno(f));
    if (sv->rec)
        tfd_stdio_open_rec(f, sv->rec, t1, t2);
    else
        tfd_stdio_open(f, sv->path, t1, t2);
    if (sv->entry && sv->source_count >= 0)
        staged_count(sv->entry, sv->source_count);
    errno = e;
}

/* ----------------------------------------------------------------- stats */

const char *redirect_stat_begin(tfd_serving *sv, int dirfd, const char *path, int nofollow)
{
    int e = errno;
    const char *copy = NULL;
    look_up(sv, dirfd, path, TFD_MODULE_POSIX);
    if (sv->entry) {
        copy = staged_copy_to_serve(sv->entry, sv->copy, sizeof(sv->copy), nofollow);
        sv->source_count = STAGED_SOURCE_STATS;
    }
    sv->errno_before = e;
    errno = e;
    return copy;
}

static void record_stat(tfd_serving *sv, uint64_t t1, uint64_t t2)
{
    if (sv->rec)
        tfd_posix_stat_rec(sv->rec, t1, t2);
    else
        tfd_posix_stat_path(sv->dirfd, sv->path, t1, t2);
}

int redirect_statted_copy(tfd_serving *sv, int rc, int is_reg, uint64_t t1, uint64_t t2)
{
    int e = errno;
    if (rc != 0) {
        staged_copy_failed(sv->entry, STAGED_FALLBACK_STATS, e);
        sv->source_count = -1;
        errno = sv->errno_before;
        return 0;
    }
    if (is_reg)
        record_stat(sv, t1, t2);
    staged_count(sv->entry, STAGED_SERVED_STATS);
    errno = e;
    return 1;
}

void redirect_statted_source(tfd_serving *sv, int rc, int is_reg, uint64_t t1, uint64_t t2)
{
    if (rc != 0)
        return;
    int e = errno;
    if (is_reg)
        record_stat(sv, t1, t2);
    if (sv->entry && sv->source_count >= 0)
        staged_count(sv->entry, sv->source_count);
    errno = e;
}

/* ------------------------------------------------ changes, /proc/self/fd */

void redirect_written(int dirfd, const char *path)
{
    tfd_serving sv;
    look_up(&sv, dirfd, path, TFD_MODULE_POSIX);
    if (sv.entry)
        staged_refuse(sv.entry, TFD_STAGED_WRITTEN);
}

/* path names a descriptor of this process (/proc/self/fd/N and its other
 * spellings), so that its link names what the descriptor has open */
static int names_own_descriptor(int dirfd, const char *path)
{
    static const char *const own[] = {"/proc/self/fd/", "/proc/thread-self/fd/", "/dev/fd/"};
    if (!path || (path[0] != '/' && dirfd != AT_FDCWD) || path[0] != '/')
        return 0;
    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
        if (!strncmp(path, own[i], strlen(own[i])))
            return 1;
    char pid[48];
    int n = snprintf(pid, sizeof(pid), "/proc/%d/fd/", (int)getpid());
    return n > 0 && !strncmp(path, pid, (size_t)n);
}

const char *redirect_served_source(int dirfd, const char *path)
{
    if (!names_own_descriptor(dirfd, path))
        return NULL;
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n <= 0 || target[0] != '/')
        return NULL;
    target[n] = '\0';
    return staged_source_of_served_copy(target, (size_t)n);
}

void redirect_truncated(const char *path)
{
    struct stat st;
    tfd_serving sv;
    look_up(&sv, AT_FDCWD, path, TFD_MODULE_POSIX);
    if (sv.entry)
        staged_written(sv.entry);
    if (path && stat(path, &st) == 0 && S_ISREG(st.st_mode))
        staged_written_inode((uint64_t)st.st_dev, (uint64_t)st.st_ino);
}

void redirect_stream_written(FILE *f, const char *mode)
{
    if (f && mode && (mode[0] != 'r' || strchr(mode, '+')))
        written_descriptor(fileno(f));
}

const char *redirect_reopened_source(FILE *stream, const char *mode, char *buf, size_t len)
{
    if (!stream || !mode || thread_suppressed())
        return NULL;
    int e = errno;
    char link[48];
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fileno(stream));
    const char *source = redirect_served_source(AT_FDCWD, link);
    errno = e;
    if (!source || strlen(source) + 1 > len)
        return NULL;
    memcpy(buf, source, strlen(source) + 1);
    return buf;
}

ssize_t redirect_readlink(int dirfd, const char *path, char *buf, size_t size, ssize_t got)
{
    int e = errno;
    const char *source = redirect_served_source(dirfd, path);
    errno = e;
    if (!source)
        return got;
    size_t n = strlen(source);
    if (n > size)
        n = size;               /* readlink truncates silently */
    memcpy(buf, source, n);
    return (ssize_t)n;
}
