/* Rewrites GOT slots (JUMP_SLOT and GLOB_DAT relocations) of loaded ELF
 * objects so their calls to the hooked functions reach our wrappers, and
 * puts every slot back on detach.
 *
 * What is kept belongs to a live object and is dropped with it (memray's
 * lesson, see shared/STYLE.md): for each patched object, the *index* of
 * each patched relocation and the slot's original value. Slot addresses are
 * never cached; every pass derives them again from the object's own
 * relocation table, inside dl_iterate_phdr's callback, after proving that
 * the object is the one that was scanned (same base, program headers,
 * name and dynamic section) and that each remembered relocation still names
 * the same hooked symbol. While the callback runs, the loader holds the
 * lock that dlclose needs to take an object off the list, and it unmaps
 * only after that, so no object we read or write can disappear under us.
 * An object that is gone is forgotten without touching its memory.
 *
 * Objects are patched only once they are fully loaded: a pass first lists
 * the objects, then waits for any dlopen/dlclose in progress (dlopen with
 * RTLD_NOLOAD takes the loader's main lock, which a loading thread holds
 * through relocation and constructors), and patches only listed objects.
 * An object another thread is still relocating waits for the next pass.
 *
 * Skipped objects: the shim itself, the dynamic loader, the vDSO, libc
 * (its internal calls never go through its GOT anyway), a chained site
 * Darshan library, and objects outside the base link-map namespace
 * (dlmopen: they have their own libc, which our wrappers must not mix with
 * ours). No dl* function is called from inside a callback. */
#include "elfpatch.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>
#include <gnu/libc-version.h>

#include "public.h"
#include "maps.h"

#if defined(__x86_64__)
#define R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define R_GLOB_DAT R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define R_GLOB_DAT R_AARCH64_GLOB_DAT
#else
#error "tfdarshan patches GOTs on x86_64 and aarch64 only"
#endif

enum { TABLE_JMPREL, TABLE_RELA };

/* One patched relocation: where to find it again, and what the slot held. */
typedef struct patch {
    uint32_t index;             /* entry in the object's JMPREL or RELA table */
    uint8_t table;
    short hook;                 /* index into hooks */
    void *original;
} patch;

typedef struct object {
    uintptr_t base;
    const ElfW(Phdr) *phdr;
    const char *name;
    uint64_t fingerprint;       /* name and dynamic section, to tell a reload apart */
    patch *patches;
    int n_patches, cap_patches;
    unsigned pass;              /* the last pass that found it loaded */
} object;

static pthread_mutex_t patch_lock = PTHREAD_MUTEX_INITIALIZER;
static object *objects;
static int n_objects, cap_objects;
static unsigned pass_number;
static unsigned long long seen_adds = ~0ull, seen_subs = ~0ull;
static int pending;             /* objects left for a later pass */
static const void *chain_marker;
static const tfd_hook *hooks;   /* what to patch (attach.c's table) */
static int n_hooks;

/* ---- hook lookup by symbol name: a small open-addressing table */
#define NAME_SLOTS 512
static short name_table[NAME_SLOTS];
static int name_table_ready;

static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

static void build_name_table(void)
{
    if (name_table_ready)
        return;
    for (int i = 0; i < NAME_SLOTS; i++)
        name_table[i] = -1;
    for (int i = 0; i < n_hooks; i++) {
        if (!*hooks[i].real)
            continue;           /* no original to forward to: leave it alone */
        const char *n = hooks[i].name;
        unsigned k = (unsigned)(fnv(14695981039346656037ull, n, strlen(n)) % NAME_SLOTS);
        while (name_table[k] >= 0)
            k = (k + 1) % NAME_SLOTS;
        name_table[k] = (short)i;
    }
    name_table_ready = 1;
}

static int find_hook(const char *name)
{
    unsigned k = (unsigned)(fnv(14695981039346656037ull, name, strlen(name)) % NAME_SLOTS);
    for (; name_table[k] >= 0; k = (k + 1) % NAME_SLOTS)
        if (strcmp(hooks[name_table[k]].name, name) == 0)
            return name_table[k];
    return -1;
}

/* A slot the loader has finished with points at code: a resolved function
 * or the object's own PLT stub. Before relocation it holds 0 (GLOB_DAT) or
 * an unrelocated offset (JUMP_SLOT). */
static int relocated(const void *value)
{
    int prot = tfd_maps_prot((uintptr_t)value);
    return prot > 0 && (prot & PROT_EXEC);
}

/* ---- an object's dynamic section, parsed afresh each time it is used */
typedef struct elf_view {
    uintptr_t base;
    const ElfW(Sym) *symtab;
    const char *strtab;
    const ElfW(Rela) *table[2];
    size_t count[2];
    uint64_t fingerprint;
} elf_view;

