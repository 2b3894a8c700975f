/* The record table keyed by (module, Darshan id), the index of records by
 * number, the record cap and its overflow records. Lookups take no lock;
 * creation takes create_lock. */
#include "table.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>

#include "public.h"
#include "darshan_hash.h"
#include "fsblock.h"

#define INDEX_CHUNK 1024

_Static_assert(offsetof(tfd_rec, module) + sizeof(int) <= 64 && offsetof(tfd_rec, last_meta_end) < 64,
               "a read's, an open's, a stat's and a close's fields of a record fill its first line");

static pthread_mutex_t create_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t record_cap;      /* per module */
static int64_t max_records;     /* all modules, index space */
static tfd_rec **rec_table;     /* open addressing on (module, id) */
static uint64_t rec_table_mask;
static tfd_rec ***rec_by_index; /* chunks of INDEX_CHUNK */
static int64_t n_records;
static int64_t n_module_records[16];
static tfd_rec *overflow_rec[16];
static uint64_t *folded_ids;    /* distinct paths folded into the overflow records */
static uint64_t folded_mask;
static int64_t folded_count;
/* inside record creation: a signal handler's I/O must not wait on the lock */
static __thread int creating;

static void *alloc_zeroed(size_t n)
{
    /* large tables come from mmap so untouched pages cost nothing */
    if (n >= (1u << 20)) {
        void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    return calloc(1, n);
}

static inline uint64_t table_hash(uint64_t id, int module)
{
    uint64_t h = id ^ ((uint64_t)module * 0x9e3779b97f4a7c15ull);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

int64_t table_capacity(void) { return max_records; }
int64_t table_count(void) { return __atomic_load_n(&n_records, __ATOMIC_ACQUIRE); }
int64_t table_folded_paths(void) { return folded_count; }
int table_is_overflow(const tfd_rec *r) { return r == overflow_rec[r->module & 15]; }

tfd_rec *table_record(int64_t index)
{
    if (index < 0 || index >= table_count())
        return NULL;
    return rec_by_index[index / INDEX_CHUNK][index % INDEX_CHUNK];
}

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

/* caller holds create_lock; block: the file's POSIX_FILE_ALIGNMENT */
static tfd_rec *new_record(uint64_t id, int module, const char *path, int64_t block)
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
    r->file_alignment = block;
    r->alignment_mask = (r->file_alignment > 0 && !(r->file_alignment & (r->file_alignment - 1)))
                            ? r->file_alignment - 1 : -1;
    r->std_stream = path[0] == '<';
    int64_t hi = r->index / INDEX_CHUNK;
    if (!rec_by_index[hi] && !(rec_by_index[hi] = calloc(INDEX_CHUNK, sizeof(tfd_rec *)))) {
        free(r->path);
        free(r);
        return NULL;
    }
    rec_by_index[hi][r->index % INDEX_CHUNK] = r;
    uint64_t i = table_hash(id, module) & rec_table_mask;
    while (rec_table[i])
        i = (i + 1) & rec_table_mask;
    __atomic_store_n(&rec_table[i], r, __ATOMIC_RELEASE);
    __atomic_store_n(&n_records, n_records + 1, __ATOMIC_RELEASE);
    n_module_records[module & 15]++;
    return r;
}

/* the overflow record does not count against the cap */
static tfd_rec *new_overflow_record(uint64_t id, int module, const char *path)
{
    tfd_rec *r = new_record(id, module, path, -1);
    if (r) {
        overflow_rec[module & 15] = r;
        n_module_records[module & 15]--;
    }
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

tfd_rec *table_record_for(const char *clean, int module)
{
    uint64_t id = tfd_hash64((const unsigned char *)clean, strlen(clean));
    tfd_rec *r = table_find(id, module);
    if (TFD_LIKELY(r != NULL))
        return r;
    if (creating)
        return NULL;
    creating = 1;
    int saved = errno;
    pthread_mutex_lock(&create_lock);
    r = table_find(id, module);
    if (!r) {
        if (n_module_records[module & 15] < record_cap) {
            r = new_record(id, module, clean, fsblock_of(clean));
        } else {
            note_folded(id);
            r = overflow_rec[module & 15];
        }
    }
    pthread_mutex_unlock(&create_lock);
    errno = saved;
    creating = 0;
    return r;
}

int table_init(int64_t cap)
{
    if (rec_table)
        return 0;
    record_cap = cap > 0 ? cap : 65536;
    max_records = 2 * record_cap + 8;  /* two modules, their overflow and std streams */
    uint64_t slots = 1;
    while (slots < (uint64_t)max_records * 2)
        slots <<= 1;
    rec_table = alloc_zeroed(slots * sizeof(tfd_rec *));
    rec_table_mask = slots - 1;
    folded_ids = alloc_zeroed(slots * sizeof(uint64_t));
    folded_mask = slots - 1;
    rec_by_index = calloc((size_t)(max_records / INDEX_CHUNK + 1), sizeof(tfd_rec **));
    if (!rec_table || !folded_ids || !rec_by_index) {
        rec_table = NULL;
        return -1;
    }
    pthread_mutex_lock(&create_lock);
    static const int mods[2] = {TFD_MODULE_POSIX, TFD_MODULE_STDIO};
    const char *name = "<tfdarshan:other-files>";
    for (int m = 0; m < 2; m++)
        new_overflow_record(tfd_hash64((const unsigned char *)name, strlen(name)), mods[m], name);
    pthread_mutex_unlock(&create_lock);
    return 0;
}

tfd_rec **table_after_fork(void)
{
    pthread_mutex_init(&create_lock, NULL);
    creating = 0;
    if (!rec_table)
        return NULL;
    tfd_rec ***old_by_index = rec_by_index;
    int64_t old_n = n_records;
    tfd_rec *old_overflow[16];
    memcpy(old_overflow, overflow_rec, sizeof(old_overflow));

    rec_table = alloc_zeroed((rec_table_mask + 1) * sizeof(tfd_rec *));
    rec_by_index = calloc((size_t)(max_records / INDEX_CHUNK + 1), sizeof(tfd_rec **));
    memset(folded_ids, 0, (folded_mask + 1) * sizeof(uint64_t));
    folded_count = 0;
    n_records = 0;
    memset(n_module_records, 0, sizeof(n_module_records));
    tfd_rec **map = rec_table && rec_by_index ? calloc((size_t)old_n + 1, sizeof(tfd_rec *)) : NULL;
    if (!map) {
        rec_table = NULL;
        return NULL;
    }
    /* remap every old record to a fresh one with the same identity */
    for (int64_t i = 0; i < old_n; i++) {
        tfd_rec *o = old_by_index[i / INDEX_CHUNK][i % INDEX_CHUNK];
        tfd_rec *n = o == old_overflow[o->module & 15] ? new_overflow_record(o->id, o->module, o->path)
                                                        : new_record(o->id, o->module, o->path, o->file_alignment);
        if (n)
            n->offset = o->offset;
        map[i] = n;
    }
    return map;
}

int tfd_record_info(int64_t index, uint64_t *id, int *module, const char **path)
{
    tfd_rec *r = rec_table ? table_record(index) : NULL;
    if (!r)
        return -1;
    *id = r->id;
    *module = r->module;
    *path = r->path;
    return 0;
}
