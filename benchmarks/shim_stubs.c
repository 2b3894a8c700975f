/* For benchmarks only, built into a copy of the shim by
 * benchmarks/stub_shim.py and never into the shipped one: the wrappers'
 * own cost, without the system call or libc work behind them, and what a
 * system call's two halves do to it. tfd_bench_stub(kind) points the
 * originals of pread, pread64 and fread at stubs ("read" everything
 * asked), so a process that does real I/O must not call it:
 *   1  return at once, moving no data;
 *   2  enter the kernel and leave (getppid), moving no data;
 *   3  copy the bytes asked for from a buffer of their own, as a read from
 *      the page cache copies them, without entering the kernel;
 *   4  overwrite the return-stack predictor, as the kernel does on its way
 *      out (x86-64; elsewhere as 1);
 *   5  read 32 KiB of memory of their own (the L1 data cache's size), so
 *      the lines the caller used are likely gone;
 *   6  run 64 KiB of straight-line code of their own (twice the L1
 *      instruction cache), so the caller's instructions are gone from it
 *      and from the decoded-op cache;
 *   7  take 4,096 branches of their own (more than the first-level branch
 *      target buffer holds), in 16 KiB of code;
 *   8  touch one line in each of 256 pages of their own (four times the
 *      first-level data TLB), all at one offset, so few cache sets move;
 *   9  read 1 MiB of memory of their own (the L2 cache's size);
 *  10  the real pread, asked for 64 bytes (the kernel's read path, a small copy);
 *  11  enter the kernel and leave (getppid), then copy 4 KiB as 3 does;
 *  12  the real pread, then load every data line the counting after it
 *      touches (so they are in L1 when the wrapper counts);
 *  13  enter the kernel and leave (getppid), then read 32 KiB as 5 does;
 *  14  enter the kernel and leave (getppid), then run 64 KiB of code as 6 does;
 *  15  the real pread, then the pread wrapper once around the stub itself
 *      (nested, it returns at once): the wrapper's code and data warm again
 *      after the kernel's read path.
 * tfd_bench_stub(0) puts the originals back. tfd_bench_wrapper gives a
 * wrapper's address and tfd_bench_stub_function the stub's, to call them
 * directly. The wrappers are unchanged.
 *
 * tfd_bench_variant(v) gives variants of the pread wrapper, for controlled
 * experiments on what its parts cost around each original (bench_parts.py):
 * the same shape as the shipped one (wrappers.c's DATA_WRAPPER) with one
 * part taken out, added or changed (VARIANTS below). */
#include "attach.h"
#include "fdmap.h"
#include "jump_return.h"
#include "rules_posix.h"
#include "threads.h"
#include "wrappers.h"

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static ssize_t stub_pread(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
    return (ssize_t)count;
}

static ssize_t stub_pread_kernel(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
    syscall(SYS_getppid);
    return (ssize_t)count;
}

static char source[1 << 16];

static ssize_t stub_pread_copy(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)offset;
    if (count > sizeof(source))
        count = sizeof(source);
    memcpy(buf, source, count);
    __asm__ volatile("" ::"r"(buf) : "memory");
    return (ssize_t)count;
}

static size_t stub_fread(void *ptr, size_t size, size_t nmemb, FILE *stream)
{
    (void)ptr, (void)size, (void)stream;
    return nmemb;
}

static ssize_t stub_pread_rsb(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
#if defined(__x86_64__)
    /* 32 calls that never return: each pushes a prediction the next ret misses */
    __asm__ volatile(".rept 32\n\tcall 1f\n\tint3\n1:\n\tadd $8, %%rsp\n\t.endr" ::: "memory", "cc");
#endif
    return (ssize_t)count;
}

/* Touch one byte every `stride` bytes of `bytes` from `at`: the stubs
 * below that evict caches or TLB entries differ only in their region */
static void touch(const volatile char *at, size_t bytes, size_t stride)
{
    long sum = 0;
    for (size_t i = 0; i < bytes; i += stride)
        sum += at[i];
    __asm__ volatile("" ::"r"(sum));
}

