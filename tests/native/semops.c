/* An interpreter of single libc I/O calls for tests/capture/test_semantics.py.
 *
 * Every call is made from this library, so it goes through this library's
 * GOT, which the shim patches. sem_op() performs exactly one hooked call,
 * chosen by op, and reports its raw return value, the errno right after it
 * (set to 0 before), the stream's EOF/error flags and any data it produced.
 * Descriptors and streams are named by slot, so one sequence of operations
 * can be replayed in two directory trees and the outcomes compared.
 *
 * Blocking calls cannot hang a test: while a call runs, a helper thread
 * sends SIGUSR2 to the calling thread every 2 ms, and the handler is
 * installed without SA_RESTART, so a call that blocks fails with EINTR.
 * (Not SIGALRM with setitimer: that signal is process-directed, may land on
 * another thread, and pytest-timeout owns it.) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* exported by glibc but declared only under _FORTIFY_SOURCE or not at all */
int __open_2(const char *, int);
int __open64_2(const char *, int);
int __openat_2(int, const char *, int);
int __openat64_2(int, const char *, int);
ssize_t __read_chk(int, void *, size_t, size_t);
ssize_t __pread_chk(int, void *, size_t, off_t, size_t);
ssize_t __pread64_chk(int, void *, size_t, off64_t, size_t);
size_t __fread_chk(void *, size_t, size_t, size_t, FILE *);
int __xstat(int, const char *, struct stat *);
int __lxstat(int, const char *, struct stat *);
int __fxstat(int, int, struct stat *);
int __xstat64(int, const char *, struct stat64 *);
int __lxstat64(int, const char *, struct stat64 *);
int __fxstat64(int, int, struct stat64 *);
int __fxstatat(int, int, const char *, struct stat *, int);
int __fxstatat64(int, int, const char *, struct stat64 *, int);
int _IO_getc(FILE *);
int _IO_putc(int, FILE *);

#if defined(__x86_64__)
#define STAT_VER 1              /* _STAT_VER_LINUX */
#else
#define STAT_VER 0
#endif

/* X(op name, libc symbol it calls, or NULL for set-up helpers) */
#define OPS(X)                                                                  \
    X(open, "open") X(open64, "open64") X(__open_2, "__open_2")                 \
    X(__open64_2, "__open64_2") X(openat, "openat") X(openat64, "openat64")     \
    X(__openat_2, "__openat_2") X(__openat64_2, "__openat64_2")                 \
    X(creat, "creat") X(creat64, "creat64") X(mkstemp, "mkstemp")               \
    X(mkostemp, "mkostemp") X(mkstemps, "mkstemps") X(mkostemps, "mkostemps")   \
    X(close, "close") X(dup, "dup") X(dup2, "dup2") X(dup3, "dup3")             \
    X(fcntl_dupfd, "fcntl") X(fcntl64_dupfd, "fcntl64")                         \
    X(fcntl_getfl, "fcntl") X(fcntl_setfl, "fcntl") X(fileno, "fileno")         \
    X(pipe, NULL)                                                               \
    X(read, "read") X(__read_chk, "__read_chk") X(pread, "pread")               \
    X(pread64, "pread64") X(__pread_chk, "__pread_chk")                         \
    X(__pread64_chk, "__pread64_chk") X(readv, "readv") X(preadv, "preadv")     \
    X(preadv64, "preadv64") X(preadv2, "preadv2") X(preadv64v2, "preadv64v2")   \
    X(write, "write") X(pwrite, "pwrite") X(pwrite64, "pwrite64")               \
    X(writev, "writev") X(pwritev, "pwritev") X(pwritev64, "pwritev64")         \
    X(pwritev2, "pwritev2") X(pwritev64v2, "pwritev64v2")                       \
    X(lseek, "lseek") X(lseek64, "lseek64") X(fsync, "fsync")                   \
    X(fdatasync, "fdatasync") X(mmap, "mmap") X(mmap64, "mmap64")               \
    X(munmap, "munmap") X(copy_file_range, "copy_file_range")                   \
    X(sendfile, "sendfile") X(sendfile64, "sendfile64") X(splice, "splice")     \
    X(posix_fadvise, "posix_fadvise") X(posix_fadvise64, "posix_fadvise64")     \
    X(stat, "stat") X(lstat, "lstat") X(fstat, "fstat") X(stat64, "stat64")     \
    X(lstat64, "lstat64") X(fstat64, "fstat64") X(fstatat, "fstatat")           \
    X(fstatat64, "fstatat64") X(statx, "statx") X(__xstat, "__xstat")           \
    X(__lxstat, "__lxstat") X(__fxstat, "__fxstat") X(__xstat64, "__xstat64")   \
    X(__lxstat64, "__lxstat64") X(__fxstat64, "__fxstat64")                     \
    X(__fxstatat, "__fxstatat") X(__fxstatat64, "__fxstatat64")                 \
    X(rename, "rename") X(renameat, "renameat") X(unlink, "unlink")             \
    X(unlinkat, "unlinkat") X(remove, "remove") X(truncate, "truncate")         \
    X(truncate64, "truncate64") X(readlink, "readlink")                         \
    X(readlinkat, "readlinkat") X(realpath, "realpath")                         \
    X(canonicalize_file_name, "canonicalize_file_name")                         \
    X(fopen, "fopen") X(fopen64, "fopen64") X(fdopen, "fdopen")                 \
    X(freopen, "freopen") X(freopen64, "freopen64") X(fclose, "fclose")         \
    X(fread, "fread") X(__fread_chk, "__fread_chk") X(fwrite, "fwrite")         \
    X(fseek, "fseek") X(fseeko, "fseeko") X(fseeko64, "fseeko64")               \
    X(ftell, "ftell") X(rewind, "rewind") X(fflush, "fflush")                   \
    X(fflush_all, "fflush") X(fgets, "fgets") X(fputs, "fputs")                 \
    X(fgetc, "fgetc") X(getc, "getc") X(_IO_getc, "_IO_getc")                   \
    X(fputc, "fputc") X(putc, "putc") X(_IO_putc, "_IO_putc")                   \
    X(fprintf, "fprintf") X(vfprintf, "vfprintf")

