/* A library the dlclose tests load and unload: it reads a file through its
 * own GOT (open, pread, close). PAD_KIB pads it to a chosen mapped size, so
 * tests can leave holes in the address space and fill them (or not). */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#ifndef PAD_KIB
#define PAD_KIB 4
#endif

__attribute__((used)) char cycle_pad[PAD_KIB * 1024];

/* Opens path, reads `size` bytes at offset 0 `times` times, closes it;
 * returns the bytes read, or -1 on an error. */
long cycle_read(const char *path, long times, long size)
{
    char *buf = malloc((size_t)size);
    int fd = open(path, O_RDONLY);
    if (!buf || fd < 0) {
        free(buf);
        return -1;
    }
    long total = 0;
    for (long i = 0; i < times; i++) {
        ssize_t n = pread(fd, buf, (size_t)size, 0);
        if (n < 0) {
            total = -1;
            break;
        }
        total += n;
    }
    close(fd);
    free(buf);
    return total;
}
