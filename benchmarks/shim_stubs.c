/* For benchmarks only, built into a copy of the shim by
 * benchmarks/stub_shim.py and never into the shipped one: the wrappers'
 * own cost, without the system call or libc work behind them.
 * tfd_bench_stub(1) points the originals of pread, pread64 and fread at
 * stubs that return at once ("read" everything asked, moving no data), so
 * a process that does real I/O must not call it; tfd_bench_stub(0) puts
 * the originals back. tfd_bench_wrapper gives a wrapper's address, to call
 * it directly. The wrappers are unchanged. */
#include "attach.h"

#include <sys/types.h>

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

static const char *const stubbed[3] = {"pread", "pread64", "fread"};
static void *saved[3];
static int on_now;

int tfd_bench_stub(int on)
{
    void *stubs[3] = {(void *)stub_pread, (void *)stub_pread, (void *)stub_fread};
    if (on == on_now)
        return 0;
    for (int i = 0; i < 3; i++) {
        const tfd_hook *h = tfd_hook_named(stubbed[i]);
        if (on)
            saved[i] = hooks_set_original(h, stubs[i]);
        else
            hooks_set_original(h, saved[i]);
    }
    on_now = on;
    return 0;
}

void *tfd_bench_wrapper(const char *name)
{
    const tfd_hook *h = tfd_hook_named(name);
    return h ? h->wrapper : NULL;
}

void *tfd_bench_stub_function(const char *name)
{
    if (strcmp(name, "pread") == 0 || strcmp(name, "pread64") == 0)
        return (void *)stub_pread;
    if (strcmp(name, "fread") == 0)
        return (void *)stub_fread;
    return NULL;
}
