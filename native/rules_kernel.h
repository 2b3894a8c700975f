/* I/O Darshan's wrappers never see, counted in our own fields
 * (KERNEL_IO_FIELDS in fields.h): kernel-side copies and mapped files
 * (rules_kernel.c). */
#ifndef TFD_RULES_KERNEL_H
#define TFD_RULES_KERNEL_H
#include "base.h"

#include <stddef.h>

typedef struct tfd_rec tfd_rec;

enum { TFD_KC_COPY_FILE_RANGE, TFD_KC_SENDFILE, TFD_KC_SPLICE };

/* rules_kernel.c's: read them through the functions below */
extern int tfd_kernel_io TFD_HIDDEN;          /* follow them (attach's kernel_io) */
extern int tfd_mapped_count TFD_HIDDEN;       /* mappings followed */

static inline int kernel_io_on(void) { return RELAXED_LOAD(tfd_kernel_io); }
/* any mapping followed: munmap's fast path */
static inline int mapped_any(void) { return __atomic_load_n(&tfd_mapped_count, __ATOMIC_RELAXED) != 0; }

void tfd_kernel_copy(int fd_in, int fd_out, int64_t bytes, int mechanism, uint64_t t1, uint64_t t2) TFD_HIDDEN;
void tfd_mapped_created(void *addr, size_t len, int prot, int fd, int64_t offset) TFD_HIDDEN;
void *tfd_mapped_hold(void *addr, size_t len) TFD_HIDDEN;
void tfd_mapped_release(void *held, void *addr, size_t len, int done) TFD_HIDDEN;

/* attach: follow them or not, and the mappings made while detached */
void tfd_mapped_start(int kernel_io) TFD_HIDDEN;
/* detach: a last sample, then nothing is followed */
void tfd_mapped_stop(void) TFD_HIDDEN;
/* every collect, before the interval closes */
void tfd_mapped_sample_all(void) TFD_HIDDEN;
void tfd_mapped_prepare_fork(void) TFD_HIDDEN;
void tfd_mapped_parent_fork(void) TFD_HIDDEN;
/* remap: old record index -> the child's record (NULL: none) */
void tfd_mapped_after_fork(tfd_rec **remap) TFD_HIDDEN;

#endif
