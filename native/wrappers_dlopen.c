/* The dlopen wrappers: libraries loaded after attach get patched too. */
#include "wrappers.h"

#include <link.h>
#include <unistd.h>

#include "elfpatch.h"

/* dlopen resolves a bare name against its caller's RPATH/RUNPATH, and the
 * caller is now us. Search the real caller's path list ourselves (dlinfo
 * gives it in the loader's order, $ORIGIN expanded), then let the loader do
 * the rest (LD_LIBRARY_PATH, ld.so.cache, system directories). */
static void *open_for_caller(Lmid_t lmid, const char *file, int mode, const void *caller)
{
#define REAL_OPEN(f, m) (lmid == LM_ID_BASE ? tfd_real_dlopen(f, m) : tfd_real_dlmopen(lmid, f, m))
    if (!file || strchr(file, '/'))
        return REAL_OPEN(file, mode);
    void *h = REAL_OPEN(file, mode | RTLD_NOLOAD);
    if (h)
        return h;
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1(caller, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        return REAL_OPEN(file, mode);
    Dl_serinfo size;
    if (dlinfo(lm, RTLD_DI_SERINFOSIZE, &size) != 0)
        return REAL_OPEN(file, mode);
    Dl_serinfo *si = malloc(size.dls_size);
    if (!si)
        return REAL_OPEN(file, mode);
    si->dls_size = size.dls_size;
    si->dls_cnt = size.dls_cnt;
    if (dlinfo(lm, RTLD_DI_SERINFO, si) == 0) {
        char path[4096];
        for (unsigned i = 0; i < si->dls_cnt; i++) {
            if (si->dls_serpath[i].dls_flags & (LA_SER_DEFAULT | LA_SER_CONFIG))
                continue;
            int n = snprintf(path, sizeof(path), "%s/%s", si->dls_serpath[i].dls_name, file);
            if (n <= 0 || (size_t)n >= sizeof(path) || access(path, F_OK) != 0)
                continue;
            h = REAL_OPEN(path, mode);
            if (h)
                break;
        }
    }
    free(si);
    return h ? h : REAL_OPEN(file, mode);
#undef REAL_OPEN
}

void *tfd_w_dlopen(const char *file, int mode)
{
    void *h = open_for_caller(LM_ID_BASE, file, mode, __builtin_return_address(0));
    if (h && !IDLE())
        KEEP_ERRNO(tfd_patch_loaded_objects());
    return h;
}

void *tfd_w_dlmopen(Lmid_t lmid, const char *file, int mode)
{
    void *h = open_for_caller(lmid, file, mode, __builtin_return_address(0));
    if (h && !IDLE() && lmid == LM_ID_BASE)
        KEEP_ERRNO(tfd_patch_loaded_objects());
    return h;
}
