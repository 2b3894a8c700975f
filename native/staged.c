/* The staged copies: the table, each source's first-use check, and what
 * serving each did. */
#include "staged.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "paths.h"

/* An entry's counts, made at its first use and pushed on its table's list
 * of used entries, which is what Python reads. */
typedef struct staged_use {
    int64_t count[STAGED_COUNTS];
    tfd_staged *entry;
    struct staged_use *next;
} staged_use;

/* The stager mirrors a source's path under a root, so a copy is most often
 * its source behind a prefix: it is kept as that prefix, and composed when
 * served. Another copy is kept whole in `prefix`. */
struct tfd_staged {
    uint64_t hash;
    int64_t size, source_mtime_ns, copy_mtime_ns;
    const char *source;
    const char *prefix;
    uint32_t source_len, prefix_len;
    int32_t mirrored;           /* the copy is prefix + source */
    int32_t source_is_link;     /* written before the state is published */
    int32_t state;              /* STAGED_UNCHECKED, STAGED_SERVING or a refusal */
    int64_t index;
    staged_use *use;
    uint64_t dev, ino;          /* the source's, once its check passed */
};

struct staged_table {
    tfd_staged *entries;
    int64_t n;
    uint64_t mask;
    uint32_t *by_source;        /* entry index + 1; 0: an empty slot */
    uint32_t *by_copy;
    uint32_t *by_inode;         /* the sources being served, by device and inode (filled by checks) */
    char *arena;
    staged_use *used;           /* newest first */
};

staged_table *tfd_staged_table;

