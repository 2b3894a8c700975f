/* From a path a call names to its record: Darshan's naming rules (clean,
 * exclude, hash, cap), with the cache of paths already resolved. */
#ifndef TFD_NAMES_H
#define TFD_NAMES_H
#include "base.h"

typedef struct tfd_rec tfd_rec;

/* What a call that named a path opens or stats: its record, EXCLUDED (the
 * rules leave it out) or NULL (it cannot be named). Relative paths are
 * joined to the directory of dirfd when it is one Darshan knows. */
tfd_rec *resolve_path(int dirfd, const char *path, int module) TFD_HIDDEN;
/* the same, NULL for an excluded path */
tfd_rec *record_for_path(int dirfd, const char *path, int module) TFD_HIDDEN;
/* the record of a cleaned path; NULL if excluded */
tfd_rec *record_for_clean(const char *clean, int module) TFD_HIDDEN;
/* The staged copy (staged.h) of a path a call names, absolute or relative
 * to the working directory, or NULL; clean gets the path as Darshan names
 * it. A path relative to another directory is never looked up: the name
 * the shim knows that directory by may no longer be true. */
typedef struct tfd_staged tfd_staged;
tfd_staged *staged_of_path(int dirfd, const char *path, char *clean, size_t clean_len) TFD_HIDDEN;

#endif
