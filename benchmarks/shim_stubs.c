/* For benchmarks only, built into a copy of the shim by
 * benchmarks/stub_shim.py and never into the shipped one: the wrappers'
 * own cost, without the system call or libc work behind them, and what a
 * system call's two halves do to it. tfd_bench_stub(kind) points the
 * originals of pread, pread64 and fread at stubs ("read" everything
 * asked), so a process that does real I/O must not call it:
 *   1  return at once, moving no data;
 *   2  enter the kernel and leave (getppid), moving no data;
 *   3  copy the bytes asked for from a buffer of their own, as a read from
 *      the page cache copies them, without entering the kernel;
 *   4  overwrite the return-stack predictor, as the kernel does on its way
 *      out (x86-64; elsewhere as 1);
 *   5  read 32 KiB of memory of their own (the L1 data cache's size), so
 *      the lines the caller used are likely gone.
 * tfd_bench_stub(0) puts the originals back. tfd_bench_wrapper gives a
 * wrapper's address and tfd_bench_stub_function the stub's, to call them
 * directly. The wrappers are unchanged. */
#include "attach.h"

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static ssize_t stub_pread(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
    return (ssize_t)count;
}

static ssize_t stub_pread_kernel(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
    syscall(SYS_getppid);
    return (ssize_t)count;
}

static char source[1 << 16];

static ssize_t stub_pread_copy(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)offset;
    if (count > sizeof(source))
        count = sizeof(source);
    memcpy(buf, source, count);
    __asm__ volatile("" ::"r"(buf) : "memory");
    return (ssize_t)count;
}

static size_t stub_fread(void *ptr, size_t size, size_t nmemb, FILE *stream)
{
    (void)ptr, (void)size, (void)stream;
    return nmemb;
}

static ssize_t stub_pread_rsb(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
#if defined(__x86_64__)
    /* 32 calls that never return: each pushes a prediction the next ret misses */
    __asm__ volatile(".rept 32\n\tcall 1f\n\tint3\n1:\n\tadd $8, %%rsp\n\t.endr" ::: "memory", "cc");
#endif
    return (ssize_t)count;
}

static ssize_t stub_pread_evict(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
    static volatile char lines[32 << 10];
    long sum = 0;
    for (size_t i = 0; i < sizeof(lines); i += 64)
        sum += lines[i];
    __asm__ volatile("" ::"r"(sum));
    return (ssize_t)count;
}

static const char *const stubbed[3] = {"pread", "pread64", "fread"};
static void *saved[3];
static int kind_now;

static void *pread_stub(int kind)
{
    void *stubs[6] = {(void *)stub_pread, (void *)stub_pread, (void *)stub_pread_kernel, (void *)stub_pread_copy,
                      (void *)stub_pread_rsb, (void *)stub_pread_evict};
    return stubs[kind];
}

int tfd_bench_stub(int kind)
{
    if (kind < 0 || kind > 5)
        return -1;
    for (int i = 0; i < 3; i++) {
        const tfd_hook *h = tfd_hook_named(stubbed[i]);
        void *stub = i < 2 ? pread_stub(kind) : (void *)stub_fread;
        if (kind && !kind_now)
            saved[i] = hooks_set_original(h, stub);
        else if (kind)
            hooks_set_original(h, stub);
        else if (kind_now)
            hooks_set_original(h, saved[i]);
    }
    kind_now = kind;
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
        return pread_stub(kind_now);
    if (strcmp(name, "fread") == 0)
        return (void *)stub_fread;
    return NULL;
}