static inline staged_table *current(void)
{
    return __atomic_load_n(&tfd_staged_table, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------ the table */

/* where to look (a full compare decides), 8 bytes at a time */
static uint64_t hash_of(const char *p, size_t n)
{
    uint64_t h = 0x2545f4914f6cdd1dull ^ n, w;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0x9fb21c651e98df25ull;
        h ^= h >> 32;
    }
    if (i < n) {
        w = 0;
        memcpy(&w, p + i, n - i);
        h = (h ^ w) * 0x9fb21c651e98df25ull;
        h ^= h >> 32;
    }
    return h;
}

/* the copy's path into buf; its length, or 0 when it does not fit */
static size_t copy_path(const tfd_staged *e, char *buf, size_t len)
{
    size_t n = (size_t)e->prefix_len + (e->mirrored ? e->source_len : 0);
    if (n + 1 > len)
        return 0;
    memcpy(buf, e->prefix, e->prefix_len);
    if (e->mirrored)
        memcpy(buf + e->prefix_len, e->source, e->source_len);
    buf[n] = '\0';
    return n;
}

static tfd_staged *find_in(const staged_table *t, const char *clean, size_t n, uint64_t h)
{
    for (uint64_t i = h & t->mask;; i = (i + 1) & t->mask) {
        uint32_t k = t->by_source[i];
        if (!k)
            return NULL;
        tfd_staged *e = &t->entries[k - 1];
        if (e->hash == h && e->source_len == n && memcmp(e->source, clean, n) == 0)
            return e;
    }
}

tfd_staged *staged_find(const char *clean, size_t n)
{
    staged_table *t = current();
    return t ? find_in(t, clean, n, hash_of(clean, n)) : NULL;
}

const char *staged_source_of_served_copy(const char *copy, size_t n)
{
    staged_table *t = current();
    if (!t)
        return NULL;
    char buf[PATH_MAX];
    for (uint64_t i = hash_of(copy, n) & t->mask;; i = (i + 1) & t->mask) {
        uint32_t k = t->by_copy[i];
        if (!k)
            return NULL;
        tfd_staged *e = &t->entries[k - 1];
        if (copy_path(e, buf, sizeof(buf)) != n || memcmp(buf, copy, n) != 0)
            continue;
        staged_use *u = __atomic_load_n(&e->use, __ATOMIC_ACQUIRE);
        int served = u && (__atomic_load_n(&u->count[STAGED_SERVED_OPENS], __ATOMIC_RELAXED) ||
                           __atomic_load_n(&u->count[STAGED_SERVED_FOPENS], __ATOMIC_RELAXED));
        return served ? e->source : NULL;
    }
}

static void free_table(staged_table *t)
{
    if (!t)
        return;
    free(t->entries);
    free(t->by_source);
    free(t->by_copy);
    free(t->by_inode);
    free(t->arena);
    free(t);
}

static void insert(uint32_t *slots, uint64_t mask, uint64_t h, uint32_t k)
{
    uint64_t i = h & mask;
    while (slots[i])
        i = (i + 1) & mask;
    slots[i] = k;
}

/* how much of copy is a prefix before source (the whole copy when it does not end with it) */
static size_t prefix_of(const char *copy, size_t lc, const char *source, size_t ls)
{
    return lc > ls && memcmp(copy + lc - ls, source, ls) == 0 ? lc - ls : lc;
}

/* A new table from the spec (NULL with err filled when it cannot be made). */
static staged_table *build(const tfd_staged_spec *s, char *err, size_t err_len)
{
    if (s->n < 0 || s->n >= (int64_t)(UINT32_MAX / 4)) {
        snprintf(err, err_len, "%lld staged copies: too many", (long long)s->n);
        return NULL;
    }
    size_t bytes = 0;
    for (int64_t i = 0; i < s->n; i++) {
        const char *src = s->sources[i], *cp = s->copies[i];
        size_t ls = src ? strlen(src) : 0, lc = cp ? strlen(cp) : 0;
        if (!ls || !lc || src[0] != '/' || cp[0] != '/' || ls >= PATH_MAX || lc >= PATH_MAX) {
            snprintf(err, err_len, "staged copy %lld: source and copy must be absolute paths shorter than %d bytes",
                     (long long)i, PATH_MAX);
            return NULL;
        }
        bytes += ls + 1 + prefix_of(cp, lc, src, ls) + 1;
    }
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)s->n)
        cap *= 2;
    staged_table *t = calloc(1, sizeof(*t));
    if (t) {
        t->entries = calloc((size_t)s->n + 1, sizeof(tfd_staged));
        t->by_source = calloc(cap, sizeof(uint32_t));
        t->by_copy = calloc(cap, sizeof(uint32_t));
        t->by_inode = calloc(cap, sizeof(uint32_t));
        t->arena = malloc(bytes + 1);
    }
    if (!t || !t->entries || !t->by_source || !t->by_copy || !t->by_inode || !t->arena) {
        free_table(t);
        snprintf(err, err_len, "cannot allocate the table of %lld staged copies", (long long)s->n);
        return NULL;
    }
    t->n = s->n;
    t->mask = cap - 1;
    char *a = t->arena, buf[PATH_MAX];
    for (int64_t i = 0; i < s->n; i++) {
        tfd_staged *e = &t->entries[i];
        size_t ls = strlen(s->sources[i]), lc = strlen(s->copies[i]);
        size_t lp = prefix_of(s->copies[i], lc, s->sources[i], ls);
        e->source = memcpy(a, s->sources[i], ls + 1);
        a += ls + 1;
        e->prefix = memcpy(a, s->copies[i], lp);
        a[lp] = '\0';
        a += lp + 1;
        e->source_len = (uint32_t)ls;
        e->prefix_len = (uint32_t)lp;
        e->mirrored = lp < lc;
        e->size = s->sizes[i];
        e->source_mtime_ns = s->source_mtimes_ns[i];
        e->copy_mtime_ns = s->copy_mtimes_ns[i];
        e->index = i;
        e->hash = hash_of(e->source, ls);
        if (find_in(t, e->source, ls, e->hash)) {
            snprintf(err, err_len, "staged copy %lld: its source %s is listed twice", (long long)i, e->source);
            free_table(t);
            return NULL;
        }
        insert(t->by_source, t->mask, e->hash, (uint32_t)i + 1);
        size_t n = copy_path(e, buf, sizeof(buf));
        insert(t->by_copy, t->mask, hash_of(buf, n), (uint32_t)i + 1);
    }
    return t;
}

static void after_fork_child(void);

int tfd_staged_load(const tfd_staged_spec *spec, char *err, size_t err_len)
{
    static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
    static int registered;
    staged_table *t = NULL;
    if (spec && spec->n > 0 && !(t = build(spec, err, err_len)))
        return -1;
    pthread_mutex_lock(&load_lock);
    if (!registered)
        pthread_atfork(NULL, NULL, after_fork_child);
    registered = 1;
    /* the old table stays: a wrapper may be reading it */
    __atomic_store_n(&tfd_staged_table, t, __ATOMIC_RELEASE);
    paths_forget();             /* cached paths carry the old table's entries */
    pthread_mutex_unlock(&load_lock);
    return 0;
}

int64_t tfd_staged_loaded(void)
{
    staged_table *t = current();
    return t ? t->n : 0;
}

/* --------------------------------------------------------- checks, counts */

