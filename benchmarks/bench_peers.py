"""Side by side with a peer: what each profiler adds to one call.

    python benchmarks/bench_peers.py [--rounds 7] [--calls 100000]

One interleaved run of separate processes: each round runs every
configuration once, in a shuffled order, each in a fresh interpreter that
calls libc through a library's GOT (benchmarks/hotloop.c), as a data
loader's C++ code does:

  plain            nothing attached
  dftracer         DFTracer's preload library (`pip install 'tfdarshan[peers]'`),
                   under LD_PRELOAD, tracing the data directory; it writes
                   a trace event for every call
  tfdarshan        tfdarshan.attach(): Darshan's counters
  tfdarshan+trace  attached with the per-operation trace (DXT)

Two calls: a buffered 64-byte fread (libc serves 63 of every 64 from the
FILE buffer, so no system call hides the wrapper) and a cached 4 KiB pread.
A process times --repeats loops of --calls calls of each in its CPU time
(time.process_time: all its threads, so a profiler's helper threads count;
not wall time, which on a shared machine counts the moments the process is
descheduled) and reports the median; a round's added cost is its figure
minus the same round's plain one. A third line, "pread over syscall", is
taken inside each process: the same cached pread through the GOT less the
same read made as syscall(2), which no profiler wraps, into one buffer,
in alternating loop pairs. The plain pread moves by more than the budget
between processes (where its buffer and the kernel's pages land); this
difference moves less, so its added figure is what the profiler adds to a
pread in a fresh process.

Every process starts one idle thread before it measures (--single-thread:
not): a TensorFlow program always has threads, and glibc changes two paths
once a second thread exists. A pread then takes the cancellation-point path
around its system call, which syscall(2) does not (+10 ns [7, 23] in "pread
over syscall" here, 6 fresh processes each way), and stdio locks the
stream. tfdarshan's attach starts a thread of its own, so a single-threaded
plain process charged libc's multi-threaded path to the profiler.

The trace's first 64 MiB (its default memory) land on memory the process
has never touched, which a VM's host backs on first touch (about 3-5 ms a
2 MiB huge page here, 80-130 ns per 56-byte segment): in a fresh process
the traced pread pays that until the budget is full (about 1.2 M traced
preads, more than a run with the defaults makes: its trace figures are
the first fill's), and after it drops segments. --collect collects before every timed loop,
outside the timing, as a long-running job's collector does, so the chunks
are used again and nothing is dropped: the trace's steady state. Printed:
the segments the shim dropped, when any.

With --attach-pairs, a fourth line for tfdarshan's processes: the same
pread loop through the GOT attached against detached (the GOT restored),
in alternating loop pairs in the one process: what the wrapper adds there
with nothing else changed, not even libc's path (each detach collects, so
the trace's chunks are used again).

Printed per configuration and call: ns per call and added ns (medians
over the rounds, each with the 95 % bootstrap interval of the median), and
the ratio to plain. Each process checks it was really profiled: tfdarshan
counted every call, DFTracer's trace holds an event per call."""
from __future__ import annotations

import argparse
import ctypes
import gzip
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from intervals import median_interval  # noqa: E402

CONFIGS = ("plain", "dftracer", "tfdarshan", "tfdarshan+trace")
CALLS = ("fread", "pread")
PAIRED = "pread over syscall"
ATTACHED = "pread att. over det."


def dftracer_library():
    """DFTracer's preload library from the installed package, or None."""
    import importlib.util
    spec = importlib.util.find_spec("dftracer")
    if not spec or not spec.submodule_search_locations:
        return None
    for d in spec.submodule_search_locations:
        for sub in ("lib64", "lib"):
            so = pathlib.Path(d) / sub / "libdftracer_preload.so"
            if so.exists():
                return so
    return None


