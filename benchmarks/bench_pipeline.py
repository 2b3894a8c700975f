"""Overhead on an input-bound tf.data pipeline, and the cost of stats().

    python benchmarks/bench_pipeline.py [--files 3000] [--rounds 41] [--passes 1] [--threads 1]
                                        [--counts FILE]

Files of about 88 KB (ImageNet's median JPEG size) read with tf.io.read_file
in a parallel map (tf.data.AUTOTUNE), --passes passes over every file per
measurement. Each round measures once detached, once attached with
counters, once attached with the per-operation trace, and once detached
again (the A/A control: what two identical measurements differ by), in a
shuffled order, in one process; a first round warms every mode up and is
dropped. Each measurement is taken in wall time and in the process's CPU
time (user + system, all threads, from getrusage). Overheads are medians
of the per-round ratios against the same round's detached measurement,
with the 95 % bootstrap interval of the median and the rounds' 5-95 %
range; the A/A control's interval is the resolution of the run, and the
script says when a budget cannot be judged at it. After every attached
measurement the script checks, from a snapshot, that the profiler counted
every file of it: one open and its bytes per file and pass.
Budgets (issues 4 and 31): at most 1 % with counters, 2 % with the trace;
stats() at most 50 us with 1,000 active files.

Where the noise comes from, measured (docs/performance.md, "The pipeline's
overhead: measured so it can be judged"): TensorFlow's Eigen thread pools spin while they
wait for work (about a tenth of this pipeline's CPU in a `perf` sample),
and CPU time counts the spinning, which varies with timing and with
whatever else the 2 cores run; so the inter- and intra-op pools get
--threads threads each (1 by default: the setting a user of an input-bound
job on few cores would pick, `tf.config.threading`; 0 keeps TensorFlow's
defaults). tf.data's own threads, which make every wrapped call, are not
changed. Short measurements (one pass by default) in many rounds pair each
attached measurement with a detached one a second apart, so the machine's
drift cancels; Python's garbage collector runs before each measurement, so
none starts inside one by chance. The work the profiler sees per file is
the same as in a long run: every measurement reads every file.

The timed figure on a shared 2-core machine stays noisy, so the script
prints a deterministic one beside it when given --counts FILE (written by
`bench_pipeline_lines.py --json FILE`: callgrind's count of the shim's own
instructions and simulated cache misses per file of this same pipeline):
the instructions at the cost per instruction of the same calls timed in a
warm native loop in this run, plus the misses beyond that loop's at the
latency of a dependent load from the last level and from memory, measured
in this run by chasing pointers. Misses that overlap, and stores, cost
less than a dependent load, so that is an upper bound; the instructions
alone, the lower one.

Where the counters' overhead goes: the CPU time of the collects made during
the attached measurements (the recorder's 10 s background collect; the
collect that folds a measurement, at its snapshot, comes after its
measured CPU and is printed apart), and the per-file calls (stat, open, two
preads, close, as tf.io.read_file makes them) timed natively in this
process, detached and attached interleaved; the rest is what neither
explains: cache misses on each file's state, cold at every pass in the
pipeline and warm in the native loop, and the machine's noise."""
from __future__ import annotations

import argparse
import ctypes
import gc
import json
import os
import pathlib
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
from intervals import median_interval  # noqa: E402
MODES = ("off", "counters", "trace", "off-again")
BUDGETS = (("counters", 1.0), ("trace", 2.0), ("off-again", None))