static staged_use *use_of(tfd_staged *e) TFD_COLD;
static staged_use *use_of(tfd_staged *e)
{
    staged_use *u = __atomic_load_n(&e->use, __ATOMIC_ACQUIRE);
    if (u)
        return u;
    int saved = errno;
    staged_use *mine = calloc(1, sizeof(*mine));
    errno = saved;
    if (!mine)
        return NULL;
    mine->entry = e;
    if (!__atomic_compare_exchange_n(&e->use, &u, mine, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        free(mine);
        return u;
    }
    /* the table the entry belongs to: entries are an array inside it */
    staged_table *t = current();
    if (t && e >= t->entries && e < t->entries + t->n) {
        staged_use *head = __atomic_load_n(&t->used, __ATOMIC_RELAXED);
        do
            mine->next = head;
        while (!__atomic_compare_exchange_n(&t->used, &head, mine, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED));
    }
    return mine;
}

void staged_count(tfd_staged *e, int what)
{
    staged_use *u = use_of(e);
    if (u)
        __atomic_add_fetch(&u->count[what], 1, __ATOMIC_RELAXED);
}

void staged_refuse(tfd_staged *e, int state)
{
    use_of(e);
    __atomic_store_n(&e->state, state, __ATOMIC_RELEASE);
}

/* The descriptors this process has open on e's copy, put back on its source
 * (the same number, offset, status flags and close-on-exec), so that they
 * see the change the program is making to it, as they would have without
 * us. Mappings of the copy stay on the copy. */
static void repoint(tfd_staged *e) TFD_COLD;
static void repoint(tfd_staged *e)
{
    char copy[PATH_MAX], link[64], target[PATH_MAX];
    size_t n = copy_path(e, copy, sizeof(copy));
    DIR *d = n ? opendir("/proc/self/fd") : NULL;
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        char *end;
        long fd = strtol(de->d_name, &end, 10);
        if (*end || fd < 0 || fd == dirfd(d))
            continue;
        snprintf(link, sizeof(link), "/proc/self/fd/%ld", fd);
        ssize_t got = readlink(link, target, sizeof(target));
        if (got != (ssize_t)n || memcmp(target, copy, n) != 0)
            continue;
        int fl = fcntl((int)fd, F_GETFL), fdfl = fcntl((int)fd, F_GETFD);
        off_t off = lseek((int)fd, 0, SEEK_CUR);
        int src = fl < 0 ? -1 : open(e->source, fl & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY));
        if (src < 0)
            continue;
        if (off > 0)
            lseek(src, off, SEEK_SET);
        dup3(src, (int)fd, fdfl >= 0 && (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0);
        close(src);
    }
    closedir(d);
}

void staged_written(tfd_staged *e)
{
    int was = __atomic_exchange_n(&e->state, TFD_STAGED_WRITTEN, __ATOMIC_ACQ_REL);
    use_of(e);
    staged_use *u = __atomic_load_n(&e->use, __ATOMIC_ACQUIRE);
    if (was == STAGED_SERVING && u && (__atomic_load_n(&u->count[STAGED_SERVED_OPENS], __ATOMIC_RELAXED) ||
                                       __atomic_load_n(&u->count[STAGED_SERVED_FOPENS], __ATOMIC_RELAXED))) {
        int saved = errno;
        repoint(e);
        errno = saved;
    }
}

void staged_copy_failed(tfd_staged *e, int what, int err)
{
    staged_count(e, what);
    /* these say nothing about the copy: the source's call would meet them too */
    if (err != EINTR && err != EMFILE && err != ENFILE && err != ENOMEM && err != EAGAIN)
        staged_refuse(e, TFD_STAGED_COPY_FAILED);
}

/* fstatat without going through any library's wrappers (a site Darshan's
 * among them): the check's own calls are not the program's */
static int raw_stat(const char *p, struct stat *st, int nofollow)
{
#ifdef SYS_newfstatat
    return (int)syscall(SYS_newfstatat, AT_FDCWD, p, st, nofollow ? AT_SYMLINK_NOFOLLOW : 0);
#else
    return fstatat(AT_FDCWD, p, st, nofollow ? AT_SYMLINK_NOFOLLOW : 0);
#endif
}

static int64_t mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

static uint64_t inode_hash(uint64_t dev, uint64_t ino)
{
    uint64_t h = (dev * 0x9e3779b97f4a7c15ull) ^ (ino * 0xbf58476d1ce4e5b9ull);
    return h ^ (h >> 31);
}

/* a source now served, findable by its inode: a write through another name
 * of it (a link, a /proc/self/fd path) must stop its serving too */
static void remember_inode(tfd_staged *e, uint64_t dev, uint64_t ino)
{
    staged_table *t = current();
    if (!t || e < t->entries || e >= t->entries + t->n)
        return;
    e->dev = dev;
    e->ino = ino;
    uint32_t mine = (uint32_t)(e - t->entries) + 1;
    for (uint64_t i = inode_hash(dev, ino) & t->mask;; i = (i + 1) & t->mask) {
        uint32_t k = 0;
        if (__atomic_compare_exchange_n(&t->by_inode[i], &k, mine, 0, __ATOMIC_RELEASE, __ATOMIC_ACQUIRE) ||
            k == mine)
            return;
    }
}

