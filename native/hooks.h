/* What the wrappers forward to and whether they record: the originals of
 * the hooked functions (one per line of hooks.def) and the switch that
 * attach and detach turn. Both are read on every wrapped call, inline;
 * hooks.c owns and writes them. */
#ifndef TFD_HOOKS_H
#define TFD_HOOKS_H
#include "base.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>

#define HOOK(name, ret, params) extern ret(*tfd_real_##name) params TFD_HIDDEN;
#include "hooks.def"
#undef HOOK

/* one hooked function: its name, its wrapper, where its original is kept */
typedef struct tfd_hook {
    const char *name;
    void *wrapper;
    void **real;
} tfd_hook;

/* recording is on: the wrappers time and record; off: they only forward */
extern volatile int tfd_attached TFD_HIDDEN;

static inline int tfd_recording_on(void)
{
    return tfd_attached;
}

void hooks_set_recording(int on) TFD_HIDDEN;

/* Find each hook's original: in the chained library (a site's Darshan)
 * when it has one, else the next object in lookup order (libc). *chain_ld
 * gets an address inside the chained library (NULL without one). 0, or -1
 * with err filled. */
int hooks_resolve(const tfd_hook *hooks, int n, const char *chain, const void **chain_ld,
                  char *err, size_t err_len) TFD_HIDDEN;

/* point one hook at another original (a benchmark's stub); returns the old one */
void *hooks_set_original(const tfd_hook *hook, void *original) TFD_HIDDEN;

#endif
