/* The case studies' slow tier: a FUSE passthrough (libfuse3) over a local
 * directory that adds a fixed latency to every metadata call, read request,
 * write request and fsync, and caps the read and the write bandwidth (one
 * shared pipe each, like a busy parallel file system seen from one node).
 *
 * Every delay is a sleep, never a spin, so the daemon costs the CPU only
 * what passing requests through FUSE costs (case_studies/slowfs.py measures
 * it). Mounted with direct_io and zero attribute/entry timeouts: the kernel
 * keeps no copy of file data and every lookup reaches us, so every epoch
 * pays again.
 *
 *   slowfs ROOT MOUNTPOINT META_S READ_S READ_BPS WRITE_S WRITE_BPS FSYNC_S
 *
 * Latencies in seconds, bandwidths in bytes per second (0: no cap). */
#define FUSE_USE_VERSION 35
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

struct pipe_cap {               /* a shared pipe: requests queue for their share */
    pthread_mutex_t lock;
    double free_at;             /* CLOCK_MONOTONIC seconds when the pipe is free */
    double bps;
};

static char root[PATH_MAX];
static double meta_s, read_s, write_s, fsync_s;
static struct pipe_cap rpipe = {PTHREAD_MUTEX_INITIALIZER, 0, 0};
static struct pipe_cap wpipe = {PTHREAD_MUTEX_INITIALIZER, 0, 0};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void sleep_until(double when) {
    struct timespec t;
    t.tv_sec = (time_t)when;
    t.tv_nsec = (long)((when - (double)t.tv_sec) * 1e9);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR)
        ;
}

static void delay(double seconds) {
    if (seconds > 0)
        sleep_until(now() + seconds);
}

static void through_pipe(struct pipe_cap *p, size_t n) {
    if (p->bps <= 0 || n == 0)
        return;
    pthread_mutex_lock(&p->lock);
    double start = now() > p->free_at ? now() : p->free_at;
    p->free_at = start + (double)n / p->bps;
    double done = p->free_at;
    pthread_mutex_unlock(&p->lock);
    sleep_until(done);
}

static void real(char *out, const char *path) {
    snprintf(out, PATH_MAX, "%s%s", root, path);
}

static int sfs_getattr(const char *path, struct stat *st, struct fuse_file_info *fi) {
    char p[PATH_MAX];
    delay(meta_s);
    if (fi)
        return fstat((int)fi->fh, st) == 0 ? 0 : -errno;
    real(p, path);
    return lstat(p, st) == 0 ? 0 : -errno;
}

static int sfs_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
                       struct fuse_file_info *fi, enum fuse_readdir_flags flags) {
    char p[PATH_MAX];
    (void)off; (void)fi; (void)flags;
    real(p, path);
    DIR *d = opendir(p);
    if (!d)
        return -errno;
    struct dirent *e;
    while ((e = readdir(d)))
        if (fill(buf, e->d_name, NULL, 0, 0))
            break;
    closedir(d);
    return 0;
}

static int sfs_open(const char *path, struct fuse_file_info *fi) {
    char p[PATH_MAX];
    delay(meta_s);
    real(p, path);
    int fd = open(p, fi->flags);
    if (fd < 0)
        return -errno;
    fi->fh = (uint64_t)fd;
    fi->direct_io = 1;
    return 0;
}

static int sfs_create(const char *path, mode_t mode, struct fuse_file_info *fi) {
    char p[PATH_MAX];
    delay(meta_s);
    real(p, path);
    int fd = open(p, fi->flags | O_CREAT, mode);
    if (fd < 0)
        return -errno;
    fi->fh = (uint64_t)fd;
    fi->direct_io = 1;
    return 0;
}

static int sfs_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)path;
    delay(read_s);
    ssize_t n = pread((int)fi->fh, buf, size, off);
    if (n < 0)
        return -errno;
    through_pipe(&rpipe, (size_t)n);
    return (int)n;
}

static int sfs_write(const char *path, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)path;
    delay(write_s);
    ssize_t n = pwrite((int)fi->fh, buf, size, off);
    if (n < 0)
        return -errno;
    through_pipe(&wpipe, (size_t)n);
    return (int)n;
}

