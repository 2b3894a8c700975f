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

/* The include/exclude rules, with their lengths. A wrapper reads them
 * without a lock, so a new set replaces the old one whole and the old one
 * is never freed (rules change only when attach is given new ones). */
typedef struct rule { char *s; size_t len; } rule;
typedef struct rules { rule *inc, *exc, *suf; int n_inc, n_exc, n_suf; } rules;
static rules *current_rules;

static int same_rules(const rule *v, int n, const char *const *src, int n_src)
{
    if (n != n_src)
        return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(v[i].s, src[i]) != 0)
            return 0;
    return 1;
}

static void free_rules(rule *v)
{
    for (int i = 0; v && v[i].s; i++)
        free(v[i].s);
    free(v);
}

static rule *copy_rules(const char *const *src, int n)
{
    rule *v = calloc((size_t)n + 1, sizeof(rule));
    for (int i = 0; v && i < n; i++) {
        v[i].len = strlen(src[i]);
        if (!(v[i].s = strdup(src[i]))) {
            free_rules(v);
            return NULL;
        }
    }
    return v;
}

/* caller holds create_lock; 0, or -1 if out of memory */
int set_rules(const tfd_config *c)
{
    rules *old = current_rules;
    if (old && same_rules(old->inc, old->n_inc, c->include_prefixes, c->n_include) &&
        same_rules(old->exc, old->n_exc, c->exclude_prefixes, c->n_exclude) &&
        same_rules(old->suf, old->n_suf, c->exclude_suffixes, c->n_exclude_suffixes))
        return 0;
    rules *r = calloc(1, sizeof(*r));
    if (!r || !(r->inc = copy_rules(c->include_prefixes, c->n_include)) ||
        !(r->exc = copy_rules(c->exclude_prefixes, c->n_exclude)) ||
        !(r->suf = copy_rules(c->exclude_suffixes, c->n_exclude_suffixes))) {
        if (r) {
            free_rules(r->inc);
            free_rules(r->exc);
        }
        free(r);
        return -1;
    }
    r->n_inc = c->n_include;
    r->n_exc = c->n_exclude;
    r->n_suf = c->n_exclude_suffixes;
    __atomic_store_n(&current_rules, r, __ATOMIC_RELEASE);
    forget_paths();     /* cached outcomes were decided by the old rules */
    return 0;
}

/* p (n bytes) starts with the rule; the second byte rules most out */
static inline int starts_with(const char *p, size_t n, const rule *x)
{
    return x->len <= n && (x->len < 2 || p[1] == x->s[1]) && memcmp(p, x->s, x->len) == 0;
}

int tfd_path_excluded(const char *p)
{
    const rules *r = __atomic_load_n(&current_rules, __ATOMIC_ACQUIRE);
    if (p[0] == '<' || !r)
        return 0;
    size_t n = strlen(p);
    for (int i = 0; i < r->n_inc; i++)
        if (starts_with(p, n, &r->inc[i]))
            return 0;
    for (int i = 0; i < r->n_exc; i++)
        if (starts_with(p, n, &r->exc[i]))
            return 1;
    for (int i = 0; i < r->n_suf; i++)
        if (r->suf[i].len <= n && memcmp(p + n - r->suf[i].len, r->suf[i].s, r->suf[i].len) == 0)
            return 1;
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

/* The record for a cleaned path that the rules let through, created on
 * first sight. Past the cap, new paths share one overflow record per module. */
static tfd_rec *record_for_id(const char *clean, int module)
{
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

/* The record for a cleaned path; NULL if excluded. */
tfd_rec *record_for_clean(const char *clean, int module)
{
    return tfd_path_excluded(clean) ? NULL : record_for_id(clean, module);
}

/* ------------------------------------------------------------- path cache */

/* A data loader opens and stats the same files epoch after epoch: an
 * absolute path seen before skips cleaning, the rules and Darshan's hash.
 * The cache maps the path as given (and the module) to its record, or to
 * "excluded". Entries are immutable once published and never freed (a
 * wrapper may still be reading one), within a memory cap; new rules or a
 * fork start a new generation, which older entries do not match. */
typedef struct path_entry {
    uint64_t key;
    int64_t gen;
    tfd_rec *rec;               /* or EXCLUDED */
    size_t len;
    int module;
    char path[];
} path_entry;
#define PATH_SLOTS 65536        /* 512 KiB of pointers, in pages touched only when used */
#define PATH_PROBES 8
#define PATH_CACHE_BYTES (32 << 20)
static path_entry *path_cache[PATH_SLOTS];
static int64_t path_gen = 1;
static int64_t path_bytes;

void forget_paths(void)
{
    __atomic_add_fetch(&path_gen, 1, __ATOMIC_RELEASE);
}

/* where to look: not Darshan's id (a full compare decides), just cheap */
static inline uint64_t path_key(const char *p, size_t n, int module)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n ^ ((uint64_t)module << 56), w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
    }
    if (i < n) {
        w = 0;
        if (n >= 8)
            memcpy(&w, p + n - 8, 8);       /* the last 8 bytes, overlapping */
        else
            for (size_t k = 0; k < n; k++)
                w = (w << 8) | (unsigned char)p[k];
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
    }
    return h;
}

