/* attach and detach: the hook table, and the order in which attaching
 * wakes the recording up (clock, originals, state, descriptors, patches)
 * and detaching puts it to sleep. */
#include "attach.h"
#include "clock.h"
#include "collect.h"
#include "elfpatch.h"
#include "hooks.h"
#include "jump_return.h"
#include "rules_kernel.h"
#include "rules_posix.h"
#include "wrappers.h"

#include <pthread.h>

/* every hooked function: its name, wrapper and original (hooks.def) */
static const tfd_hook hook_table[] = {
#define HOOK(name, ret, params) {#name, (void *)tfd_w_##name, (void **)&tfd_real_##name},
#include "hooks.def"
#undef HOOK
};
#define N_HOOKS ((int)(sizeof(hook_table) / sizeof(hook_table[0])))

static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t generation;

const tfd_hook *tfd_hook_named(const char *name)
{
    for (int i = 0; i < N_HOOKS; i++)
        if (strcmp(hook_table[i].name, name) == 0)
            return &hook_table[i];
    return NULL;
}

int tfd_attach(const tfd_config *config, char *err, size_t err_len)
{
    int rc = 0;
    pthread_mutex_lock(&attach_lock);
    if (tfd_recording_on()) {
        rc = 1;
        goto out;
    }
    tfd_clock_init();
    jump_return_init();
    const void *chain_ld;
    if (hooks_resolve(hook_table, N_HOOKS, config->chain_library, &chain_ld, err, err_len) != 0 ||
        collect_init(config, err, err_len) != 0) {
        rc = -1;
        goto out;
    }
    tfd_patch_set_chain_base(chain_ld);
    /* while no wrapper can change them: descriptors opened, closed or
     * reused while we were detached */
    tfd_posix_sync_open_fds();
    tfd_mapped_start(config->kernel_io);
    /* record from the first patched call on */
    hooks_set_recording(1);
    tfd_patch_use(hook_table, N_HOOKS);
    tfd_patch_loaded_objects();
    __atomic_add_fetch(&generation, 1, __ATOMIC_SEQ_CST);
out:
    pthread_mutex_unlock(&attach_lock);
    return rc;
}

int tfd_detach(void)
{
    pthread_mutex_lock(&attach_lock);
    if (!tfd_recording_on()) {
        pthread_mutex_unlock(&attach_lock);
        return 1;
    }
    __atomic_add_fetch(&generation, 1, __ATOMIC_SEQ_CST);
    /* restore first, so calls already routed to us are still counted */
    tfd_unpatch_all();
    tfd_mapped_stop();
    hooks_set_recording(0);
    pthread_mutex_unlock(&attach_lock);
    return 0;
}

int tfd_is_attached(void)
{
    return tfd_recording_on();
}

int64_t tfd_attach_generation(void)
{
    return __atomic_load_n(&generation, __ATOMIC_SEQ_CST);
}