def child(args) -> int:
    """One process of one configuration: prints {"fread": ns, "pread": ns}."""
    lib = ctypes.CDLL(args.lib)
    libc = ctypes.CDLL(None)
    L, P, I, S = ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
    lib.fread_loop.argtypes, lib.fread_loop.restype = [P, L, L], L
    lib.pread_loop.argtypes, lib.pread_loop.restype = [I, L, L], L
    lib.open_stream.argtypes, lib.open_stream.restype = [S], P
    lib.open_fd.argtypes, lib.open_fd.restype = [S], I
    lib.pread_into_loop.argtypes, lib.pread_into_loop.restype = [I, P, L, L, I], L
    libc.rewind.argtypes = [P]          # called directly, not through a profiled GOT
    if not args.single_thread:
        import threading
        idle = threading.Event()
        threading.Thread(target=idle.wait, name="idle", daemon=True).start()
    if args.child.startswith("tfdarshan"):
        import tfdarshan
        tfdarshan.attach(trace=args.child == "tfdarshan+trace")
    collect = tfdarshan.snapshot if args.collect and args.child.startswith("tfdarshan") else (lambda: None)
    data = args.data.encode()
    f, fd = lib.open_stream(data), lib.open_fd(data)
    if not f or fd < 0:
        print(f"cannot open {args.data}", file=sys.stderr)
        return 1
    timed = {"fread": lambda: lib.fread_loop(f, args.calls, 64), "pread": lambda: lib.pread_loop(fd, args.calls, 4096)}
    got = {}
    for name in CALLS:
        samples = []
        for i in range(args.repeats + 1):          # the first loop warms up
            libc.rewind(f)
            collect()
            t = time.process_time_ns()
            timed[name]()
            if i:
                samples.append((time.process_time_ns() - t) / args.calls)
        got[name] = statistics.median(samples)
    got[PAIRED] = pread_over_syscall(lib, fd, args, collect)
    if args.attach_pairs and args.child.startswith("tfdarshan"):
        got[ATTACHED] = pread_attached_over_detached(lib, fd, args, args.child == "tfdarshan+trace")
    if args.child.startswith("tfdarshan"):
        import tfdarshan
        snap = tfdarshan.snapshot()
        want = (args.repeats + 1) * args.calls
        freads = int(snap.stdio.loc[snap.stdio["path"] == args.data, "STDIO_READS"].sum())
        preads = int(snap.posix.loc[snap.posix["path"] == args.data, "POSIX_READS"].sum())
        pairs = (2 * args.repeats + 1) * args.calls * (2 if args.attach_pairs else 1)
        if (freads, preads) != (want, want + pairs):
            print(f"tfdarshan counted {freads} freads and {preads} preads of {want} each", file=sys.stderr)
            return 1
        got["dropped"] = int(snap.meta.get("trace_dropped", 0))
    print(json.dumps(got), flush=True)
    return 0


def pread_over_syscall(lib, fd: int, args, collect) -> float:
    """ns a pread through the GOT takes over the same read made as
    syscall(2), which no profiler wraps, into the same buffer in the same
    process. A pread's own cost moves by more than the budget between
    processes, with where its buffer and the kernel's pages land; a
    difference taken inside one process does not."""
    def through_got(yes: bool) -> int:
        collect()
        return 0 if yes else 1
    return alternating_pairs(lib, fd, args, through_got)


def pread_attached_over_detached(lib, fd: int, args, trace: bool) -> float:
    """ns the pread loop through the GOT takes attached over detached, in
    this process and buffer; left attached."""
    import tfdarshan

    def attached(yes: bool) -> int:
        if yes:
            tfdarshan.attach(trace=trace)
        else:
            tfdarshan.detach()
        return 0
    got = alternating_pairs(lib, fd, args, attached)
    tfdarshan.attach(trace=trace)
    return got


def alternating_pairs(lib, fd: int, args, side) -> float:
    """ns a 4 KiB pread loop into one page-aligned buffer takes with
    side(True) over side(False) (each sets its side up and returns
    pread_into_loop's raw flag): the median of 2 * --repeats loop pairs,
    alternating which comes first (the first pair warms up)."""
    buf = ctypes.create_string_buffer(4096 + 4096)
    at = ctypes.c_void_p((ctypes.addressof(buf) + 4095) & ~4095)
    diffs = []
    for i in range(2 * args.repeats + 1):
        times = {}
        for yes in ((True, False) if i % 2 else (False, True)):
            raw = side(yes)
            t = time.process_time_ns()
            lib.pread_into_loop(fd, at, args.calls, 4096, raw)
            times[yes] = time.process_time_ns() - t
        if i:
            diffs.append((times[True] - times[False]) / args.calls)
    return statistics.median(diffs)


def traced_calls(prefix: pathlib.Path) -> dict:
    """Events per call name in the DFTracer trace files starting with prefix."""
    counts = {name: 0 for name in CALLS}
    for p in prefix.parent.glob(prefix.name + "*.pfw*"):
        opener = gzip.open if p.suffix == ".gz" else open
        try:
            with opener(p, "rt", errors="replace") as f:
                for line in f:
                    for name in CALLS:
                        if f'"name":"{name}' in line:
                            counts[name] += 1
        except (OSError, EOFError):
            continue
    return counts


