/* Darshan's STDIO counter rules, one function per event (rules_stdio.c);
 * the wrappers call them after the real call succeeded. */
#ifndef TFD_RULES_STDIO_H
#define TFD_RULES_STDIO_H
#include "base.h"

#include <stdio.h>

void tfd_stdio_open(FILE *stream, const char *path, uint64_t t1, uint64_t t2) TFD_HIDDEN;
/* the same for a path already resolved (redirect.c) */
typedef struct tfd_rec tfd_rec;
void tfd_stdio_open_rec(FILE *stream, tfd_rec *r, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_stdio_fdopen(FILE *stream, int fd, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_stdio_read(FILE *stream, int64_t bytes, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_stdio_write(FILE *stream, int64_t bytes, int is_flush, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_stdio_seek(FILE *stream, int64_t newoff, uint64_t t1, uint64_t t2) TFD_HIDDEN;
/* fclose in two steps, as close (rules_posix.h) */
void *tfd_stdio_close_begin(FILE *stream) TFD_HIDDEN;
void tfd_stdio_close_end(void *token, uint64_t t1, uint64_t t2) TFD_HIDDEN;

/* Darshan opens the three standard streams at start-up: their records */
void tfd_stdio_open_std_streams(void) TFD_HIDDEN;

#endif