static uintptr_t dyn_ptr(uintptr_t v, uintptr_t base)
{
    /* glibc relocates .dynamic in place; other loaders may not */
    return v < base ? v + base : v;
}

static int read_elf(const struct dl_phdr_info *info, elf_view *v)
{
    const ElfW(Dyn) *dyn = NULL;
    memset(v, 0, sizeof(*v));
    v->base = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return -1;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    uint64_t fp = fnv(14695981039346656037ull, name, strlen(name));
    long pltrel = DT_RELA;
    size_t jmprel_size = 0, rela_size = 0;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        fp = fnv(fp, dyn, sizeof(*dyn));
        switch (dyn->d_tag) {
        case DT_SYMTAB: v->symtab = (const ElfW(Sym) *)dyn_ptr(dyn->d_un.d_ptr, v->base); break;
        case DT_STRTAB: v->strtab = (const char *)dyn_ptr(dyn->d_un.d_ptr, v->base); break;
        case DT_JMPREL: v->table[TABLE_JMPREL] = (const ElfW(Rela) *)dyn_ptr(dyn->d_un.d_ptr, v->base); break;
        case DT_PLTRELSZ: jmprel_size = dyn->d_un.d_val; break;
        case DT_PLTREL: pltrel = (long)dyn->d_un.d_val; break;
        case DT_RELA: v->table[TABLE_RELA] = (const ElfW(Rela) *)dyn_ptr(dyn->d_un.d_ptr, v->base); break;
        case DT_RELASZ: rela_size = dyn->d_un.d_val; break;
        }
    }
    if (!v->symtab || !v->strtab)
        return -1;
    if (pltrel != DT_RELA)
        v->table[TABLE_JMPREL] = NULL;  /* REL-format PLT: not on our architectures */
    v->count[TABLE_JMPREL] = v->table[TABLE_JMPREL] ? jmprel_size / sizeof(ElfW(Rela)) : 0;
    v->count[TABLE_RELA] = v->table[TABLE_RELA] ? rela_size / sizeof(ElfW(Rela)) : 0;
    v->fingerprint = fp;
    return 0;
}

/* The hook a relocation entry imports, or -1: an undefined symbol reached
 * through a GOT slot whose name is one we wrap. */
static int hook_of(const elf_view *v, const ElfW(Rela) *r)
{
    unsigned long type = ELF64_R_TYPE(r->r_info);
    if (type != R_JUMP_SLOT && type != R_GLOB_DAT)
        return -1;
    const ElfW(Sym) *sym = &v->symtab[ELF64_R_SYM(r->r_info)];
    if (sym->st_shndx != SHN_UNDEF)
        return -1;              /* the object defines it itself */
    return find_hook(v->strtab + sym->st_name);
}

/* The slot of a remembered patch, or NULL when the object's table no longer
 * has that entry for that hook (then it is not the object we scanned). */
static void **slot_of(const elf_view *v, const patch *p)
{
    if (p->index >= v->count[p->table])
        return NULL;
    const ElfW(Rela) *r = &v->table[p->table][p->index];
    if (hook_of(v, r) != p->hook)
        return NULL;
    return (void **)(v->base + r->r_offset);
}

static int add_patch(object *obj, uint32_t index, int table, int hook, void *original)
{
    if (obj->n_patches == obj->cap_patches) {
        int cap = obj->cap_patches ? obj->cap_patches * 2 : 16;
        patch *p = realloc(obj->patches, (size_t)cap * sizeof(patch));
        if (!p)
            return -1;
        obj->patches = p;
        obj->cap_patches = cap;
    }
    obj->patches[obj->n_patches++] = (patch){index, (uint8_t)table, (short)hook, original};
    return 0;
}

/* ---- one pass over the loaded objects */
enum { MODE_PATCH, MODE_RECHECK, MODE_RESTORE };

typedef struct listed { uintptr_t base; const ElfW(Phdr) *phdr; const char *name; } listed;