CHASE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
/* ns per dependent load, chasing a random cycle through `bytes` of lines */
double chase_ns(long bytes, long steps)
{
    long n = bytes / 64;
    char *a = aligned_alloc(64, (size_t)n * 64);
    long *perm = malloc((size_t)n * sizeof(long));
    if (!a || !perm)
        return -1;
    unsigned seed = 7;
    for (long i = 0; i < n; i++)
        perm[i] = i;
    for (long i = n - 1; i > 0; i--) {         /* Sattolo: one cycle through every line */
        long j = rand_r(&seed) % i;
        long t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    for (long i = 0; i < n; i++)
        *(void **)(a + perm[i] * 64) = a + perm[(i + 1) % n] * 64;
    void *p = a + perm[0] * 64;
    for (long i = 0; i < n; i++)
        p = *(void **)p;
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    for (long i = 0; i < steps; i++)
        p = *(void **)p;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    void *volatile sink = p;
    (void)sink;
    free(a);
    free(perm);
    return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / steps;
}
"""


def make_files(d: pathlib.Path, n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    sizes = np.clip(rng.lognormal(np.log(88_000), 0.35, n), 8_000, 400_000).astype(int)
    blob = rng.bytes(int(sizes.max()))
    paths = []
    for i, s in enumerate(sizes):
        p = d / f"{i // 1000:02d}" / f"img{i:05d}.jpg"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(blob[: int(s)])
        paths.append(str(p))
    return paths


def pipeline(tf, paths):
    """The measured pipeline (this script's, bench_pipeline_lines.py's and
    bench_pipeline_profile.py's): every file read whole by tf.io.read_file
    in a parallel map, in batches of 256 lengths."""
    return tf.data.Dataset.from_tensor_slices(paths).map(
        lambda p: tf.strings.length(tf.io.read_file(p)), num_parallel_calls=tf.data.AUTOTUNE).batch(256)


def summary(values):
    """(median, 5th percentile, 95th percentile)."""
    v = np.asarray(values, dtype=float)
    return float(np.median(v)), float(np.percentile(v, 5)), float(np.percentile(v, 95))


def per_file_calls(paths, rounds: int = 11, n: int = 4000):
    """Added ns per file of the calls tf.io.read_file makes (stat, open,
    pread, pread at the end, close), and per pread, timed natively with the
    counters attached against detached, interleaved, in the calling
    thread's CPU time: medians of the paired rounds' differences (a
    difference of each mode's least disturbed round is not paired, and
    came out negative once under load)."""
    import tfdarshan
    from bench_hotpath import build
    sample = paths[len(paths) // 2]
    size = os.path.getsize(sample)
    with tempfile.TemporaryDirectory(prefix="tfd-pipe-loop-") as d:
        loop = build(pathlib.Path(d))
        got = {m: ([], []) for m in ("off", "counters")}
        rng = random.Random(2)
        for _ in range(rounds + 1):
            order = ["off", "counters"]
            rng.shuffle(order)
            for mode in order:
                if mode == "off":
                    tfdarshan.detach()
                else:
                    tfdarshan.attach()
                fd = loop.open_fd(sample.encode())
                t = time.thread_time_ns()
                loop.read_file_loop(sample.encode(), n, size)
                t1 = time.thread_time_ns()
                loop.pread_loop(fd, n, size)
                t2 = time.thread_time_ns()
                loop.close_fd(fd)
                got[mode][0].append((t1 - t) / n)
                got[mode][1].append((t2 - t1) / n)
        tfdarshan.detach()
    diff = lambda k: statistics.median(b - a for a, b in zip(got["off"][k][1:], got["counters"][k][1:]))
    return diff(0), diff(1)


def load_latencies(workdir: pathlib.Path, runs: int = 5):
    """ns per dependent load from the last level (4 MiB of lines) and from
    memory (256 MiB), in the thread's CPU time, the least of runs (a loaded
    machine only adds to it)."""
    src, so = workdir / "chase.c", workdir / "libchase.so"
    src.write_text(CHASE)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(src), "-o", str(so)], check=True)
    lib = ctypes.CDLL(str(so))
    lib.chase_ns.argtypes, lib.chase_ns.restype = [ctypes.c_long, ctypes.c_long], ctypes.c_double
    return tuple(min(lib.chase_ns(size, 2_000_000) for _ in range(runs)) for size in (4 << 20, 256 << 20))


def where_it_goes(rounds, file_ns, pread_ns, files_read: int) -> None:
    """The counters' added CPU per measurement, split into collects, the
    per-file calls (opening calls and reads) and the rest."""
    measured = statistics.median(x["counters"][1] - x["off"][1] for x in rounds)
    collects = statistics.median(x["counters"][2][0] for x in rounds)
    at_snapshot = statistics.median(x["counters"][2][1] for x in rounds)
    opens_ns = file_ns - 2 * pread_ns
    calls = files_read * file_ns / 1e9
    print(f"where the counters' added CPU goes, per measurement ({files_read} files read): "
          f"measured {measured * 1e3:+.1f} ms (median of rounds)")
    print(f"  per-file calls, timed natively in this process: {file_ns:+.0f} ns a file "
          f"(stat, open, close {opens_ns:+.0f} ns; two preads {2 * pread_ns:+.0f} ns) = {calls * 1e3:+.1f} ms")
    print(f"  collects: {collects * 1e3:.1f} ms of CPU during the measurement; the collect at its snapshot, "
          f"after it, folds what it wrote: {at_snapshot * 1e3:.1f} ms more, not in the measured CPU")
    print(f"  the rest: {(measured - calls - collects) * 1e3:+.1f} ms (cache misses on each file's state, cold at "
          f"every pass here and warm in the native loop; the machine's noise)")


def deterministic(counts_file: str, file_ns: float, latencies, cpu_per_file: float) -> None:
    """The added CPU per file from callgrind's counts of this pipeline: the
    shim's own instructions at the warm loop's measured cost each, plus the
    misses beyond the warm loop's at a dependent load's latency."""
    c = json.loads(pathlib.Path(counts_file).read_text())
    per = c["per_file"]
    warm = per.get("warm-own")
    if not warm:
        print(f"{counts_file} holds no warm loop: re-run bench_pipeline_lines.py --json", file=sys.stderr)
        return
    if file_ns <= 0:
        print(f"no deterministic estimate: the warm loop's added cost ({file_ns:+.0f} ns a file, median of "
              f"paired rounds) did not resolve in this run", file=sys.stderr)
        return
    ns_per_instr = file_ns / warm["Ir"]
    t_ll, t_mem = latencies
    print(f"deterministic estimate (callgrind's counts in {counts_file}: {c['files']} files x {c['passes']} passes, "
          f"simulated last level {c['ll_bytes'] >> 20} MiB): the shim's own instructions at {ns_per_instr:.3f} ns "
          f"each (the warm loop, median of paired rounds: {file_ns:+.0f} ns for {warm['Ir']:.0f}), first-level "
          f"misses (data and code) that hit the last level at {t_ll:.1f} ns, last-level misses at {t_mem:.1f} ns "
          f"(dependent loads, measured now); of {cpu_per_file * 1e6:.1f} us of CPU a file detached")
    for mode in ("counters", "trace"):
        own = per.get(mode + "-own")
        if not own:
            continue
        l1 = max(0.0, (own["D1mr"] + own["D1mw"] + own["I1mr"]) - (warm["D1mr"] + warm["D1mw"] + warm["I1mr"]))
        ll = max(0.0, (own["DLmr"] + own["DLmw"] + own["ILmr"]) - (warm["DLmr"] + warm["DLmw"] + warm["ILmr"]))
        instr_ns = own["Ir"] * ns_per_instr
        miss_ns = (l1 - ll) * t_ll + ll * t_mem
        lo, hi = 100 * instr_ns * 1e-9 / cpu_per_file, 100 * (instr_ns + miss_ns) * 1e-9 / cpu_per_file
        print(f"  {mode:8s} {own['Ir']:.0f} instructions = {instr_ns:.0f} ns, {l1:.1f} first-level and {ll:.1f} "
              f"last-level misses more than warm = {miss_ns:.0f} ns at most: {lo:+.2f} to {hi:+.2f} % of the CPU")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=3_000)
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--passes", type=int, default=1, help="passes over the files per measurement")
    ap.add_argument("--threads", type=int, default=1,
                    help="TensorFlow's inter- and intra-op threads (0: TensorFlow's defaults)")
    ap.add_argument("--counts", help="bench_pipeline_lines.py --json's file: print the deterministic estimate")
    args = ap.parse_args(argv)
    import tensorflow as tf
    if args.threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    import tfdarshan
    from tfdarshan.capture import _native
    from tfdarshan.capture.recorder import RECORDER
    collect_cpu = [0]                # thread CPU ns spent in collects, whichever thread made them

    def timed_collect(fn=RECORDER.collect):
        t = time.thread_time_ns()
        try:
            return fn()
        finally:
            collect_cpu[0] += time.thread_time_ns() - t
    RECORDER.collect = timed_collect

    with tempfile.TemporaryDirectory(prefix="tfd-pipe-", dir=os.environ.get("TFD_BENCH_DIR")) as d:
        paths = make_files(pathlib.Path(d), args.files)
        sizes = np.array([os.path.getsize(p) for p in paths], dtype=np.int64)
        ds = pipeline(tf, paths)
        counted = {"files": None}    # the last attached snapshot's opens and bytes by path

        def check_counted(label: str):
            """Every file read in the measurement just made was counted: its
            opens and bytes grew by one open and its size per pass."""
            posix = tfdarshan.snapshot().posix.set_index("path")
            now = posix.reindex(paths)[["POSIX_OPENS", "POSIX_BYTES_READ"]].fillna(0).to_numpy(dtype=np.int64)
            was = counted["files"] if counted["files"] is not None else np.zeros_like(now)
            counted["files"] = now
            grew = now - was
            bad = np.flatnonzero((grew[:, 0] != args.passes) | (grew[:, 1] != sizes * args.passes))
            if len(bad):
                i = int(bad[0])
                raise SystemExit(f"{label}: {len(bad)} of {len(paths)} files not counted exactly, e.g. {paths[i]}: "
                                 f"{grew[i, 0]} opens and {grew[i, 1]} bytes, expected {args.passes} and "
                                 f"{sizes[i] * args.passes}")

        def measured_pass(mode: str):
            if mode.startswith("off"):
                tfdarshan.detach()
            else:
                tfdarshan.attach()
                _native.set_trace(mode == "trace", 256 << 20)
            gc.collect()
            k0 = collect_cpu[0]
            c0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            for _ in range(args.passes):
                total = sum(int(tf.reduce_sum(x)) for x in ds)
            c1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            k1 = collect_cpu[0]
            if not mode.startswith("off"):
                check_counted(mode)     # its collect folds what the measurement wrote
                tfdarshan.detach()
            collects = ((k1 - k0) / 1e9, (collect_cpu[0] - k1) / 1e9)
            return t1 - t0, (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime), total, collects

        rng = random.Random(1)
        rounds = []                 # per round: {mode: (wall s, CPU s, collects)}
        for r in range(args.rounds + 1):
            order = list(MODES)
            rng.shuffle(order)
            got = {}
            for mode in order:
                wall, cpu, total, collects = measured_pass(mode)
                got[mode] = (wall, cpu, collects)
            if r:                   # round 0 warms the page cache, tf.data and every mode
                rounds.append(got)
        assert total == int(sizes.sum()), (total, int(sizes.sum()))
        threads = f"{args.threads} inter- and intra-op threads" if args.threads else "TensorFlow's default thread pools"
        print(f"{args.files} files, {total / 2**20:.0f} MiB per pass, {args.passes} passes per measurement, "
              f"{len(rounds)} rounds in shuffled order, {threads}; every attached measurement counted every "
              f"file exactly ({2 * len(rounds) + 2} checked)")
        for m in MODES:
            print(f"  {m:9s} median measurement {statistics.median(x[m][0] for x in rounds):.3f} s wall, "
                  f"{statistics.median(x[m][1] for x in rounds):.3f} s CPU")
        halves_agree, resolution = True, None
        for m, budget in (BUDGETS[-1],) + BUDGETS[:-1]:     # the A/A control first: the run's resolution
            for k, what in ((1, "CPU"), (0, "wall")):
                ratios = [100 * (x[m][k] / x["off"][k] - 1) for x in rounds]
                med, lo, hi = summary(ratios)
                ilo, ihi = median_interval(ratios)
                first, second = summary(ratios[: len(ratios) // 2]), summary(ratios[len(ratios) // 2:])
                agree = first[1] <= second[0] <= first[2] and second[1] <= first[0] <= second[2]
                if k == 1 and budget is None:
                    resolution = max(abs(ilo), abs(ihi))
                if k == 1:
                    halves_agree &= agree
                verdict = ""
                if k == 1 and budget is not None:
                    verdict = ("met" if ihi <= budget else "missed" if ilo > budget else
                               f"not resolved at this run's resolution (±{resolution:.2f} %)")
                label = "detached again (A/A)" if budget is None else f"with {m}"
                print(f"overhead {label}, {what} time: {med:+.2f} % [95 % interval {ilo:+.2f} to {ihi:+.2f}] "
                      f"(5-95 % of rounds: {lo:+.2f} to {hi:+.2f}{f'; budget {budget:g} %: {verdict}' if verdict else ''}); "
                      f"halves {first[0]:+.2f} and {second[0]:+.2f} % {'agree' if agree else 'DISAGREE'}")
        if not halves_agree:
            print("WARNING: the halves' CPU-time overheads disagree: too noisy a run to quote", file=sys.stderr)
        file_ns, pread_ns = per_file_calls(paths)
        where_it_goes(rounds, file_ns, pread_ns, args.files * args.passes)
        if args.counts:
            cpu_per_file = statistics.median(x["off"][1] for x in rounds) / (args.files * args.passes)
            deterministic(args.counts, file_ns, load_latencies(pathlib.Path(d)), cpu_per_file)

        # stats() with 1,000 files active in the current step
        tfdarshan.attach()
        with tfdarshan.profile(trace=False):
            with tfdarshan.step(1):
                for p in paths[:1000]:
                    with open(p, "rb") as f:
                        f.read()
            samples = []
            for _ in range(2000):
                t = time.perf_counter_ns()
                tfdarshan.stats()
                samples.append(time.perf_counter_ns() - t)
        print(f"stats() with 1,000 active files: median {statistics.median(samples) / 1e3:.1f} us "
              f"(budget 50 us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
