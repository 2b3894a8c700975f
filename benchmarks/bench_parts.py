"""Where a wrapped pread's added time goes: controlled experiments.

    python benchmarks/bench_parts.py [--rounds R] [--originals 0 1 ...] [--variants 0 1 ...]

The pread wrapper and variants of it (benchmarks/shim_stubs.c's
tfd_bench_variant, built into the benchmarks' copy of the shim by
stub_shim.py), each called directly around an original: the real pread
(cached 4 KiB) or a stub that does one part of what a system call does to
the caller's state (shim_stubs.c's kinds: enter the kernel, copy 4 KiB,
overwrite the return-stack predictor, evict the L1 data cache, the L1
instruction cache, the branch target buffer, the data TLB, the L2 cache).

Every round runs every variant in a shuffled order; a variant's round
figure is the median, over 15 pairs of short samples, of (variant − the
original called directly), so the machine's load, which changes over
milliseconds, mostly cancels. Printed per original and variant: the median
added ns over the rounds with its 95 % bootstrap interval, and its
difference from the variant "copy" (the shipped wrapper's body, built in the
same file as the other variants) paired by round, with its interval.

Variants: 0 shipped (wrappers.c), 1 copy, 2 copy + the post-call lines
prefetched before the call, 3 the clock reads only (lookups, two rdtsc, no
counting), 4 the counting only (the times frozen, no clock read), 5 the
lookups only, 6 lfence + rdtsc, 7 rdtscp, 8 copy going back by a jump
(native/jump_return.h) whatever the host, 9 lookups only going back by a
jump, 10 shipped going back by `ret` (the jump switched off for its
samples; every other variant's run with the host's own choice, on where
the kernel returns through Safe RET)."""
from __future__ import annotations

import argparse
import ctypes
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE))
from intervals import median_interval  # noqa: E402

VARIANTS = ("shipped", "copy", "prefetch", "clock only", "counting only", "lookups only", "lfence+rdtsc", "rdtscp",
            "copy, jmp back", "lookups, jmp back", "shipped, by ret")
BY_RET = VARIANTS.index("shipped, by ret")
ORIGINALS = {0: "the real pread (cached, 4 KiB)", 1: "a stub that returns at once",
             2: "a stub that enters the kernel (getppid)", 3: "a stub that copies 4 KiB",
             4: "a stub that fills the return-stack predictor", 5: "a stub that reads 32 KiB (L1 data)",
             6: "a stub that runs 64 KiB of code (L1 instructions)", 7: "a stub that takes 4,096 branches (BTB)",
             8: "a stub that touches 256 pages (data TLB)", 9: "a stub that reads 1 MiB (L2)",
             10: "a stub that calls the real pread for 64 bytes", 11: "a stub that enters the kernel, then copies 4 KiB",
             12: "a stub that calls the real pread, then loads the counting's data lines",
             13: "a stub that enters the kernel, then reads 32 KiB (L1 data)",
             14: "a stub that enters the kernel, then runs 64 KiB of code (L1 instructions)",
             15: "a stub that calls the real pread, then the wrapper once around itself (warm again)"}


def interval(values) -> str:
    lo, hi = median_interval(values)
    return f"{statistics.median(values):+6.1f} [{lo:+6.1f}, {hi:+6.1f}]"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--originals", type=int, nargs="*", default=sorted(ORIGINALS))
    ap.add_argument("--variants", type=int, nargs="*", default=list(range(len(VARIANTS))))
    args = ap.parse_args(argv)
    if args.rounds < 5:
        ap.error("--rounds must be at least 5")
    import stub_shim
    if stub_shim.install() is None:
        print("the installed shim has the stubs built in: an old build, without the variants", file=sys.stderr)
        return 1
    import tfdarshan
    from tfdarshan.capture._native import ffi, lib as shim
    if 1 not in args.variants:
        args.variants = [1] + args.variants
    with tempfile.TemporaryDirectory(prefix="tfd-parts-") as d:
        work = pathlib.Path(d)
        so = work / "libhotloop.so"
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-pthread", str(HERE / "hotloop.c"), "-o", str(so)],
                       check=True)
        loop = ctypes.CDLL(str(so))
        loop.pread_via.argtypes, loop.pread_via.restype = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long,
                                                           ctypes.c_long], ctypes.c_long
        loop.open_fd.argtypes, loop.open_fd.restype = [ctypes.c_char_p], ctypes.c_int
        loop.close_fd.argtypes, loop.close_fd.restype = [ctypes.c_int], ctypes.c_int
        data = work / "data.bin"
        data.write_bytes(os.urandom(1 << 20))
        tfdarshan.attach()
        jump_default = shim.tfd_returns_by_jump()
        fd = loop.open_fd(str(data).encode())          # through the patched GOT: recorded
        real_pread = ctypes.cast(ctypes.CDLL(None).pread, ctypes.c_void_p).value
        rng = random.Random(1)
        print(f"{args.rounds} rounds, variants shuffled in each; added ns per call: median over rounds "
              f"[95 % interval]; vs copy: paired by round")
        try:
            for kind in args.originals:
                shim.tfd_bench_stub(kind)
                target = real_pread if kind == 0 else int(ffi.cast("uintptr_t", shim.tfd_bench_stub_function(b"pread")))
                fns = {v: int(ffi.cast("uintptr_t", shim.tfd_bench_variant(v))) for v in args.variants}
                n = 2000 if kind in (1, 3, 4) else 200 if kind == 9 else 500

                def once(fn, v=None):
                    # the shipped wrapper's way back, for the one variant that switches it
                    shim.tfd_bench_set_jump_return(0 if v == BY_RET else jump_default)
                    t = time.perf_counter_ns()
                    loop.pread_via(fn, fd, n, 4096)
                    return (time.perf_counter_ns() - t) / n

                for v, fn in fns.items():
                    once(fn, v)
                added = {v: [] for v in fns}
                plain = []
                for _ in range(args.rounds):
                    order = list(fns)
                    rng.shuffle(order)
                    for v in order:
                        pairs = [(once(target), once(fns[v], v)) for _ in range(15)]
                        added[v].append(statistics.median(b - a for a, b in pairs))
                        plain.append(statistics.median(a for a, _ in pairs))
                print(f"\naround {ORIGINALS[kind]}: direct {statistics.median(plain):.1f} ns/call")
                for v in fns:
                    vs = "" if v == 1 else "  vs copy " + interval([x - c for x, c in zip(added[v], added[1])])
                    if v == 0 and BY_RET in added:      # the jump back's own effect: the same code either way
                        vs += "  vs by ret " + interval([x - c for x, c in zip(added[0], added[BY_RET])])
                    print(f"  {VARIANTS[v]:14s} added {interval(added[v])}{vs}")
        finally:
            shim.tfd_bench_set_jump_return(jump_default)
            shim.tfd_bench_stub(0)
            loop.close_fd(fd)
            tfdarshan.detach()
    return 0


if __name__ == "__main__":
    sys.exit(main())
