"""Writing and reading a Darshan log of 100,000 POSIX records.

    python benchmarks/bench_log.py [--records N] [--runs 7]

Each round writes the log with our writer (log_stream: a stream per 8,192
records, built and deflated on every core) and with libdarshan-util's
(tests/oracles/libdarshan_util_writer.py, what tfdarshan used before: one thread,
zlib level 6), in alternating order, then reads ours back. Prints the
median, its 95 % interval and the range of wall and CPU time of each, and
the log's size. Budgets: write <= 0.3 s (issue 31), read <= 0.5 s."""
from __future__ import annotations

import argparse
import pathlib
import sys
import tempfile
import time

import numpy as np
import pandas as pd


def synthetic_snapshot(n: int, seed: int = 0):
    from tfdarshan.capture import counters as C
    from tfdarshan.capture.snapshot import Snapshot, empty_dxt, empty_extra, empty_values
    rng = np.random.default_rng(seed)
    ints, floats = C.names("POSIX")
    paths = [f"/data/train/part-{i:07d}.tfrecord" for i in range(n)]
    from tfdarshan.capture._native import darshan_hash
    df = pd.DataFrame({"record_id": np.array([darshan_hash(p) for p in paths], dtype=np.uint64),
                       "path": pd.Series(paths, dtype=object)})
    # shaped like a training run's records: most counters zero or small
    for c in ints:
        df[c] = 0
    df["POSIX_OPENS"] = rng.integers(1, 4, n)
    df["POSIX_READS"] = rng.integers(2, 40, n)
    df["POSIX_BYTES_READ"] = df["POSIX_READS"] * rng.integers(1000, 262144, n)
    df["POSIX_SEQ_READS"] = df["POSIX_READS"] - 1
    df["POSIX_CONSEC_READS"] = df["POSIX_READS"] - 1
    df["POSIX_SIZE_READ_100K_1M"] = df["POSIX_READS"] - 1
    df["POSIX_SIZE_READ_0_100"] = 1
    df["POSIX_MAX_BYTE_READ"] = df["POSIX_BYTES_READ"] - 1
    df["POSIX_MEM_ALIGNMENT"], df["POSIX_FILE_ALIGNMENT"] = 8, 4096
    for c in floats:
        df[c] = 0.0
    for c in ("POSIX_F_OPEN_START_TIMESTAMP", "POSIX_F_READ_START_TIMESTAMP", "POSIX_F_READ_END_TIMESTAMP",
              "POSIX_F_CLOSE_END_TIMESTAMP", "POSIX_F_READ_TIME", "POSIX_F_META_TIME", "POSIX_F_MAX_READ_TIME"):
        df[c] = rng.random(n) * 100
    meta = {"origin_unix_time": time.time() - 200, "start": 0.0, "end": 150.0, "hostname": "bench", "pid": 1}
    # each file read to its end, as tf.data reads it (one zero-byte read at EOF)
    extra = pd.DataFrame({"record_id": df["record_id"].to_numpy(), "module": "POSIX", "ZERO_READS": 1})
    return Snapshot(df, C.empty_frame("STDIO"), empty_values(), extra, empty_dxt(), meta)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args(argv)
    import statistics
    sys.path.insert(0, str(pathlib.Path(__file__).parent.parent / "tests" / "oracles"))
    from intervals import median_interval
    from libdarshan_util_writer import write_with_libdarshan_util
    from tfdarshan.logs.darshan_log import read_darshan_log, write_darshan_log
    snap = synthetic_snapshot(args.records)
    writers = {"ours": write_darshan_log, "libdarshan-util": write_with_libdarshan_util}
    times = {k: [] for k in ("ours", "libdarshan-util", "read")}
    cpu = {k: [] for k in times}
    sizes, ok = {}, True
    with tempfile.TemporaryDirectory() as d:
        for i in range(args.runs):
            for name in (list(writers) if i % 2 == 0 else list(writers)[::-1]):
                path = pathlib.Path(d) / f"{i}.{name}.darshan"
                t, c = time.perf_counter(), time.process_time()
                writers[name](snap, path)
                times[name].append(time.perf_counter() - t)
                cpu[name].append(time.process_time() - c)
                sizes[name] = path.stat().st_size
            t, c = time.perf_counter(), time.process_time()
            back = read_darshan_log(pathlib.Path(d) / f"{i}.ours.darshan")
            times["read"].append(time.perf_counter() - t)
            cpu["read"].append(time.process_time() - c)
            ok &= len(back.posix) == args.records
            for f in pathlib.Path(d).glob(f"{i}.*"):
                f.chmod(0o600)
                f.unlink()

    def line(xs):
        lo, hi = median_interval(xs)
        return f"median {statistics.median(xs):.3f} s [{lo:.3f}, {hi:.3f}] ({min(xs):.3f}-{max(xs):.3f})"
    print(f"{args.records} POSIX records, {args.runs} rounds (the two writers in alternating order): "
          "median [95 % interval of the median] (range)")
    for name in writers:
        print(f"  write, {name}: {line(times[name])}; CPU {line(cpu[name])}; "
              f"{sizes[name] / 2**20:.1f} MiB log" + (" (budget 0.3 s)" if name == "ours" else ""))
    print(f"  read ours back: {line(times['read'])}; CPU {line(cpu['read'])} (budget 0.5 s)"
          f"{'' if ok else '  ERROR: records lost'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
