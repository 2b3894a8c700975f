/* Lifecycle (init, fork, descriptor sync) and collection: closing an
 * interval, waiting out writers, reporting the folded totals (records_fold.c),
 * the trace and the heatmap, and retiring exited threads. */
#include "records.h"

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

static void reset_after_fork(void);

int tfd_records_init(const tfd_config *c, char *err, size_t err_len)
{
    int rc = 0;
    pthread_mutex_lock(&init_lock);
    /* filters may change at every attach */
    pthread_mutex_lock(&create_lock);
    rc = set_rules(c);
    pthread_mutex_unlock(&create_lock);
    if (rc != 0) {
        snprintf(err, err_len, "cannot allocate the include/exclude rules");
        goto out;
    }
    if (c->trace && !trace_on) {
        trace_cap = c->trace_cap_bytes;
        __atomic_store_n(&trace_budget, trace_cap, __ATOMIC_RELAXED);
        trace_on = 1;
    } else if (!c->trace) {
        trace_on = 0;
    }
    if (initialized)
        goto out;

    tfd_clock_info clock;
    tfd_clock(&clock);
    heat_origin = (uint64_t)clock.origin_ticks;
    heat_width = (uint64_t)(clock.ticks_per_second * 0.025);   /* 25 ms bins */
    if (heat_width == 0)
        heat_width = 1;
    /* TensorFlow's read of a file (stat, open, pread, pread, close), or a
     * Python loop's, comes in calls microseconds apart: one span */
    busy_gap = (int64_t)(clock.ticks_per_second * 10e-6);
    record_cap = c->record_cap > 0 ? c->record_cap : 65536;
    max_records = 2 * record_cap + 8;  /* two modules, their overflow and std streams */
    uint64_t slots = 1;
    while (slots < (uint64_t)max_records * 2)
        slots <<= 1;
    rec_table = alloc_zeroed(slots * sizeof(tfd_rec *));
    rec_table_mask = slots - 1;
    folded_ids = alloc_zeroed(slots * sizeof(uint64_t));
    folded_mask = slots - 1;
    rec_by_index = calloc((size_t)(max_records / DIR_CHUNK + 1), sizeof(tfd_rec **));
    if (!rec_table || !folded_ids || !rec_by_index) {
        snprintf(err, err_len, "cannot allocate the record table for %lld records", (long long)record_cap);
        rc = -1;
        goto out;
    }
    use_membarrier = membarrier_register();
    pthread_mutex_lock(&create_lock);
    static const int mods[2] = {TFD_MODULE_POSIX, TFD_MODULE_STDIO};
    for (int m = 0; m < 2; m++) {
        const char *name = "<tfdarshan:other-files>";
        overflow_rec[mods[m]] = new_record(tfd_hash64((const unsigned char *)name, strlen(name)), mods[m], name);
        n_module_records[mods[m]]--;  /* does not count against the cap */
    }
    pthread_mutex_unlock(&create_lock);
    pthread_atfork(tfd_mapped_prepare_fork, tfd_mapped_parent_fork, reset_after_fork);
    initialized = 1;

    /* Darshan opens the three standard streams at start-up */
    FILE *std[3] = {stdin, stdout, stderr};
    const char *names[3] = {"<STDIN>", "<STDOUT>", "<STDERR>"};
    for (int i = 0; i < 3; i++) {
        tfd_rec *r = record_for_clean(names[i], TFD_MODULE_STDIO);
        if (r && std[i])
            stdio_open_record(r, std[i], 1, 0, 0, 0);
    }
out:
    pthread_mutex_unlock(&init_lock);
    return rc;
}

/* Called by attach before any slot is patched. Descriptors may have been
 * closed and their numbers reused while we were detached, so the mappings
 * are rebuilt: every open descriptor is attributed through /proc/self/fd
 * (without counting an open Darshan never saw), and streams whose descriptor
 * is gone are forgotten. */
