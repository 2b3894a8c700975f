/* Rewrites GOT slots (JUMP_SLOT and GLOB_DAT relocations) of loaded ELF
 * objects so their calls to the hooked functions reach our wrappers, and
 * puts every slot back on detach.
 *
 * Skipped objects: the shim itself, the dynamic loader, the vDSO, libc
 * (its internal calls never go through its GOT anyway), a chained site
 * Darshan library, and objects outside the base link-map namespace (they
 * have their own libc, which our wrappers must not mix with ours).
 *
 * Patching runs inside dl_iterate_phdr's callback: the loader holds its
 * list lock there, so no object we touch can be unloaded under us. No dl*
 * function is called from inside the callback. */
#include "shim.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>
#include <gnu/libc-version.h>

#if defined(__x86_64__)
#define R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define R_GLOB_DAT R_AARCH64_GLOB_DAT
#else
#error "tfdarshan patches GOTs on x86_64 and aarch64 only"
#endif

typedef struct patch {
    void **slot;
    void *original;
    void *wrapper;
} patch;

typedef struct object {
    uintptr_t base;
    const ElfW(Phdr) *phdr;
    void **probe_slot;          /* one patched slot, to notice a reload */
    void *probe_wrapper;
} object;

static pthread_mutex_t patch_lock = PTHREAD_MUTEX_INITIALIZER;
static patch *patches;
static int n_patches, cap_patches;
static object *objects;
static int n_objects, cap_objects;
static unsigned long long seen_adds = ~0ull;
static const void *chain_marker;

/* ---- hook lookup by symbol name: a small open-addressing table */
#define NAME_SLOTS 512
static short name_table[NAME_SLOTS];
static int name_table_ready;

static unsigned name_hash(const char *s)
{
    unsigned h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h;
}

static void build_name_table(void)
{
    if (name_table_ready)
        return;
    for (int i = 0; i < NAME_SLOTS; i++)
        name_table[i] = -1;
    for (int i = 0; i < tfd_n_hooks; i++) {
        if (!*tfd_hooks[i].real)
            continue;           /* no original to forward to: leave it alone */
        unsigned k = name_hash(tfd_hooks[i].name) % NAME_SLOTS;
        while (name_table[k] >= 0)
            k = (k + 1) % NAME_SLOTS;
        name_table[k] = (short)i;
    }
    name_table_ready = 1;
}

static const tfd_hook *find_hook(const char *name)
{
    for (unsigned k = name_hash(name) % NAME_SLOTS; name_table[k] >= 0; k = (k + 1) % NAME_SLOTS)
        if (strcmp(tfd_hooks[name_table[k]].name, name) == 0)
            return &tfd_hooks[name_table[k]];
    return NULL;
}

/* ---- memory protection, read from /proc/self/maps once per pass */
typedef struct region { uintptr_t start, end; int prot; } region;
static region *regions;
static int n_regions;

static void load_regions(void)
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

static int prot_of(uintptr_t addr)
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
static int write_slot(void **slot, void *value)
{
    int prot = prot_of((uintptr_t)slot);
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

/* ---- which objects to leave alone */
typedef struct scan {
    uintptr_t skip_addr[5];     /* addresses inside objects we must not patch */
    struct link_map *base_ns;   /* first link map of the base namespace */
    unsigned long long adds;
    int restore;                /* 0: patch, 1: restore */
    int changed;
} scan;

static int contains(const struct dl_phdr_info *info, uintptr_t addr)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t s = info->dlpi_addr + ph->p_vaddr;
        if (addr >= s && addr < s + ph->p_memsz)
            return 1;
    }
    return 0;
}

static int in_base_namespace(const struct dl_phdr_info *info, struct link_map *base)
{
    if (!base)
        return 1;
    for (struct link_map *m = base; m; m = m->l_next)
        if (m->l_addr == info->dlpi_addr && (m->l_name == info->dlpi_name ||
                                             strcmp(m->l_name, info->dlpi_name) == 0))
            return 1;
    return 0;
}

static object *find_object(const struct dl_phdr_info *info)
{
    for (int i = 0; i < n_objects; i++)
        if (objects[i].base == info->dlpi_addr && objects[i].phdr == info->dlpi_phdr)
            return &objects[i];
    return NULL;
}

