"""Added cost per pread: a native loop of cached 4 KiB preads, timed with the
shim detached and attached, interleaved, in one process.

    python benchmarks/bench_pread.py [--calls N] [--rounds R] [--threads T]

Prints ns/call detached and attached, the added ns/call, and for T threads
the throughput ratio (attached / detached). Budget (issue 2): at most
50 ns added single-threaded; 8-thread ratio at least 0.9."""
from __future__ import annotations

import argparse
import ctypes
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).parent


def build_loop(workdir: pathlib.Path) -> ctypes.CDLL:
    so = workdir / "libpreadloop.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-pthread", str(HERE / "preadloop.c"), "-o", str(so)],
                   check=True)
    lib = ctypes.CDLL(str(so))
    lib.pread_loop.restype = ctypes.c_long
    lib.pread_loop.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_long]
    lib.pread_threads.restype = ctypes.c_long
    lib.pread_threads.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_long, ctypes.c_long]
    return lib


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=31)
    ap.add_argument("--threads", type=int, default=8)
    args = ap.parse_args(argv)

    import tfdarshan
    with tempfile.TemporaryDirectory(prefix="tfd-bench-") as d:
        work = pathlib.Path(d)
        lib = build_loop(work)
        data = work / "cached.bin"
        data.write_bytes(os.urandom(1 << 20))
        fd = os.open(data, os.O_RDONLY)
        fds = [os.open(work / f"t{i}.bin", os.O_RDWR | os.O_CREAT) for i in range(args.threads)]
        for f in fds:
            os.pwrite(f, os.urandom(4096), 0)
        fd_array = (ctypes.c_int * len(fds))(*fds)

        def single():
            t = time.perf_counter_ns()
            lib.pread_loop(fd, args.calls, 4096)
            return (time.perf_counter_ns() - t) / args.calls

        def threaded():
            n = args.calls // 2
            t = time.perf_counter_ns()
            lib.pread_threads(fd_array, len(fds), n, 4096)
            return len(fds) * n / ((time.perf_counter_ns() - t) / 1e9)

        tfdarshan.attach()          # the descriptors above are recorded
        tfdarshan.detach()
        single(); threaded()        # warm caches
        off, on, toff, ton = [], [], [], []
        for _ in range(args.rounds):
            off.append(single()); toff.append(threaded())
            tfdarshan.attach()
            on.append(single()); ton.append(threaded())
            tfdarshan.detach()
        snap = tfdarshan.snapshot()
        reads = int(snap.posix.loc[snap.posix["path"] == str(data), "POSIX_READS"].sum())
        expected = args.rounds * args.calls
        # the machine's speed drifts between rounds: compare each attached
        # run with the detached run just before it, and take the median
        m_off, m_on = statistics.median(off), statistics.median(on)
        added = statistics.median(b - a for a, b in zip(off, on))
        ratio = statistics.median(b / a for a, b in zip(toff, ton))
        print(f"single thread: {m_off:.1f} ns/call detached, {m_on:.1f} ns/call attached, "
              f"added {added:.1f} ns/call (median of {args.rounds} paired rounds; budget 50)")
        print(f"{len(fds)} threads: {statistics.median(toff)/1e6:.2f} M calls/s detached, "
              f"{statistics.median(ton)/1e6:.2f} M calls/s attached, ratio {ratio:.3f} "
              f"(median of paired rounds; budget >= 0.90)")
        print(f"counted {reads} of {expected} attached single-thread calls")
        if reads != expected:
            print("ERROR: the shim missed calls", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