typedef struct scan {
    int mode;
    uintptr_t skip_addr[5];     /* addresses inside objects we must not patch */
    struct link_map *base_ns;   /* first link map of the base namespace */
    listed *ready;              /* objects fully loaded before the pass began */
    int n_ready;
    int skipped;                /* objects left for a later pass */
    int restored;
    unsigned long long adds, subs;
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

static int is_ready(const scan *sc, const struct dl_phdr_info *info)
{
    for (int i = 0; i < sc->n_ready; i++)
        if (sc->ready[i].base == info->dlpi_addr && sc->ready[i].phdr == info->dlpi_phdr &&
            sc->ready[i].name == info->dlpi_name)
            return 1;
    return 0;
}

static object *find_object(const struct dl_phdr_info *info, uint64_t fingerprint)
{
    for (int i = 0; i < n_objects; i++)
        if (objects[i].base == info->dlpi_addr && objects[i].phdr == info->dlpi_phdr &&
            objects[i].name == info->dlpi_name && objects[i].fingerprint == fingerprint)
            return &objects[i];
    return NULL;
}

static void forget_object(int i)
{
    free(objects[i].patches);
    objects[i] = objects[--n_objects];
}

static object *new_object(const struct dl_phdr_info *info, uint64_t fingerprint)
{
    if (n_objects == cap_objects) {
        int cap = cap_objects ? cap_objects * 2 : 256;
        object *o = realloc(objects, (size_t)cap * sizeof(object));
        if (!o)
            return NULL;
        objects = o;
        cap_objects = cap;
    }
    object *obj = &objects[n_objects++];
    *obj = (object){info->dlpi_addr, info->dlpi_phdr, info->dlpi_name, fingerprint, NULL, 0, 0, 0};
    return obj;
}

/* Point a slot at the wrapper, remembering what it held. */
static void patch_slot(void **slot, int hook, void **original)
{
    void *wrapper = hooks[hook].wrapper;
    void *cur = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (cur == wrapper || !relocated(cur))
        return;         /* ours already, or unresolved (a weak symbol absent) */
    if (tfd_maps_write(slot, wrapper) == 0)
        *original = cur;
}

/* A first sight of an object: every hooked relocation it has. */
static void scan_object(const elf_view *v, object *obj)
{
    for (int t = 0; t < 2; t++)
        for (size_t i = 0; i < v->count[t]; i++) {
            const ElfW(Rela) *r = &v->table[t][i];
            int hook = hook_of(v, r);
            if (hook < 0)
                continue;
            if (add_patch(obj, (uint32_t)i, t, hook, NULL) != 0)
                return;
            patch *p = &obj->patches[obj->n_patches - 1];
            patch_slot((void **)(v->base + r->r_offset), hook, &p->original);
        }
}

static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
    scan *sc = data;
    (void)size;
    sc->adds = info->dlpi_adds;
    sc->subs = info->dlpi_subs;
    for (int i = 0; i < 5; i++)
        if (sc->skip_addr[i] && contains(info, sc->skip_addr[i]))
            return 0;
    elf_view v;
    if (read_elf(info, &v) != 0)
        return 0;
    object *obj = find_object(info, v.fingerprint);
    for (int i = 0; obj && i < obj->n_patches; i++)
        if (!slot_of(&v, &obj->patches[i])) {
            /* same place, name and dynamic section, other relocations: a
             * stranger, not the object we scanned */
            forget_object((int)(obj - objects));
            obj = NULL;
        }
    if (obj) {
        obj->pass = pass_number;
        for (int i = 0; i < obj->n_patches; i++) {
            patch *p = &obj->patches[i];
            void **slot = slot_of(&v, p);
            if (sc->mode != MODE_RESTORE)
                /* a reload at the same place, or a lazy binding racing
                 * with our write, may have put an original back */
                patch_slot(slot, p->hook, &p->original);
            else if (p->original && __atomic_load_n(slot, __ATOMIC_ACQUIRE) == hooks[p->hook].wrapper &&
                     tfd_maps_write(slot, p->original) == 0)
                sc->restored++;
        }
        return 0;
    }
    if (sc->mode != MODE_PATCH)
        return 0;
    if (!is_ready(sc, info)) {
        sc->skipped++;          /* appeared after the barrier: maybe still loading */
        return 0;
    }
    if (!in_base_namespace(info, sc->base_ns))
        return 0;
    obj = new_object(info, v.fingerprint);
    if (obj) {
        obj->pass = pass_number;
        scan_object(&v, obj);
    }
    return 0;
}

static int list_ready(struct dl_phdr_info *info, size_t size, void *data)
{
    scan *sc = data;
    (void)size;
    listed *r = realloc(sc->ready, (size_t)(sc->n_ready + 1) * sizeof(listed));
    if (!r)
        return 1;
    sc->ready = r;
    sc->ready[sc->n_ready++] = (listed){info->dlpi_addr, info->dlpi_phdr, info->dlpi_name};
    return 0;
}

static int counts_callback(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    unsigned long long *c = data;
    c[0] = info->dlpi_adds;
    c[1] = info->dlpi_subs;
    return 1;
}

void tfd_patch_use(const tfd_hook *table, int n)
{
    pthread_mutex_lock(&patch_lock);
    if (hooks != table || n_hooks != n)
        name_table_ready = 0;
    hooks = table;
    n_hooks = n;
    pthread_mutex_unlock(&patch_lock);
}

