/* Calls a C program makes on a path, for tests/advice/test_staged.py: each goes
 * through this library's GOT (which the shim patches), as TensorFlow's C++
 * file system's do. Each read_* returns the first byte read through one
 * libc entry point, or -errno. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int first_byte(int fd)
{
    if (fd < 0)
        return -errno;
    unsigned char c;
    ssize_t n = read(fd, &c, 1);
    int e = errno;
    close(fd);
    return n == 1 ? c : -e;
}

int read_open(const char *p) { return first_byte(open(p, O_RDONLY)); }
int read_open64(const char *p) { return first_byte(open64(p, O_RDONLY)); }
int read_openat(const char *p) { return first_byte(openat(AT_FDCWD, p, O_RDONLY)); }

static int stream_byte(FILE *f)
{
    if (!f)
        return -errno;
    int c = fgetc(f);
    fclose(f);
    return c;
}

int read_fopen(const char *p) { return stream_byte(fopen(p, "rb")); }
int read_fopen64(const char *p) { return stream_byte(fopen64(p, "r")); }

/* realpath into out (PATH_MAX bytes): 0, or -errno */
int resolve(const char *p, char *out)
{
    return realpath(p, out) ? 0 : -errno;
}

/* the inode stat() reports, or -errno */
long stat_ino(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_ino : -errno;
}
