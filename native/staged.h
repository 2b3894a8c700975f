/* The staged copies this process may serve in place of their sources
 * (`tfdarshan run --staged`): the table of sources and copies loaded from
 * Python, what each source's first use found, and what serving it did.
 * staged.c owns it all; redirect.c decides, call by call, what is served.
 *
 * A table is replaced whole and never freed (a wrapper may still be reading
 * the old one); loading one makes every cached path outcome stale, since
 * the path cache carries each path's entry (paths.h). */
#ifndef TFD_STAGED_H
#define TFD_STAGED_H
#include "base.h"

#include "public.h"

typedef struct tfd_staged tfd_staged;
typedef struct staged_table staged_table;

extern staged_table *tfd_staged_table TFD_HIDDEN;     /* staged.c's: read it through staged_loaded() */

/* a table is loaded: the open and stat wrappers take the staged path */
static inline __attribute__((always_inline)) int staged_loaded(void)
{
    return __atomic_load_n(&tfd_staged_table, __ATOMIC_RELAXED) != NULL;
}

/* What an entry's check found: serve it, or not and why (api.h's
 * TFD_STAGED_* states; a refusal is final for the process). */
enum { STAGED_UNCHECKED = 0, STAGED_SERVING = 1 };

/* What serving an entry did, counted per entry (api.h's TFD_STAGED_C_*). */
enum {
    STAGED_SERVED_OPENS,        /* open/openat of the source served from the copy */
    STAGED_SERVED_FOPENS,       /* fopen of it served from the copy */
    STAGED_SERVED_STATS,        /* stat family answered for the copy */
    STAGED_FALLBACK_OPENS,      /* the copy failed to open: the source opened instead */
    STAGED_FALLBACK_STATS,      /* the copy failed a stat: the source answered */
    STAGED_SOURCE_OPENS,        /* opens of the source not served (a write, a refused entry) */
    STAGED_SOURCE_STATS,        /* stats of the source not served */
    STAGED_COUNTS
};

/* The entry of a source (an absolute path, as Darshan cleans it), or NULL. */
tfd_staged *staged_find(const char *clean, size_t n) TFD_HIDDEN;
/* The copy to serve for e, composed in buf (checking e first if this is
 * its first use), or NULL when e is not served. nofollow: the call does
 * not follow a final symbolic link, so a source that is one is not served. */
const char *staged_copy_to_serve(tfd_staged *e, char *buf, size_t len, int nofollow) TFD_HIDDEN;
void staged_count(tfd_staged *e, int what) TFD_HIDDEN;
/* never serve e again in this process (state: a TFD_STAGED_* refusal) */
void staged_refuse(tfd_staged *e, int state) TFD_HIDDEN;
/* the program is changing e's source (a write, a truncation): never served
 * again, and the descriptors served from its copy are put on the source */
void staged_written(tfd_staged *e) TFD_HIDDEN;
/* the file (device, inode) was opened for writing or truncated, by any of
 * its names: a source being served that it is is never served again */
void staged_written_inode(uint64_t dev, uint64_t ino) TFD_HIDDEN;
/* An open or stat of e's copy failed with err: counted (what), and e is
 * refused unless the error says nothing about the copy (EINTR, EMFILE, ...). */
void staged_copy_failed(tfd_staged *e, int what, int err) TFD_HIDDEN;
/* The source of a copy (an absolute path of length n) this process has
 * served an open of, or NULL: what a /proc/self/fd link names instead. */
const char *staged_source_of_served_copy(const char *copy, size_t n) TFD_HIDDEN;

#endif
