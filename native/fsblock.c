/* POSIX_FILE_ALIGNMENT's block sizes, remembered per directory. */
#include "fsblock.h"

#include <errno.h>
#include <sys/statfs.h>

#include "darshan_hash.h"

#ifndef LL_SUPER_MAGIC
#define LL_SUPER_MAGIC 0x0BD00BD0
#endif

/* open addressing on the directory's hash; the directory kept to compare */
typedef struct dir_entry { uint64_t hash; char *dir; int64_t block; } dir_entry;
static dir_entry *dirs;
static uint64_t dirs_mask;
static uint64_t dirs_used;

static dir_entry *slot_of(dir_entry *table, uint64_t mask, uint64_t hash, const char *dir, size_t len)
{
    for (uint64_t i = hash & mask;; i = (i + 1) & mask) {
        dir_entry *e = &table[i];
        if (!e->dir || (e->hash == hash && strncmp(e->dir, dir, len) == 0 && e->dir[len] == '\0'))
            return e;
    }
}

/* room for one more entry, the table at most half full; 0, or -1 */
static int make_room(void)
{
    if (dirs && 2 * (dirs_used + 1) <= dirs_mask + 1)
        return 0;
    uint64_t slots = dirs ? 2 * (dirs_mask + 1) : 64;
    dir_entry *grown = calloc(slots, sizeof(dir_entry));
    if (!grown)
        return -1;
    for (uint64_t i = 0; dirs && i <= dirs_mask; i++)
        if (dirs[i].dir)
            *slot_of(grown, slots - 1, dirs[i].hash, dirs[i].dir, strlen(dirs[i].dir)) = dirs[i];
    free(dirs);
    dirs = grown;
    dirs_mask = slots - 1;
    return 0;
}

static int64_t statfs_block(const char *path)
{
    struct statfs sf;
    if (statfs(path, &sf) != 0)
        return -1;
    return sf.f_type == LL_SUPER_MAGIC ? 1024 * 1024 : (int64_t)sf.f_bsize;
}

int64_t fsblock_of(const char *clean)
{
    if (clean[0] != '/')
        return -1;
    int saved = errno;
    size_t len = (size_t)(strrchr(clean, '/') - clean) + 1;     /* the directory, with its slash */
    uint64_t hash = tfd_hash64((const unsigned char *)clean, len);
    int64_t block;
    dir_entry *e = dirs ? slot_of(dirs, dirs_mask, hash, clean, len) : NULL;
    if (e && e->dir) {
        block = e->block;
    } else {
        /* the file itself, not its directory: a symbolic link to another
         * file system answers for where its data is */
        block = statfs_block(clean);
        char *dir = block > 0 ? strndup(clean, len) : NULL;   /* a failure is asked again */
        if (dir && make_room() == 0) {
            e = slot_of(dirs, dirs_mask, hash, dir, len);
            e->hash = hash;
            e->dir = dir;
            e->block = block;
            dirs_used++;
        } else {
            free(dir);
        }
    }
    errno = saved;
    return block;
}