enum {
#define X(name, sym) OP_##name,
    OPS(X)
#undef X
    N_OPS
};
static const char *op_names[] = {
#define X(name, sym) #name,
    OPS(X)
#undef X
};
static const char *op_symbols[] = {
#define X(name, sym) sym,
    OPS(X)
#undef X
};

const char *sem_op_name(int op) { return op >= 0 && op < N_OPS ? op_names[op] : NULL; }
const char *sem_op_symbol(int op) { return op >= 0 && op < N_OPS ? op_symbols[op] : NULL; }

/* ------------------------------------------------------------- slots */

#define N_FD_SLOTS 8
#define N_STREAM_SLOTS 4
#define SLOT_MINUS_ONE (-1)     /* the fd -1 */
#define SLOT_UNUSED (-2)        /* a large fd nobody has open */
#define SLOT_ROOT (-3)          /* the directory the run works in */
#define UNUSED_FD 1048575       /* beyond any RLIMIT_NOFILE here */
#define DUP_TARGET_BASE 900     /* dup2/dup3 onto a slot that never held an fd */
#define SKIPPED LONG_MIN        /* the op named an empty stream slot: nothing called */
#define MAX_OWNED 4096

static int fd_of[N_FD_SLOTS];   /* -1: never set; a closed fd stays (stale) */
static FILE *stream_of[N_STREAM_SLOTS];
static int owned_fds[MAX_OWNED], n_owned_fds;
static FILE *live_streams[MAX_OWNED];
static int n_live_streams;
static int root_fd = -1;
static char root[PATH_MAX];

static int fd_arg(int slot)
{
    if (slot == SLOT_MINUS_ONE)
        return -1;
    if (slot == SLOT_UNUSED)
        return UNUSED_FD;
    if (slot == SLOT_ROOT)
        return root_fd;
    return slot >= 0 && slot < N_FD_SLOTS ? fd_of[slot] : -1;
}

/* a new descriptor: name it by slot and close it when the run ends */
static void keep_fd(int slot, long fd)
{
    if (fd < 0)
        return;
    if (slot >= 0 && slot < N_FD_SLOTS)
        fd_of[slot] = (int)fd;
    if (n_owned_fds < MAX_OWNED)
        owned_fds[n_owned_fds++] = (int)fd;
}