void staged_written_inode(uint64_t dev, uint64_t ino)
{
    staged_table *t = current();
    if (!t)
        return;
    for (uint64_t i = inode_hash(dev, ino) & t->mask;; i = (i + 1) & t->mask) {
        uint32_t k = __atomic_load_n(&t->by_inode[i], __ATOMIC_ACQUIRE);
        if (!k)
            return;
        tfd_staged *e = &t->entries[k - 1];
        if (e->dev == dev && e->ino == ino)
            staged_written(e);
    }
}

/* The first use of e: is its source still what was staged, and is the copy
 * on this node? Publishes and returns e's state (a racing thread may have
 * published first: its answer stands). */
static int check(tfd_staged *e) TFD_COLD;
static int check(tfd_staged *e)
{
    int saved = errno;
    struct stat s, c;
    char copy[PATH_MAX];
    int state = TFD_STAGED_SERVING, link = 0;
    if (raw_stat(e->source, &s, 1) != 0)
        state = TFD_STAGED_SOURCE_UNREADABLE;
    else if (S_ISLNK(s.st_mode) && (link = 1, raw_stat(e->source, &s, 0) != 0))
        state = TFD_STAGED_SOURCE_UNREADABLE;
    else if (!S_ISREG(s.st_mode))
        state = TFD_STAGED_NOT_A_FILE;
    else if (s.st_size != e->size || mtime_ns(&s) != e->source_mtime_ns)
        state = TFD_STAGED_SOURCE_CHANGED;
    else if (!copy_path(e, copy, sizeof(copy)) || raw_stat(copy, &c, 1) != 0)
        state = TFD_STAGED_COPY_MISSING;
    else if (!S_ISREG(c.st_mode) || c.st_size != e->size || mtime_ns(&c) != e->copy_mtime_ns)
        state = TFD_STAGED_COPY_DIFFERS;
    errno = saved;
    use_of(e);
    __atomic_store_n(&e->source_is_link, link, __ATOMIC_RELAXED);
    if (state == TFD_STAGED_SERVING)
        remember_inode(e, (uint64_t)s.st_dev, (uint64_t)s.st_ino);
    int expected = STAGED_UNCHECKED;
    if (!__atomic_compare_exchange_n(&e->state, &expected, state, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        return expected;
    return state;
}

const char *staged_copy_to_serve(tfd_staged *e, char *buf, size_t len, int nofollow)
{
    int state = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
    if (TFD_UNLIKELY(state == STAGED_UNCHECKED))
        state = check(e);
    if (state != STAGED_SERVING || (nofollow && __atomic_load_n(&e->source_is_link, __ATOMIC_RELAXED)))
        return NULL;
    return copy_path(e, buf, len) ? buf : NULL;
}

int tfd_staged_check(int64_t i)
{
    staged_table *t = current();
    if (!t || i < 0 || i >= t->n)
        return STAGED_UNCHECKED;
    tfd_staged *e = &t->entries[i];
    int state = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
    return state == STAGED_UNCHECKED ? check(e) : state;
}

/* ---------------------------------------------------------- Python, fork */

int tfd_staged_used(tfd_staged_rows *out)
{
    growbuf rows = {0};
    staged_table *t = current();
    for (staged_use *u = t ? __atomic_load_n(&t->used, __ATOMIC_ACQUIRE) : NULL; u; u = u->next) {
        int64_t row[TFD_STAGED_ROW] = {u->entry->index, __atomic_load_n(&u->entry->state, __ATOMIC_ACQUIRE)};
        for (int k = 0; k < STAGED_COUNTS; k++)
            row[2 + k] = __atomic_load_n(&u->count[k], __ATOMIC_RELAXED);
        if (grow_push(&rows, row, TFD_STAGED_ROW) != 0) {
            free(rows.p);
            out->n = 0;
            out->rows = NULL;
            return -1;
        }
    }
    out->rows = rows.p;
    out->n = rows.n / TFD_STAGED_ROW;
    return 0;
}

void tfd_staged_free(tfd_staged_rows *out)
{
    free(out->rows);
    out->rows = NULL;
    out->n = 0;
}

/* The child of fork counts afresh, as its records do; what the checks
 * found still holds. */
static void after_fork_child(void)
{
    staged_table *t = current();
    for (staged_use *u = t ? t->used : NULL; u; u = u->next)
        memset(u->count, 0, sizeof(u->count));
}
