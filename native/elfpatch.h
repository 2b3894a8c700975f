/* Rewriting and restoring GOT slots (elfpatch.c). */
#ifndef TFD_ELFPATCH_H
#define TFD_ELFPATCH_H
#include "hooks.h"

/* the hooks to patch: each symbol named in the table gets its wrapper */
void tfd_patch_use(const tfd_hook *hooks, int n) TFD_HIDDEN;
int tfd_patch_loaded_objects(void) TFD_HIDDEN;   /* patches objects not yet patched */
int tfd_unpatch_all(void) TFD_HIDDEN;
void tfd_patch_set_chain_base(const void *addr_in_chain_library) TFD_HIDDEN;
void tfd_patch_after_fork(void) TFD_HIDDEN;

#endif
