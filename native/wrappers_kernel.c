/* Wrappers for the calls that move file data without a read or write the
 * process makes itself: mmap/munmap (the mapped pages are sampled in
 * rules_kernel.c) and the kernel-side copies. Same shape as wrappers.c:
 * forward at once when detached, time the original, record only what
 * succeeded, hand back its return value and errno untouched. With
 * kernel_io off (attach(kernel_io=False), TFDARSHAN_KERNEL_IO=0) they only
 * forward, apart from Darshan's own mmap counter. */
#include "wrappers.h"

#include <sys/mman.h>

#include "rules_kernel.h"
#include "rules_posix.h"

/* ------------------------------------------------------------- mappings */

/* Darshan counts the mmap (POSIX_MMAPS); we follow the mapping's pages. A
 * MAP_FIXED mapping replaces what was there: that is sampled first. */
#define MMAP_WRAPPER(name, offtype)                                                         \
    void *tfd_w_##name(void *addr, size_t len, int prot, int flags, int fd, offtype off)    \
    {                                                                                       \
        if (IDLE())                                                                         \
            return tfd_real_##name(addr, len, prot, flags, fd, off);                        \
        void *held = NULL;                                                                  \
        if (flags & MAP_FIXED)                                                              \
            KEEP_ERRNO(held = tfd_mapped_hold(addr, len));                                  \
        void *r = tfd_real_##name(addr, len, prot, flags, fd, off);                         \
        if (held)                                                                           \
            KEEP_ERRNO(tfd_mapped_release(held, addr, len, r != MAP_FAILED));               \
        if (fd >= 0 && !(flags & MAP_ANONYMOUS) && r != MAP_FAILED) {                       \
            KEEP_ERRNO(tfd_posix_mmap(fd));                                                 \
            if (kernel_io_on())                                                             \
                KEEP_ERRNO(tfd_mapped_created(r, len, prot, fd, (int64_t)off));             \
        }                                                                                   \
        return r;                                                                           \
    }
MMAP_WRAPPER(mmap, off_t)
MMAP_WRAPPER(mmap64, off64_t)

/* The pages are gone after the call: the mappings it touches are sampled
 * before it, and the table is held across it (see tfd_mapped_hold). */
int tfd_w_munmap(void *addr, size_t len)
{
    if (IDLE() || !mapped_any())
        return tfd_real_munmap(addr, len);
    void *held;
    KEEP_ERRNO(held = tfd_mapped_hold(addr, len));
    int r = tfd_real_munmap(addr, len);
    KEEP_ERRNO(tfd_mapped_release(held, addr, len, r == 0));
    return r;
}

/* ------------------------------------------------------- kernel copies */

/* one call: its bytes were read from fd_in and written to fd_out */
#define COPY_WRAPPER(name, params, args, fd_in, fd_out, mechanism)                          \
    ssize_t tfd_w_##name params                                                             \
    {                                                                                       \
        if (IDLE() || !kernel_io_on())                                                     \
            return tfd_real_##name args;                                                    \
        TIMED(tfd_real_##name args);                                                        \
        if (r >= 0)                                                                         \
            KEEP_ERRNO(tfd_kernel_copy(fd_in, fd_out, r, mechanism, t1, t2));               \
        return r;                                                                           \
    }

COPY_WRAPPER(copy_file_range,
             (int fd_in, off64_t *off_in, int fd_out, off64_t *off_out, size_t len, unsigned int flags),
             (fd_in, off_in, fd_out, off_out, len, flags), fd_in, fd_out, TFD_KC_COPY_FILE_RANGE)
COPY_WRAPPER(sendfile, (int out_fd, int in_fd, off_t *offset, size_t count), (out_fd, in_fd, offset, count),
             in_fd, out_fd, TFD_KC_SENDFILE)
COPY_WRAPPER(sendfile64, (int out_fd, int in_fd, off64_t *offset, size_t count), (out_fd, in_fd, offset, count),
             in_fd, out_fd, TFD_KC_SENDFILE)
/* one end is a pipe, which is never recorded: the other end's file gets the bytes */
COPY_WRAPPER(splice,
             (int fd_in, off64_t *off_in, int fd_out, off64_t *off_out, size_t len, unsigned int flags),
             (fd_in, off_in, fd_out, off_out, len, flags), fd_in, fd_out, TFD_KC_SPLICE)
