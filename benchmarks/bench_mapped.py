"""Following mapped files: what it costs a collect, and how far the
estimate is from the bytes touched when reads are scattered.

    python benchmarks/bench_mapped.py [--gib 1] [--collects 20] [--dirs /tmp /dev/shm]

1. One mapping of a sparse file (no disk I/O, the page cache fills as it
   is touched) sampled from /proc/self/pagemap, untouched, half read and
   wholly read: the median collect time, the pagemap bytes the shim read
   per collect (8 per page not yet counted), and the munmap's time (its
   last sample). No budget: the cost is per page not yet counted.
2. 100 random 4 KiB pages touched in a 64 MiB file in each of --dirs,
   cached and then cold: the estimate against the 400 KiB touched (the
   kernel maps cached neighbours at each fault). See docs/limits.md, "Seen beyond
   Darshan"."""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--collects", type=int, default=20)
    ap.add_argument("--dirs", nargs="*", default=[os.environ.get("TMPDIR", "/tmp"), "/dev/shm"])
    args = ap.parse_args()
    import tfdarshan
    from tfdarshan.capture import _native
    from tfdarshan.capture.recorder import RECORDER
    size = int(args.gib * (1 << 30)) // 4096 * 4096

    def collects(label):
        before, times = _native.own_read_bytes(), []
        for _ in range(args.collects):
            t = time.perf_counter()
            RECORDER.collect()
            times.append(time.perf_counter() - t)
        per = (_native.own_read_bytes() - before) / args.collects
        print(f"{label:34s} collect {1e3 * float(np.median(times)):7.3f} ms  pagemap {per / 2**20:6.2f} MiB")

    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/tmp")) as d:
        path = os.path.join(d, "sparse.bin")
        with open(path, "wb") as f:
            f.truncate(size)
        tfdarshan.attach()
        collects("no mapping followed")
        m = np.memmap(path, dtype=np.uint8, mode="r")
        collects(f"{args.gib:g} GiB mapped, untouched")
        int(m[: size // 2].sum(dtype=np.uint64))
        RECORDER.collect()
        collects("half read (and counted)")
        int(m.sum(dtype=np.uint64))
        RECORDER.collect()
        collects("all read (and counted)")
        t = time.perf_counter()
        m._mmap.close()
        print(f"{'munmap (its last sample)':34s} {1e3 * (time.perf_counter() - t):7.3f} ms")
        del m
        tfdarshan.detach()
    for d in args.dirs:
        if os.path.isdir(d):
            scattered(d)


def scattered(directory: str, size: int = 64 << 20, pages: int = 100) -> None:
    import tfdarshan
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory(dir=directory) as d:
        path = os.path.join(d, "scattered.bin")
        with open(path, "wb") as f:
            f.write(os.urandom(size))
        tfdarshan.attach()
        for cold in (False, True):
            if cold:
                fd = os.open(path, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)
            before = tfdarshan.snapshot()
            m = np.memmap(path, dtype=np.uint8, mode="r")
            for p in rng.choice(size // 4096, pages, replace=False):
                int(m[p * 4096])
            m._mmap.close()
            del m
            e = (tfdarshan.snapshot() - before).extra
            print(f"{directory}: {pages} random 4 KiB pages of a {size >> 20} MiB file, "
                  f"{'cold' if cold else 'cached'}: estimate {e['MMAP_BYTES'].sum() / 2**20:.1f} MiB "
                  f"for {pages * 4096 / 2**20:.2f} MiB touched")
        tfdarshan.detach()


if __name__ == "__main__":
    main()