def run_one(config: str, args, work: pathlib.Path, lib: pathlib.Path, data: pathlib.Path, preload, n: int):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    prefix = None
    if config == "dftracer":
        prefix = work / f"dft-{n}"
        env.update(LD_PRELOAD=str(preload), DFTRACER_ENABLE="1", DFTRACER_INIT="PRELOAD",
                   DFTRACER_DATA_DIR=str(data.parent), DFTRACER_LOG_FILE=str(prefix))
    cmd = [sys.executable, __file__, "--child", config, "--lib", str(lib), "--data", str(data),
           "--calls", str(args.calls), "--repeats", str(args.repeats)]
    cmd += ["--single-thread"] * args.single_thread + ["--collect"] * args.collect + ["--attach-pairs"] * args.attach_pairs
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        raise RuntimeError(f"{config}: {r.stderr.strip()[-2000:]}")
    got = json.loads(r.stdout.strip().splitlines()[-1])
    if prefix is not None:
        want = (args.repeats + 1) * args.calls
        seen = traced_calls(prefix)
        if seen["fread"] < want or seen["pread"] < want + (2 * args.repeats + 1) * args.calls:
            raise RuntimeError(f"DFTracer traced {seen} calls, expected {want} of each: is it tracing?")
        for p in work.glob(prefix.name + "*"):
            p.unlink()
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3, help="timed loops per process (their median counts)")
    ap.add_argument("--single-thread", action="store_true",
                    help="no idle thread in each process (glibc's single-threaded paths for plain)")
    ap.add_argument("--collect", action="store_true",
                    help="collect before every timed loop, untimed: the trace's memory used again")
    ap.add_argument("--attach-pairs", action="store_true",
                    help="tfdarshan's pread loop attached against detached, paired in each process")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--lib", help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args)
    if args.rounds < 5:
        ap.error("--rounds must be at least 5")
    preload = dftracer_library()
    configs = [c for c in CONFIGS if c != "dftracer" or preload]
    if not preload:
        print("DFTracer is not installed (pip install 'tfdarshan[peers]'): measuring without it", file=sys.stderr)
    with tempfile.TemporaryDirectory(prefix="tfd-peers-") as d:
        work = pathlib.Path(d)
        lib = work / "libhotloop.so"
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-pthread", str(HERE / "hotloop.c"), "-o", str(lib)], check=True)
        (work / "data").mkdir()
        data = work / "data" / "data.bin"
        data.write_bytes(os.urandom(args.calls * 64 + (1 << 20)))
        rng = random.Random(1)
        rounds = []
        for n in range(args.rounds):
            order = list(configs)
            rng.shuffle(order)
            rounds.append({c: run_one(c, args, work, lib, data, preload, n) for c in order})
    print(f"{len(rounds)} interleaved rounds of {len(configs)} processes; {args.calls} calls a loop, "
          f"median of {args.repeats} loops per process; medians with their 95 % bootstrap intervals; "
          f"{'single-threaded' if args.single_thread else 'an idle thread in each process'}"
          f"{'; collected before every loop' if args.collect else ''}")
    print(f"{'':16s} {'call':18s} {'ns per call':>26s} {'added ns':>26s} {'ratio':>6s}")
    for c in configs:
        for call in (*CALLS, PAIRED, ATTACHED):
            if any(call not in r[c] for r in rounds):
                continue
            if call == ATTACHED:        # paired inside each process: its own added figure
                ns = [r[c][call] for r in rounds]
                lo, hi = median_interval(ns)
                print(f"{c:16s} {call:18s} {'':26s} {statistics.median(ns):+9.1f} [{lo:+7.1f}, {hi:+7.1f}]")
                continue
            ns = [r[c][call] for r in rounds]
            added = [r[c][call] - r["plain"][call] for r in rounds]
            lo, hi = median_interval(ns)
            alo, ahi = median_interval(added)
            # plain's pread over syscall is libc's few ns: no ratio to it
            ratio = "" if call == PAIRED else f"{statistics.median(r[c][call] / r['plain'][call] for r in rounds):6.2f}"
            print(f"{c:16s} {call:18s} {statistics.median(ns):9.1f} [{lo:7.1f}, {hi:7.1f}] "
                  f"{statistics.median(added):+9.1f} [{alo:+7.1f}, {ahi:+7.1f}] {ratio}")
        dropped = [r[c].get("dropped", 0) for r in rounds]
        if any(dropped):
            print(f"{c:16s} trace segments dropped for lack of memory: median {statistics.median(dropped):,.0f} a process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
