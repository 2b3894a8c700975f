/* For benchmarks only: the wrappers' own cost, without the system call or
 * libc work behind them. tfd_bench_stub(1) points the originals of pread,
 * pread64 and fread at stubs that return at once ("read" everything asked,
 * moving no data), so a process that does real I/O must not call it;
 * tfd_bench_stub(0) puts the originals back. tfd_bench_wrapper gives a
 * wrapper's address, to call it directly. The wrappers are unchanged. */
#include "shim.h"

#include <string.h>

static ssize_t stub_pread(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
    return (ssize_t)count;
}

static size_t stub_fread(void *ptr, size_t size, size_t nmemb, FILE *stream)
{
    (void)ptr, (void)size, (void)stream;
    return nmemb;
}

static ssize_t (*saved_pread)(int, void *, size_t, off_t);
static ssize_t (*saved_pread64)(int, void *, size_t, off64_t);
static size_t (*saved_fread)(void *, size_t, size_t, FILE *);

int tfd_bench_stub(int on)
{
    if (on && !saved_pread) {
        saved_pread = tfd_real_pread;
        saved_pread64 = tfd_real_pread64;
        saved_fread = tfd_real_fread;
        tfd_real_pread = stub_pread;
        tfd_real_pread64 = (ssize_t (*)(int, void *, size_t, off64_t))stub_pread;
        tfd_real_fread = stub_fread;
    } else if (!on && saved_pread) {
        tfd_real_pread = saved_pread;
        tfd_real_pread64 = saved_pread64;
        tfd_real_fread = saved_fread;
        saved_pread = NULL;
    }
    return 0;
}

void *tfd_bench_wrapper(const char *name)
{
    for (int i = 0; i < tfd_n_hooks; i++)
        if (strcmp(tfd_hooks[i].name, name) == 0)
            return tfd_hooks[i].wrapper;
    return NULL;
}

void *tfd_bench_stub_function(const char *name)
{
    if (strcmp(name, "pread") == 0 || strcmp(name, "pread64") == 0)
        return (void *)stub_pread;
    if (strcmp(name, "fread") == 0)
        return (void *)stub_fread;
    return NULL;
}
