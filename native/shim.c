/* attach/detach, the clock, and finding the originals to forward to. */
#include "shim.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

int tfd_clock_tsc;
static double ticks_per_second = 1e9;
static int64_t origin_ticks;
static double origin_unix;
static int clock_ready;

static pthread_mutex_t attach_lock = PTHREAD_MUTEX_INITIALIZER;
static void *chain_handle;
static char *chain_path;
static int reals_ready;
static int64_t generation;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The TSC is used only where the kernel itself trusts it as its clock
 * source (invariant and synchronised across cores); its rate is measured
 * once against CLOCK_MONOTONIC so every snapshot converts ticks alike. */
void tfd_clock_init(void)
{
    if (clock_ready)
        return;
#if defined(__x86_64__)
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
    char src[32] = "";
    if (f) {
        if (!fgets(src, sizeof(src), f))
            src[0] = 0;
        fclose(f);
    }
    if (strncmp(src, "tsc", 3) == 0) {
        tfd_clock_tsc = 1;
        uint64_t m0a = mono_ns(), c0 = tfd_ticks(), m0b = mono_ns();
        struct timespec nap = {0, 20 * 1000 * 1000};
        while (nanosleep(&nap, &nap) != 0 && errno == EINTR)
            ;
        uint64_t m1a = mono_ns(), c1 = tfd_ticks(), m1b = mono_ns();
        double ns = ((double)m1a + (double)m1b) / 2 - ((double)m0a + (double)m0b) / 2;
        if (ns > 0 && c1 > c0)
            ticks_per_second = (double)(c1 - c0) * 1e9 / ns;
        else
            tfd_clock_tsc = 0;
    }
#elif defined(__aarch64__)
    uint64_t freq;
    __asm__ volatile("mrs %0, cntfrq_el0" : "=r"(freq));
    if (freq) {
        tfd_clock_tsc = 1;
        ticks_per_second = (double)freq;
    }
#endif
    struct timeval tv;
    origin_ticks = (int64_t)tfd_ticks();
    gettimeofday(&tv, NULL);
    origin_unix = (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
    clock_ready = 1;
}

void tfd_clock(tfd_clock_info *out)
{
    out->origin_ticks = origin_ticks;
    out->ticks_per_second = ticks_per_second;
    out->origin_unix_time = origin_unix;
    out->uses_tsc = tfd_clock_tsc;
}

int64_t tfd_now_ticks(void)
{
    return (int64_t)tfd_ticks();
}

/* Originals come from the next object in lookup order (libc), or from a
 * site Darshan library whose wrappers then forward to libc themselves. */
static int resolve_reals(const char *chain, char *err, size_t err_len)
{
    if (reals_ready && ((!chain && !chain_path) || (chain && chain_path && !strcmp(chain, chain_path))))
        return 0;
    void *h = NULL;
    if (chain && *chain) {
        h = dlopen(chain, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *why = dlerror();
            snprintf(err, err_len, "cannot load the Darshan library %s: %s", chain, why ? why : "unknown error");
            return -1;
        }
        struct link_map *lm = NULL;
        if (dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 && lm)
            tfd_patch_set_chain_base(lm->l_ld);
    }
    for (int i = 0; i < tfd_n_hooks; i++) {
        void *f = h ? dlsym(h, tfd_hooks[i].name) : NULL;
        if (!f)
            f = dlsym(RTLD_NEXT, tfd_hooks[i].name);
        if (f == tfd_hooks[i].wrapper)
            f = NULL;
        *tfd_hooks[i].real = f;
    }
    chain_handle = h;
    free(chain_path);
    chain_path = chain ? strdup(chain) : NULL;
    reals_ready = 1;
    return 0;
}

int tfd_attach(const tfd_config *config, char *err, size_t err_len)
{
    int rc = 0;
    pthread_mutex_lock(&attach_lock);
    if (tfd_attached) {
        rc = 1;
        goto out;
    }
    tfd_clock_init();
    if (resolve_reals(config->chain_library, err, err_len) != 0 ||
        tfd_records_init(config, err, err_len) != 0) {
        rc = -1;
        goto out;
    }
    /* while no wrapper can change them: descriptors opened, closed or
     * reused while we were detached */
    tfd_records_sync_open_fds();
    tfd_kernel_io = config->kernel_io != 0;
    tfd_mapped_sync();
    /* record from the first patched call on */
    __atomic_store_n(&tfd_attached, 1, __ATOMIC_SEQ_CST);
    tfd_patch_loaded_objects();
    __atomic_add_fetch(&generation, 1, __ATOMIC_SEQ_CST);
out:
    pthread_mutex_unlock(&attach_lock);
    return rc;
}

int tfd_detach(void)
{
    pthread_mutex_lock(&attach_lock);
    if (!tfd_attached) {
        pthread_mutex_unlock(&attach_lock);
        return 1;
    }
    __atomic_add_fetch(&generation, 1, __ATOMIC_SEQ_CST);
    /* restore first, so calls already routed to us are still counted */
    tfd_unpatch_all();
    tfd_mapped_stop();
    __atomic_store_n(&tfd_attached, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&attach_lock);
    return 0;
}

int tfd_is_attached(void)
{
    return __atomic_load_n(&tfd_attached, __ATOMIC_RELAXED);
}

int64_t tfd_attach_generation(void)
{
    return __atomic_load_n(&generation, __ATOMIC_SEQ_CST);
}
