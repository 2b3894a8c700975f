/* Native I/O for the shim's tests: real libc calls from a library of its
 * own (so they go through its own GOT), from real pthreads. */
#define _GNU_SOURCE
#include <fcntl.h>
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
