/* Native I/O for the shim's tests: real libc calls from a library of its
 * own (so they go through its own GOT), from real pthreads. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int64_t (*generation_fn)(void);

struct job {
    int fd;
    long n;
    generation_fn gen;
    long done;
    long surely_attached;   /* calls made entirely while attached */
};

static void *worker(void *p)
{
    struct job *j = p;
    char buf[4096];
    for (long i = 0; i < j->n; i++) {
        int64_t g1 = j->gen ? j->gen() : 0;
        if (pread(j->fd, buf, sizeof buf, 0) == (ssize_t)sizeof buf)
            j->done++;
        int64_t g2 = j->gen ? j->gen() : 0;
        if (g1 == g2 && (g1 & 1))
            j->surely_attached++;
    }
    return NULL;
}

/* threads x n preads of 4 KiB at offset 0; fds[i] for thread i.
 * out[0] = successful calls, out[1] = calls made surely while attached */
int run_preads(const int *fds, int threads, long n, generation_fn gen, long *out)
{
    pthread_t tid[128];
    struct job jobs[128];
    if (threads > 128)
        return -1;
    for (int i = 0; i < threads; i++) {
        jobs[i] = (struct job){fds[i], n, gen, 0, 0};
        if (pthread_create(&tid[i], NULL, worker, &jobs[i]))
            return -1;
    }
    out[0] = out[1] = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        out[0] += jobs[i].done;
        out[1] += jobs[i].surely_attached;
    }
    return 0;
}

/* open + read everything + close, from this library */
long read_whole(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    char buf[65536];
    long total = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        total += n;
    close(fd);
    return total;
}

/* ---- scale: many distinct files ---------------------------------------
 * root/dDDD/fNNNNNN for i in [0, n), 1000 files per directory, every one a
 * hard link to `source`: distinct names and directory entries at the cost
 * of a dentry each, so a million fit in /dev/shm. */

static void tree_name(char *out, size_t len, const char *root, long i)
{
    snprintf(out, len, "%s/d%04ld/f%07ld", root, i / 1000, i);
}

long link_tree(const char *source, const char *root, long n)
{
    char path[4096];
    for (long i = 0; i < n; i++) {
        if (i % 1000 == 0) {
            snprintf(path, sizeof path, "%s/d%04ld", root, i / 1000);
            if (mkdir(path, 0755) && errno != EEXIST)
                return -1;
        }
        tree_name(path, sizeof path, root, i);
        if (link(source, path) && errno != EEXIST)
            return -1;
    }
    return n;
}

/* open, read `chunk` bytes twice (the second read may be short or at EOF),
 * close, for files first .. first + n - 1; returns the bytes read */
long read_tree(const char *root, long first, long n, long chunk)
{
    char path[4096], buf[65536];
    long total = 0;
    if (chunk > (long)sizeof buf)
        return -1;
    for (long i = first; i < first + n; i++) {
        tree_name(path, sizeof path, root, i);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            return -1;
        for (int k = 0; k < 2; k++) {
            ssize_t got = read(fd, buf, (size_t)chunk);
            if (got < 0) {
                close(fd);
                return -1;
            }
            total += got;
        }
        close(fd);
    }
    return total;
}

/* ---- concurrency: mixed operations that pause at a barrier -------------
 * Each thread opens, reads, preads, writes, fstats, dups and closes its own
 * file and a shared one, counting what it did; stress_pause() returns when
 * every thread is parked between operations, so a snapshot taken then must
 * hold exactly the counted operations. */
enum { C_OPENS, C_READS, C_WRITES, C_BYTES_READ, C_BYTES_WRITTEN, C_STATS, C_DUPS, C_N };
#define MAX_MIXERS 128

struct mixer {
    char own[4096];
    long counts[2][C_N];        /* [0] own file, [1] shared file */
    unsigned long rng;
    pthread_t tid;
};

static struct mixer mixers[MAX_MIXERS];
static int n_mixers;
static char shared_path[4096];
static int running, stopping, parked;

