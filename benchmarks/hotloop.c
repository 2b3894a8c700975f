/* The hot-path benchmark's native loops (benchmarks/bench_hotpath.py).
 * fread_loop calls fread through this library's GOT entry, which the shim
 * patches; the *_via loops call a given function pointer (a stub, or a
 * wrapper whose original is that stub), so no GOT is involved. */
#include <stdio.h>
#include <sys/types.h>

long fread_loop(FILE *f, long n, long size)
{
    char buf[256];
    long total = 0;
    for (long i = 0; i < n; i++) {
        size_t got = fread(buf, (size_t)size, 1, f);
        if (got == 0) {
            rewind(f);
            continue;
        }
        total += (long)got;
    }
    return total;
}

long pread_via(ssize_t (*fn)(int, void *, size_t, off_t), int fd, long n, long size)
{
    char buf[4096];
    long total = 0;
    for (long i = 0; i < n; i++)
        total += fn(fd, buf, (size_t)size, 0);
    return total;
}

long fread_via(size_t (*fn)(void *, size_t, size_t, FILE *), FILE *f, long n, long size)
{
    char buf[256];
    long total = 0;
    for (long i = 0; i < n; i++)
        total += (long)fn(buf, (size_t)size, 1, f);
    return total;
}

/* fopen/fclose through this library's GOT: a stream opened while attached
 * is one the shim records (as a data loader's would be) */
FILE *open_stream(const char *path)
{
    return fopen(path, "rb");
}

int close_stream(FILE *f)
{
    return fclose(f);
}
