"""Two builds of the shim side by side in one process: what each adds to a
call, measured in the same milliseconds.

    python benchmarks/bench_ab.py OTHER_SO [--rounds 21] [--calls 2000] [--pairs 15]

On a machine shared with other work the speed of a core changes over
seconds (another guest on its sibling thread, say), so two builds measured
one after the other, even interleaved run by run, differ by more than what
an optimisation changes. Here both are loaded into one process (this
checkout's benchmark copy with its stubs, stub_shim.py, and OTHER_SO, a
compiled _native_shim*.so that has the benchmark stubs built in: this
checkout's own copy, or one from before they left the shipped library),
and each round attaches one build, calls its pread wrapper directly in
short samples, each after a sample of the original (a stub that returns at
once, or the real pread of a cached 4 KiB block), detaches it, and does the
same with the other (two shims attached at once would patch each other's
calls). A round's figure for each build is the median of its samples'
differences from the original's; printed are the medians over the rounds
with their 95 % intervals, and the difference between the builds, round by
round."""
from __future__ import annotations

import argparse
import ctypes
import importlib.machinery
import importlib.util
import os
import pathlib
import statistics
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from intervals import median_interval  # noqa: E402


def load(so: pathlib.Path, name: str):
    loader = importlib.machinery.ExtensionFileLoader(name, str(so))
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, str(so), loader=loader))
    loader.exec_module(module)
    return module


def attach(module, workdir: pathlib.Path) -> None:
    """Attach with the package's default rules, the data directory included."""
    ffi, lib = module.ffi, module.lib
    keep = [ffi.new("char[]", (str(workdir) + "/").encode())]
    cfg = ffi.new("tfd_config *")
    cfg.record_cap = 1 << 16
    cfg.include_prefixes = ffi.new("const char *[]", keep)
    cfg.n_include = 1
    cfg.trace_cap_bytes = 64 << 20
    err = ffi.new("char[512]")
    if lib.tfd_attach(cfg, err, 512) < 0:
        raise RuntimeError(ffi.string(err).decode())
    module._keep = (keep, cfg)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("other", help="another build of the shim (with the benchmark stubs)")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--calls", type=int, default=2000, help="calls per sample (a quarter of them for the real pread)")
    ap.add_argument("--pairs", type=int, default=15, help="pairs of samples per build and round (three times as many for the real pread)")
    args = ap.parse_args(argv)
    import stub_shim
    mine = load(stub_shim.build(), "tfd_ab_this._native_shim")
    other = load(pathlib.Path(args.other).resolve(), "tfd_ab_other._native_shim")
    from bench_hotpath import build
    with tempfile.TemporaryDirectory(prefix="tfd-ab-") as d:
        work = pathlib.Path(d)
        loop = build(work)
        data = work / "data.bin"
        data.write_bytes(os.urandom(1 << 20))
        fd = loop.open_fd(str(data).encode())          # each build attributes it as it attaches
        real = ctypes.cast(ctypes.CDLL(None).pread, ctypes.c_void_p).value
        builds = {"this": mine, "other": other}
        wrappers = {k: int(m.ffi.cast("uintptr_t", m.lib.tfd_bench_wrapper(b"pread"))) for k, m in builds.items()}

        def sample(fn, n):
            t = time.perf_counter_ns()
            loop.pread_via(fn, fd, n, 4096)
            return (time.perf_counter_ns() - t) / n

        for what, stub_kind in (("around a stub that returns at once", 1), ("around the real pread (cached, 4 KiB)", 0)):
            mine.lib.tfd_bench_stub(1)
            original = real if stub_kind == 0 else int(mine.ffi.cast("uintptr_t", mine.lib.tfd_bench_stub_function(b"pread")))
            mine.lib.tfd_bench_stub(0)
            n = args.calls if stub_kind else max(args.calls // 4, 100)
            added = {k: [] for k in builds}
            for r in range(args.rounds + 1):
                for k in (("this", "other") if r % 2 else ("other", "this")):
                    attach(builds[k], work)             # (finds the originals afresh)
                    builds[k].lib.tfd_bench_stub(stub_kind)
                    diffs = []
                    for i in range(args.pairs if stub_kind else 3 * args.pairs):
                        base = sample(original, n)
                        diffs.append(sample(wrappers[k], n) - base)
                    builds[k].lib.tfd_bench_stub(0)
                    builds[k].lib.tfd_detach()
                    if r:                   # the first round warms both up
                        added[k].append(statistics.median(diffs))
            print(f"pread wrapper {what}:")
            for k in builds:
                lo, hi = median_interval(added[k])
                print(f"  {k:5s} build: added {statistics.median(added[k]):+.1f} ns [95 % interval {lo:+.1f} to {hi:+.1f}]")
            delta = [a - b for a, b in zip(added["this"], added["other"])]
            lo, hi = median_interval(delta)
            print(f"  this - other: {statistics.median(delta):+.1f} ns [95 % interval {lo:+.1f} to {hi:+.1f}]")
        loop.close_fd(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
