/* Paths: Darshan's cleaning, the include/exclude rules, and a cache that
 * lets a path seen before skip both (and Darshan's hash). */
#include "paths.h"

#include <errno.h>
#include <unistd.h>

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

/* ------------------------------------------------------------------ rules */

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

/* called by attach only (under its lock) */
int paths_set_rules(const tfd_config *c)
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
    paths_forget();     /* cached outcomes were decided by the old rules */
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
    tfd_rec *rec;               /* or the excluded marker */
    tfd_staged *staged;         /* the path's staged copy, or NULL */
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

void paths_forget(void)
{
    __atomic_add_fetch(&path_gen, 1, __ATOMIC_RELEASE);
}

/* where to look: not Darshan's id (a full compare decides), just cheap */
static inline uint64_t path_hash(const char *p, size_t n, int module)
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

/* The cached outcome for the path, or NULL; key is filled either way, for
 * paths_remember (the generation is read before the outcome is decided, so
 * an outcome of old rules is filed under the old generation). */
tfd_rec *paths_cached(const char *p, size_t n, int module, path_key *key)
{
    key->gen = __atomic_load_n(&path_gen, __ATOMIC_ACQUIRE);
    key->hash = path_hash(p, n, module);
    key->staged = NULL;
    for (uint64_t i = key->hash, k = 0; k < PATH_PROBES; k++, i++) {
        path_entry *e = __atomic_load_n(&path_cache[i % PATH_SLOTS], __ATOMIC_ACQUIRE);
        if (!e)
            return NULL;
        if (e->key == key->hash && e->gen == key->gen && e->len == n && e->module == module &&
            memcmp(e->path, p, n) == 0) {
            key->staged = e->staged;
            return e->rec;
        }
    }
    return NULL;
}

void paths_remember(const char *p, size_t n, int module, const path_key *key, tfd_rec *r)
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
    *e = (path_entry){key->hash, key->gen, r, key->staged, n, module};
    memcpy(e->path, p, n + 1);
    for (uint64_t i = key->hash, k = 0; k < PATH_PROBES; k++, i++) {
        path_entry *old = __atomic_load_n(&path_cache[i % PATH_SLOTS], __ATOMIC_ACQUIRE);
        /* an entry of an older generation is garbage: take its slot */
        if ((!old || old->gen != key->gen) &&
            __atomic_compare_exchange_n(&path_cache[i % PATH_SLOTS], &old, e, 0, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED))
            return;
    }
    free(e);
    __atomic_sub_fetch(&path_bytes, (int64_t)size, __ATOMIC_RELAXED);
}
