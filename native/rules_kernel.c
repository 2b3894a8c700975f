/* I/O that Darshan's wrappers never see, counted in our own fields
 * (KERNEL_IO_FIELDS in fields.h), never in Darshan's counters or in the
 * per-file state Darshan's rules read (offsets, last byte, last I/O type):
 *
 *  - kernel-side copies (copy_file_range, sendfile, splice): the bytes each
 *    call read from a recorded source and wrote to a recorded destination;
 *  - memory-mapped files: for each mapping of a recorded file (created
 *    through our mmap wrapper, or found in /proc/self/maps at attach), the
 *    pages the process has had in its page tables, read from the "present"
 *    bit of /proc/self/pagemap (readable without privileges; only the frame
 *    numbers are hidden). A page counts once per mapping, the first time a
 *    sample sees it. Sampling happens at every collect and before a mapping
 *    goes (munmap, mmap over it, detach), never on a read's path.
 *
 * The mapped figure is an estimate: at a fault the kernel also maps cached
 * neighbours (fault-around, 64 KiB; a whole large folio on file systems
 * that use them), so sparse access is overcounted, and a page reclaimed and
 * dropped from the page tables between two samples is missed. */
#include "rules_kernel.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdmap.h"
#include "names.h"
#include "paths.h"
#include "threads.h"

int tfd_kernel_io = 1;
int tfd_mapped_count;           /* mappings followed: munmap's fast path reads it */

/* -------------------------------------------------------------- copies */

void tfd_kernel_copy(int fd_in, int fd_out, int64_t bytes, int mechanism, uint64_t t1, uint64_t t2)
{
    static const int field[3] = {S_KC_CFR_BYTES, S_KC_SENDFILE_BYTES, S_KC_SPLICE_BYTES};
    static const int once[3] = {S_KC_CFR_ONCE, S_KC_SENDFILE_ONCE, S_KC_SPLICE_ONCE};
    tfd_rec *src = posix_rec_any(fd_in), *dst = posix_rec_any(fd_out);
    int64_t d = (int64_t)(t2 - t1);
    update u;
    /* an excluded end is counted in the excluded bucket, as the kernel counts
     * copy_file_range and sendfile in rchar/wchar (splice in neither) */
    if (src == EXCLUDED) {
        if (mechanism != TFD_KC_SPLICE)
            count_excluded(0, bytes);
        src = NULL;
    }
    if (dst == EXCLUDED) {
        if (mechanism != TFD_KC_SPLICE)
            count_excluded(1, bytes);
        dst = NULL;
    }
    if (src && begin(&u, src)) {
        u.s->sum[S_KC_BYTES_READ] += bytes;
        u.s->sum[S_T_KC_READ] += d;
        u.s->sum[S_T_KC] += d;
        u.s->sum[field[mechanism]] += bytes;
        u.s->sum[once[mechanism]] += bytes;
        end(&u);
    }
    if (dst && begin(&u, dst)) {
        u.s->sum[S_KC_BYTES_WRITTEN] += bytes;
        u.s->sum[S_T_KC_WRITE] += d;
        if (!src) {
            u.s->sum[S_T_KC] += d;
            u.s->sum[once[mechanism]] += bytes;
        }
        u.s->sum[field[mechanism]] += bytes;
        end(&u);
    }
}

/* ------------------------------------------------------------- mappings */

typedef struct mapping {
    uintptr_t start, end;       /* the part still mapped, page aligned */
    uintptr_t base;             /* address of the bitmap's page 0 */
    uintptr_t data_end;         /* the file's data ends here (pages past it cannot be touched) */
    tfd_rec *rec;
    uint64_t *seen;             /* a bit per page from base: counted already */
} mapping;

static pthread_mutex_t mapped_lock = PTHREAD_MUTEX_INITIALIZER;
static mapping *mapped;
static int cap_mapped;
static __thread int in_mapped;  /* a signal handler's munmap must not wait on our own lock */
static int64_t own_read_bytes;  /* what the shim read from /proc/self/pagemap (/proc/self/io counts it) */
static long page_size;

