/* tail_read(fd, buf, count): a jump to read() through this library's GOT.
 * No frame of this library stays on the stack, so the library can be
 * unloaded while a thread is inside read() (inside our wrapper) without
 * anything returning into unmapped code. */
#if defined(__x86_64__)
    .text
    .globl tail_read
    .type tail_read, @function
tail_read:
    jmp read@PLT
    .size tail_read, .-tail_read
#elif defined(__aarch64__)
    .text
    .globl tail_read
    .type tail_read, %function
tail_read:
    b read
    .size tail_read, .-tail_read
#endif
    .section .note.GNU-stack,"",%progbits