void tfd_records_sync_open_fds(void)
{
    for (int hi = 0; hi < FD_TOP; hi++) {
        tfd_rec **chunk = __atomic_load_n(&fd_posix[hi], __ATOMIC_ACQUIRE);
        stream_slot *streams = __atomic_load_n(&fd_stdio[hi], __ATOMIC_ACQUIRE);
        for (int lo = 0; lo < FD_CHUNK && (chunk || streams); lo++) {
            if (chunk)
                __atomic_store_n(&chunk[lo], NULL, __ATOMIC_RELEASE);
            if (streams && streams[lo].stream && fcntl(hi * FD_CHUNK + lo, F_GETFD) == -1)
                __atomic_store_n(&streams[lo].stream, NULL, __ATOMIC_RELEASE);
        }
    }
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return;
    int self_fd = dirfd(d);
    struct dirent *e;
    char link[64], target[PATH_MAX];
    while ((e = readdir(d))) {
        char *endp;
        long fd = strtol(e->d_name, &endp, 10);
        if (*endp || fd == self_fd || fd < 0)
            continue;
        tfd_rec **slot = posix_slot((int)fd, 1);
        if (!slot || __atomic_load_n(slot, __ATOMIC_ACQUIRE))
            continue;
        snprintf(link, sizeof(link), "/proc/self/fd/%ld", fd);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        struct stat st;
        if (n <= 0 || target[0] != '/' || fstat((int)fd, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        target[n] = 0;
        char clean[2 * PATH_MAX];
        if (tfd_clean_path(target, clean, sizeof(clean)) != 0)
            continue;
        tfd_rec *r = tfd_path_excluded(clean) ? EXCLUDED : record_for_clean(clean, TFD_MODULE_POSIX);
        if (!r)
            continue;
        off_t pos = r == EXCLUDED ? -1 : lseek((int)fd, 0, SEEK_CUR);
        if (pos >= 0)
            RELAXED_STORE(r->offset, (int64_t)pos);
        tfd_rec *none = NULL;
        __atomic_compare_exchange_n(slot, &none, r, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    }
    closedir(d);
}

/* The child of fork() starts with empty records, as Darshan's does: it keeps
 * the descriptor mappings (the files are still open) but counts afresh. */
static void reset_after_fork(void)
{
    pthread_mutex_init(&create_lock, NULL);
    pthread_mutex_init(&collect_lock, NULL);
    pthread_mutex_init(&init_lock, NULL);
    tfd_patch_atfork_child();
    if (!initialized)
        return;
    forget_paths();     /* the cached paths point at the parent's records */
    tfd_rec **old_table = rec_table;
    uint64_t old_mask = rec_table_mask;
    tfd_rec ***old_by_index = rec_by_index;
    int64_t old_n = n_records;

    rec_table = alloc_zeroed((old_mask + 1) * sizeof(tfd_rec *));
    rec_by_index = calloc((size_t)(max_records / DIR_CHUNK + 1), sizeof(tfd_rec **));
    memset(folded_ids, 0, (folded_mask + 1) * sizeof(uint64_t));
    folded_count = 0;
    n_records = 0;
    memset(n_module_records, 0, sizeof(n_module_records));
    threads = NULL;
    n_threads = 0;
    self = NULL;
    trace_budget = trace_cap;
    if (!rec_table || !rec_by_index) {
        /* cannot count in the child: stop recording, keep forwarding */
        tfd_attached = 0;
        tfd_mapped_after_fork(NULL);
        return;
    }
    /* remap every old record to a fresh one with the same identity */
    tfd_rec **map = calloc((size_t)old_n + 1, sizeof(tfd_rec *));
    for (int64_t i = 0; i < old_n; i++) {
        tfd_rec *o = old_by_index[i / DIR_CHUNK][i % DIR_CHUNK];
        tfd_rec *n = new_record(o->id, o->module, o->path);
        if (n) {
            n->offset = o->offset;
            if (o == overflow_rec[o->module & 15]) {
                overflow_rec[o->module & 15] = n;
                n_module_records[o->module & 15]--;
            }
        }
        if (map)
            map[i] = n;
    }
    for (int hi = 0; hi < FD_TOP; hi++) {
        for (int lo = 0; fd_posix[hi] && lo < FD_CHUNK; lo++) {
            tfd_rec *o = fd_posix[hi][lo];
            if (o && o != EXCLUDED)
                fd_posix[hi][lo] = map ? map[o->index] : NULL;
        }
        for (int lo = 0; fd_stdio[hi] && lo < FD_CHUNK; lo++) {
            tfd_rec *o = fd_stdio[hi][lo].rec;
            if (o && o != EXCLUDED)
                fd_stdio[hi][lo].rec = map ? map[o->index] : NULL;
        }
    }
    tfd_mapped_after_fork(map);
    free(map);
    (void)old_table;
}

/* ---------------------------------------------------------------- collect */

static void wait_for_writers(void)
{
    if (use_membarrier)
        syscall(SYS_membarrier, 8, 0, 0);
    else
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
    for (tfd_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        uint32_t s = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
        if (!(s & 1))
            continue;
        /* inside an update, which never blocks: wait for it to finish */
        for (long spins = 0; __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE) == s; spins++) {
            if (spins > 64)
                sched_yield();
            if (spins > 2000000)
                break;  /* a thread stopped mid-update (killed); do not hang */
        }
    }
}

int grow_push(growbuf *b, const int64_t *v, int64_t k)
{
    if (b->n + k > b->cap) {
        int64_t cap = b->cap ? b->cap * 2 : 1024;
        while (cap < b->n + k)
            cap *= 2;
        int64_t *p = realloc(b->p, (size_t)cap * sizeof(int64_t));
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, v, (size_t)k * sizeof(int64_t));
    b->n += k;
    return 0;
}

/* Report each thread's bins from the oldest unreported to its newest; the
 * newest may still grow, so what was reported of it is remembered. */
static int collect_heat(growbuf *heat, int64_t *unbinned)
{
    static int64_t copy[HEAT_RING][HEAT_KINDS];
    for (tfd_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        int64_t newest, oldest = t->heat_next, lost;
        int64_t n = 0;
        for (long tries = 0;; tries++) {
            uint32_t a = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
            if ((a & 1) && tries < 1000000) {
                sched_yield();
                continue;
            }
            newest = RELAXED_LOAD(t->heat_bin);
            lost = RELAXED_LOAD(t->heat_unbinned);
            n = newest < oldest ? 0 : newest - oldest + 1;
            for (int64_t i = 0; i < n; i++)
                memcpy(copy[i], t->heat[(oldest + i) % HEAT_RING], sizeof(copy[0]));
            __atomic_thread_fence(__ATOMIC_ACQUIRE);
            if (__atomic_load_n(&t->seq, __ATOMIC_RELAXED) == a || tries >= 1000000)
                break;
        }
        *unbinned += lost;
        for (int64_t i = 0; i < n; i++) {
            for (int k = 0; k < HEAT_KINDS; k++) {
                int64_t v = copy[i][k] - (i == 0 ? t->heat_reported[k] : 0);
                if (v == 0)
                    continue;
                int64_t row[3] = {oldest + i, k, v};
                if (grow_push(heat, row, 3))
                    return -1;
            }
        }
        if (n > 0) {
            memcpy(t->heat_reported, copy[n - 1], sizeof(t->heat_reported));
            RELAXED_STORE(t->heat_next, newest);
        }
    }
    return 0;
}

static int collect_trace(growbuf *segs, int64_t *dropped, int64_t closed)
{
    for (tfd_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        *dropped += RELAXED_LOAD(t->trace_dropped);
        seg_chunk *c = __atomic_load_n(&t->trace_head, __ATOMIC_ACQUIRE);
        while (c) {
            int32_t count = __atomic_load_n(&c->count, __ATOMIC_ACQUIRE);
            int32_t i = t->trace_read;
            /* a thread's segments are in interval order: stop at the first
             * one counted after the interval being closed */
            for (; i < count && c->s[i].epoch <= closed; i++)
                if (grow_push(segs, (const int64_t *)&c->s[i], 6))
                    return -1;
            t->trace_read = i;
            if (i < count)
                break;
            seg_chunk *next = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE);
            /* a full chunk the writer has moved past can be released */
            if (count == SEG_PER_CHUNK && next) {
                __atomic_store_n(&t->trace_head, next, __ATOMIC_RELEASE);
                t->trace_read = 0;
                free(c);
                __atomic_add_fetch(&trace_budget, (int64_t)sizeof(seg_chunk), __ATOMIC_RELAXED);
                c = next;
            } else {
                break;
            }
        }
    }
    return 0;
}

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
    int64_t closed = RELAXED_LOAD(epoch);
    __atomic_store_n(&epoch, closed + 1, __ATOMIC_SEQ_CST);
    wait_for_writers();
    rc = fold_dirty_shards(closed, &rows, &vals, &out->n_shards);
    if (rc == 0)
        rc = collect_trace(&segs, &out->trace_dropped, closed);
    if (rc == 0)
        rc = collect_heat(&heat, &out->heat_unbinned);
    /* the busy spans' union over the interval just closed */
    static int64_t busy_since;
    int64_t closed_at = (int64_t)tfd_ticks();
    if (rc == 0)
        rc = collect_busy(busy_since, closed_at, &out->busy_ticks, &out->busy_joined);
    busy_since = closed_at;
    /* exited threads whose last writes this collect folded: nothing of them
     * is left to report, so their memory goes to the next new thread */
    for (tfd_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t && rc == 0; t = t->next)
        if (__atomic_load_n(&t->state, __ATOMIC_ACQUIRE) == THREAD_EXITED && !t->dirty[0] && !t->dirty[1])
            retire_thread(t);
    out->epoch = closed;
    out->now_ticks = (int64_t)tfd_ticks();
    out->n_records = __atomic_load_n(&n_records, __ATOMIC_ACQUIRE);
    out->folded_files = folded_count;
    out->n_threads = RELAXED_LOAD(n_threads);
    pthread_mutex_unlock(&collect_lock);
    out->rows = rows.p;
    out->n_rows = rows.n / R_WIDTH;
    out->values = vals.p;
    out->n_values = vals.n / 4;
    out->segments = segs.p;
    out->n_segments = segs.n / 6;
    out->heat = heat.p;
    out->n_heat = heat.n / 3;
    out->heat_bin_ticks = (int64_t)heat_width;
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
    for (tfd_thread *t = __atomic_load_n(&threads, __ATOMIC_ACQUIRE); t; t = t->next) {
        out->bytes_read += RELAXED_LOAD(t->tot_bytes_read);
        out->bytes_written += RELAXED_LOAD(t->tot_bytes_written);
        out->reads += RELAXED_LOAD(t->tot_reads);
        out->writes += RELAXED_LOAD(t->tot_writes);
        out->opens += RELAXED_LOAD(t->tot_opens);
        out->io_ticks += RELAXED_LOAD(t->tot_ticks);
        out->excluded_read += RELAXED_LOAD(t->excl_read);
        out->excluded_written += RELAXED_LOAD(t->excl_written);
    }
    out->files = __atomic_load_n(&n_records, __ATOMIC_ACQUIRE);
    out->excluded_read += __atomic_load_n(&tfd_maps_bytes, __ATOMIC_RELAXED);
    return 0;
}

int tfd_record_info(int64_t index, uint64_t *id, int *module, const char **path)
{
    if (!initialized || index < 0 || index >= __atomic_load_n(&n_records, __ATOMIC_ACQUIRE))
        return -1;
    tfd_rec *r = rec_by_index[index / DIR_CHUNK][index % DIR_CHUNK];
    if (!r)
        return -1;
    *id = r->id;
    *module = r->module;
    *path = r->path;
    return 0;
}

void tfd_set_trace(int on, int64_t cap_bytes)
{
    if (on) {
        /* chunks still held count against the new budget when they are freed */
        trace_cap = cap_bytes;
        __atomic_store_n(&trace_budget, cap_bytes, __ATOMIC_RELAXED);
    }
    __atomic_store_n(&trace_on, on ? 1 : 0, __ATOMIC_RELAXED);
}