static int remember_patch(void **slot, void *original, void *wrapper)
{
    if (n_patches == cap_patches) {
        int cap = cap_patches ? cap_patches * 2 : 1024;
        patch *p = realloc(patches, (size_t)cap * sizeof(patch));
        if (!p)
            return -1;
        patches = p;
        cap_patches = cap;
    }
    patches[n_patches++] = (patch){slot, original, wrapper};
    return 0;
}

static void patch_relocs(const ElfW(Rela) *rel, size_t size, uintptr_t base, const ElfW(Sym) *symtab,
                         const char *strtab, object *obj)
{
    for (size_t i = 0; rel && i < size / sizeof(ElfW(Rela)); i++) {
        unsigned long type = ELF64_R_TYPE(rel[i].r_info);
        if (type != R_JUMP_SLOT && type != R_GLOB_DAT)
            continue;
        const ElfW(Sym) *sym = &symtab[ELF64_R_SYM(rel[i].r_info)];
        if (sym->st_shndx != SHN_UNDEF)
            continue;           /* the object defines it itself */
        const tfd_hook *h = find_hook(strtab + sym->st_name);
        if (!h)
            continue;
        void **slot = (void **)(base + rel[i].r_offset);
        void *cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        if (cur == h->wrapper)
            continue;
        if (remember_patch(slot, cur, h->wrapper) != 0)
            return;
        if (write_slot(slot, h->wrapper) != 0) {
            n_patches--;
            continue;
        }
        if (!obj->probe_slot) {
            obj->probe_slot = slot;
            obj->probe_wrapper = h->wrapper;
        }
    }
}

static uintptr_t dyn_ptr(uintptr_t v, uintptr_t base)
{
    /* glibc relocates .dynamic in place; other loaders may not */
    return v < base ? v + base : v;
}

static int patch_callback(struct dl_phdr_info *info, size_t size, void *data)
{
    scan *sc = data;
    (void)size;
    sc->adds = info->dlpi_adds;
    for (int i = 0; i < 5; i++)
        if (sc->skip_addr[i] && contains(info, sc->skip_addr[i]))
            return 0;
    if (!in_base_namespace(info, sc->base_ns))
        return 0;

    object *obj = find_object(info);
    if (obj) {
        /* patched already, unless it was unloaded and loaded again here */
        if (!obj->probe_slot || __atomic_load_n(obj->probe_slot, __ATOMIC_ACQUIRE) == obj->probe_wrapper)
            return 0;
        obj->probe_slot = NULL;
    } else {
        if (n_objects == cap_objects) {
            int cap = cap_objects ? cap_objects * 2 : 512;
            object *o = realloc(objects, (size_t)cap * sizeof(object));
            if (!o)
                return 0;
            objects = o;
            cap_objects = cap;
        }
        obj = &objects[n_objects++];
        *obj = (object){info->dlpi_addr, info->dlpi_phdr, NULL, NULL};
    }

    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return 0;
    uintptr_t base = info->dlpi_addr;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    size_t jmprel_size = 0, rela_size = 0;
    long pltrel = DT_RELA;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB: symtab = (const ElfW(Sym) *)dyn_ptr(dyn->d_un.d_ptr, base); break;
        case DT_STRTAB: strtab = (const char *)dyn_ptr(dyn->d_un.d_ptr, base); break;
        case DT_JMPREL: jmprel = (const ElfW(Rela) *)dyn_ptr(dyn->d_un.d_ptr, base); break;
        case DT_PLTRELSZ: jmprel_size = dyn->d_un.d_val; break;
        case DT_PLTREL: pltrel = (long)dyn->d_un.d_val; break;
        case DT_RELA: rela = (const ElfW(Rela) *)dyn_ptr(dyn->d_un.d_ptr, base); break;
        case DT_RELASZ: rela_size = dyn->d_un.d_val; break;
        }
    }
    if (!symtab || !strtab)
        return 0;
    if (pltrel == DT_RELA)
        patch_relocs(jmprel, jmprel_size, base, symtab, strtab, obj);
    patch_relocs(rela, rela_size, base, symtab, strtab, obj);
    sc->changed = 1;
    return 0;
}

