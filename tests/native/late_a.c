/* Loaded after attach: opens libtfdlate_b.so by bare name, which only its
 * own RUNPATH ($ORIGIN/sub) can find. */
#include <dlfcn.h>
#include <stddef.h>

long a_read_via_b(const char *path)
{
    void *h = dlopen("libtfdlate_b.so", RTLD_NOW);
    if (!h)
        return -2;
    long (*read_whole)(const char *) = (long (*)(const char *))dlsym(h, "b_read_whole");
    return read_whole ? read_whole(path) : -3;
}