#define PRESENT(e) (((e) >> 63) & 1)
#define FILE_PAGE(e) (((e) >> 61) & 1)      /* file page or shared anonymous: not a private copy */
#define BATCH 256           /* entries per read (2 KiB of stack) */

static int seen_bit(const mapping *m, uintptr_t p) { return (int)((m->seen[p / 64] >> (p % 64)) & 1); }

/* Read the pagemap entries of the mapping's pages not yet seen and count
 * the present ones, a batch at a time, each batch recorded before its bits
 * are set (a batch that cannot be recorded is read again next time). */
static void sample(mapping *m, int pm)
{
    uint64_t e[BATCH];
    uintptr_t last = (m->end - m->base) / (uintptr_t)page_size;
    for (uintptr_t p = (m->start - m->base) / (uintptr_t)page_size; p < last;) {
        if (p % 64 == 0 && p + 64 <= last && m->seen[p / 64] == ~0ull) {
            p += 64;
            continue;
        }
        if (seen_bit(m, p)) {
            p++;
            continue;
        }
        uintptr_t n = last - p < BATCH ? last - p : BATCH;
        off_t at = (off_t)((m->base / (uintptr_t)page_size + p) * sizeof(uint64_t));
        ssize_t got = pread(pm, e, n * sizeof(uint64_t), at);
        if (got <= 0)
            return;
        own_read_bytes += got;
        n = (uintptr_t)got / sizeof(uint64_t);
        int64_t bytes = 0;
        for (uintptr_t i = 0; i < n; i++) {
            uintptr_t a = m->base + (p + i) * (uintptr_t)page_size;
            if (!seen_bit(m, p + i) && PRESENT(e[i]) && FILE_PAGE(e[i]) && a < m->data_end)
                bytes += (int64_t)(m->data_end - a < (uintptr_t)page_size ? m->data_end - a : (uintptr_t)page_size);
        }
        update u;
        if (bytes && !begin_sampled(&u, m->rec))
            return;
        if (bytes) {
            u.s->sum[S_MMAP_BYTES] += bytes;
            end(&u);
        }
        for (uintptr_t i = 0; i < n; i++)
            if (PRESENT(e[i]) && FILE_PAGE(e[i]))
                m->seen[(p + i) / 64] |= 1ull << ((p + i) % 64);
        p += n;
    }
}

static int open_pagemap(void)
{
    return open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
}

/* changed under mapped_lock only; read without it by munmap's fast path */
static void set_count(int n)
{
    __atomic_store_n(&tfd_mapped_count, n, __ATOMIC_RELAXED);
}

static void forget(int i)
{
    free(mapped[i].seen);
    mapped[i] = mapped[tfd_mapped_count - 1];
    set_count(tfd_mapped_count - 1);
}

static int reserve(void);

/* Take [a, b) out of the followed mappings; a hole in the middle of one
 * leaves two (or, without memory for the second, only the head). */
static void cut(uintptr_t a, uintptr_t b)
{
    for (int i = 0; i < tfd_mapped_count;) {
        mapping *m = &mapped[i];
        if (b <= m->start || a >= m->end) {
            i++;
            continue;
        }
        if (a <= m->start && b >= m->end) {
            forget(i);
            continue;
        }
        if (a > m->start && b < m->end && reserve() == 0) {
            m = &mapped[i];
            /* the tail keeps its own copy of the bitmap, from base */
            size_t words = (m->end - m->base) / (size_t)page_size / 64 + 1;
            uint64_t *copy = malloc(words * sizeof(uint64_t));
            if (copy) {
                memcpy(copy, m->seen, words * sizeof(uint64_t));
                mapped[tfd_mapped_count] = (mapping){b, m->end, m->base, m->data_end, m->rec, copy};
                set_count(tfd_mapped_count + 1);
            }
        }
        if (a <= m->start)
            m->start = b;
        else
            m->end = a;
        i++;
    }
}