static void forget_stream(FILE *f)
{
    for (int i = 0; i < n_live_streams; i++)
        if (live_streams[i] == f) {
            live_streams[i] = live_streams[--n_live_streams];
            break;
        }
    for (int i = 0; i < N_STREAM_SLOTS; i++)
        if (stream_of[i] == f)
            stream_of[i] = NULL;
}

static void keep_stream(int slot, FILE *f)
{
    if (!f)
        return;
    if (slot >= 0 && slot < N_STREAM_SLOTS)
        stream_of[slot] = f;
    if (n_live_streams < MAX_OWNED)
        live_streams[n_live_streams++] = f;
}

static const char *in_root(char *out, const char *name)
{
    if (!name)
        return NULL;
    snprintf(out, PATH_MAX, "%s/%s", root, name);
    return out;
}

/* ------------------------------------------------------ the interrupter */

static pthread_mutex_t irq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t irq_cond = PTHREAD_COND_INITIALIZER;
static pthread_t irq_target;
static int irq_armed, irq_started;
static struct sigaction saved_action;

static void on_interrupt(int sig) { (void)sig; }

/* Sends are made holding the lock and only while armed, so once disarm()
 * returns no further signal is sent. */
static void *interrupter(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&irq_lock);
    for (;;) {
        while (!irq_armed)
            pthread_cond_wait(&irq_cond, &irq_lock);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 2 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&irq_cond, &irq_lock, &until) == ETIMEDOUT && irq_armed)
            pthread_kill(irq_target, SIGUSR2);
    }
    return NULL;
}

static void arm(void)
{
    pthread_mutex_lock(&irq_lock);
    irq_target = pthread_self();
    irq_armed = 1;
    pthread_cond_broadcast(&irq_cond);
    pthread_mutex_unlock(&irq_lock);
}

static void disarm(void)
{
    pthread_mutex_lock(&irq_lock);
    irq_armed = 0;
    pthread_cond_broadcast(&irq_cond);
    pthread_mutex_unlock(&irq_lock);
}

/* ------------------------------------------------------------ the run */

/* Start a run in directory `dir`: empty slots, the handler installed. */
int sem_begin(const char *dir)
{
    if (!irq_started) {
        pthread_t t;
        if (pthread_create(&t, NULL, interrupter, NULL))
            return -1;
        pthread_detach(t);
        irq_started = 1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;     /* no SA_RESTART: blocked calls fail */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR2, &sa, &saved_action))
        return -1;
    for (int i = 0; i < N_FD_SLOTS; i++)
        fd_of[i] = -1;
    for (int i = 0; i < N_STREAM_SLOTS; i++)
        stream_of[i] = NULL;
    n_owned_fds = n_live_streams = 0;
    snprintf(root, sizeof root, "%s", dir);
    root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return root_fd >= 0 ? 0 : -1;
}

/* End a run: close whatever it left open, put the old handler back. */
int sem_end(void)
{
    arm();                              /* fclose may flush into a full pipe */
    while (n_live_streams > 0) {
        FILE *f = live_streams[0];
        forget_stream(f);
        fclose(f);
    }
    for (int i = 0; i < n_owned_fds; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++)
            seen |= owned_fds[j] == owned_fds[i];
        if (!seen)
            close(owned_fds[i]);        /* EBADF for those already closed */
    }
    disarm();
    close(root_fd);
    root_fd = -1;
    /* a signal sent just before disarm() is delivered when this system
     * call returns, while our handler is still installed */
    sigset_t pending;
    sigpending(&pending);
    return sigaction(SIGUSR2, &saved_action, NULL);
}

/* ------------------------------------------------------------- helpers */

/* size, type and permissions: the stat fields two identical trees share
 * (not inodes or times; and a directory's size depends on the file
 * system's history, so it is left out) */
#define TYPE_AND_PERMS (S_IFMT | 07777)
static long pack_stat(char *buf, long long size, unsigned mode)
{
    int64_t v[2] = {S_ISDIR(mode) ? 0 : size, mode & TYPE_AND_PERMS};
    memcpy(buf, v, sizeof v);
    return sizeof v;
}

static long pack_statx(char *buf, const struct statx *sx)
{
    int64_t v[3] = {S_ISDIR(sx->stx_mode) ? 0 : (int64_t)sx->stx_size, sx->stx_mode & TYPE_AND_PERMS,
                    sx->stx_mask & (STATX_TYPE | STATX_SIZE)};
    memcpy(buf, v, sizeof v);
    return sizeof v;
}

