/* The record table: one record per (module, Darshan id), created on first
 * sight, never freed; past the cap, new paths share one overflow record
 * per module. table.c owns the table and a record's identity; a record's
 * Darshan state (its offset, last bytes, last ends) is written by the
 * rules of its module, and its totals by totals.c. */
#ifndef TFD_TABLE_H
#define TFD_TABLE_H
#include "base.h"

typedef struct rec_totals rec_totals;       /* totals.c's */

/* Aligned to a cache line; the first holds all that a read, an open, a
 * stat or a close reads and writes of it (a file read once touches one
 * line of its record); a write also touches last_write_end in the second. */
typedef struct tfd_rec {
    int64_t index;
    int64_t alignment_mask;     /* file_alignment - 1 when a power of two, else -1 */
    /* Darshan's per-record reference state, shared by all threads (relaxed
     * loads and stores: when threads race on a file the order they land in
     * is as arbitrary as the order of Darshan's lock) */
    int64_t offset, last_byte_read, last_byte_written;
    int64_t last_read_end, last_meta_end;
    int last_io_type;
    int module;
    /* the second line */
    int64_t last_write_end;
    int64_t file_alignment;
    uint64_t id;
    char *path;
    int std_stream;             /* <STDIN>/<STDOUT>/<STDERR> */
    int64_t mode, renamed_from;
    rec_totals *totals;         /* the collector's: sums over all shards */
} tfd_rec;

/* 0, or -1 when the table cannot be allocated (the cap is per module) */
int table_init(int64_t record_cap) TFD_HIDDEN;
/* records of all modules the index space holds */
int64_t table_capacity(void) TFD_HIDDEN;
/* records created so far (all modules) */
int64_t table_count(void) TFD_HIDDEN;
/* distinct paths folded into the overflow records */
int64_t table_folded_paths(void) TFD_HIDDEN;
tfd_rec *table_record(int64_t index) TFD_HIDDEN;
tfd_rec *table_find(uint64_t id, int module) TFD_HIDDEN;
/* The record of a cleaned path, created on first sight (the overflow
 * record past the cap); NULL when a signal handler's I/O arrives while
 * this thread creates one, or when out of memory. */
tfd_rec *table_record_for(const char *clean, int module) TFD_HIDDEN;
int table_is_overflow(const tfd_rec *r) TFD_HIDDEN;

/* The child of fork starts an empty table holding a fresh record for each
 * of the parent's (same identity and offset, no counts). Returns old index
 * -> new record (the caller frees it), or NULL when it could not: then the
 * child cannot count. */
tfd_rec **table_after_fork(void) TFD_HIDDEN;

#endif
