/* The clock's calibration: which counter, its rate, and the origin every
 * timestamp is measured from (the first attach). */
#include "clock.h"

#include <errno.h>
#include <stdio.h>
#include <sys/time.h>

#include "public.h"

int tfd_clock_tsc;
static double ticks_per_second = 1e9;
static int64_t origin_ticks;
static double origin_unix;
static int clock_ready;

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
