"""What the shim adds to a call, measured where a noisy VM cannot hide it.

1. Calls through a GOT the shim patches (benchmarks/hotloop.c), detached,
   attached with counters and attached with the trace, in a shuffled order
   every round, in one process:
   - a buffered 64-byte fread: libc serves 63 of every 64 from its buffer,
     so no system call drowns the wrapper;
   - a cached 4 KiB pread;
   - open + close of one file, and the calls tf.io.read_file makes per
     file (stat, open, pread of 88 KB, pread at the end, close): the
     per-file part of an input pipeline's cost.
2. The wrapper alone: the originals of pread and fread replaced by stubs
   that return at once (benchmarks/shim_stubs.c, built into the
   benchmarks' own copy of the shim by stub_shim.py), the wrapper called
   against the stub called directly, alternating in short samples. Then
   the pread wrapper around the real pread (the same calls as in 1, without
   switching modes, so the machine's load cancels better), and where a real
   pread's extra cost to the wrapper goes: around stubs that do one part of
   what a system call does each (enter the kernel and leave; copy 4 KiB;
   fill the return-stack predictor, as the kernel does on its way out; read
   32 KiB, the size of the L1 data cache). Where the wrappers go back to
   their caller by a jump (native/jump_return.h), the pread wrapper around
   the real pread each way, switched between samples, and with the trace on.
3. The clock's floor: two reads of the shim's clock (rdtsc), the least a
   timed call can cost on this machine.
4. What not timing freads served from the FILE buffer would take out of
   Darshan's STDIO read time: 64 B and 512 B freads through a whole cached
   file, each timed as Darshan times it, split by whether libc served it
   from the buffer (detached; x86-64 with glibc).

5. With --staged: what serving staged copies (`run --staged`) adds to an
   open, in separate processes run alternately (--runs of each; a process
   builds the table once): with no table loaded, and with a table of
   --table sources (1,000,000 by default). An open + close of a path not
   in the table, against the same with no table; of a staged source served
   from its copy, against an open + close of the copy by its own path with
   no table (the same system call); and the same for the calls
   tf.io.read_file makes per file (its stat served too).

    python benchmarks/bench_hotpath.py [--calls N] [--rounds R] [--staged [--runs N] [--table N]]

Times in 1 are the process's CPU time (time.process_time: all its
threads), not wall time: on a machine shared with other work a process is
often descheduled in the middle of a loop, which wall time counts and CPU
time does not; 2 takes the median difference of short samples in pairs. Each added cost is the median of the rounds' differences from
the same round's detached figure, with the 95 % bootstrap interval of that
median and the rounds' 5-95 % range. benchmarks/bench_instructions.py
counts the same paths' instructions, which do not move with the machine's
load."""
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

MODES = ("off", "counters", "trace")


