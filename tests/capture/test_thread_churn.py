"""Threads that come and go: tf.data starts a pool of threads for every
iterator, so a training job starts new ones every epoch. What an exited
thread read stays counted exactly, and the memory its counters took is
reused by the next threads instead of growing by a shard per thread and
file for as long as the job runs."""
import ctypes
import gc
import os
import threading

import numpy as np

import tfdarshan
from tfdarshan.capture.recorder import RECORDER

FILES, ROUNDS, THREADS = 300, 60, 4


def _rss() -> int:
    # live memory, not what malloc keeps on its free lists (which depends on
    # which thread freed what, and when)
    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_exited_threads_stay_counted_and_their_memory_is_reused(tmp_path, attached):
    paths = [str(tmp_path / f"f{i:03d}") for i in range(FILES)]
    sizes = np.arange(1, FILES + 1) * 10
    for p, n in zip(paths, sizes):
        with open(p, "wb") as f:
            f.write(b"c" * int(n))

    def reader():
        for p in paths:
            with open(p, "rb", buffering=0) as f:
                f.read()

    start = tfdarshan.snapshot()
    for r in range(ROUNDS):
        pool = [threading.Thread(target=reader) for _ in range(THREADS)]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
        RECORDER.collect()                 # folds the exited threads' last reads
        if r == 4:
            warm = _rss()
    grown = _rss() - warm
    window = tfdarshan.snapshot() - start
    p = window.posix.set_index("path").loc[paths]
    opens = ROUNDS * THREADS
    assert (p["POSIX_OPENS"] == opens).all()
    np.testing.assert_array_equal(p["POSIX_BYTES_READ"].to_numpy(), opens * sizes)
    # the largest file's first read is its size: every open of it counted one
    assert int(p["POSIX_SIZE_READ_1K_10K"].iloc[-1]) == opens
    # kept per thread, the 55 later rounds' 220 threads x 300 files would
    # take about 80 MiB of counters (1.3 KiB a shard)
    assert grown < 16 << 20, f"RSS grew {grown / 2**20:.1f} MiB"


def test_shards_handed_on_while_collects_run(tmp_path, attached):
    # waves of short-lived readers, each wave started before the last one is
    # joined, so threads exit (releasing their shards) while others take
    # those shards over, and a collector closes intervals all along: every
    # read is counted once, whichever thread held the file's shard
    waves, per_wave, files = 30, 3, 40
    paths = [str(tmp_path / f"g{i:02d}") for i in range(files)]
    sizes = (np.arange(files) + 1) * 1000
    for p, n in zip(paths, sizes):
        with open(p, "wb") as f:
            f.write(b"g" * int(n))

    def reader(offset):
        for p in paths[offset:] + paths[:offset]:
            with open(p, "rb", buffering=0) as f:
                while f.read(4096):
                    pass

    stop = threading.Event()

    def collector():
        while not stop.is_set():
            RECORDER.collect()

    start = tfdarshan.snapshot()
    c = threading.Thread(target=collector)
    c.start()
    previous = []
    try:
        for w in range(waves):
            wave = [threading.Thread(target=reader, args=((w * per_wave + i) % files,)) for i in range(per_wave)]
            for t in wave:
                t.start()
            for t in previous:
                t.join()
            previous = wave
        for t in previous:
            t.join()
    finally:
        stop.set()
        c.join()
    window = tfdarshan.snapshot() - start
    p = window.posix.set_index("path").loc[paths]
    opens = waves * per_wave
    chunks = -(-sizes // 4096)                  # reads that return data
    assert (p["POSIX_OPENS"] == opens).all()
    np.testing.assert_array_equal(p["POSIX_BYTES_READ"].to_numpy(), opens * sizes)
    np.testing.assert_array_equal(p["POSIX_READS"].to_numpy(), opens * (chunks + 1))
