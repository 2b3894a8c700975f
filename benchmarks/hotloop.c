/* The hot-path benchmarks' native loops (bench_hotpath.py, bench_peers.py,
 * bench_instructions.py). Every loop calls libc through this library's own
 * GOT, as a data loader's C++ code would, so the shim's patch, a library
 * under LD_PRELOAD and GOTCHA all reach it; the *_via loops call a given
 * function pointer instead (a stub, or a wrapper whose original is that
 * stub), so no GOT is involved.
 *
 * Built with -DTFD_INSTRUCTIONS, each loop is bracketed by callgrind client
 * requests: statistics are zeroed as it starts and dumped, labelled with the
 * string given to ir_label(), as it ends, so a dump holds exactly one loop's
 * instructions. Without it the brackets are empty. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#ifdef TFD_INSTRUCTIONS
#include <valgrind/callgrind.h>
static char label[256];
void ir_label(const char *s)
{
    strncpy(label, s, sizeof(label) - 1);
}
#define LOOP_BEGIN() CALLGRIND_ZERO_STATS
#define LOOP_END() CALLGRIND_DUMP_STATS_AT(label)
#else
void ir_label(const char *s)
{
    (void)s;
}
#define LOOP_BEGIN() ((void)0)
#define LOOP_END() ((void)0)
#endif

/* n freads of size bytes; at the end of the file it rewinds (not counted) */
long fread_loop(FILE *f, long n, long size)
{
    char buf[65536];
    long total = 0;
    if (size > (long)sizeof(buf))
        return -1;
    LOOP_BEGIN();
    for (long i = 0; i < n; i++) {
        size_t got = fread(buf, (size_t)size, 1, f);
        if (got == 0) {
            rewind(f);
            continue;
        }
        total += (long)got;
    }
    LOOP_END();
    return total;
}

/* n preads of size bytes at offset 0: served from the page cache */
long pread_loop(int fd, long n, long size)
{
    char *buf = aligned_alloc(4096, (size_t)(size + 4095) & ~(size_t)4095);
    long total = 0;
    if (!buf)
        return -1;
    LOOP_BEGIN();
    for (long i = 0; i < n; i++)
        total += pread(fd, buf, (size_t)size, 0);
    LOOP_END();
    free(buf);
    return total;
}

/* n preads of size bytes at offset 0 into the caller's buffer: through this
 * library's GOT (raw = 0), where a profiler sees them, or as syscall(2)
 * (raw = 1), which no profiler wraps. In one process the two differ by
 * libc's thin wrapper and the profiler's cost, whatever the page placement
 * that moves a pread's own cost between processes (bench_peers.py). */
long pread_into_loop(int fd, char *buf, long n, long size, int raw)
{
    long total = 0;
    LOOP_BEGIN();
    if (raw)
        for (long i = 0; i < n; i++)
            total += syscall(SYS_pread64, fd, buf, (size_t)size, (off_t)0);
    else
        for (long i = 0; i < n; i++)
            total += pread(fd, buf, (size_t)size, 0);
    LOOP_END();
    return total;
}

/* n open/close pairs of one file */
long open_close_loop(const char *path, long n)
{
    long total = 0;
    LOOP_BEGIN();
    for (long i = 0; i < n; i++) {
        int fd = open(path, O_RDONLY);
        total += fd >= 0;
        if (fd >= 0)
            close(fd);
    }
    LOOP_END();
    return total;
}

/* n fopen/fclose pairs of one file */
long fopen_fclose_loop(const char *path, long n)
{
    long total = 0;
    LOOP_BEGIN();
    for (long i = 0; i < n; i++) {
        FILE *f = fopen(path, "rb");
        total += f != NULL;
        if (f)
            fclose(f);
    }
    LOOP_END();
    return total;
}

/* what tf.io.read_file does per file: stat, open, one pread of the whole
 * file, a zero-length pread at the end, close */
static long read_file_once(const char *path, char *buf, long size)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    long total = 0;
    ssize_t got = pread(fd, buf, (size_t)size, 0);
    if (got > 0)
        total += got + pread(fd, buf + got, 4096, got);
    close(fd);
    return total;
}

static char *file_buffer(long size)
{
    return aligned_alloc(4096, (size_t)(size + 4096 + 4095) & ~(size_t)4095);
}

long read_file_loop(const char *path, long n, long size)
{
    char *buf = file_buffer(size);
    long total = 0;
    if (!buf)
        return -1;
    LOOP_BEGIN();
    for (long i = 0; i < n; i++)
        total += read_file_once(path, buf, size);
    LOOP_END();
    free(buf);
    return total;
}

struct files_job { const char *const *paths; long k; long size; long total; };

static void *read_files(void *p)
{
    struct files_job *j = p;
    char *buf = file_buffer(j->size);
    for (long i = 0; buf && i < j->k; i++)
        j->total += read_file_once(j->paths[i], buf, j->size);
    free(buf);
    return NULL;
}