/* the count bytes of buf as three consecutive pieces (none if count is 0) */
static int split3(struct iovec *iov, char *buf, long count)
{
    if (count == 0)
        return 0;
    long a = count / 3, b = count / 3;
    iov[0] = (struct iovec){buf, (size_t)a};
    iov[1] = (struct iovec){buf + a, (size_t)b};
    iov[2] = (struct iovec){buf + a + b, (size_t)(count - a - b)};
    return 3;
}

static int call_vfprintf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vfprintf(f, fmt, ap);
    va_end(ap);
    return r;
}

/* the mapped bytes that lie inside the file (touching past its end faults) */
static long copy_mapping(char *buf, long buflen, const char *map, int fd, long len, long off)
{
    struct stat st;
    if (syscall(SYS_fstat, fd, &st) != 0 || off >= st.st_size)
        return 0;
    long n = st.st_size - off;
    if (n > len)
        n = len;
    if (n > buflen)
        n = buflen;
    memcpy(buf, map, (size_t)n);
    return n;
}

/* --------------------------------------------------------- one operation */

/* Perform op once. Arguments by op: slot is the fd or stream slot acted on,
 * or the one a new fd/stream goes to (slot2 then names the source, or the
 * directory fd of *at calls); a, b, c are the numeric arguments; name and
 * mode are paths relative to the run's directory (mode is the second path
 * of rename); buf holds data to write or receives data read.
 * out[0] = errno after the call, out[1] = the stream's feof | ferror << 1,
 * out[2] = how many bytes of buf the call produced. */
