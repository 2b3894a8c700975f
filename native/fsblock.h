/* A file's block size as Darshan records it (POSIX_FILE_ALIGNMENT): its
 * file system's f_bsize, or 1 MiB on Lustre. Looked up once per directory
 * (a statfs(2) walks the path, and on a shared file system it is a round
 * trip to the server: once per new file, it doubled the metadata cost of
 * a job reading many new files), and again once the mount table changed. */
#ifndef TFD_FSBLOCK_H
#define TFD_FSBLOCK_H
#include "base.h"

/* The block size for an absolute, cleaned path, -1 when unknown. Callers
 * serialize (table.c calls it under its create lock); errno unchanged. */
int64_t fsblock_of(const char *clean) TFD_HIDDEN;
/* The collector's (at most once a second): when the mount table has
 * changed since the last look, the next lookup forgets what it knew.
 * Takes no lock. */
void fsblock_check_mounts(void) TFD_HIDDEN;

#endif
