/* Paths (cleaning, include/exclude rules), the record table keyed by
 * (module, Darshan id), the record cap, and descriptor/stream maps. */
#include "records.h"

/* ------------------------------------------------------------------ paths */

/* darshan_clean_file_path: absolute, no "//", no "/./". Names starting
 * with '<' are Darshan's reserved names and stay as they are. */
int tfd_clean_path(const char *path, char *out, size_t out_len)
{
    if (!path || !*path)
        return -1;
    size_t need;
    if (path[0] == '<' || path[0] == '/') {
        need = strlen(path) + 1;
        if (need > out_len)
            return -1;
        memcpy(out, path, need);
        if (path[0] == '<')
            return 0;
    } else {
        if (!getcwd(out, out_len))
            return -1;
        size_t c = strlen(out), p = strlen(path);
        if (c + 1 + p + 1 > out_len)
            return -1;
        out[c] = '/';
        memcpy(out + c + 1, path, p + 1);
    }
    char *f;
    while ((f = strstr(out, "//")))
        memmove(f, f + 1, strlen(f + 1) + 1);
    while ((f = strstr(out, "/./")))
        memmove(f, f + 2, strlen(f + 2) + 1);
    return 0;
}

int tfd_path_excluded(const char *p)
{
    if (p[0] == '<')
        return 0;
    for (int i = 0; i < n_include; i++)
        if (strncmp(p, include_prefixes[i], strlen(include_prefixes[i])) == 0)
            return 0;
    for (int i = 0; i < n_exclude; i++)
        if (strncmp(p, exclude_prefixes[i], strlen(exclude_prefixes[i])) == 0)
            return 1;
    size_t n = strlen(p);
    for (int i = 0; i < n_exclude_suffixes; i++) {
        size_t k = strlen(exclude_suffixes[i]);
        if (n >= k && strcmp(p + n - k, exclude_suffixes[i]) == 0)
            return 1;
    }
    return 0;
}

/* --------------------------------------------------------------- records */


tfd_rec *table_find(uint64_t id, int module)
{
    for (uint64_t i = table_hash(id, module) & rec_table_mask;; i = (i + 1) & rec_table_mask) {
        tfd_rec *r = __atomic_load_n(&rec_table[i], __ATOMIC_ACQUIRE);
        if (!r)
            return NULL;
        if (r->id == id && r->module == module)
            return r;
    }
}

static int64_t block_size_of(const char *path)
{
    struct statfs sf;
    if (path[0] != '/' || statfs(path, &sf) != 0)
        return -1;
#ifndef LL_SUPER_MAGIC
#define LL_SUPER_MAGIC 0x0BD00BD0
#endif
    return sf.f_type == LL_SUPER_MAGIC ? 1024 * 1024 : (int64_t)sf.f_bsize;
}

/* caller holds create_lock */
tfd_rec *new_record(uint64_t id, int module, const char *path)
{
    if (n_records >= max_records)
        return NULL;
    /* a cache line of its own: threads write the position fields */
    tfd_rec *r = aligned_alloc(64, (sizeof(*r) + 63) & ~(size_t)63);
    if (r)
        memset(r, 0, sizeof(*r));
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return NULL;
    }
    r->id = id;
    r->module = module;
    r->index = n_records;
    r->file_alignment = block_size_of(path);
    r->alignment_mask = (r->file_alignment > 0 && !(r->file_alignment & (r->file_alignment - 1)))
                            ? r->file_alignment - 1 : -1;
    r->std_stream = path[0] == '<';
    int64_t hi = r->index / DIR_CHUNK;
    if (!rec_by_index[hi] && !(rec_by_index[hi] = calloc(DIR_CHUNK, sizeof(tfd_rec *)))) {
        free(r->path);
        free(r);
        return NULL;
    }
    rec_by_index[hi][r->index % DIR_CHUNK] = r;
    uint64_t i = table_hash(id, module) & rec_table_mask;
    while (rec_table[i])
        i = (i + 1) & rec_table_mask;
    __atomic_store_n(&rec_table[i], r, __ATOMIC_RELEASE);
    __atomic_store_n(&n_records, n_records + 1, __ATOMIC_RELEASE);
    n_module_records[module & 15]++;
    return r;
}

static void note_folded(uint64_t id)
{
    for (uint64_t i = (id * 0x9e3779b97f4a7c15ull) & folded_mask;; i = (i + 1) & folded_mask) {
        if (folded_ids[i] == id)
            return;
        if (folded_ids[i] == 0) {
            if (folded_count < (int64_t)folded_mask / 2) {
                folded_ids[i] = id;
            }
            folded_count++;
            return;
        }
    }
}

