"""What the continuous recording (the flight recorder's ring) costs.

    python benchmarks/bench_ring.py [--files 3000] [--rounds 41] [--passes 12]

1. Overhead on the pipeline benchmark's input-bound tf.data pipeline (files
   of about 88 KB read with tf.io.read_file): each round measures once
   attached without the ring and once attached with the ring collecting
   every 100 ms, in a shuffled order, in one process; the first round is
   dropped. Reported: the median of the per-round ratios, the 95 %
   bootstrap interval of that median and the rounds' 5-95 % range, in CPU
   time (user + system, all threads) and wall time; budget (issue 13) 1 %.
   Also the collector thread's own CPU, per second and as a share of the
   ring runs' CPU (measured directly, so far less noisy than the ratio), and
   the interval it settled on (it holds itself to 1 % of one core).
2. Memory at the cap: a ring with a small cap (--cap, default 8 MiB) fed
   with reads of many files until it evicts; its accounted bytes, the
   process's resident-set growth, and what it counted as dropped."""
from __future__ import annotations

import argparse
import os
import pathlib
import random
import resource
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from bench_pipeline import make_files, summary  # noqa: E402
from intervals import median_interval  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
MODES = ("attached", "ring")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=3_000)
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--passes", type=int, default=12,
                    help="passes over the files per measurement: several of the collector's intervals, "
                         "which stretch to 2 s when collecting is costly")
    ap.add_argument("--cap", default="8MiB", help="the ring's memory cap for part 2")
    args = ap.parse_args(argv)
    import tensorflow as tf
    import tfdarshan
    from tfdarshan.advice.tiers import parse_size
    from tfdarshan.capture.recorder import RECORDER
    from tfdarshan.capture.ring import Ring

    with tempfile.TemporaryDirectory(prefix="tfd-ring-", dir=os.environ.get("TFD_BENCH_DIR")) as d:
        paths = make_files(pathlib.Path(d), args.files)
        ds = tf.data.Dataset.from_tensor_slices(paths).map(
            lambda p: tf.strings.length(tf.io.read_file(p)), num_parallel_calls=tf.data.AUTOTUNE).batch(256)
        tfdarshan.attach(trace=False)
        collector = []              # (collector CPU s, wall s) of each ring pass

        ring = Ring(RECORDER, 120)           # one ring, resumed for each of its passes (as in a long job)

        def measured_pass(mode: str):
            if mode == "ring":
                ring.start()
            c0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            for _ in range(args.passes):
                sum(int(tf.reduce_sum(x)) for x in ds)
            c1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            cpu = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
            if mode == "ring":
                ring.stop()
                collector.append((ring.collector_cpu, t1 - t0, ring.collects, ring.effective_interval, cpu))
                ring.collector_cpu, ring.collects = 0.0, 0
            return t1 - t0, cpu

        rng = random.Random(1)
        rounds = []
        for r in range(args.rounds + 1):
            order = list(MODES)
            rng.shuffle(order)
            got = {mode: measured_pass(mode) for mode in order}
            if r:
                rounds.append(got)
        collector = collector[1:]
        print(f"{args.files} files, {args.passes} passes per measurement, {len(rounds)} rounds in shuffled order")
        for m in MODES:
            print(f"  {m:8s} median measurement {statistics.median(x[m][0] for x in rounds):.3f} s wall, "
                  f"{statistics.median(x[m][1] for x in rounds):.3f} s CPU")
        for k, what in ((1, "CPU"), (0, "wall")):
            ratios = [100 * (x["ring"][k] / x["attached"][k] - 1) for x in rounds]
            med, lo, hi = summary(ratios)
            clo, chi = median_interval(ratios)
            print(f"ring overhead, {what} time: {med:+.2f} % (95 % interval of the median {clo:+.2f} to "
                  f"{chi:+.2f}; rounds' 5-95 %: {lo:+.2f} to {hi:+.2f}; budget 1 %)")
        med, lo, hi = summary([1e3 * c / w for c, w, *_ in collector])
        rate = statistics.median(n / w for _, w, n, *_ in collector)
        interval = statistics.median(i for *_, i, _ in collector)
        print(f"collector thread CPU: {med:.2f} ms per second (5-95 %: {lo:.2f} to {hi:.2f}); "
              f"{rate:.1f} collects per second; interval in effect {interval:.2f} s")
        shares = [100 * c / cpu for c, *_, cpu in collector]
        med, lo, hi = summary(shares)
        clo, chi = median_interval(shares)
        print(f"collector thread CPU as a share of the ring runs' CPU: {med:.2f} % (95 % interval of the "
              f"median {clo:.2f} to {chi:.2f}; rounds' 5-95 %: {lo:.2f} to {hi:.2f})")

        # memory at the cap: every read touches a new file, so every interval holds rows
        cap = parse_size(args.cap)
        ring = Ring(RECORDER, 3600, memory_cap=cap).start()   # its arena is written through at start
        before = rss_bytes()
        peak_rss = before
        i = 0
        while ring.dropped_intervals < 20:
            for p in paths[i % len(paths): i % len(paths) + 200]:
                with open(p, "rb") as f:
                    f.read(4096)
            i += 200
            time.sleep(0.02)
            peak_rss = max(peak_rss, rss_bytes())
        s = ring.stats()
        ring.stop()
        print(f"memory at the cap ({cap / 2**20:.0f} MiB): ring accounts {s['peak_memory'] / 2**20:.2f} MiB at "
              f"its peak, {s['memory'] / 2**20:.2f} MiB now, holding {s['held_seconds']:.1f} s in "
              f"{s['intervals']} intervals; process RSS grew {(peak_rss - before) / 2**20:.1f} MiB; "
              f"dropped {s['dropped_intervals']} intervals ({s['dropped_seconds']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
