/* The data wrappers' jump back after a system call (jump_return.h): the
 * choice, and the three instructions that make it. */
#include "jump_return.h"

#include <stdio.h>

#include "public.h"

int tfd_jump_return;
static int decided;

#if defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>

/* rdi: r, rsi: where the wrapper's caller continues. CFI says where the
 * return address is at each instruction, for unwinders and debuggers. */
__asm__(".text\n"
        "\t.p2align 4\n"
        "\t.globl tfd_return_by_jump\n"
        "\t.hidden tfd_return_by_jump\n"
        "\t.type tfd_return_by_jump, @function\n"
        "tfd_return_by_jump:\n"
        "\t.cfi_startproc\n"
        "\tmov %rdi, %rax\n"
        "\tcmp (%rsp), %rsi\n"
        "\tjne 1f\n"
        "\t.cfi_remember_state\n"
        "\tadd $8, %rsp\n"
        "\t.cfi_adjust_cfa_offset -8\n"
        "\t.cfi_register 16, 4\n"          /* the return address (column 16) is in rsi (4) */
        "\tjmp *%rsi\n"
        "\t.cfi_restore_state\n"
        "1:\n"
        "\tret\n"
        "\t.cfi_endproc\n"
        "\t.size tfd_return_by_jump, .-tfd_return_by_jump\n");

/* the calling thread runs with a user-space shadow stack (Linux 6.6+) */
static int shadow_stack_on(void)
{
    unsigned long features = 0;
    /* ARCH_SHSTK_STATUS; an older kernel fails it: no shadow stack there */
    if (syscall(SYS_arch_prctl, 0x5005, &features) != 0)
        return 0;
    return (features & 1) != 0;
}

static int kernel_says_safe_ret(void)
{
    FILE *f = fopen("/sys/devices/system/cpu/vulnerabilities/spec_rstack_overflow", "re");
    char line[128] = "";
    if (!f)
        return 0;
    if (!fgets(line, sizeof(line), f))
        line[0] = 0;
    fclose(f);
    /* "Mitigation: Safe RET", or "Vulnerable: Safe RET, no microcode" (the
     * thunk without the microcode's IBPB): the kernel returns through it */
    return strstr(line, "Safe RET") != NULL;
}
#endif

void jump_return_init(void)
{
    if (decided)
        return;
#if defined(__x86_64__)
    const char *knob = getenv("TFDARSHAN_DEBUG_RETURN_BY_JUMP");
    int want = knob && (knob[0] == '0' || knob[0] == '1') ? knob[0] == '1' : kernel_says_safe_ret();
    tfd_jump_return = want && !shadow_stack_on();
#endif
    decided = 1;
}

int jump_return_set(int on)
{
    int was = tfd_jump_return;
#if defined(__x86_64__)
    tfd_jump_return = on && !shadow_stack_on();
#else
    (void)on;
#endif
    decided = 1;
    return was;
}

int tfd_returns_by_jump(void)
{
    return tfd_jump_return;
}
