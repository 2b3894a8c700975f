#include <fcntl.h>
#include <unistd.h>

long b_read_whole(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    char buf[8192];
    long total = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        total += n;
    close(fd);
    return total;
}