def build(workdir: pathlib.Path) -> ctypes.CDLL:
    so = workdir / "libhotloop.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-pthread", str(HERE / "hotloop.c"), "-o", str(so)], check=True)
    lib = ctypes.CDLL(str(so))
    L, P, I, S = ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
    for name, args, res in (("fread_loop", [P, L, L], L), ("pread_loop", [I, L, L], L),
                            ("open_close_loop", [S, L], L), ("read_file_loop", [S, L, L], L),
                            ("pread_via", [P, I, L, L], L), ("fread_via", [P, P, L, L], L),
                            ("open_stream", [S], P), ("close_stream", [P], I), ("open_fd", [S], I),
                            ("close_fd", [I], I), ("clock_pair_loop", [L], L),
                            ("fread_split", [P, L, ctypes.POINTER(ctypes.c_longlong)], None)):
        if not hasattr(lib, name):      # fread_split: x86-64 with glibc only
            continue
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def spread(diffs) -> str:
    s = sorted(diffs)
    q = lambda p: s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]
    lo, hi = median_interval(s)
    return (f"median {statistics.median(s):+.1f} ns [95 % interval {lo:+.1f} to {hi:+.1f}] "
            f"(rounds 5-95 %: {q(0.05):+.1f} to {q(0.95):+.1f})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--staged", action="store_true", help="only the staged copies' section (5)")
    ap.add_argument("--runs", type=int, default=7, help="processes of each kind, alternating (--staged)")
    ap.add_argument("--table", type=int, default=1_000_000, help="sources in the staged table (--staged)")
    ap.add_argument("--staged-child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rounds < 5 or args.runs < 5:
        ap.error("--rounds and --runs must be at least 5")
    if args.staged_child:
        return staged_child(pathlib.Path(args.staged_child[0]), args.staged_child[1] == "table", args)
    if args.staged:
        return staged_main(args)

    import stub_shim
    # the shim with the stubs, before tfdarshan loads the shipped one (a
    # build from before they left it has its own, which return at once only)
    all_stubs = stub_shim.install() is not None
    import tfdarshan
    from tfdarshan.capture._native import ffi, lib as shim
    with tempfile.TemporaryDirectory(prefix="tfd-hot-") as d:
        work = pathlib.Path(d)
        loop = build(work)
        data = work / "data.bin"
        data.write_bytes(os.urandom(args.calls * 64))   # no round reaches the end of the file
        small = work / "small.bin"
        small.write_bytes(os.urandom(88_000))
        dpath, spath = str(data).encode(), str(small).encode()
        fd = loop.open_fd(dpath)
        per_file = max(args.calls // 20, 100)

        def fread_calls():
            f = loop.open_stream(dpath)          # opened in the mode measured, so recorded in it
            t = time.process_time_ns()
            loop.fread_loop(f, args.calls, 64)
            ns = time.process_time_ns() - t
            loop.close_stream(f)
            return ns / args.calls

        def timed(fn, n):
            def run():
                t = time.process_time_ns()
                fn()
                return (time.process_time_ns() - t) / n
            return run

        loops = {
            "buffered 64-byte fread": fread_calls,
            "cached 4 KiB pread": timed(lambda: loop.pread_loop(fd, args.calls, 4096), args.calls),
            "open + close": timed(lambda: loop.open_close_loop(dpath, per_file), per_file),
            "per file as read_file (stat, open, 2 pread, close)":
                timed(lambda: loop.read_file_loop(spath, per_file, 88_000), per_file),
        }

        def set_mode(mode):
            if mode == "off":
                tfdarshan.detach()
            else:
                tfdarshan.attach()
                shim.tfd_set_trace(1 if mode == "trace" else 0, 256 << 20)

        for mode in MODES:                      # warm up every mode
            set_mode(mode)
            for fn in loops.values():
                fn()
        rng = random.Random(1)
        got = {name: {m: [] for m in MODES} for name in loops}
        for _ in range(args.rounds):
            order = list(MODES)
            rng.shuffle(order)
            for mode in order:
                set_mode(mode)
                for name, fn in loops.items():
                    got[name][mode].append(fn())
        tfdarshan.detach()
        snap = tfdarshan.snapshot()
        reads = int(snap.stdio.loc[snap.stdio["path"] == str(data), "STDIO_READS"].sum())
        want = (2 * args.rounds + 2) * args.calls
        if reads != want:
            print(f"ERROR: the shim counted {reads} of {want} attached freads", file=sys.stderr)
            return 1
        print(f"{args.rounds} rounds, modes in a shuffled order each round")
        for name, by_mode in got.items():
            off = by_mode["off"]
            print(f"{name}: {statistics.median(off):.1f} ns/call detached")
            for mode in ("counters", "trace"):
                print(f"  {mode:8s} {statistics.median(by_mode[mode]):.1f} ns/call; added "
                      f"{spread([b - a for a, b in zip(off, by_mode[mode])])}")

        # the wrappers called directly against what they forward to, called
        # directly: short samples in pairs, a round's figure the median of
        # its pairs' differences, so the machine's load (which changes over
        # milliseconds here) mostly cancels
        tfdarshan.attach()
        f = loop.open_stream(dpath)
        real_pread = ctypes.cast(ctypes.CDLL(None).pread, ctypes.c_void_p).value
        rows = (("pread", 1, "wrapper alone"), ("fread", 1, "wrapper alone"),
                ("pread", 0, "around the real pread (cached, 4 KiB)"),
                ("pread", 2, "around a stub that enters the kernel and leaves (getppid)"),
                ("pread", 3, "around a stub that copies 4 KiB (no kernel)"),
                ("pread", 4, "around a stub that fills the return-stack predictor"),
                ("pread", 5, "around a stub that reads 32 KiB (the L1 data cache)"))
        try:
            for name, kind, what in rows:
                if kind > 1 and not all_stubs:
                    continue
                shim.tfd_bench_stub(kind)
                n = 2000 if kind in (1, 3, 4) else 500
                target = real_pread if kind == 0 else int(ffi.cast("uintptr_t", shim.tfd_bench_stub_function(name.encode())))
                wrapper = int(ffi.cast("uintptr_t", shim.tfd_bench_wrapper(name.encode())))

                def once(fn, name=name, n=n):
                    t = time.perf_counter_ns()
                    if name == "pread":
                        loop.pread_via(fn, fd, n, 4096)
                    else:
                        loop.fread_via(fn, f, n, 64)
                    return (time.perf_counter_ns() - t) / n

                plain, added = [], []
                for _ in range(args.rounds):
                    pairs = [(once(target), once(wrapper)) for _ in range(15)]
                    plain.append(statistics.median(a for a, _ in pairs))
                    added.append(statistics.median(b - a for a, b in pairs))
                print(f"{name} {what}: direct {statistics.median(plain):.1f} ns/call; added {spread(added)}")
            if all_stubs and shim.tfd_returns_by_jump():
                jump_back_ab(shim, ffi, loop, fd, real_pread, args.rounds)
        finally:
            shim.tfd_bench_stub(0)
            loop.close_stream(f)
            tfdarshan.detach()
        pairs = []
        for _ in range(args.rounds):
            t = time.process_time_ns()
            loop.clock_pair_loop(args.calls)
            pairs.append((time.process_time_ns() - t) / args.calls)
        lo, hi = median_interval(pairs)
        print(f"clock floor: two clock reads (rdtsc) {statistics.median(pairs):.1f} ns "
              f"[95 % interval {lo:.1f} to {hi:.1f}]: the least a timed call adds here")
        if hasattr(loop, "fread_split"):
            out = (ctypes.c_longlong * 4)()
            for size in (64, 512):
                shares = []
                for _ in range(args.rounds):
                    f = loop.open_stream(dpath)
                    loop.fread_split(f, size, out)
                    loop.close_stream(f)
                    shares.append(100 * out[1] / (out[1] + out[3]))
                lo, hi = median_interval(shares)
                print(f"{size} B freads: the {out[0]} served from the buffer take {statistics.median(shares):.0f} % "
                      f"[95 % interval {lo:.0f} to {hi:.0f}] of the time Darshan would measure, the {out[2]} "
                      f"that reached read() the rest")
        loop.close_fd(fd)
    return 0


def jump_back_ab(shim, ffi, loop, fd, real_pread, rounds) -> None:
    """The pread wrapper around the real pread going back by a jump (this
    host's choice, native/jump_return.h) and by `ret`, switched between
    samples: triples of short samples (the real pread, the wrapper each
    way), a round's figure the median of its triples' differences."""
    shim.tfd_bench_stub(0)
    wrapper = int(ffi.cast("uintptr_t", shim.tfd_bench_wrapper(b"pread")))

    def once(fn, jump, n=500):
        shim.tfd_bench_set_jump_return(jump)
        t = time.perf_counter_ns()
        loop.pread_via(fn, fd, n, 4096)
        return (time.perf_counter_ns() - t) / n

    by_jump, by_ret, saved = [], [], []
    try:
        for _ in range(rounds):
            triples = []
            for i in range(15):
                first, second = (1, 0) if i % 2 else (0, 1)
                plain = once(real_pread, 1)
                a = once(wrapper, first)
                b = once(wrapper, second)
                triples.append((plain, b if first == 0 else a, a if first == 0 else b))
            by_jump.append(statistics.median(j - p for p, j, _ in triples))
            by_ret.append(statistics.median(r - p for p, _, r in triples))
            saved.append(statistics.median(j - r for _, j, r in triples))
    finally:
        shim.tfd_bench_set_jump_return(1)
    print(f"pread around the real pread, back by a jump (this host's choice): added {spread(by_jump)}")
    print(f"pread around the real pread, back by ret: added {spread(by_ret)}")
    print(f"  jump - ret, paired: {spread(saved)}")
    shim.tfd_set_trace(1, 256 << 20)
    try:
        traced = []
        for _ in range(rounds):
            pairs = [(once(real_pread, 1), once(wrapper, 1)) for _ in range(15)]
            traced.append(statistics.median(b - a for a, b in pairs))
    finally:
        shim.tfd_set_trace(0, 256 << 20)
    print(f"pread around the real pread with the trace on, back by a jump: added {spread(traced)}")


# ------------------------------------------------------------ staged copies

STAGED_LOOPS = ("unstaged open + close", "served open + close", "copy open + close",
                "unstaged per file (read_file)", "served per file (read_file)", "copy per file (read_file)")


def staged_files(work: pathlib.Path) -> dict:
    """A file not staged, a staged source and its copy under /dev/shm (as
    the stager makes it: the same size and mtime)."""
    import shutil
    plain, source = work / "plain.bin", work / "source.bin"
    for p in (plain, source):
        p.write_bytes(os.urandom(88_000))
    root = pathlib.Path(tempfile.mkdtemp(prefix="tfd-hot-staged-", dir="/dev/shm"))
    copy = root / str(source).lstrip("/")
    copy.parent.mkdir(parents=True)
    shutil.copy2(source, copy)
    return {"plain": str(plain), "source": str(source), "copy": str(copy), "root": str(root)}


def staged_child(work: pathlib.Path, with_table: bool, args) -> int:
    """One process: its loops' per-call CPU time, medians of --rounds, as JSON on stdout."""
    import json
    import tfdarshan
    from tfdarshan.capture import _native
    f = json.loads((work / "files.json").read_text())
    if with_table:
        st, cst = os.stat(f["source"]), os.stat(f["copy"])
        sources = [f"{work}/absent/{i:08d}.bin" for i in range(args.table - 1)] + [f["source"]]
        copies = [f["root"] + s for s in sources]
        _native.load_staged(sources, copies, [st.st_size] * args.table, [st.st_mtime_ns] * args.table,
                            [cst.st_mtime_ns] * args.table)
        del sources, copies
    own = work / f"loops-{os.getpid()}"
    own.mkdir()
    loop = build(own)
    n = max(args.calls // 20, 100)
    paths = {k: f[k].encode() for k in ("plain", "source", "copy")}
    loops = {"unstaged open + close": lambda: loop.open_close_loop(paths["plain"], n),
             "copy open + close": lambda: loop.open_close_loop(paths["copy"], n),
             "unstaged per file (read_file)": lambda: loop.read_file_loop(paths["plain"], n, 88_000),
             "copy per file (read_file)": lambda: loop.read_file_loop(paths["copy"], n, 88_000)}
    if with_table:
        loops.update({"served open + close": lambda: loop.open_close_loop(paths["source"], n),
                      "served per file (read_file)": lambda: loop.read_file_loop(paths["source"], n, 88_000)})
    tfdarshan.attach()
    got = {k: [] for k in loops}
    for fn in loops.values():
        fn()                                # warm: records made, paths cached
    for _ in range(args.rounds):
        for k, fn in loops.items():
            t = time.process_time_ns()
            fn()
            got[k].append((time.process_time_ns() - t) / n)
    if with_table:
        served = {int(r[0]): r for r in _native.staged_used()}
        row = served.get(args.table - 1)
        # every open and stat of the source was served (the warm-up's and the rounds')
        if row is None or row[2] != (args.rounds + 1) * n * 2 or row[4] != (args.rounds + 1) * n:
            print(f"ERROR: not every open and stat of the source was served: {row}", file=sys.stderr)
            return 1
    tfdarshan.detach()
    print(json.dumps({k: statistics.median(v) for k, v in got.items()}))
    return 0


def staged_main(args) -> int:
    import json
    import shutil
    with tempfile.TemporaryDirectory(prefix="tfd-hot-staged-") as d:
        work = pathlib.Path(d)
        f = staged_files(work)
        (work / "files.json").write_text(json.dumps(f))
        runs = {False: [], True: []}
        try:
            for i in range(args.runs):
                for with_table in ((False, True) if i % 2 == 0 else (True, False)):
                    p = subprocess.run([sys.executable, __file__, "--staged-child", str(work),
                                        "table" if with_table else "none", "--calls", str(args.calls),
                                        "--rounds", str(args.rounds), "--table", str(args.table)],
                                       capture_output=True, text=True)
                    if p.returncode != 0:
                        print(p.stderr[-3000:], file=sys.stderr)
                        return 1
                    runs[with_table].append(json.loads(p.stdout.strip().splitlines()[-1]))
        finally:
            shutil.rmtree(f["root"], ignore_errors=True)
    none, table = runs[False], runs[True]
    print(f"staged copies: {args.runs} processes with no table and {args.runs} with {args.table:,} sources, "
          f"alternating; per call, each process the median of {args.rounds} rounds (CPU time)")
    for what, loaded, base in (("open + close of a path not staged (table loaded vs none)",
                                "unstaged open + close", "unstaged open + close"),
                               ("open + close of a staged source served (vs the copy by its path, no table)",
                                "served open + close", "copy open + close"),
                               ("per file as read_file, a path not staged (table loaded vs none)",
                                "unstaged per file (read_file)", "unstaged per file (read_file)"),
                               ("per file as read_file, a staged source served (vs the copy, no table)",
                                "served per file (read_file)", "copy per file (read_file)")):
        a = [r[base] for r in none]
        b = [r[loaded] for r in table]
        print(f"{what}: {statistics.median(a):.0f} ns -> {statistics.median(b):.0f} ns; added "
              f"{spread([y - x for x, y in zip(a, b)])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
