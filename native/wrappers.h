/* The wrappers (wrappers.c, wrappers_kernel.c): one per line of hooks.def,
 * all of the same shape. */
#ifndef TFD_WRAPPERS_H
#define TFD_WRAPPERS_H
#include "clock.h"
#include "hooks.h"

#include <errno.h>

#define HOOK(name, ret, params) ret tfd_w_##name params TFD_HIDDEN;
#include "hooks.def"
#undef HOOK

/* forward at once: recording is off */
#define IDLE() TFD_UNLIKELY(!tfd_recording_on())
/* Recording may reach libc (getcwd, statfs, malloc) only when it creates
 * records: those wrappers keep errno explicitly. The data paths call
 * nothing that sets errno (allocation there saves it itself). */
#define KEEP_ERRNO(stmt) do { int e_ = errno; stmt; errno = e_; } while (0)
#define HOT(stmt) stmt
/* time one call of the original into r, t1, t2 */
#define TIMED(call) uint64_t t1 = tfd_ticks(); __typeof__(call) r = (call); uint64_t t2 = tfd_ticks()

#endif
