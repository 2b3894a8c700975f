/* How a data wrapper goes back to its caller after the system call.
 *
 * A kernel that returns through AMD's Safe RET thunk (the SRSO mitigation
 * of Zen 3 and 4: sysfs's spec_rstack_overflow says "Safe RET") makes each
 * of its own returns a call into the thunk, which then skips the thunk's
 * return address: every kernel function it returns from leaves one entry
 * more on the CPU's return-stack predictor than it takes. A read's path
 * through the kernel so overwrites the whole return stack (32 entries on
 * Zen 3), and every `ret` after the call to a frame made before it is
 * mispredicted: libc's own (which a program pays without us) and then our
 * wrapper's (about 7-9 ns here; benchmarks/bench_parts.py). There, the
 * data wrappers go back by an indirect jump, which the indirect-branch
 * predictor gets right for a given caller, instead of `ret`.
 *
 * Elsewhere the return stack still holds our caller after the call, and
 * a jump back would leave the caller's entry on it, mispredicting every
 * later return of the caller's own frames: so only where the kernel says
 * Safe RET, never under a shadow stack (a jump back there would fault the
 * caller's own `ret`), and only on x86-64. TFDARSHAN_DEBUG_RETURN_BY_JUMP=0
 * or 1 overrides the choice (1 still never under a shadow stack). */
#ifndef TFD_JUMP_RETURN_H
#define TFD_JUMP_RETURN_H
#include "base.h"

#include <sys/types.h>

/* set once, by jump_return_init, before any wrapper records */
extern int tfd_jump_return TFD_HIDDEN;

/* decide once (the first attach) */
void jump_return_init(void) TFD_HIDDEN;
/* set the choice, returning the previous one (benchmarks/shim_stubs.c, for
 * an A/B of the shipped wrappers in one process); 1 never under a shadow stack */
int jump_return_set(int on) TFD_HIDDEN;

#if defined(__x86_64__)
/* Return r to `to` by a jump, when `to` is the return address on top of
 * the stack (we were reached by a sibling call from the function whose
 * caller `to` returns to); otherwise, a plain `ret` with r, so a compiler
 * that made an ordinary call of it still gets r back where it called. */
ssize_t tfd_return_by_jump(ssize_t r, void *to) TFD_HIDDEN;

/* the last statement of a wrapper whose original entered the kernel: must
 * be in tail position, so the compiler makes it a sibling call (jmp) */
#define RETURN_AFTER_KERNEL(r)                                               \
    do {                                                                     \
        if (tfd_jump_return)                                                 \
            return tfd_return_by_jump((r), __builtin_return_address(0));     \
        return (r);                                                          \
    } while (0)
#else
#define RETURN_AFTER_KERNEL(r) return (r)
#endif

#endif
