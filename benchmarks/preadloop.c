/* The benchmark's native loop: n cached 4 KiB preads, as a data loader's
 * C++ code would issue them (through this library's own GOT entry). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

long pread_loop(int fd, long n, long size)
{
    char *buf = aligned_alloc(4096, (size_t)size);
    long total = 0;
    for (long i = 0; i < n; i++)
        total += pread(fd, buf, (size_t)size, 0);
    free(buf);
    return total;
}

struct job { int fd; long n; long size; long total; };

static void *run(void *p)
{
    struct job *j = p;
    j->total = pread_loop(j->fd, j->n, j->size);
    return NULL;
}

/* threads readers at once, each on its own descriptor fds[i] */
long pread_threads(const int *fds, int threads, long n, long size)
{
    pthread_t tid[256];
    struct job jobs[256];
    long total = 0;
    if (threads > 256)
        threads = 256;
    for (int i = 0; i < threads; i++) {
        jobs[i] = (struct job){fds[i], n, size, 0};
        pthread_create(&tid[i], NULL, run, &jobs[i]);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(tid[i], NULL);
        total += jobs[i].total;
    }
    return total;
}