static int reserve(void)
{
    if (tfd_mapped_count < cap_mapped)
        return 0;
    int cap = cap_mapped ? 2 * cap_mapped : 16;
    mapping *p = realloc(mapped, (size_t)cap * sizeof(mapping));
    if (!p)
        return -1;
    mapped = p;
    cap_mapped = cap;
    return 0;
}

static void follow(tfd_rec *r, uintptr_t start, size_t len, int64_t file_offset, int64_t file_size, int baseline)
{
    if (!page_size)
        page_size = sysconf(_SC_PAGESIZE);
    uintptr_t end = start + ((len + (size_t)page_size - 1) & ~((size_t)page_size - 1));
    cut(start, end);                /* stale: unmapped where we could not see it */
    if (reserve() != 0)
        return;
    uint64_t *seen = calloc((end - start) / (size_t)page_size / 64 + 1, sizeof(uint64_t));
    if (!seen)
        return;
    int64_t data = file_size - file_offset;
    uintptr_t data_end = file_size < 0 ? end : data <= 0 ? start : start + (uintptr_t)data < end ? start + (uintptr_t)data : end;
    mapped[tfd_mapped_count] = (mapping){start, end, start, data_end, r, seen};
    set_count(tfd_mapped_count + 1);
    if (!baseline)
        return;
    /* pages already present were touched before we looked: not ours to count */
    int pm = open_pagemap();
    uint64_t e[BATCH];
    uintptr_t n_pages = (end - start) / (uintptr_t)page_size;
    for (uintptr_t p = 0; pm >= 0 && p < n_pages; p += BATCH) {
        size_t n = n_pages - p < BATCH ? n_pages - p : BATCH;
        ssize_t got = pread(pm, e, n * sizeof(uint64_t), (off_t)((start / (uintptr_t)page_size + p) * sizeof(uint64_t)));
        if (got <= 0)
            break;
        own_read_bytes += got;
        for (size_t i = 0; i < (size_t)got / sizeof(uint64_t); i++)
            if (PRESENT(e[i]))
                seen[(p + i) / 64] |= 1ull << ((p + i) % 64);
    }
    if (pm >= 0)
        close(pm);
}

void tfd_mapped_created(void *addr, size_t len, int prot, int fd, int64_t offset)
{
    tfd_rec *r = posix_rec(fd);
    struct stat st;
    if (!r || prot == PROT_NONE || len == 0 || in_mapped)
        return;
    int64_t size = fstat(fd, &st) == 0 ? (int64_t)st.st_size : -1;
    in_mapped = 1;
    pthread_mutex_lock(&mapped_lock);
    follow(r, (uintptr_t)addr, len, offset, size, 0);
    pthread_mutex_unlock(&mapped_lock);
    in_mapped = 0;
}

/* Before [addr, addr + len) is unmapped or mapped over: sample the
 * mappings it touches, and hold the table until tfd_mapped_release, so a
 * mapping another thread creates at these addresses right after the real
 * call is not forgotten with the old one. NULL: nothing held. */
void *tfd_mapped_hold(void *addr, size_t len)
{
    if (in_mapped || !__atomic_load_n(&tfd_mapped_count, __ATOMIC_RELAXED))
        return NULL;
    in_mapped = 1;
    pthread_mutex_lock(&mapped_lock);
    uintptr_t a = (uintptr_t)addr, b = a + len;
    int pm = -1;
    for (int i = 0; i < tfd_mapped_count; i++) {
        if (b <= mapped[i].start || a >= mapped[i].end)
            continue;
        if (pm < 0 && (pm = open_pagemap()) < 0)
            break;
        sample(&mapped[i], pm);
    }
    if (pm >= 0)
        close(pm);
    return &mapped_lock;
}

/* done: the real call succeeded, so the range is gone */
void tfd_mapped_release(void *held, void *addr, size_t len, int done)
{
    if (!held)
        return;
    if (done && page_size) {
        uintptr_t a = (uintptr_t)addr & ~((uintptr_t)page_size - 1);
        uintptr_t b = ((uintptr_t)addr + len + (uintptr_t)page_size - 1) & ~((uintptr_t)page_size - 1);
        cut(a, b);
    }
    pthread_mutex_unlock(&mapped_lock);
    in_mapped = 0;
}

