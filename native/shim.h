/* Declarations shared by the shim's C files (not seen by Python). */
#ifndef TFD_SHIM_H
#define TFD_SHIM_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "api.h"

#define TFD_LIKELY(x) __builtin_expect(!!(x), 1)
#define TFD_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TFD_HIDDEN __attribute__((visibility("hidden")))

/* The originals each wrapper forwards to, and the wrappers themselves. */
#define HOOK(name, ret, params) \
    extern ret(*tfd_real_##name) params TFD_HIDDEN; \
    ret tfd_w_##name params TFD_HIDDEN;
#include "hooks.def"
#undef HOOK

typedef struct tfd_hook {
    const char *name;
    void *wrapper;
    void **real;
} tfd_hook;

extern tfd_hook tfd_hooks[] TFD_HIDDEN;
extern const int tfd_n_hooks TFD_HIDDEN;

/* ---- time: raw ticks (TSC where it is invariant, else CLOCK_MONOTONIC ns) */
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
void tfd_clock_init(void) TFD_HIDDEN;

/* ---- the shape every wrapper shares (wrappers.c, wrappers_kernel.c) */
#define IDLE() TFD_UNLIKELY(!tfd_attached)
/* Recording may reach libc (getcwd, statfs, malloc) only when it creates
 * records: those wrappers keep errno explicitly. The data paths call
 * nothing that sets errno (allocation there saves it itself). */
#define KEEP_ERRNO(stmt) do { int e_ = errno; stmt; errno = e_; } while (0)
#define HOT(stmt) stmt
/* time one call of the original into r, t1, t2 */
#define TIMED(call) uint64_t t1 = tfd_ticks(); __typeof__(call) r = (call); uint64_t t2 = tfd_ticks()

/* ---- elfpatch.c: rewrite and restore GOT slots */
int tfd_patch_loaded_objects(void) TFD_HIDDEN;   /* patches objects not yet patched */
int tfd_unpatch_all(void) TFD_HIDDEN;
void tfd_patch_set_chain_base(const void *addr_in_chain_library) TFD_HIDDEN;
void tfd_patch_atfork_child(void) TFD_HIDDEN;

/* ---- maps.c: memory protection for the patcher */
void tfd_maps_load(void) TFD_HIDDEN;                 /* read /proc/self/maps */
extern int64_t tfd_maps_bytes TFD_HIDDEN;            /* bytes it has read so far */
int tfd_maps_prot(uintptr_t addr) TFD_HIDDEN;        /* PROT_* of addr, -1 if unmapped */
int tfd_maps_write(void **slot, void *value) TFD_HIDDEN;

/* ---- records_*.c: the recording runtime */
extern volatile int tfd_attached TFD_HIDDEN;
int tfd_records_init(const tfd_config *config, char *err, size_t err_len) TFD_HIDDEN;
void tfd_records_sync_open_fds(void) TFD_HIDDEN;
int tfd_recording(void) TFD_HIDDEN;

void tfd_posix_open(int fd, int dirfd, const char *path, int64_t mode, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_refopen(int oldfd, int newfd, int is_dup, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_fileno(FILE *stream, int fd, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_read(int fd, int64_t ret, int pflag, int64_t off, int aligned, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_write(int fd, int64_t ret, int pflag, int64_t off, int aligned, uint64_t t1, uint64_t t2) TFD_HIDDEN;
/* The data wrappers look the descriptor's record up before the call: an
 * untracked descriptor's calls are then not timed at all, and a tracked
 * one's are counted against the file the call was made on. Six arguments,
 * all in registers. */
typedef struct tfd_rec tfd_rec;
/* what a descriptor or stream of an excluded path maps to (records.h) */
extern tfd_rec tfd_excluded TFD_HIDDEN;
#define TFD_AT_OFFSET 1         /* pread/pwrite: the offset is explicit */
#define TFD_MEM_ALIGNED 2       /* the buffer is 8-byte aligned */
#define TFD_DATA_FLAGS(pflag, aligned) (((pflag) ? TFD_AT_OFFSET : 0) | ((aligned) ? TFD_MEM_ALIGNED : 0))
/* fd -> POSIX record, two levels of 4096 (records_table.c fills it) */
#define FD_CHUNK 4096
#define FD_TOP 256              /* fds up to 1,048,575 are tracked */
extern tfd_rec **fd_posix[FD_TOP] TFD_HIDDEN;
static inline tfd_rec *tfd_posix_record(int fd)
{
    if ((unsigned)fd >= FD_TOP * FD_CHUNK)
        return NULL;
    tfd_rec **chunk = __atomic_load_n(&fd_posix[(unsigned)fd / FD_CHUNK], __ATOMIC_ACQUIRE);
    return chunk ? __atomic_load_n(&chunk[(unsigned)fd % FD_CHUNK], __ATOMIC_ACQUIRE) : NULL;
}
void tfd_posix_read_rec(tfd_rec *r, int64_t ret, int64_t off, int flags, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_write_rec(tfd_rec *r, int64_t ret, int64_t off, int flags, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_seek(int fd, int64_t newoff, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_stat_path(int dirfd, const char *path, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_stat_fd(int fd, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_mmap(int fd) TFD_HIDDEN;
void tfd_posix_sync(int fd, int data_only, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void *tfd_posix_close_begin(int fd) TFD_HIDDEN;
void tfd_posix_close_end(void *token, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_posix_rename(const char *oldpath, const char *newpath, uint64_t t1, uint64_t t2) TFD_HIDDEN;

void tfd_stdio_open(FILE *stream, const char *path, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_stdio_fdopen(FILE *stream, int fd, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_stdio_read(FILE *stream, int64_t bytes, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_stdio_write(FILE *stream, int64_t bytes, int is_flush, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_stdio_seek(FILE *stream, int64_t newoff, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void *tfd_stdio_close_begin(FILE *stream) TFD_HIDDEN;
void tfd_stdio_close_end(void *token, uint64_t t1, uint64_t t2) TFD_HIDDEN;

/* ---- records_kernel.c: kernel-side copies and mapped files, in our own fields */
enum { TFD_KC_COPY_FILE_RANGE, TFD_KC_SENDFILE, TFD_KC_SPLICE };
extern int tfd_kernel_io TFD_HIDDEN;          /* follow them (attach's kernel_io) */
extern int tfd_mapped_count TFD_HIDDEN;       /* mappings followed */
void tfd_kernel_copy(int fd_in, int fd_out, int64_t bytes, int mechanism, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_mapped_created(void *addr, size_t len, int prot, int fd, int64_t offset) TFD_HIDDEN;
void *tfd_mapped_hold(void *addr, size_t len) TFD_HIDDEN;
void tfd_mapped_release(void *held, void *addr, size_t len, int done) TFD_HIDDEN;
void tfd_mapped_sample_all(void) TFD_HIDDEN;
void tfd_mapped_sync(void) TFD_HIDDEN;
void tfd_mapped_stop(void) TFD_HIDDEN;

/* ---- darshan_hash.c */
uint64_t tfd_hash64(const unsigned char *key, size_t len) TFD_HIDDEN;

#endif
