/* A path as Darshan names it, to its record. */
#include "names.h"

#include <fcntl.h>
#include <limits.h>

#include "public.h"
#include "fdmap.h"
#include "paths.h"
#include "staged.h"
#include "table.h"

tfd_rec *record_for_clean(const char *clean, int module)
{
    return tfd_path_excluded(clean) ? NULL : table_record_for(clean, module);
}

/* A path as Darshan names it, relative ones joined to the directory of
 * dirfd when it is one Darshan knows (else to the working directory).
 * 0 when cleaned, -1 when not, 1 when relative to an excluded directory:
 * the path lies under it (hwloc walks /sys this way), so it is excluded. */
static int clean_path_at(int dirfd, const char *path, char *out, size_t out_len)
{
    const char *p = path;
    char joined[2 * PATH_MAX];
    if (!path || !*path)
        return -1;
    /* openat/fstatat relative to a directory Darshan knows: join the names */
    if (path[0] != '/' && dirfd >= 0 && dirfd != AT_FDCWD) {
        tfd_rec *d = tfd_posix_record(dirfd);
        if (d == EXCLUDED)
            return 1;
        if (d && d->path[0] == '/') {
            size_t dl = strlen(d->path), pl = strlen(path);
            if (dl + pl + 2 < sizeof(joined)) {
                memcpy(joined, d->path, dl);
                if (d->path[dl - 1] != '/')
                    joined[dl++] = '/';
                memcpy(joined + dl, path, pl + 1);
                p = joined;
            }
        }
    }
    return tfd_clean_path(p, out, out_len);
}

tfd_rec *resolve_path(int dirfd, const char *path, int module)
{
    char clean[2 * PATH_MAX];
    if (!path || !*path)
        return NULL;
    if (path[0] == '/') {
        size_t n = strlen(path);
        path_key key;
        tfd_rec *r = paths_cached(path, n, module, &key);
        if (TFD_LIKELY(r != NULL))
            return r;
        if (tfd_clean_path(path, clean, sizeof(clean)) != 0)
            return NULL;
        r = tfd_path_excluded(clean) ? EXCLUDED : table_record_for(clean, module);
        /* the cache carries the path's staged copy, for the wrappers that serve them */
        key.staged = staged_loaded() ? staged_find(clean, strlen(clean)) : NULL;
        if (r && (r == EXCLUDED || !table_is_overflow(r)))
            paths_remember(path, n, module, &key, r);
        return r;
    }
    int rc = clean_path_at(dirfd, path, clean, sizeof(clean));
    if (rc != 0)
        return rc == 1 ? EXCLUDED : NULL;
    return tfd_path_excluded(clean) ? EXCLUDED : table_record_for(clean, module);
}

tfd_rec *record_for_path(int dirfd, const char *path, int module)
{
    tfd_rec *r = resolve_path(dirfd, path, module);
    return r == EXCLUDED ? NULL : r;
}

tfd_staged *staged_of_path(int dirfd, const char *path, char *clean, size_t clean_len)
{
    if (!staged_loaded() || !path || !*path || (path[0] != '/' && dirfd != AT_FDCWD))
        return NULL;
    if (clean_path_at(dirfd, path, clean, clean_len) != 0)
        return NULL;
    return staged_find(clean, strlen(clean));
}