static int adds_callback(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(unsigned long long *)data = info->dlpi_adds;
    return 1;
}

void tfd_patch_set_chain_base(const void *addr)
{
    chain_marker = addr;
}

static void fill_skip(scan *sc)
{
    memset(sc, 0, sizeof(*sc));
    sc->skip_addr[0] = (uintptr_t)&tfd_patch_loaded_objects;   /* ourselves */
    sc->skip_addr[1] = (uintptr_t)getauxval(AT_BASE);           /* ld.so */
    sc->skip_addr[2] = (uintptr_t)getauxval(AT_SYSINFO_EHDR);   /* vDSO */
    sc->skip_addr[3] = (uintptr_t)&gnu_get_libc_version;        /* libc */
    sc->skip_addr[4] = (uintptr_t)chain_marker;
    void *main_handle = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
    struct link_map *lm = NULL;
    if (main_handle && dlinfo(main_handle, RTLD_DI_LINKMAP, &lm) == 0) {
        while (lm && lm->l_prev)
            lm = lm->l_prev;
        sc->base_ns = lm;
    }
    if (main_handle)
        dlclose(main_handle);
}

int tfd_patch_loaded_objects(void)
{
    pthread_mutex_lock(&patch_lock);
    build_name_table();
    unsigned long long adds = 0;
    dl_iterate_phdr(adds_callback, &adds);
    if (adds == seen_adds) {
        pthread_mutex_unlock(&patch_lock);
        return 0;
    }
    scan sc;
    fill_skip(&sc);
    load_regions();
    dl_iterate_phdr(patch_callback, &sc);
    /* a lazy binding resolved concurrently may have overwritten a slot */
    for (int i = 0; i < n_patches; i++) {
        void **slot = patches[i].slot;
        void *cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        if (cur != patches[i].wrapper && cur != patches[i].original)
            continue;       /* not ours any more (object replaced) */
        if (cur != patches[i].wrapper)
            write_slot(slot, patches[i].wrapper);
    }
    seen_adds = sc.adds;
    pthread_mutex_unlock(&patch_lock);
    return n_patches;
}

int tfd_unpatch_all(void)
{
    pthread_mutex_lock(&patch_lock);
    load_regions();
    int restored = 0;
    for (int i = n_patches - 1; i >= 0; i--) {
        void **slot = patches[i].slot;
        /* an unloaded object's page is gone; only touch mapped slots that
         * still hold our wrapper */
        if (prot_of((uintptr_t)slot) < 0)
            continue;
        if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) != patches[i].wrapper)
            continue;
        if (write_slot(slot, patches[i].original) == 0)
            restored++;
    }
    n_patches = 0;
    n_objects = 0;
    seen_adds = ~0ull;
    pthread_mutex_unlock(&patch_lock);
    return restored;
}

int tfd_patched_slots(void)
{
    return n_patches;
}

int tfd_patched_objects(void)
{
    int n = 0;
    pthread_mutex_lock(&patch_lock);
    for (int i = 0; i < n_objects; i++)
        n += objects[i].probe_slot != NULL;
    pthread_mutex_unlock(&patch_lock);
    return n;
}

typedef struct probe_query { const char *fragment; int found; } probe_query;

static int probe_callback(struct dl_phdr_info *info, size_t size, void *data)
{
    probe_query *q = data;
    (void)size;
    if (!info->dlpi_name || !strstr(info->dlpi_name, q->fragment))
        return 0;
    object *o = find_object(info);
    if (o && o->probe_slot && __atomic_load_n(o->probe_slot, __ATOMIC_ACQUIRE) == o->probe_wrapper)
        q->found = 1;
    return q->found;
}

int tfd_object_is_patched(const char *fragment)
{
    probe_query q = {fragment, 0};
    pthread_mutex_lock(&patch_lock);
    dl_iterate_phdr(probe_callback, &q);
    pthread_mutex_unlock(&patch_lock);
    return q.found;
}

void tfd_patch_atfork_child(void)
{
    pthread_mutex_init(&patch_lock, NULL);
}
