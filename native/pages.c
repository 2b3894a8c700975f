/* 2 MiB regions in transparent huge pages (madvise), zeroed by the kernel. */
#include "pages.h"

#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>

void *pages_region(int populate)
{
    int saved = errno;
    /* twice the size, then the aligned middle kept: a huge page needs its alignment */
    char *p = mmap(NULL, 2 * PAGES_REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED) {
        errno = saved;
        return NULL;
    }
    char *start = (char *)(((uintptr_t)p + PAGES_REGION - 1) & ~(uintptr_t)(PAGES_REGION - 1));
    if (start > p)
        munmap(p, (size_t)(start - p));
    if (start + PAGES_REGION < p + 2 * PAGES_REGION)
        munmap(start + PAGES_REGION, (size_t)(p + 2 * PAGES_REGION - (start + PAGES_REGION)));
#ifdef MADV_HUGEPAGE
    madvise(start, PAGES_REGION, MADV_HUGEPAGE);
#endif
    if (populate)
        for (size_t i = 0; i < PAGES_REGION; i += 4096)
            ((volatile char *)start)[i] = 0;
    errno = saved;
    return start;
}