/* threads new threads one after another, each doing what read_file does to
 * k files, as tf.data's short-lived threads do: the first write of each
 * (thread, file) pair */
long threads_files_loop(const char *const *paths, long k, long threads, long size)
{
    long total = 0;
    LOOP_BEGIN();
    for (long t = 0; t < threads; t++) {
        struct files_job j = {paths, k, size, 0};
        pthread_t tid;
        if (pthread_create(&tid, NULL, read_files, &j) != 0)
            return -1;
        pthread_join(tid, NULL);
        total += j.total;
    }
    LOOP_END();
    return total;
}

/* threads new threads one after another, each doing what read_file does to
 * its own k of the paths (paths holds threads * k of them): every file read
 * for the first time */
long threads_distinct_files_loop(const char *const *paths, long k, long threads, long size)
{
    long total = 0;
    LOOP_BEGIN();
    for (long t = 0; t < threads; t++) {
        struct files_job j = {paths + t * k, k, size, 0};
        pthread_t tid;
        if (pthread_create(&tid, NULL, read_files, &j) != 0)
            return -1;
        pthread_join(tid, NULL);
        total += j.total;
    }
    LOOP_END();
    return total;
}

/* one call of fn(arg), bracketed: the shim's collect */
int bracketed_call(int (*fn)(void *), void *arg)
{
    LOOP_BEGIN();
    int r = fn(arg);
    LOOP_END();
    return r;
}

long pread_via(ssize_t (*fn)(int, void *, size_t, off_t), int fd, long n, long size)
{
    char buf[4096];
    long total = 0;
    LOOP_BEGIN();
    for (long i = 0; i < n; i++)
        total += fn(fd, buf, (size_t)size, 0);
    LOOP_END();
    return total;
}

long fread_via(size_t (*fn)(void *, size_t, size_t, FILE *), FILE *f, long n, long size)
{
    char buf[256];
    long total = 0;
    LOOP_BEGIN();
    for (long i = 0; i < n; i++)
        total += (long)fn(buf, (size_t)size, 1, f);
    LOOP_END();
    return total;
}

/* fopen/fclose through this library's GOT: a stream opened while attached
 * is one the shim records (as a data loader's would be). buffer: the
 * stream's buffer in bytes (0: unbuffered, -1: libc's default). */
FILE *open_stream_buffered(const char *path, long buffer)
{
    FILE *f = fopen(path, "rb");
    if (f && buffer >= 0 && setvbuf(f, NULL, buffer ? _IOFBF : _IONBF, (size_t)buffer) != 0) {
        fclose(f);
        return NULL;
    }
    return f;
}

FILE *open_stream(const char *path)
{
    return open_stream_buffered(path, -1);
}

int close_stream(FILE *f)
{
    return fclose(f);
}

int open_fd(const char *path)
{
    return open(path, O_RDONLY);
}

int close_fd(int fd)
{
    return close(fd);
}

/* Timed freads of size bytes to the end of the stream, as Darshan times
 * them (a clock read before and after), split by whether libc served the
 * call from the FILE buffer (glibc's public read pointers say so before
 * the call): out[0..3] = buffered calls, their ticks, calls that reached
 * read(), their ticks. The share of the time a Darshan-exact profiler would
 * lose by not timing buffered calls. */
#if defined(__x86_64__) && defined(__GLIBC__)
static inline unsigned long long ticks(void)
{
    unsigned lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return ((unsigned long long)hi << 32) | lo;
}

void fread_split(FILE *f, long size, long long *out)
{
    char buf[65536];
    out[0] = out[1] = out[2] = out[3] = 0;
    if (size > (long)sizeof(buf))
        return;
    for (;;) {
        int buffered = f->_IO_read_end - f->_IO_read_ptr >= size;
        unsigned long long a = ticks();
        size_t got = fread(buf, (size_t)size, 1, f);
        unsigned long long b = ticks();
        if (!got)
            break;
        out[buffered ? 0 : 2]++;
        out[buffered ? 1 : 3] += (long long)(b - a);
    }
}
#endif

/* n pairs of clock reads, as a timed call makes them (the shim's clock on
 * x86-64 where the kernel trusts the TSC): the floor of a timed call */
long clock_pair_loop(long n)
{
    unsigned long long total = 0;
    for (long i = 0; i < n; i++) {
#if defined(__x86_64__)
        unsigned lo, hi, lo2, hi2;
        __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
        __asm__ volatile("rdtsc" : "=a"(lo2), "=d"(hi2));
        total += (((unsigned long long)hi2 << 32) | lo2) - (((unsigned long long)hi << 32) | lo);
#else
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        clock_gettime(CLOCK_MONOTONIC, &b);
        total += (unsigned long long)(b.tv_nsec - a.tv_nsec);
#endif
    }
    return (long)total;
}
