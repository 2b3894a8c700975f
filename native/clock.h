/* The shim's clock: raw ticks (the TSC where the kernel trusts it as its
 * clock source, else CLOCK_MONOTONIC nanoseconds), read inline by every
 * timed wrapper; clock.c owns the calibration. */
#ifndef TFD_CLOCK_H
#define TFD_CLOCK_H
#include "base.h"

#include <time.h>

/* set once, by tfd_clock_init, before any wrapper records */
extern int tfd_clock_tsc TFD_HIDDEN;

static inline uint64_t tfd_ticks(void)
{
#if defined(__x86_64__)
    if (TFD_LIKELY(tfd_clock_tsc)) {
        uint32_t lo, hi;
        __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
        return ((uint64_t)hi << 32) | lo;
    }
#elif defined(__aarch64__)
    if (TFD_LIKELY(tfd_clock_tsc)) {
        uint64_t v;
        __asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
        return v;
    }
#endif
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* calibrate once (the first attach); tfd_clock() (api.h) reports it */
void tfd_clock_init(void) TFD_HIDDEN;

#endif
