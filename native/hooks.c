/* The originals the wrappers forward to, found once per attach, and the
 * recording switch. */
#include "hooks.h"

#include <link.h>
#include <stdio.h>

#define HOOK(name, ret, params) ret(*tfd_real_##name) params;
#include "hooks.def"
#undef HOOK

volatile int tfd_attached;

static char *chain_path;
static const void *chain_dynamic;    /* inside the chained library */
static int resolved;

void hooks_set_recording(int on)
{
    __atomic_store_n(&tfd_attached, on ? 1 : 0, __ATOMIC_SEQ_CST);
}

void *hooks_set_original(const tfd_hook *hook, void *original)
{
    void *old = *hook->real;
    __atomic_store_n(hook->real, original, __ATOMIC_RELEASE);
    return old;
}

/* Originals come from the next object in lookup order (libc), or from a
 * site Darshan library whose wrappers then forward to libc themselves. */
int hooks_resolve(const tfd_hook *hooks, int n, const char *chain, const void **chain_ld,
                  char *err, size_t err_len)
{
    *chain_ld = chain_dynamic;
    if (resolved && ((!chain && !chain_path) || (chain && chain_path && !strcmp(chain, chain_path))))
        return 0;
    void *h = NULL;
    const void *dynamic = NULL;
    if (chain && *chain) {
        h = dlopen(chain, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *why = dlerror();
            snprintf(err, err_len, "cannot load the Darshan library %s: %s", chain, why ? why : "unknown error");
            return -1;
        }
        struct link_map *lm = NULL;
        if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm)
            dynamic = lm->l_ld;
    }
    for (int i = 0; i < n; i++) {
        void *f = h ? dlsym(h, hooks[i].name) : NULL;
        if (!f)
            f = dlsym(RTLD_NEXT, hooks[i].name);
        if (f == hooks[i].wrapper)
            f = NULL;
        hooks_set_original(&hooks[i], f);
    }
    *chain_ld = chain_dynamic = dynamic;
    free(chain_path);
    chain_path = chain ? strdup(chain) : NULL;
    resolved = 1;
    return 0;
}