/* At every collect, before the interval closes: what each followed
 * mapping brought in since the last sample belongs to that interval. */
void tfd_mapped_sample_all(void)
{
    if (!__atomic_load_n(&tfd_mapped_count, __ATOMIC_RELAXED) || in_mapped)
        return;
    in_mapped = 1;
    pthread_mutex_lock(&mapped_lock);
    int pm = tfd_mapped_count ? open_pagemap() : -1;
    for (int i = 0; pm >= 0 && i < tfd_mapped_count; i++)
        sample(&mapped[i], pm);
    if (pm >= 0)
        close(pm);
    pthread_mutex_unlock(&mapped_lock);
    in_mapped = 0;
}

/* At attach: mappings of recorded files made while we were not looking
 * (np.memmap before a profiling window opened) are followed from now on. */
void tfd_mapped_start(int kernel_io)
{
    RELAXED_STORE(tfd_kernel_io, kernel_io != 0);
    if (!kernel_io)
        return;
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    char line[PATH_MAX + 128], path[PATH_MAX], clean[2 * PATH_MAX];
    in_mapped = 1;
    pthread_mutex_lock(&mapped_lock);
    while (fgets(line, sizeof(line), f)) {
        unsigned long s, e, off, inode;
        char perms[8];
        int at = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %*s %lu %n", &s, &e, perms, &off, &inode, &at) < 5 || !at || !inode)
            continue;
        size_t n = strcspn(line + at, "\n");
        if (line[at] != '/' || n >= sizeof(path) || !strcmp(perms, "---p"))
            continue;
        memcpy(path, line + at, n);
        path[n] = 0;
        /* most mappings are libraries, excluded by name: decide before any system call */
        struct stat st;
        if (tfd_clean_path(path, clean, sizeof(clean)) != 0 || tfd_path_excluded(clean) ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;               /* (deleted) files and the like */
        tfd_rec *r = record_for_clean(clean, TFD_MODULE_POSIX);
        if (r)
            follow(r, s, e - s, (int64_t)off, (int64_t)st.st_size, 1);
    }
    pthread_mutex_unlock(&mapped_lock);
    in_mapped = 0;
    fclose(f);
}

/* At detach: a last sample, then nothing is followed (unmaps would go unseen). */
void tfd_mapped_stop(void)
{
    tfd_mapped_sample_all();
    in_mapped = 1;
    pthread_mutex_lock(&mapped_lock);
    while (tfd_mapped_count)
        forget(0);
    pthread_mutex_unlock(&mapped_lock);
    in_mapped = 0;
}

int64_t tfd_followed_mappings(void)
{
    return __atomic_load_n(&tfd_mapped_count, __ATOMIC_RELAXED);
}

int64_t tfd_own_read_bytes(void)
{
    return __atomic_load_n(&own_read_bytes, __ATOMIC_RELAXED);
}

/* fork: the parent holds the table still while the child is made */
void tfd_mapped_prepare_fork(void) { pthread_mutex_lock(&mapped_lock); }
void tfd_mapped_parent_fork(void) { pthread_mutex_unlock(&mapped_lock); }

/* The child follows the same mappings for its fresh records (remap: old
 * record index -> new record, NULL when none). Its page tables hold none
 * of a shared file mapping's pages (fork does not copy them), so it
 * counts from nothing, as its records do. */
void tfd_mapped_after_fork(tfd_rec **remap)
{
    pthread_mutex_init(&mapped_lock, NULL);
    in_mapped = 0;
    for (int i = 0; i < tfd_mapped_count;) {
        mapping *m = &mapped[i];
        m->rec = remap ? remap[m->rec->index] : NULL;
        if (!m->rec) {
            forget(i);
            continue;
        }
        memset(m->seen, 0, ((m->end - m->base) / (size_t)page_size / 64 + 1) * sizeof(uint64_t));
        i++;
    }
}