static unsigned long next_random(unsigned long *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *mix(void *p)
{
    struct mixer *m = p;
    int fd[2] = {-1, -1};
    char buf[4096];
    memset(buf, 'w', sizeof buf);
    while (!__atomic_load_n(&stopping, __ATOMIC_SEQ_CST)) {
        if (!__atomic_load_n(&running, __ATOMIC_SEQ_CST)) {
            __atomic_add_fetch(&parked, 1, __ATOMIC_SEQ_CST);
            while (!__atomic_load_n(&running, __ATOMIC_SEQ_CST) && !__atomic_load_n(&stopping, __ATOMIC_SEQ_CST))
                usleep(200);
            __atomic_sub_fetch(&parked, 1, __ATOMIC_SEQ_CST);
            continue;
        }
        unsigned long r = next_random(&m->rng);
        int f = (int)(r & 1);
        long *c = m->counts[f];
        if (fd[f] < 0) {
            fd[f] = open(f ? shared_path : m->own, f ? O_RDONLY : O_RDWR);
            if (fd[f] >= 0)
                c[C_OPENS]++;
            continue;
        }
        ssize_t got;
        switch ((r >> 1) % 7) {
        case 0:
            got = read(fd[f], buf, 512);
            if (got > 0) {
                c[C_READS]++;
                c[C_BYTES_READ] += got;
            } else if (got == 0) {
                c[C_READS]++;
                close(fd[f]);                   /* at the end: start over */
                fd[f] = -1;
            }
            break;
        case 1:
            got = pread(fd[f], buf, 1024, (off_t)((r >> 8) % 65536));
            if (got >= 0) {
                c[C_READS]++;
                c[C_BYTES_READ] += got;
            }
            break;
        case 2:
            if (f == 0 && (got = write(fd[f], buf, 256)) >= 0) {
                c[C_WRITES]++;
                c[C_BYTES_WRITTEN] += got;
            }
            break;
        case 3: {
            struct stat st;
            if (fstat(fd[f], &st) == 0)
                c[C_STATS]++;
            break;
        }
        case 4: {
            int d = dup(fd[f]);
            if (d >= 0) {
                c[C_DUPS]++;
                c[C_OPENS]++;                   /* Darshan: opens include dups */
                if ((got = pread(d, buf, 100, 0)) >= 0) {
                    c[C_READS]++;
                    c[C_BYTES_READ] += got;
                }
                close(d);
            }
            break;
        }
        case 5:
            close(fd[f]);
            fd[f] = -1;
            break;
        default:
            if ((got = pread(fd[f], buf, 4096, 0)) >= 0) {
                c[C_READS]++;
                c[C_BYTES_READ] += got;
            }
        }
    }
    for (int f = 0; f < 2; f++)
        if (fd[f] >= 0)
            close(fd[f]);
    return NULL;
}

/* threads start parked; own files are dir/own-NNN, the shared one dir/shared */
int stress_start(int threads, const char *dir)
{
    if (threads > MAX_MIXERS)
        return -1;
    snprintf(shared_path, sizeof shared_path, "%s/shared", dir);
    running = stopping = parked = 0;
    n_mixers = threads;
    for (int i = 0; i < threads; i++) {
        memset(&mixers[i], 0, sizeof mixers[i]);
        snprintf(mixers[i].own, sizeof mixers[i].own, "%s/own-%03d", dir, i);
        mixers[i].rng = 0x9e3779b97f4a7c15UL * (unsigned long)(i + 1);
        if (pthread_create(&mixers[i].tid, NULL, mix, &mixers[i]))
            return -1;
    }
    while (__atomic_load_n(&parked, __ATOMIC_SEQ_CST) < threads)
        usleep(1000);
    return 0;
}

void stress_resume(void)
{
    __atomic_store_n(&running, 1, __ATOMIC_SEQ_CST);
}

void stress_pause(void)
{
    __atomic_store_n(&running, 0, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&parked, __ATOMIC_SEQ_CST) < n_mixers)
        usleep(500);
}

/* out[thread][file][counter], then zero them; only while paused */
void stress_take_counts(long *out)
{
    for (int i = 0; i < n_mixers; i++) {
        memcpy(out + (long)i * 2 * C_N, mixers[i].counts, sizeof mixers[i].counts);
        memset(mixers[i].counts, 0, sizeof mixers[i].counts);
    }
}

void stress_stop(void)
{
    __atomic_store_n(&stopping, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < n_mixers; i++)
        pthread_join(mixers[i].tid, NULL);
}