static path_entry *cached_path(const char *p, size_t n, int module, uint64_t key, int64_t gen)
{
    for (uint64_t i = key, k = 0; k < PATH_PROBES; k++, i++) {
        path_entry *e = __atomic_load_n(&path_cache[i % PATH_SLOTS], __ATOMIC_ACQUIRE);
        if (!e)
            return NULL;
        if (e->key == key && e->gen == gen && e->len == n && e->module == module && memcmp(e->path, p, n) == 0)
            return e;
    }
    return NULL;
}

static void remember_path(const char *p, size_t n, int module, uint64_t key, int64_t gen, tfd_rec *r)
{
    size_t size = sizeof(path_entry) + n + 1;
    if (__atomic_add_fetch(&path_bytes, (int64_t)size, __ATOMIC_RELAXED) > PATH_CACHE_BYTES)
        return;
    int saved = errno;
    path_entry *e = malloc(size);
    errno = saved;
    if (!e) {
        __atomic_sub_fetch(&path_bytes, (int64_t)size, __ATOMIC_RELAXED);
        return;
    }
    *e = (path_entry){key, gen, r, n, module};
    memcpy(e->path, p, n + 1);
    for (uint64_t i = key, k = 0; k < PATH_PROBES; k++, i++) {
        path_entry *old = __atomic_load_n(&path_cache[i % PATH_SLOTS], __ATOMIC_ACQUIRE);
        /* an entry of an older generation is garbage: take its slot */
        if ((!old || old->gen != gen) &&
            __atomic_compare_exchange_n(&path_cache[i % PATH_SLOTS], &old, e, 0, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
            return;
    }
    free(e);
    __atomic_sub_fetch(&path_bytes, (int64_t)size, __ATOMIC_RELAXED);
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

/* What a call that named a path opens or stats: its record, EXCLUDED (the
 * rules leave it out) or NULL (it cannot be named). An absolute path seen
 * before comes from the cache. */
tfd_rec *resolve_path(int dirfd, const char *path, int module)
{
    char clean[2 * PATH_MAX];
    if (!path || !*path)
        return NULL;
    if (path[0] == '/') {
        size_t n = strlen(path);
        int64_t gen = __atomic_load_n(&path_gen, __ATOMIC_ACQUIRE);
        uint64_t key = path_key(path, n, module);
        path_entry *e = cached_path(path, n, module, key, gen);
        if (TFD_LIKELY(e != NULL))
            return e->rec;
        if (tfd_clean_path(path, clean, sizeof(clean)) != 0)
            return NULL;
        tfd_rec *r = tfd_path_excluded(clean) ? EXCLUDED : record_for_id(clean, module);
        if (r && r != overflow_rec[module & 15])
            remember_path(path, n, module, key, gen, r);
        return r;
    }
    int rc = clean_path_at(dirfd, path, clean, sizeof(clean));
    if (rc != 0)
        return rc == 1 ? EXCLUDED : NULL;
    return tfd_path_excluded(clean) ? EXCLUDED : record_for_id(clean, module);
}

/* the record of a path, or NULL (excluded or unnamed) */
tfd_rec *record_for_path(int dirfd, const char *path, int module)
{
    tfd_rec *r = resolve_path(dirfd, path, module);
    return r == EXCLUDED ? NULL : r;
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
    stream_slot *s = stdio_slot(stream_fd(stream), 0);
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
    stream_slot *s = stdio_slot(stream_fd(stream), 1);
    if (!s)
        return;
    RELAXED_STORE(s->rec, r);
    __atomic_store_n(&s->stream, stream, __ATOMIC_RELEASE);
}
