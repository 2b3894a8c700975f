/* The process's memory map as the patcher needs it: the protection of
 * each mapping, read from /proc/self/maps once per patch pass, and a GOT
 * slot write that opens a read-only (RELRO) page for that write only. */
#include "maps.h"

#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct region { uintptr_t start, end; int prot; } region;
static region *regions;
static int n_regions;
static int64_t bytes_read;      /* of /proc/self/maps, by the patcher */

int64_t tfd_maps_bytes_read(void)
{
    return __atomic_load_n(&bytes_read, __ATOMIC_RELAXED);
}

void tfd_maps_load(void)
{
    free(regions);
    regions = NULL;
    n_regions = 0;
    FILE *f = fopen("/proc/self/maps", "re");
    if (!f)
        return;
    int cap = 0;
    char line[512];
    while (fgets(line, sizeof(line), f)) {
        __atomic_add_fetch(&bytes_read, (int64_t)strlen(line), __ATOMIC_RELAXED);
        unsigned long s, e;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &s, &e, perms) != 3)
            continue;
        if (n_regions == cap) {
            cap = cap ? cap * 2 : 256;
            region *r = realloc(regions, (size_t)cap * sizeof(region));
            if (!r)
                break;
            regions = r;
        }
        int prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
                   (perms[2] == 'x' ? PROT_EXEC : 0);
        regions[n_regions++] = (region){s, e, prot};
    }
    fclose(f);
}

int tfd_maps_prot(uintptr_t addr)
{
    int lo = 0, hi = n_regions - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (addr < regions[mid].start)
            hi = mid - 1;
        else if (addr >= regions[mid].end)
            lo = mid + 1;
        else
            return regions[mid].prot;
    }
    return -1;
}

/* Write one slot; a read-only page (RELRO) is opened for the write only. */
int tfd_maps_write(void **slot, void *value)
{
    int prot = tfd_maps_prot((uintptr_t)slot);
    if (prot < 0)
        return -1;
    if (prot & PROT_WRITE) {
        __atomic_store_n(slot, value, __ATOMIC_SEQ_CST);
        return 0;
    }
    long page = sysconf(_SC_PAGESIZE);
    void *p = (void *)((uintptr_t)slot & ~(uintptr_t)(page - 1));
    if (mprotect(p, (size_t)page, prot | PROT_WRITE) != 0)
        return -1;
    __atomic_store_n(slot, value, __ATOMIC_SEQ_CST);
    mprotect(p, (size_t)page, prot);
    return 0;
}
