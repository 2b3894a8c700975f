/* Paths as Darshan names them, the include/exclude rules, and the cache of
 * paths already resolved (paths.c owns the rules and the cache). */
#ifndef TFD_PATHS_H
#define TFD_PATHS_H
#include "base.h"

#include "public.h"

typedef struct tfd_rec tfd_rec;

/* tfd_clean_path and tfd_path_excluded are in api.h */

/* replace the rules with the config's (a no-op when unchanged); 0, or -1
 * when out of memory */
int paths_set_rules(const tfd_config *c) TFD_HIDDEN;

/* A path as given (absolute) -> what resolving it gave: a record or the
 * excluded marker, and the path's staged copy (staged.h; NULL for none),
 * which the staged-copy wrappers read from here rather than look up again.
 * Entries stay valid for one generation of the rules and staged copies. */
typedef struct tfd_staged tfd_staged;
typedef struct path_key { uint64_t hash; int64_t gen; tfd_staged *staged; } path_key;
/* the cached record (key->staged its staged copy), or NULL */
tfd_rec *paths_cached(const char *path, size_t n, int module, path_key *key) TFD_HIDDEN;
/* files r and key->staged under the path */
void paths_remember(const char *path, size_t n, int module, const path_key *key, tfd_rec *r) TFD_HIDDEN;
/* every cached outcome is stale (new rules, staged copies, or a fork's fresh records) */
void paths_forget(void) TFD_HIDDEN;

#endif
