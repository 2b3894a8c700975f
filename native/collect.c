/* Lifecycle and collection, in order: each owner of recording state is
 * initialised at attach, reset in the child of a fork, and drained at a
 * collect (close the interval, fold the shards, drain the trace, the
 * heatmap and the busy spans, make new shards ready), here and nowhere else. */
#include "collect.h"

#include <pthread.h>
#include <stdio.h>

#include "busy.h"
#include "clock.h"
#include "elfpatch.h"
#include "fdmap.h"
#include "heat.h"
#include "hooks.h"
#include "maps.h"
#include "paths.h"
#include "rules_kernel.h"
#include "rules_stdio.h"
#include "table.h"
#include "threads.h"
#include "totals.h"
#include "trace.h"

static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t collect_lock = PTHREAD_MUTEX_INITIALIZER;
static int initialized;

/* the columns of a collected row, named for Python */
static const char *const row_fields[R_WIDTH] = {
    "INDEX", "MODULE",
#define X(n) #n,
    SUM_FIELDS(X)
#undef X
#define X(n) "I_" #n,
    EXT_FIELDS(X)
#undef X
    "MODE", "RENAMED_FROM", "MEM_ALIGNMENT", "FILE_ALIGNMENT",
};

int tfd_row_width(void) { return R_WIDTH; }
const char *tfd_row_field(int i) { return (i >= 0 && i < R_WIDTH) ? row_fields[i] : NULL; }

/* -------------------------------------------------------------- lifecycle */

static void after_fork(void);

int collect_init(const tfd_config *c, char *err, size_t err_len)
{
    int rc = 0;
    pthread_mutex_lock(&init_lock);
    /* filters and the trace may change at every attach */
    if (paths_set_rules(c) != 0) {
        snprintf(err, err_len, "cannot allocate the include/exclude rules");
        rc = -1;
        goto out;
    }
    trace_init(c);
    if (initialized)
        goto out;
    heat_init();
    busy_init();
    if (table_init(c->record_cap) != 0) {
        snprintf(err, err_len, "cannot allocate the record table for %lld records",
                 (long long)(c->record_cap > 0 ? c->record_cap : 65536));
        rc = -1;
        goto out;
    }
    if (threads_init() != 0) {
        snprintf(err, err_len, "cannot allocate the shards' index for %lld records",
                 (long long)table_capacity());
        rc = -1;
        goto out;
    }
    static int registered;
    if (!registered)
        pthread_atfork(tfd_mapped_prepare_fork, tfd_mapped_parent_fork, after_fork);
    registered = 1;
    initialized = 1;
    tfd_stdio_open_std_streams();
out:
    pthread_mutex_unlock(&init_lock);
    return rc;
}

/* The child of fork() starts with empty records, as Darshan's does: it keeps
 * the descriptor mappings (the files are still open) but counts afresh. */
static void after_fork(void)
{
    pthread_mutex_init(&collect_lock, NULL);
    pthread_mutex_init(&init_lock, NULL);
    tfd_patch_after_fork();
    if (!initialized)
        return;
    paths_forget();     /* the cached paths point at the parent's records */
    threads_after_fork();
    trace_after_fork();
    tfd_rec **remap = table_after_fork();
    if (!remap) {
        /* cannot count in the child: stop recording, keep forwarding */
        hooks_set_recording(0);
        initialized = 0;
    }
    fdmap_after_fork(remap);
    tfd_mapped_after_fork(remap);
    free(remap);
}

/* ---------------------------------------------------------------- collect */

int tfd_collect(tfd_collect_result *out)
{
    memset(out, 0, sizeof(*out));
    if (!initialized)
        return -1;
    growbuf rows = {0}, vals = {0}, segs = {0}, heat = {0};
    int rc = 0;
    pthread_mutex_lock(&collect_lock);
    /* what mapped files brought in belongs to the interval being closed */
    tfd_mapped_sample_all();
    int64_t closed = threads_close_interval();
    rc = totals_fold(closed, &rows, &vals, &out->n_shards);
    for (tfd_thread *t = threads_first(); t && rc == 0; t = t->next)
        rc = trace_drain(&t->trace, &segs, &out->trace_dropped, closed);
    trace_recycle();
    for (tfd_thread *t = threads_first(); t && rc == 0; t = t->next)
        rc = heat_drain(&t->heat, &t->seq, &heat, &out->heat_unbinned);
    /* the busy spans' union over the interval just closed */
    static int64_t busy_since;
    int64_t closed_at = (int64_t)tfd_ticks();
    growbuf spans = {0};
    for (tfd_thread *t = threads_first(); t && rc == 0; t = t->next)
        rc = busy_drain(&t->busy_now, &t->busy, t->busy_spans, &t->seq, &spans, busy_since, closed_at, &out->busy_joined);
    if (rc == 0)
        out->busy_ticks = busy_merge(&spans);
    free(spans.p);
    busy_since = closed_at;
    /* new shards ready before the writers need them */
    threads_prepare();
    out->epoch = closed;
    out->now_ticks = tfd_now_ticks();
    out->n_records = table_count();
    out->folded_files = table_folded_paths();
    out->n_threads = threads_count();
    pthread_mutex_unlock(&collect_lock);
    out->rows = rows.p;
    out->n_rows = rows.n / R_WIDTH;
    out->values = vals.p;
    out->n_values = vals.n / 4;
    out->segments = segs.p;
    out->n_segments = segs.n / 6;
    out->heat = heat.p;
    out->n_heat = heat.n / 3;
    out->heat_bin_ticks = (int64_t)heat_bin_ticks();
    if (rc) {
        tfd_free_collect(out);
        return -1;
    }
    return 0;
}

void tfd_free_collect(tfd_collect_result *out)
{
    free(out->rows);
    free(out->values);
    free(out->segments);
    free(out->heat);
    out->rows = out->values = out->segments = out->heat = NULL;
    out->n_rows = out->n_values = out->n_segments = out->n_heat = 0;
}

/* Totals since the first attach, from per-thread running sums, without
 * closing an interval: cheap enough to call every step. Best-effort reads. */
int tfd_live(tfd_live_totals *out)
{
    memset(out, 0, sizeof(*out));
    if (!initialized)
        return -1;
    threads_live(out);
    out->files = table_count();
    out->excluded_read += tfd_maps_bytes_read();
    return 0;
}
