"""Overhead on an input-bound tf.data pipeline, and the cost of stats().

    python benchmarks/bench_pipeline.py [--files 10000] [--rounds 5]

10,000 files of about 88 KB (ImageNet's median JPEG size) read with
tf.io.read_file in a parallel map, one pass per measurement. Detached,
attached with counters, and attached with the per-operation trace are
interleaved round by round in one process; the ratios are medians of the
per-round ratios. Budgets (issue 4): overhead at most 1 % with counters,
3 % with the trace; stats() at most 50 us with 1,000 active files."""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    import tensorflow as tf
    import tfdarshan
    from tfdarshan import _native

    with tempfile.TemporaryDirectory(prefix="tfd-pipe-", dir=os.environ.get("TFD_BENCH_DIR")) as d:
        paths = make_files(pathlib.Path(d), args.files)
        ds = tf.data.Dataset.from_tensor_slices(paths).map(
            lambda p: tf.strings.length(tf.io.read_file(p)), num_parallel_calls=tf.data.AUTOTUNE).batch(256)

        def one_pass():
            t = time.perf_counter()
            total = sum(int(tf.reduce_sum(x)) for x in ds)
            return time.perf_counter() - t, total

        one_pass()   # warm the page cache and tf.data
        modes = {"off": [], "counters": [], "trace": []}
        for _ in range(args.rounds):
            for mode in modes:
                if mode == "off":
                    tfdarshan.detach()
                else:
                    tfdarshan.attach()
                    _native.set_trace(mode == "trace", 256 << 20)
                elapsed, total = one_pass()
                modes[mode].append(elapsed)
            tfdarshan.detach()
        ratio = {m: statistics.median(v / o for v, o in zip(modes[m], modes["off"])) for m in ("counters", "trace")}
        print(f"{args.files} files, {total / 2**20:.0f} MiB per pass; median pass "
              + ", ".join(f"{m} {statistics.median(v):.3f} s" for m, v in modes.items()))
        print(f"overhead with counters {100 * (ratio['counters'] - 1):+.2f} % (budget 1 %), "
              f"with trace {100 * (ratio['trace'] - 1):+.2f} % (budget 3 %)")

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
