/* Serving staged copies (redirect.c): what the open, fopen and stat
 * wrappers do instead of their usual body while a table of staged copies is
 * loaded (staged.h). The path is looked up once, before the call, in the
 * path cache, whose entry carries the path's staged copy; a read-only open
 * or a stat of a staged source whose check passed is made on the copy, and
 * recorded under the path the program gave; anything else, and any error
 * on the copy, goes to the source with the program's own arguments.
 *
 * Each hook below is one line in its wrapper; CALL(p) makes the wrapper's
 * call with path p and the program's other arguments. */
#ifndef TFD_REDIRECT_H
#define TFD_REDIRECT_H
#include "base.h"

#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

#include "public.h"
#include "staged.h"

typedef struct tfd_rec tfd_rec;

/* one call's lookup and outcome */
typedef struct tfd_serving {
    tfd_staged *entry;          /* the path's staged copy, or NULL */
    tfd_rec *rec;               /* its record when the path cache knew it, else NULL: resolved after the call */
    const char *path;           /* what the call is recorded under (the program's path, cleaned when relative) */
    int dirfd;
    int errno_before;
    int source_count;           /* STAGED_SOURCE_OPENS/STATS to count when the source's call succeeds; -1: none */
    int writes;                 /* an open for writing: whatever file it opens stops being served */
    char clean[PATH_MAX];
    char copy[PATH_MAX];
} tfd_serving;

/* before an open: the copy to open, or NULL for the program's own path */
const char *redirect_open_begin(tfd_serving *sv, int dirfd, const char *path, int flags) TFD_HIDDEN;
/* after opening the copy: 1 when it opened (recorded and counted), 0 when
 * it failed (counted; errno as before the call: open the source) */
int redirect_opened_copy(tfd_serving *sv, int fd, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void redirect_opened_source(tfd_serving *sv, int fd, int64_t mode, uint64_t t1, uint64_t t2) TFD_HIDDEN;

const char *redirect_fopen_begin(tfd_serving *sv, const char *path, const char *mode) TFD_HIDDEN;
int redirect_fopened_copy(tfd_serving *sv, FILE *f, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void redirect_fopened_source(tfd_serving *sv, FILE *f, uint64_t t1, uint64_t t2) TFD_HIDDEN;

/* stats: is_reg, the call succeeded on a regular file (Darshan counts those) */
const char *redirect_stat_begin(tfd_serving *sv, int dirfd, const char *path, int nofollow) TFD_HIDDEN;
int redirect_statted_copy(tfd_serving *sv, int rc, int is_reg, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void redirect_statted_source(tfd_serving *sv, int rc, int is_reg, uint64_t t1, uint64_t t2) TFD_HIDDEN;

/* a call that changed what path names (rename, unlink) succeeded: its
 * staged copy is never served again */
void redirect_written(int dirfd, const char *path) TFD_HIDDEN;
/* truncate: the file's content changed, by whichever of its names */
void redirect_truncated(const char *path) TFD_HIDDEN;
/* freopen(NULL, mode, stream) of a stream served from a copy reopens its
 * source (the file the program opened); else NULL */
const char *redirect_reopened_source(FILE *stream, const char *mode, char *buf, size_t len) TFD_HIDDEN;
/* a stream (re)opened for writing: the file it opened stops being served */
void redirect_stream_written(FILE *f, const char *mode) TFD_HIDDEN;
/* A readlink of path gave buf[0..got): a /proc/self/fd link to a copy this
 * process served names the source instead, as it would without us. The
 * bytes now in buf. */
ssize_t redirect_readlink(int dirfd, const char *path, char *buf, size_t size, ssize_t got) TFD_HIDDEN;
/* the source a /proc/self/fd path leads to, when the descriptor is a served copy (else NULL) */
const char *redirect_served_source(int dirfd, const char *path) TFD_HIDDEN;

/* ------------------------------------------------------- the wrappers' hooks */

#define STAGED_OPEN(dirfd, path, flags, created_mode, CALL)                          \
    if (TFD_UNLIKELY(staged_loaded())) {                                           \
        tfd_serving sv_;                                                            \
        const char *p_ = redirect_open_begin(&sv_, dirfd, path, flags);            \
        if (p_) {                                                                   \
            TIMED(CALL(p_));                                                        \
            if (redirect_opened_copy(&sv_, r, t1, t2))                              \
                return r;                                                           \
        }                                                                           \
        TIMED(CALL(path));                                                          \
        redirect_opened_source(&sv_, r, created_mode, t1, t2);                      \
        return r;                                                                   \
    }

#define STAGED_FOPEN(path, mode, CALL)                                               \
    if (TFD_UNLIKELY(staged_loaded())) {                                           \
        tfd_serving sv_;                                                            \
        const char *p_ = redirect_fopen_begin(&sv_, path, mode);                   \
        if (p_) {                                                                   \
            TIMED(CALL(p_));                                                        \
            if (redirect_fopened_copy(&sv_, r, t1, t2))                             \
                return r;                                                           \
        }                                                                           \
        TIMED(CALL(path));                                                          \
        redirect_fopened_source(&sv_, r, t1, t2);                                   \
        return r;                                                                   \
    }

/* MODE: the file type the call filled in (read only when it succeeded) */
#define STAGED_STAT(dirfd, path, nofollow, CALL, MODE)                               \
    if (TFD_UNLIKELY(staged_loaded())) {                                           \
        tfd_serving sv_;                                                            \
        const char *p_ = redirect_stat_begin(&sv_, dirfd, path, nofollow);         \
        if (p_) {                                                                   \
            TIMED(CALL(p_));                                                        \
            if (redirect_statted_copy(&sv_, r, r == 0 && S_ISREG(MODE), t1, t2))    \
                return r;                                                           \
        }                                                                           \
        TIMED(CALL(path));                                                          \
        redirect_statted_source(&sv_, r, r == 0 && S_ISREG(MODE), t1, t2);         \
        return r;                                                                   \
    }

#define STAGED_WRITTEN(dirfd, path)                                                  \
    do {                                                                            \
        if (TFD_UNLIKELY(staged_loaded()))                                         \
            KEEP_ERRNO(redirect_written(dirfd, path));                              \
    } while (0)

#endif