void tfd_patch_set_chain_base(const void *addr)
{
    chain_marker = addr;
}

/* Must run without patch_lock: it waits for the loader's lock, which a
 * thread inside dlopen holds while its constructors may call into us. */
static void prepare_scan(scan *sc, int mode)
{
    memset(sc, 0, sizeof(*sc));
    sc->mode = mode;
    sc->skip_addr[0] = (uintptr_t)&tfd_patch_loaded_objects;   /* ourselves */
    sc->skip_addr[1] = (uintptr_t)getauxval(AT_BASE);           /* ld.so */
    sc->skip_addr[2] = (uintptr_t)getauxval(AT_SYSINFO_EHDR);   /* vDSO */
    sc->skip_addr[3] = (uintptr_t)&gnu_get_libc_version;        /* libc */
    sc->skip_addr[4] = (uintptr_t)chain_marker;
    if (mode == MODE_PATCH)
        dl_iterate_phdr(list_ready, sc);
    /* the barrier: returns once every dlopen/dlclose begun before it ended */
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

/* Objects the last pass did not find are gone: drop them unseen. */
static void sweep(void)
{
    for (int i = n_objects - 1; i >= 0; i--)
        if (objects[i].pass != pass_number)
            forget_object(i);
}

/* One pass over the loaded objects; returns holding patch_lock. */
static void run_pass(scan *sc, int mode)
{
    prepare_scan(sc, mode);
    pthread_mutex_lock(&patch_lock);
    build_name_table();
    tfd_maps_load();
    pass_number++;
    dl_iterate_phdr(visit, sc);
}

int tfd_patch_loaded_objects(void)
{
    unsigned long long counts[2] = {0, 0};
    dl_iterate_phdr(counts_callback, counts);
    pthread_mutex_lock(&patch_lock);
    int unchanged = counts[0] == seen_adds && counts[1] == seen_subs && !pending;
    pthread_mutex_unlock(&patch_lock);
    if (unchanged)
        return tfd_patched_slots();

    scan sc;
    run_pass(&sc, MODE_PATCH);
    sweep();
    /* a lazy binding resolved while we wrote may have put an original back */
    sc.mode = MODE_RECHECK;
    dl_iterate_phdr(visit, &sc);
    seen_adds = sc.adds;
    seen_subs = sc.subs;
    pending = sc.skipped > 0;
    pthread_mutex_unlock(&patch_lock);
    free(sc.ready);
    return tfd_patched_slots();
}

int tfd_unpatch_all(void)
{
    scan sc;
    run_pass(&sc, MODE_RESTORE);
    while (n_objects > 0)
        forget_object(n_objects - 1);
    seen_adds = seen_subs = ~0ull;
    pending = 0;
    pthread_mutex_unlock(&patch_lock);
    return sc.restored;
}

int tfd_patched_slots(void)
{
    int n = 0;
    pthread_mutex_lock(&patch_lock);
    for (int i = 0; i < n_objects; i++)
        for (int j = 0; j < objects[i].n_patches; j++)
            n += objects[i].patches[j].original != NULL;
    pthread_mutex_unlock(&patch_lock);
    return n;
}

int tfd_patched_objects(void)
{
    int n = 0;
    pthread_mutex_lock(&patch_lock);
    for (int i = 0; i < n_objects; i++)
        for (int j = 0; j < objects[i].n_patches; j++)
            if (objects[i].patches[j].original) {
                n++;
                break;
            }
    pthread_mutex_unlock(&patch_lock);
    return n;
}

typedef struct probe_query { const char *fragment; int found; } probe_query;

/* Patched means: a live object whose remembered slots hold our wrappers. */
static int probe_callback(struct dl_phdr_info *info, size_t size, void *data)
{
    probe_query *q = data;
    (void)size;
    if (!info->dlpi_name || !strstr(info->dlpi_name, q->fragment))
        return 0;
    elf_view v;
    if (read_elf(info, &v) != 0)
        return 0;
    object *obj = find_object(info, v.fingerprint);
    for (int i = 0; obj && i < obj->n_patches && !q->found; i++) {
        void **slot = slot_of(&v, &obj->patches[i]);
        q->found = slot && __atomic_load_n(slot, __ATOMIC_ACQUIRE) == hooks[obj->patches[i].hook].wrapper;
    }
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

/* The parent may have held the lock at fork; the child's copy of the
 * table describes the same objects, which the child inherited. */
void tfd_patch_after_fork(void)
{
    pthread_mutex_init(&patch_lock, NULL);
}
