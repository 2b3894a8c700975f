/* Reads and writes of memory streams (fmemopen, open_memstream) for
 * tests/capture/test_semantics.py, called through this library's GOT, which the
 * shim patches. Each returns errno right after one call (set to 0 before),
 * or a negative number if the call itself did not do what it should. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

static char data[64] = "0123456789abcdef0123456789abcdef";

int memstream_fread_errno(void)
{
    char buf[8];
    FILE *f = fmemopen(data, sizeof(data), "r");
    if (!f)
        return -1;
    errno = 0;
    size_t n = fread(buf, 1, sizeof(buf), f);
    int e = errno;
    fclose(f);
    return n == sizeof(buf) ? e : -2;
}

int memstream_fwrite_errno(void)
{
    char *p = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&p, &len);
    if (!f)
        return -1;
    errno = 0;
    size_t n = fwrite("abcd", 1, 4, f);
    int e = errno;
    fclose(f);
    free(p);
    return n == 4 ? e : -2;
}
