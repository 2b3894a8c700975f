"""What the shim adds to a call, measured where a noisy VM cannot hide it.

1. A buffered 64-byte fread loop through a GOT the shim patches: libc serves
   63 of every 64 calls from its buffer, so no system call drowns the
   wrapper. Detached and attached rounds alternate in one process.
2. The wrapper alone: the originals of pread and fread replaced by stubs
   that return at once (native/bench.c), the wrapper called against the stub
   called directly, alternating.

    python benchmarks/bench_hotpath.py [--calls N] [--rounds R]

Each figure is the median of R paired rounds with the 5-95 % and min-max
range of the per-round differences."""
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


def build(workdir: pathlib.Path) -> ctypes.CDLL:
    so = workdir / "libhotloop.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(HERE / "hotloop.c"), "-o", str(so)], check=True)
    lib = ctypes.CDLL(str(so))
    lib.fread_loop.restype = lib.pread_via.restype = lib.fread_via.restype = ctypes.c_long
    lib.fread_loop.argtypes = [ctypes.c_void_p, ctypes.c_long, ctypes.c_long]
    lib.pread_via.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    lib.fread_via.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_long]
    lib.open_stream.restype = ctypes.c_void_p
    lib.open_stream.argtypes = [ctypes.c_char_p]
    lib.close_stream.argtypes = [ctypes.c_void_p]
    return lib


def spread(diffs):
    s = sorted(diffs)
    q = lambda p: s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]
    return (f"median {statistics.median(s):+.1f} ns (5-95 %: {q(0.05):+.1f} to {q(0.95):+.1f}; "
            f"min-max {s[0]:+.1f} to {s[-1]:+.1f})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=31)
    args = ap.parse_args(argv)

    import tfdarshan
    from tfdarshan.capture._native import ffi, lib as shim
    with tempfile.TemporaryDirectory(prefix="tfd-hot-") as d:
        work = pathlib.Path(d)
        loop = build(work)
        data = work / "data.bin"
        data.write_bytes(os.urandom(args.calls * 64))   # no round reaches the end of the file

        def fread_round(attached: bool) -> float:
            if attached:
                tfdarshan.attach()
            f = loop.open_stream(str(data).encode())
            t = time.perf_counter_ns()
            loop.fread_loop(f, args.calls, 64)
            ns = (time.perf_counter_ns() - t) / args.calls
            loop.close_stream(f)
            if attached:
                tfdarshan.detach()
            return ns

        fread_round(False), fread_round(True)            # warm up
        off, on = [], []
        for _ in range(args.rounds):
            off.append(fread_round(False))
            on.append(fread_round(True))
        snap = tfdarshan.snapshot()
        reads = int(snap.stdio.loc[snap.stdio["path"] == str(data), "STDIO_READS"].sum())
        if reads != (args.rounds + 1) * args.calls:
            print(f"ERROR: the shim counted {reads} of {(args.rounds + 1) * args.calls} attached freads",
                  file=sys.stderr)
            return 1
        print(f"buffered 64-byte fread: {statistics.median(off):.1f} ns/call detached, "
              f"{statistics.median(on):.1f} attached; added {spread([b - a for a, b in zip(off, on)])}")

        # the wrapper alone, against the stub it forwards to
        tfdarshan.attach()
        fd = os.open(data, os.O_RDONLY)
        f = loop.open_stream(str(data).encode())
        shim.tfd_bench_stub(1)
        try:
            for name, call in (("pread", lambda fn: loop.pread_via(fn, fd, args.calls, 4096)),
                               ("fread", lambda fn: loop.fread_via(fn, f, args.calls, 64))):
                stub = int(ffi.cast("uintptr_t", shim.tfd_bench_stub_function(name.encode())))
                wrapper = int(ffi.cast("uintptr_t", shim.tfd_bench_wrapper(name.encode())))

                def timed(fn, call=call):
                    t = time.perf_counter_ns()
                    call(fn)
                    return (time.perf_counter_ns() - t) / args.calls

                timed(stub), timed(wrapper)
                plain, wrapped = [], []
                for _ in range(args.rounds):
                    plain.append(timed(stub))
                    wrapped.append(timed(wrapper))
                print(f"{name} wrapper alone: stub {statistics.median(plain):.1f} ns/call, wrapper + stub "
                      f"{statistics.median(wrapped):.1f}; added {spread([b - a for a, b in zip(plain, wrapped)])}")
        finally:
            shim.tfd_bench_stub(0)
            loop.close_stream(f)
            os.close(fd)
            tfdarshan.detach()
    return 0


if __name__ == "__main__":
    sys.exit(main())