static int sfs_fsync(const char *path, int datasync, struct fuse_file_info *fi) {
    (void)path;
    delay(fsync_s);
    int r = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);
    return r == 0 ? 0 : -errno;
}

static int sfs_flush(const char *path, struct fuse_file_info *fi) {
    (void)path; (void)fi;
    return 0;
}

static int sfs_release(const char *path, struct fuse_file_info *fi) {
    (void)path;
    close((int)fi->fh);
    return 0;
}

static int sfs_truncate(const char *path, off_t size, struct fuse_file_info *fi) {
    char p[PATH_MAX];
    if (fi)
        return ftruncate((int)fi->fh, size) == 0 ? 0 : -errno;
    real(p, path);
    return truncate(p, size) == 0 ? 0 : -errno;
}

static int sfs_unlink(const char *path) {
    char p[PATH_MAX];
    delay(meta_s);
    real(p, path);
    return unlink(p) == 0 ? 0 : -errno;
}

static int sfs_mkdir(const char *path, mode_t mode) {
    char p[PATH_MAX];
    delay(meta_s);
    real(p, path);
    return mkdir(p, mode) == 0 ? 0 : -errno;
}

static int sfs_rmdir(const char *path) {
    char p[PATH_MAX];
    delay(meta_s);
    real(p, path);
    return rmdir(p) == 0 ? 0 : -errno;
}

static int sfs_rename(const char *from, const char *to, unsigned int flags) {
    char a[PATH_MAX], b[PATH_MAX];
    if (flags)
        return -EINVAL;
    delay(meta_s);
    real(a, from);
    real(b, to);
    return rename(a, b) == 0 ? 0 : -errno;
}

static int sfs_chmod(const char *path, mode_t mode, struct fuse_file_info *fi) {
    char p[PATH_MAX];
    (void)fi;
    real(p, path);
    return chmod(p, mode) == 0 ? 0 : -errno;
}

static int sfs_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi) {
    char p[PATH_MAX];
    (void)fi;
    real(p, path);
    return utimensat(AT_FDCWD, p, tv, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

static int sfs_statfs(const char *path, struct statvfs *st) {
    char p[PATH_MAX];
    real(p, path);
    return statvfs(p, st) == 0 ? 0 : -errno;
}

static void *sfs_init(struct fuse_conn_info *conn, struct fuse_config *cfg) {
    conn->max_read = 131072;          /* must agree with the max_read mount option */
    cfg->direct_io = 1;
    cfg->kernel_cache = 0;
    cfg->attr_timeout = 0;
    cfg->entry_timeout = 0;
    cfg->negative_timeout = 0;
    return NULL;
}

static const struct fuse_operations ops = {
    .init = sfs_init,
    .getattr = sfs_getattr,
    .readdir = sfs_readdir,
    .open = sfs_open,
    .create = sfs_create,
    .read = sfs_read,
    .write = sfs_write,
    .fsync = sfs_fsync,
    .flush = sfs_flush,
    .release = sfs_release,
    .truncate = sfs_truncate,
    .unlink = sfs_unlink,
    .mkdir = sfs_mkdir,
    .rmdir = sfs_rmdir,
    .rename = sfs_rename,
    .chmod = sfs_chmod,
    .utimens = sfs_utimens,
    .statfs = sfs_statfs,
};

int main(int argc, char **argv) {
    if (argc != 9) {
        fprintf(stderr, "usage: %s ROOT MOUNTPOINT META_S READ_S READ_BPS WRITE_S WRITE_BPS FSYNC_S\n", argv[0]);
        return 2;
    }
    if (!realpath(argv[1], root)) {
        perror(argv[1]);
        return 2;
    }
    meta_s = atof(argv[3]);
    read_s = atof(argv[4]);
    rpipe.bps = atof(argv[5]);
    write_s = atof(argv[6]);
    wpipe.bps = atof(argv[7]);
    fsync_s = atof(argv[8]);
    /* foreground, multi-threaded; requests of at most 128 KiB */
    char *fargv[] = {argv[0], "-f", "-o", "max_read=131072,fsname=slowfs,subtype=slowfs", argv[2], NULL};
    return fuse_main(5, fargv, &ops, NULL);
}