static ssize_t stub_pread_evict(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
    static volatile char lines[32 << 10];
    touch(lines, sizeof(lines), 64);
    return (ssize_t)count;
}

static ssize_t stub_pread_icache(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
#if defined(__x86_64__)
    /* 8-byte no-ops: 8,192 of them, executed once each */
    __asm__ volatile(".rept 8192\n\t.byte 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00\n\t.endr" ::: "memory");
#endif
    return (ssize_t)count;
}

static ssize_t stub_pread_btb(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
#if defined(__x86_64__)
    /* a taken jump every 4 bytes (2 of jump, 2 of padding) */
    __asm__ volatile(".rept 4096\n\tjmp 1f\n\t.byte 0x66, 0x90\n1:\n\t.endr" ::: "memory", "cc");
#endif
    return (ssize_t)count;
}

static ssize_t stub_pread_tlb(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
    static volatile char pages[256 << 12] __attribute__((aligned(4096)));
    touch(pages + 13 * 64, sizeof(pages) - 13 * 64, 4096);
    return (ssize_t)count;
}

static ssize_t stub_pread_l2(int fd, void *buf, size_t count, off_t offset)
{
    (void)fd, (void)buf, (void)offset;
    static volatile char lines[1 << 20];
    touch(lines, sizeof(lines), 64);
    return (ssize_t)count;
}

static const char *const stubbed[3] = {"pread", "pread64", "fread"};
void *tfd_bench_wrapper(const char *name);
static void *saved[3];

/* the kernel's whole read path with a 64-byte copy: the real pread (the
 * original saved when the stubs went in), asked for 64 bytes */
static ssize_t stub_pread_small(int fd, void *buf, size_t count, off_t offset)
{
    ssize_t (*real)(int, void *, size_t, off_t) = (ssize_t(*)(int, void *, size_t, off_t))saved[0];
    ssize_t r = real(fd, buf, count < 64 ? count : 64, offset);
    return r < 0 ? r : (ssize_t)count;
}

/* a kernel entry and exit and a 4 KiB copy, as a cached read's, without the read's code in between */
static ssize_t stub_pread_kernel_copy(int fd, void *buf, size_t count, off_t offset)
{
    syscall(SYS_getppid);
    return stub_pread_copy(fd, buf, count, offset);
}

/* load every line the counting after a pread touches (the lines of
 * prefetch_update below, the thread's first two, its heatmap slot) */
static void load_update_lines(int fd)
{
    tfd_rec *r = tfd_posix_record(fd);
    if (!r || r == EXCLUDED)
        return;
    tfd_shard *s = shard_ahead(r);
    if (!s)
        return;
    const volatile int64_t *lines[] = {&s->epoch, &s->sum[8], &s->iext[s->epoch & 1].v[0],
                                       (int64_t *)&s->values, (int64_t *)r,
                                       (int64_t *)s->owner, (int64_t *)&s->owner->dir,
                                       s->owner->heat_now.row ? s->owner->heat_now.row : (int64_t *)r};
    int64_t sum = 0;
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++)
        sum += *lines[i];
    __asm__ volatile("" ::"r"(sum));
}

/* the real pread, then the counting's data lines loaded again: what the
 * counting costs after the kernel's read path with its data in L1 */
static ssize_t stub_pread_then_lines(int fd, void *buf, size_t count, off_t offset)
{
    ssize_t (*real)(int, void *, size_t, off_t) = (ssize_t(*)(int, void *, size_t, off_t))saved[0];
    ssize_t r = real(fd, buf, count, offset);
    load_update_lines(fd);
    return r;
}

/* getppid, then 32 KiB of memory of their own read (the L1 data cache):
 * a kernel entry whose caller's data lines are gone */
static ssize_t stub_pread_kernel_evict(int fd, void *buf, size_t count, off_t offset)
{
    syscall(SYS_getppid);
    return stub_pread_evict(fd, buf, count, offset);
}

/* getppid, then 64 KiB of straight-line code of their own run (twice the
 * L1 instruction cache): a kernel entry whose caller's instructions are gone */