/* The record for a cleaned path, created on first sight; NULL if excluded.
 * Past the cap, new paths share one overflow record per module. */
tfd_rec *record_for_clean(const char *clean, int module)
{
    if (tfd_path_excluded(clean))
        return NULL;
    uint64_t id = tfd_hash64((const unsigned char *)clean, strlen(clean));
    tfd_rec *r = table_find(id, module);
    if (TFD_LIKELY(r != NULL))
        return r;
    /* a signal handler doing I/O while we hold the lock must not wait on it */
    tfd_thread *t = thread_self();
    if (!t || t->creating)
        return NULL;
    t->creating = 1;
    int saved = errno;
    pthread_mutex_lock(&create_lock);
    r = table_find(id, module);
    if (!r) {
        if (n_module_records[module & 15] < record_cap) {
            r = new_record(id, module, clean);
        } else {
            note_folded(id);
            r = overflow_rec[module & 15];
        }
    }
    pthread_mutex_unlock(&create_lock);
    errno = saved;
    t->creating = 0;
    return r;
}

tfd_rec tfd_excluded;

/* A path as Darshan names it, relative ones joined to the directory of
 * dirfd when it is one Darshan knows (else to the working directory).
 * 0 when cleaned, -1 when not, 1 when relative to an excluded directory:
 * the path lies under it (hwloc walks /sys this way), so it is excluded. */
int clean_path_at(int dirfd, const char *path, char *out, size_t out_len)
{
    const char *p = path;
    char joined[2 * PATH_MAX];
    if (!path || !*path)
        return -1;
    /* openat/fstatat relative to a directory Darshan knows: join the names */
    if (path[0] != '/' && dirfd >= 0 && dirfd != AT_FDCWD) {
        tfd_rec *d = NULL;
        if (dirfd < FD_TOP * FD_CHUNK && fd_posix[dirfd / FD_CHUNK])
            d = RELAXED_LOAD(fd_posix[dirfd / FD_CHUNK][dirfd % FD_CHUNK]);
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

tfd_rec *record_for_path(int dirfd, const char *path, int module)
{
    char clean[2 * PATH_MAX];
    if (clean_path_at(dirfd, path, clean, sizeof(clean)) != 0)
        return NULL;
    return record_for_clean(clean, module);
}

tfd_rec **posix_slot(int fd, int create)
{
    if (fd < 0 || fd >= FD_TOP * FD_CHUNK)
        return NULL;
    tfd_rec **chunk = __atomic_load_n(&fd_posix[fd / FD_CHUNK], __ATOMIC_ACQUIRE);
    if (!chunk) {
        if (!create)
            return NULL;
        tfd_rec **fresh = calloc(FD_CHUNK, sizeof(tfd_rec *));
        if (!fresh)
            return NULL;
        if (!__atomic_compare_exchange_n(&fd_posix[fd / FD_CHUNK], &chunk, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            free(fresh);
        else
            chunk = fresh;
    }
    return &chunk[fd % FD_CHUNK];
}


stream_slot *stdio_slot(int fd, int create)
{
    if (fd < 0 || fd >= FD_TOP * FD_CHUNK)
        return NULL;
    stream_slot *chunk = __atomic_load_n(&fd_stdio[fd / FD_CHUNK], __ATOMIC_ACQUIRE);
    if (!chunk) {
        if (!create)
            return NULL;
        stream_slot *fresh = calloc(FD_CHUNK, sizeof(stream_slot));
        if (!fresh)
            return NULL;
        if (!__atomic_compare_exchange_n(&fd_stdio[fd / FD_CHUNK], &chunk, fresh, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            free(fresh);
        else
            chunk = fresh;
    }
    return &chunk[fd % FD_CHUNK];
}

/* stream -> its record, EXCLUDED or NULL */
tfd_rec *stdio_rec_any(FILE *stream)
{
    if (!stream)
        return NULL;
    stream_slot *s = stdio_slot(fileno_unlocked(stream), 0);
    if (!s || __atomic_load_n(&s->stream, __ATOMIC_ACQUIRE) != stream)
        return NULL;
    return RELAXED_LOAD(s->rec);
}

/* stream -> its record, or NULL (an excluded path has none) */
tfd_rec *stdio_rec(FILE *stream)
{
    tfd_rec *r = stdio_rec_any(stream);
    return r == EXCLUDED ? NULL : r;
}

void stdio_map(FILE *stream, tfd_rec *r)
{
    stream_slot *s = stdio_slot(fileno_unlocked(stream), 1);
    if (!s)
        return;
    RELAXED_STORE(s->rec, r);
    __atomic_store_n(&s->stream, stream, __ATOMIC_RELEASE);
}