long sem_op(int op, int slot, int slot2, long a, long b, long c, const char *name, const char *mode,
            char *buf, long buflen, long *out)
{
    char path[PATH_MAX], path2[PATH_MAX];
    struct iovec iov[3];
    struct stat st;
    struct stat64 st64;
    struct statx sx;
    int fd = fd_arg(slot), fd2 = fd_arg(slot2);
    int stream_op = op >= OP_fopen && op != OP_fflush_all;
    FILE *f = slot >= 0 && slot < N_STREAM_SLOTS ? stream_of[slot] : NULL;
    long r = 0, produced = 0;

    out[0] = out[1] = out[2] = 0;
    /* calls that read or write a FILE need a live one, and every count must
     * fit the buffer (the _chk variants would abort otherwise) */
    int counted = (op >= OP_read && op <= OP_pwritev64v2) || op == OP_fgets;
    int sized = op == OP_fread || op == OP___fread_chk || op == OP_fwrite;
    if ((stream_op && op != OP_fopen && op != OP_fopen64 && op != OP_fdopen && !f) ||
        (counted && (a < 0 || a > buflen)) || (sized && (a < 0 || b < 0 || a * b > buflen)))
        return SKIPPED;

    arm();
    errno = 0;
    switch (op) {
    /* opening */
    case OP_open: r = open(in_root(path, name), (int)a, (mode_t)b); break;
    case OP_open64: r = open64(in_root(path, name), (int)a, (mode_t)b); break;
    case OP___open_2: r = __open_2(in_root(path, name), (int)a); break;
    case OP___open64_2: r = __open64_2(in_root(path, name), (int)a); break;
    case OP_openat: r = openat(fd2, name, (int)a, (mode_t)b); break;
    case OP_openat64: r = openat64(fd2, name, (int)a, (mode_t)b); break;
    case OP___openat_2: r = __openat_2(fd2, name, (int)a); break;
    case OP___openat64_2: r = __openat64_2(fd2, name, (int)a); break;
    case OP_creat: r = creat(in_root(path, name), (mode_t)b); break;
    case OP_creat64: r = creat64(in_root(path, name), (mode_t)b); break;
    case OP_mkstemp: r = mkstemp((char *)in_root(path, name)); break;
    case OP_mkostemp: r = mkostemp((char *)in_root(path, name), (int)a); break;
    case OP_mkstemps: r = mkstemps((char *)in_root(path, name), (int)a); break;
    case OP_mkostemps: r = mkostemps((char *)in_root(path, name), (int)a, (int)b); break;
    case OP_close: r = close(fd); break;
    case OP_dup: r = dup(fd2); break;
    case OP_dup2: r = dup2(fd2, fd >= 0 ? fd : DUP_TARGET_BASE + slot); break;
    case OP_dup3: r = dup3(fd2, fd >= 0 ? fd : DUP_TARGET_BASE + slot, (int)a); break;
    case OP_fcntl_dupfd: r = fcntl(fd2, F_DUPFD, (int)a); break;
    case OP_fcntl64_dupfd: r = fcntl64(fd2, F_DUPFD, (int)a); break;
    case OP_fcntl_getfl: r = fcntl(fd, F_GETFL); break;
    case OP_fcntl_setfl: r = fcntl(fd, F_SETFL, (int)a); break;
    case OP_fileno: {
        FILE *src = slot2 >= 0 && slot2 < N_STREAM_SLOTS ? stream_of[slot2] : NULL;
        if (!src) {
            disarm();
            return SKIPPED;
        }
        r = fileno(src);
        if (r >= 0 && slot >= 0 && slot < N_FD_SLOTS)
            fd_of[slot] = (int)r;       /* the stream still owns it */
        break;
    }
    case OP_pipe: {
        /* a one-page pipe: 4096 bytes fill it */
        int ends[2];
        r = pipe2(ends, (int)a);
        out[0] = errno;
        if (r == 0) {
            keep_fd(slot, ends[0]);
            keep_fd(slot2, ends[1]);
            fcntl(ends[1], F_SETPIPE_SZ, 4096);
        }
        disarm();
        return r;
    }

    /* data */
    case OP_read: r = read(fd, buf, (size_t)a); break;
    case OP___read_chk: r = __read_chk(fd, buf, (size_t)a, (size_t)buflen); break;
    case OP_pread: r = pread(fd, buf, (size_t)a, b); break;
    case OP_pread64: r = pread64(fd, buf, (size_t)a, b); break;
    case OP___pread_chk: r = __pread_chk(fd, buf, (size_t)a, b, (size_t)buflen); break;
    case OP___pread64_chk: r = __pread64_chk(fd, buf, (size_t)a, b, (size_t)buflen); break;
    case OP_readv: r = readv(fd, iov, split3(iov, buf, a)); break;
    case OP_preadv: r = preadv(fd, iov, split3(iov, buf, a), b); break;
    case OP_preadv64: r = preadv64(fd, iov, split3(iov, buf, a), b); break;
    case OP_preadv2: r = preadv2(fd, iov, split3(iov, buf, a), b, (int)c); break;
    case OP_preadv64v2: r = preadv64v2(fd, iov, split3(iov, buf, a), b, (int)c); break;
    case OP_write: r = write(fd, buf, (size_t)a); break;
    case OP_pwrite: r = pwrite(fd, buf, (size_t)a, b); break;
    case OP_pwrite64: r = pwrite64(fd, buf, (size_t)a, b); break;
    case OP_writev: r = writev(fd, iov, split3(iov, buf, a)); break;
    case OP_pwritev: r = pwritev(fd, iov, split3(iov, buf, a), b); break;
    case OP_pwritev64: r = pwritev64(fd, iov, split3(iov, buf, a), b); break;
    case OP_pwritev2: r = pwritev2(fd, iov, split3(iov, buf, a), b, (int)c); break;
    case OP_pwritev64v2: r = pwritev64v2(fd, iov, split3(iov, buf, a), b, (int)c); break;
    case OP_lseek: r = lseek(fd, a, (int)b); break;
    case OP_lseek64: r = lseek64(fd, a, (int)b); break;
    case OP_fsync: r = fsync(fd); break;
    case OP_fdatasync: r = fdatasync(fd); break;
    case OP_mmap:
    case OP_mmap64: {
        void *m = op == OP_mmap ? mmap(NULL, (size_t)a, PROT_READ, MAP_PRIVATE, fd, b)
                                : mmap64(NULL, (size_t)a, PROT_READ, MAP_PRIVATE, fd, b);
        out[0] = errno;
        disarm();
        if (m == MAP_FAILED)
            return -1;
        out[2] = copy_mapping(buf, buflen, m, fd, a, b);
        munmap(m, (size_t)a);
        return 0;
    }
    case OP_munmap: {
        /* a shared mapping of its own (length a at offset b), read through,
         * then the page at offset c unmapped (c = -1: all of it; -2: zero
         * bytes, EINVAL); what is left goes afterwards */
        void *m = mmap(NULL, (size_t)a, PROT_READ, MAP_SHARED, fd, b);
        if (m == MAP_FAILED) {
            out[0] = errno;
            disarm();
            return -1;
        }
        out[2] = copy_mapping(buf, buflen, m, fd, a, b);
        size_t len = c == -1 ? (size_t)a : c == -2 ? 0 : 4096;
        errno = 0;
        r = munmap((char *)m + (c < 0 ? 0 : c), len);
        out[0] = errno;
        disarm();
        if (r != 0 || len != (size_t)a)
            munmap(m, (size_t)a);
        return r;
    }
    /* kernel-side copies from slot2 to slot; b < 0: no offset (the file
     * position), else the source offset; c: flags */
    case OP_copy_file_range: {
        loff_t from = b;
        r = copy_file_range(fd2, b >= 0 ? &from : NULL, fd, NULL, (size_t)a, (unsigned)c);
        break;
    }
    case OP_sendfile: {
        off_t from = b;
        r = sendfile(fd, fd2, b >= 0 ? &from : NULL, (size_t)a);
        break;
    }
    case OP_sendfile64: {
        off64_t from = b;
        r = sendfile64(fd, fd2, b >= 0 ? &from : NULL, (size_t)a);
        break;
    }
    case OP_splice: {
        loff_t from = b;
        r = splice(fd2, b >= 0 ? &from : NULL, fd, NULL, (size_t)a, (unsigned)c);
        break;
    }
    case OP_posix_fadvise: r = posix_fadvise(fd, a, b, (int)c); break;
    case OP_posix_fadvise64: r = posix_fadvise64(fd, a, b, (int)c); break;

    /* metadata */
#define STAT_CASE(opname, call, sb)                                         \
    case OP_##opname:                                                       \
        if ((r = (call)) == 0)                                              \
            produced = pack_stat(buf, (sb).st_size, (sb).st_mode);          \
        break;
    STAT_CASE(stat, stat(in_root(path, name), &st), st)
    STAT_CASE(lstat, lstat(in_root(path, name), &st), st)
    STAT_CASE(fstat, fstat(fd, &st), st)
    STAT_CASE(stat64, stat64(in_root(path, name), &st64), st64)
    STAT_CASE(lstat64, lstat64(in_root(path, name), &st64), st64)
    STAT_CASE(fstat64, fstat64(fd, &st64), st64)
    STAT_CASE(fstatat, fstatat(fd2, name, &st, (int)a), st)
    STAT_CASE(fstatat64, fstatat64(fd2, name, &st64, (int)a), st64)
    STAT_CASE(__xstat, __xstat(STAT_VER, in_root(path, name), &st), st)
    STAT_CASE(__lxstat, __lxstat(STAT_VER, in_root(path, name), &st), st)
    STAT_CASE(__fxstat, __fxstat(STAT_VER, fd, &st), st)
    STAT_CASE(__xstat64, __xstat64(STAT_VER, in_root(path, name), &st64), st64)
    STAT_CASE(__lxstat64, __lxstat64(STAT_VER, in_root(path, name), &st64), st64)
    STAT_CASE(__fxstat64, __fxstat64(STAT_VER, fd, &st64), st64)
    STAT_CASE(__fxstatat, __fxstatat(STAT_VER, fd2, name, &st, (int)a), st)
    STAT_CASE(__fxstatat64, __fxstatat64(STAT_VER, fd2, name, &st64, (int)a), st64)
#undef STAT_CASE
    case OP_statx:
        if ((r = statx(fd2, name, (int)a, (unsigned)b, &sx)) == 0)
            produced = pack_statx(buf, &sx);
        break;
    case OP_rename: r = rename(in_root(path, name), in_root(path2, mode)); break;
    case OP_renameat: r = renameat(fd2, name, fd2, mode); break;
    case OP_unlink: r = unlink(in_root(path, name)); break;
    case OP_unlinkat: r = unlinkat(fd2, name, (int)a); break;
    case OP_remove: r = remove(in_root(path, name)); break;
    case OP_truncate: r = truncate(in_root(path, name), a); break;
    case OP_truncate64: r = truncate64(in_root(path, name), a); break;
    case OP_readlink:
    case OP_readlinkat:
        if (a < 0 || a > buflen) {
            disarm();
            return SKIPPED;
        }
        r = op == OP_readlink ? readlink(in_root(path, name), buf, (size_t)a) : readlinkat(fd2, name, buf, (size_t)a);
        produced = r > 0 ? r : 0;
        break;
    case OP_realpath:
    case OP_canonicalize_file_name: {
        /* the result below the run's directory (the two runs' trees differ in name only) */
        char *got = op == OP_canonicalize_file_name ? canonicalize_file_name(in_root(path, name))
                  : realpath(in_root(path, name), a ? path2 : NULL);
        r = got ? 0 : -1;
        out[0] = errno;
        if (got) {
            char base[PATH_MAX];
            const char *top = realpath(root, base) ? base : root;
            const char *rel = strncmp(got, top, strlen(top)) == 0 ? got + strlen(top) : got;
            produced = (long)strlen(rel) < buflen ? (long)strlen(rel) : buflen;
            memcpy(buf, rel, (size_t)produced);
            if (got != path2)
                free(got);
        }
        goto stream_done;
    }

    /* STDIO: pointer results become 0 (a stream) or -1 (NULL) */
    case OP_fopen:
    case OP_fopen64:
    case OP_fdopen: {
        FILE *got = op == OP_fopen ? fopen(in_root(path, name), mode)
                  : op == OP_fopen64 ? fopen64(in_root(path, name), mode) : fdopen(fd2, mode);
        r = got ? 0 : -1;
        out[0] = errno;
        keep_stream(slot, got);
        f = got;
        goto stream_done;
    }
    case OP_freopen:
    case OP_freopen64: {
        FILE *got = op == OP_freopen ? freopen(in_root(path, name), mode, f)
                                     : freopen64(in_root(path, name), mode, f);
        r = got ? 0 : -1;
        out[0] = errno;
        if (!got) {                     /* failure closes the original */
            forget_stream(f);
            f = NULL;
        }
        goto stream_done;
    }
    case OP_fclose:
        forget_stream(f);               /* gone whatever fclose returns */
        r = fclose(f);
        out[0] = errno;
        f = NULL;
        goto stream_done;
    case OP_fread: r = (long)fread(buf, (size_t)a, (size_t)b, f); produced = r * a; break;
    case OP___fread_chk: r = (long)__fread_chk(buf, (size_t)buflen, (size_t)a, (size_t)b, f); produced = r * a; break;
    case OP_fwrite: r = (long)fwrite(buf, (size_t)a, (size_t)b, f); break;
    case OP_fseek: r = fseek(f, a, (int)b); break;
    case OP_fseeko: r = fseeko(f, a, (int)b); break;
    case OP_fseeko64: r = fseeko64(f, a, (int)b); break;
    case OP_ftell: r = ftell(f); break;
    case OP_rewind: rewind(f); break;
    case OP_fflush: r = fflush(f); break;
    case OP_fflush_all: r = fflush(NULL); break;
    case OP_fgets: {
        char *got = fgets(buf, (int)a, f);
        r = got ? 0 : -1;
        produced = got ? (long)strlen(buf) : 0;
        break;
    }
    case OP_fputs: r = fputs(buf, f); break;
    case OP_fgetc: r = fgetc(f); break;
    case OP_getc: r = getc(f); break;
    case OP__IO_getc: r = _IO_getc(f); break;
    case OP_fputc: r = fputc((int)a, f); break;
    case OP_putc: r = putc((int)a, f); break;
    case OP__IO_putc: r = _IO_putc((int)a, f); break;
    case OP_fprintf: r = fprintf(f, "%ld:%s\n", a, buf); break;
    case OP_vfprintf: r = call_vfprintf(f, "%ld:%s\n", a, buf); break;
    default:
        disarm();
        return SKIPPED;
    }
    out[0] = errno;
    if (op >= OP_read && op <= OP_preadv64v2 && r > 0)
        produced = r;
stream_done:
    disarm();
    out[2] = produced;
    if (stream_op && f)
        out[1] = (feof(f) ? 1 : 0) | (ferror(f) ? 2 : 0);
    if (op <= OP_fcntl64_dupfd && op != OP_close)
        keep_fd(slot, r);
    return r;
}
