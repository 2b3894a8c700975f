/* A file's block size as Darshan records it (POSIX_FILE_ALIGNMENT): its
 * file system's f_bsize, or 1 MiB on Lustre. Looked up once per directory
 * for the life of the process, as Darshan reads its mount table once (a
 * statfs(2) walks the path, and on a shared file system it is a round trip
 * to the server: once per new file, it added half again to the metadata
 * calls of a job reading new files). Mounts are not watched: reading the
 * mount table takes a descriptor, and one opened beside the program's own
 * threads changes the numbers its opens return. */
#ifndef TFD_FSBLOCK_H
#define TFD_FSBLOCK_H
#include "base.h"

/* The block size for an absolute, cleaned path, -1 when unknown. Callers
 * serialize (table.c calls it under its create lock); errno unchanged. */
int64_t fsblock_of(const char *clean) TFD_HIDDEN;
#endif
