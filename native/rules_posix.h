/* Darshan's POSIX counter rules, one function per event (rules_posix.c);
 * the wrappers call them after the real call succeeded. */
#ifndef TFD_RULES_POSIX_H
#define TFD_RULES_POSIX_H
#include "base.h"

#include <stdio.h>

typedef struct tfd_rec tfd_rec;

void tfd_posix_open(int fd, int dirfd, const char *path, int64_t mode, uint64_t t1, uint64_t t2) TFD_HIDDEN;
/* the same for a path already resolved (its record, EXCLUDED or NULL):
 * the staged-copy wrappers look paths up before the call (redirect.c) */
void tfd_posix_open_rec(int fd, tfd_rec *r, int64_t mode, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_stat_rec(tfd_rec *r, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_refopen(int oldfd, int newfd, int is_dup, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_fileno(FILE *stream, int fd, uint64_t t1, uint64_t t2) TFD_HIDDEN;
/* The data wrappers look the descriptor's record up before the call: an
 * untracked descriptor's calls are then not timed at all, and a tracked
 * one's are counted against the file the call was made on. They also look
 * up this thread's counters of the record before the call (ahead: NULL
 * when the thread does not record now), so the counting after it does not
 * wait on a chain of loads the system call has pushed out of the cache. */
#define TFD_AT_OFFSET 1         /* pread/pwrite: the offset is explicit */
#define TFD_MEM_ALIGNED 2       /* the buffer is 8-byte aligned */
#define TFD_DATA_FLAGS(pflag, aligned) (((pflag) ? TFD_AT_OFFSET : 0) | ((aligned) ? TFD_MEM_ALIGNED : 0))
void *tfd_posix_data_ahead(tfd_rec *r) TFD_HIDDEN;
void tfd_posix_read_rec(tfd_rec *r, void *ahead, int64_t ret, int64_t off, int flags, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_write_rec(tfd_rec *r, void *ahead, int64_t ret, int64_t off, int flags, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_seek(int fd, int64_t newoff, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_stat_path(int dirfd, const char *path, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_stat_fd(int fd, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_mmap(int fd) TFD_HIDDEN;
void tfd_posix_sync(int fd, int data_only, uint64_t t1, uint64_t t2) TFD_HIDDEN;
/* close in two steps: forget the descriptor before the real close, count
 * after it (token: what the descriptor mapped to; NULL or EXCLUDED: none) */
void *tfd_posix_close_begin(int fd) TFD_HIDDEN;
void tfd_posix_close_end(void *token, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_rename(const char *oldpath, const char *newpath, uint64_t t1, uint64_t t2) TFD_HIDDEN;

/* Attach, before any slot is patched: every open descriptor is attributed
 * afresh through /proc/self/fd (without counting an open Darshan never
 * saw), with its current offset. */
void tfd_posix_sync_open_fds(void) TFD_HIDDEN;

#endif
