/* The shim's interface to Python. This file is also the cffi cdef, so it
 * holds only plain declarations: no includes, no macros beyond integer
 * constants. Everything else in native/ is private to the shim. */

#define TFD_MODULE_POSIX 1
#define TFD_MODULE_STDIO 9

typedef struct tfd_config {
    int64_t record_cap;              /* records per module; later files fold into one */
    const char *const *include_prefixes;
    int n_include;
    const char *const *exclude_prefixes;
    int n_exclude;
    const char *const *exclude_suffixes;
    int n_exclude_suffixes;
    int trace;                       /* keep a per-operation trace (DXT) */
    int64_t trace_cap_bytes;         /* memory for the trace, all threads together */
    const char *chain_library;       /* forward to this library's wrappers (site Darshan) */
    int kernel_io;                   /* count kernel-side copies and follow mapped files */
} tfd_config;

typedef struct tfd_collect_result {
    int64_t n_rows;
    int64_t *rows;                   /* n_rows x tfd_row_width() int64 values */
    int64_t n_values;
    int64_t *values;                 /* n_values x 4: record index, kind, value, count */
    int64_t n_segments;
    int64_t *segments;               /* n_segments x 6: record index, op, offset, length, start, end */
    int64_t n_heat;
    int64_t *heat;                   /* n_heat x 3: time bin, kind (module*2+write), bytes */
    int64_t heat_bin_ticks;          /* width of a time bin */
    int64_t heat_unbinned;           /* bytes that could not be binned (collects too far apart) */
    int64_t epoch;                   /* the interval this collect closed */
    int64_t now_ticks;               /* when it closed */
    int64_t n_records;               /* records created so far (all modules) */
    int64_t folded_files;            /* distinct paths folded into the overflow record */
    int64_t trace_dropped;           /* trace segments dropped for lack of memory */
    int64_t n_threads;               /* threads that ever recorded */
    int64_t n_shards;                /* (thread, record) counters folded: a collect's cost */
    int64_t busy_ticks;              /* wall time with a read or metadata call in flight, since the last collect */
    int64_t busy_joined;             /* spans joined across a gap (a full ring): busy_ticks is then an upper bound */
} tfd_collect_result;

typedef struct tfd_clock_info {
    int64_t origin_ticks;            /* tick count at the first attach */
    double ticks_per_second;
    double origin_unix_time;         /* wall clock at origin_ticks */
    int uses_tsc;
} tfd_clock_info;

typedef struct tfd_live_totals {
    int64_t bytes_read;
    int64_t bytes_written;
    int64_t reads;
    int64_t writes;
    int64_t opens;
    int64_t io_ticks;                /* read + write + metadata time */
    int64_t files;                   /* records touched */
    int64_t excluded_read;           /* bytes on excluded paths, which have no record */
    int64_t excluded_written;
} tfd_live_totals;

/* attach/detach: 0 on success, 1 if already in that state, -1 on error */
int tfd_attach(const tfd_config *config, char *err, size_t err_len);
int tfd_detach(void);
int tfd_is_attached(void);
/* odd while attached; changes after patching completes and before unpatching starts */
int64_t tfd_attach_generation(void);
int tfd_patched_slots(void);
int tfd_patched_objects(void);
int tfd_object_is_patched(const char *path_fragment);

/* turn the per-operation trace on (with a fresh memory budget) or off */
void tfd_set_trace(int on, int64_t cap_bytes);

/* the calling thread's own I/O is not recorded while suppressed */
int tfd_suppress(int on);

int tfd_row_width(void);
const char *tfd_row_field(int i);
int tfd_collect(tfd_collect_result *out);
void tfd_free_collect(tfd_collect_result *out);
int tfd_live(tfd_live_totals *out);

/* mapped files followed now; bytes the shim itself read from /proc (its
 * page samples), which the kernel's rchar counts */
int64_t tfd_followed_mappings(void);
int64_t tfd_own_read_bytes(void);

int tfd_record_info(int64_t index, uint64_t *id, int *module, const char **path);
uint64_t tfd_darshan_hash(const char *key, size_t len);
int tfd_clean_path(const char *path, char *out, size_t out_len);
int tfd_path_excluded(const char *clean_path);
void tfd_clock(tfd_clock_info *out);
int64_t tfd_now_ticks(void);
/* 1 when the data wrappers go back to their caller by a jump, not `ret`
 * (native/jump_return.h); decided at the first attach, 0 before it */
int tfd_returns_by_jump(void);

/* Staged copies served in place of their sources (native/staged.c,
 * redirect.c). A source is checked at its first use: it must still have
 * the size and mtime it had when staged, and the copy must be a regular
 * file of that size with the recorded mtime; else it is never served. */
typedef struct tfd_staged_spec {
    int64_t n;
    const char *const *sources;      /* absolute, clean (no //, /./ or ..) */
    const char *const *copies;
    const int64_t *sizes;
    const int64_t *source_mtimes_ns;
    const int64_t *copy_mtimes_ns;
} tfd_staged_spec;

#define TFD_STAGED_UNCHECKED 0
#define TFD_STAGED_SERVING 1
#define TFD_STAGED_SOURCE_CHANGED -1     /* size or mtime differ from when it was staged */
#define TFD_STAGED_SOURCE_UNREADABLE -2  /* its stat failed */
#define TFD_STAGED_NOT_A_FILE -3         /* the source is not a regular file */
#define TFD_STAGED_COPY_MISSING -4       /* no copy on this node */
#define TFD_STAGED_COPY_DIFFERS -5       /* the copy is not a file of the source's size and recorded mtime */
#define TFD_STAGED_COPY_FAILED -6        /* an open or stat of the copy failed */
#define TFD_STAGED_WRITTEN -7            /* this process wrote, truncated, renamed or removed the source */
#define TFD_STAGED_ROW 9                 /* a used entry: index, state, then the 7 counts of staged.h */

typedef struct tfd_staged_rows {
    int64_t n;
    int64_t *rows;                   /* n x TFD_STAGED_ROW */
} tfd_staged_rows;

/* serve these copies from now on (n = 0: none); 0, or -1 with err filled */
int tfd_staged_load(const tfd_staged_spec *spec, char *err, size_t err_len);
int64_t tfd_staged_loaded(void);
/* check entry i now, ahead of its first use; its state */
int tfd_staged_check(int64_t i);
/* the entries of the loaded table this process has used */
int tfd_staged_used(tfd_staged_rows *out);
void tfd_staged_free(tfd_staged_rows *out);