static ssize_t stub_pread_kernel_icache(int fd, void *buf, size_t count, off_t offset)
{
    syscall(SYS_getppid);
    return stub_pread_icache(fd, buf, count, offset);
}

/* the real pread, then the shipped pread wrapper once more around the stub
 * kind 1 (its original is this stub, which sees it nested and returns at
 * once): the wrapper's code, its branches and its data are fresh again
 * when the wrapper around this stub counts after the kernel's read path */
static int in_warm_up;
static ssize_t stub_pread_then_wrapper(int fd, void *buf, size_t count, off_t offset)
{
    static ssize_t (*wrapper)(int, void *, size_t, off_t);
    if (in_warm_up)
        return (ssize_t)count;
    if (!wrapper)
        wrapper = (ssize_t(*)(int, void *, size_t, off_t))tfd_bench_wrapper("pread");
    ssize_t (*real)(int, void *, size_t, off_t) = (ssize_t(*)(int, void *, size_t, off_t))saved[0];
    ssize_t r = real(fd, buf, count, offset);
    in_warm_up = 1;
    wrapper(fd, buf, count, offset);
    in_warm_up = 0;
    return r;
}
#define STUB_KINDS 16
static int kind_now;

static void *pread_stub(int kind)
{
    void *stubs[STUB_KINDS] = {(void *)stub_pread, (void *)stub_pread, (void *)stub_pread_kernel,
                               (void *)stub_pread_copy, (void *)stub_pread_rsb, (void *)stub_pread_evict,
                               (void *)stub_pread_icache, (void *)stub_pread_btb, (void *)stub_pread_tlb,
                               (void *)stub_pread_l2, (void *)stub_pread_small, (void *)stub_pread_kernel_copy,
                               (void *)stub_pread_then_lines, (void *)stub_pread_kernel_evict,
                               (void *)stub_pread_kernel_icache, (void *)stub_pread_then_wrapper};
    return stubs[kind];
}

int tfd_bench_stub(int kind)
{
    if (kind < 0 || kind >= STUB_KINDS)
        return -1;
    for (int i = 0; i < 3; i++) {
        const tfd_hook *h = tfd_hook_named(stubbed[i]);
        void *stub = i < 2 ? pread_stub(kind) : (void *)stub_fread;
        if (kind && !kind_now)
            saved[i] = hooks_set_original(h, stub);
        else if (kind)
            hooks_set_original(h, stub);
        else if (kind_now)
            hooks_set_original(h, saved[i]);
    }
    kind_now = kind;
    return 0;
}

void *tfd_bench_wrapper(const char *name)
{
    const tfd_hook *h = tfd_hook_named(name);
    return h ? h->wrapper : NULL;
}

void *tfd_bench_stub_function(const char *name)
{
    if (strcmp(name, "pread") == 0 || strcmp(name, "pread64") == 0)
        return pread_stub(kind_now);
    if (strcmp(name, "fread") == 0)
        return (void *)stub_fread;
    return NULL;
}

/* ------------------------------------------------- the wrapper's parts */

static inline __attribute__((always_inline)) uint64_t ticks_fenced(void)
{
    uint32_t lo, hi;
    __asm__ volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return ((uint64_t)hi << 32) | lo;
}

static inline __attribute__((always_inline)) uint64_t ticks_rdtscp(void)
{
    uint32_t lo, hi, aux;
    __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
    return ((uint64_t)hi << 32) | lo;
}

/* what the post-call path reads and writes, fetched while the call runs */
static inline __attribute__((always_inline)) void prefetch_update(tfd_rec *r, void *ahead)
{
    tfd_shard *s = ahead;
    if (!s)
        return;
    int64_t e = RELAXED_LOAD(s->epoch);     /* the interval it was last updated in: almost always this one */
    __builtin_prefetch(&s->sum[8], 1);
    __builtin_prefetch(&s->iext[e & 1].v[0], 1);
    __builtin_prefetch(&s->values, 1);      /* both value trackers' first entries: one line */
    __builtin_prefetch(r, 1);
}

static volatile int64_t sink;

/* BACK: how the wrapper returns after the call (plain `return`, or the
 * jump back below); BEFORE: after the lookups, before the first clock
 * read; T1, T2: the clock reads; RECORD: the counting */
#define VARIANT_BACK(name, BACK, BEFORE, T1, T2, RECORD)                       \
    __attribute__((flatten)) static ssize_t name(int fd, void *buf, size_t n, off_t off) \
    {                                                                        \
        tfd_rec *rec;                                                        \
        if (IDLE() || !(rec = tfd_posix_record(fd)) || rec == EXCLUDED)      \
            return tfd_real_pread(fd, buf, n, off);                          \
        void *ahead = tfd_posix_data_ahead(rec);                             \
        BEFORE;                                                              \
        uint64_t t1 = T1;                                                    \
        ssize_t r = tfd_real_pread(fd, buf, n, off);                         \
        uint64_t t2 = T2;                                                    \
        if (r >= 0) {                                                        \
            RECORD;                                                          \
        }                                                                    \
        BACK(r);                                                             \
    }
#define RET_RETURN(r) return (r)
#define VARIANT(name, ...) VARIANT_BACK(name, RET_RETURN, __VA_ARGS__)
#define COUNT tfd_posix_read_rec(rec, ahead, r, off, TFD_DATA_FLAGS(1, ((uintptr_t)buf % 8) == 0), t1, t2)
#define NOTHING ((void)0)

VARIANT(v_copy, NOTHING, tfd_ticks(), tfd_ticks(), COUNT)
VARIANT(v_prefetch, prefetch_update(rec, ahead), tfd_ticks(), tfd_ticks(), COUNT)
VARIANT(v_clock_only, NOTHING, tfd_ticks(), tfd_ticks(), sink = (int64_t)(t2 - t1) + (ahead != NULL))
/* the counting with times inside the thread's newest heatmap bin, as real ones are */
#define FROZEN (ahead ? ((tfd_shard *)ahead)->owner->heat_now.lo : 0)
VARIANT(v_count_no_clock, NOTHING, FROZEN, t1 + 1, COUNT)
VARIANT(v_lookup_only, NOTHING, 0, 0, sink = (ahead != NULL) + (int64_t)(t2 - t1))
VARIANT(v_lfence, NOTHING, ticks_fenced(), ticks_fenced(), COUNT)
VARIANT(v_rdtscp, NOTHING, ticks_rdtscp(), ticks_rdtscp(), COUNT)

/* The same wrappers, back by an indirect jump instead of `ret` whatever
 * the kernel's mitigation (jump_return.h; the shipped wrapper jumps only
 * where the kernel says Safe RET) */
#if defined(__x86_64__)
#define JMP_RETURN(r) return tfd_return_by_jump((r), __builtin_return_address(0))
#else
#define JMP_RETURN(r) return (r)
#endif
#define VARIANT_JMP(name, ...) VARIANT_BACK(name, JMP_RETURN, __VA_ARGS__)
VARIANT_JMP(v_copy_jmp, NOTHING, tfd_ticks(), tfd_ticks(), COUNT)
VARIANT_JMP(v_lookup_only_jmp, NOTHING, 0, 0, sink = (ahead != NULL) + (int64_t)(t2 - t1))

/* the shipped wrappers' choice (jump_return.h), switched for an A/B in one process */
int tfd_bench_set_jump_return(int on)
{
    return jump_return_set(on);
}

/* 0: the shipped wrapper; then the variants above, in order; 10 the shipped
 * wrapper again (bench_parts.py switches its jump back off around it) */
void *tfd_bench_variant(int v)
{
    void *variants[] = {NULL, (void *)v_copy, (void *)v_prefetch, (void *)v_clock_only, (void *)v_count_no_clock,
                        (void *)v_lookup_only, (void *)v_lfence, (void *)v_rdtscp,
                        (void *)v_copy_jmp, (void *)v_lookup_only_jmp};
    if (v == 0 || v == 10)      /* 10: the shipped wrapper, run with its jump back off */
        return tfd_bench_wrapper("pread");
    if (v < 0 || v >= (int)(sizeof(variants) / sizeof(variants[0])))
        return NULL;
    return variants[v];
}
