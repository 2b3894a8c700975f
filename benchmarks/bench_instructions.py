"""Instructions per call of the shim's hot paths, counted by callgrind.

On a shared VM a wall-clock figure moves by tens of ns from run to run;
valgrind's instruction counts do not (the same binary, inputs and
environment give the same count whatever else the machine is doing), so
optimisation decisions are made from these. They do not show what an
instruction costs: the two `rdtsc` a timed call executes count as two
instructions here and take 10-50 ns on the VMs we measured
(bench_hotpath.py and bench_peers.py measure time).

    python benchmarks/bench_instructions.py [--calls N] [--only PATH ...] [--shim SO]

--shim measures another build of the shim (the compiled _native_shim*.so of
an older checkout, say) against this checkout's loops and settings.

Runs itself under `valgrind --tool=callgrind`. Every measured loop
(benchmarks/hotloop.c, built with -DTFD_INSTRUCTIONS) calls libc through its
own GOT and is dumped alone, so each figure is exactly that loop's
instructions divided by its calls, user space only (the kernel's work in a
system call is not counted). Each path runs detached ("plain"), attached
with counters and attached with the per-operation trace; "added" is the
difference from plain. The shim is loaded straight from its file with the
default recording settings, without importing the package (under valgrind
every import costs ~50x)."""
from __future__ import annotations

import argparse
import json
import ctypes
import importlib.machinery
import importlib.util
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
MODES = ("plain", "counters", "trace")
# (name, what it is)
PATHS = (
    ("fread-buffered", "64 B fread served from the FILE buffer (1 MiB buffer, primed)"),
    ("fread-default", "64 B fread, libc's 4 KiB buffer: 1 call in 64 reaches read()"),
    ("fread-unbuffered", "4 KiB fread on an unbuffered stream: every call reaches read()"),
    ("pread", "cached 4 KiB pread"),
    ("open-close", "open + close of one file (absolute path, record exists)"),
    ("fopen-fclose", "fopen + fclose of one file"),
    ("read-file", "per file as tf.io.read_file: stat, open, pread 88 KB, pread at EOF, close"),
    ("new-threads", "the same per file, 16 files a thread, each thread new (tf.data's short-lived threads)"),
    ("first-read", "the same per file of 4 KiB, each file read for the first time (its record and counters made)"),
    ("collect", "a collect after new-threads, per file those threads read"),
    # staged copies (`run --staged`): a table of STAGED_TABLE sources loaded
    ("open-close-copy", "open + close of a copy on /dev/shm by its own path, no staged table (served's baseline)"),
    ("open-close-unstaged", "open + close of the same path as open-close, a staged table loaded"),
    ("open-close-served", "open + close of a staged source, served from its copy (the copy above)"),
    ("read-file-copy", "read-file's calls on the copy by its own path, no staged table"),
    ("read-file-served", "read-file's calls on a staged source: the stat and open served from its copy"),
)
STAGED_TABLE = 100_000      # (a lookup that hits the path cache never touches the table: its size does not count)
FILES_PER_THREAD = 16


def build(workdir: pathlib.Path, instructions: bool) -> pathlib.Path:
    so = workdir / "libhotloop.so"
    cmd = ["gcc", "-O2", "-shared", "-fPIC", "-pthread", str(HERE / "hotloop.c"), "-o", str(so)]
    if instructions:
        cmd.insert(1, "-DTFD_INSTRUCTIONS")
    subprocess.run(cmd, check=True)
    return so


def load_loops(so: pathlib.Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(so))
    L, P, I, S = ctypes.c_long, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
    for name, args, res in (("fread_loop", [P, L, L], L), ("pread_loop", [I, L, L], L),
                            ("open_close_loop", [S, L], L), ("fopen_fclose_loop", [S, L], L),
                            ("read_file_loop", [S, L, L], L), ("pread_via", [P, I, L, L], L),
                            ("fread_via", [P, P, L, L], L), ("open_stream_buffered", [S, L], P),
                            ("threads_files_loop", [ctypes.POINTER(S), L, L, L], L),
                            ("threads_distinct_files_loop", [ctypes.POINTER(S), L, L, L], L),
                            ("bracketed_call", [P, P], I),
                            ("open_stream", [S], P), ("close_stream", [P], I), ("open_fd", [S], I),
                            ("close_fd", [I], I), ("ir_label", [S], None)):
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = args, res
    return lib


def load_shim(so=None):
    """The cffi module and the default settings, without the package's imports."""
    pkg = pathlib.Path(importlib.util.find_spec("tfdarshan").submodule_search_locations[0])
    so = so or next(pkg.glob("_native_shim*.so"))
    loader = importlib.machinery.ExtensionFileLoader("tfdarshan._native_shim", str(so))
    shim = importlib.util.module_from_spec(importlib.util.spec_from_file_location(
        "tfdarshan._native_shim", str(so), loader=loader))
    loader.exec_module(shim)
    spec = importlib.util.spec_from_file_location("tfd_bench_config", pkg / "capture" / "config.py")
    config = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = config         # dataclasses look their module up
    spec.loader.exec_module(config)
    return shim.ffi, shim.lib, config.settings()


def child(workdir: pathlib.Path, calls: int, only, shim_so=None) -> int:
    # once a process has started a thread, glibc's system call wrappers take
    # their multi-threaded path for good: start one first, so that every
    # loop runs in that state, as in a TensorFlow process
    import threading
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()
    ffi, shim, settings = load_shim(shim_so)
    loops = load_loops(workdir / "libhotloop.so")
    data = workdir / "data.bin"
    small = workdir / "small.bin"
    with open(data, "wb") as f:
        f.write(os.urandom(1 << 20) * (calls * 4096 // (1 << 20) + 2))
    small.write_bytes(os.urandom(88_000))
    many = []
    for i in range(FILES_PER_THREAD):
        many.append(workdir / f"file{i:02d}.bin")
        many[-1].write_bytes(os.urandom(88_000))
    many_paths = (ctypes.c_char_p * len(many))(*(str(p).encode() for p in many))

    def fresh_files(mode):
        """calls files of 4 KiB no one has read, and a warm-up's 16"""
        d = workdir / f"fresh-{mode}"
        d.mkdir()
        names = [d / f"{i:05d}.bin" for i in range(calls + FILES_PER_THREAD)]
        for p in names:
            p.write_bytes(b"f" * 4096)
        return (ctypes.c_char_p * len(names))(*(str(p).encode() for p in names))
    keep = []

    def strings(items):
        arr = [ffi.new("char[]", os.fsencode(s)) for s in items]
        table = ffi.new("const char *[]", arr) if arr else ffi.NULL
        keep.append((arr, table))           # cfg's pointers do not keep them alive
        return table, len(arr)

    cfg = ffi.new("tfd_config *")
    cfg.record_cap = settings.record_cap
    cfg.include_prefixes, cfg.n_include = strings(settings.include)
    cfg.exclude_prefixes, cfg.n_exclude = strings(settings.exclude)
    cfg.exclude_suffixes, cfg.n_exclude_suffixes = strings(settings.exclude_suffixes)
    cfg.trace_cap_bytes = settings.trace_memory
    err = ffi.new("char[512]")
    d, s = str(data).encode(), str(small).encode()
    out = ffi.new("tfd_collect_result *")
    collect = int(ffi.cast("uintptr_t", ffi.addressof(shim, "tfd_collect")))
    shards = {}

    def run(label: str, fn, *args):
        loops.ir_label(label.encode())
        return fn(*args)

    staged = staged_files(ffi, shim, workdir, keep) if any(
        n.endswith(("-served", "-unstaged", "-copy")) for n in only or [n for n, _ in PATHS]) else None

    def table(on: bool):
        if on and shim.tfd_staged_load(staged["spec"], err, 512) != 0:
            raise RuntimeError(ffi.string(err).decode())
        if not on:
            shim.tfd_staged_load(ffi.NULL, err, 512)

    for mode in MODES:
        if mode != "plain" and shim.tfd_attach(cfg, err, 512) < 0:
            print(ffi.string(err).decode(), file=sys.stderr)
            return 1
        shim.tfd_set_trace(1 if mode == "trace" else 0, settings.trace_memory)
        for name, _ in PATHS:
            if only and name not in only:
                continue
            if name.startswith("fread"):
                buffer, size = {"fread-buffered": (1 << 20, 64), "fread-default": (-1, 64),
                                "fread-unbuffered": (0, 4096)}[name]
                f = loops.open_stream_buffered(d, buffer)
                run("warmup", loops.fread_loop, f, 64 if size == 64 else 4, size)   # fills the buffer
                run(f"{name}/{mode}", loops.fread_loop, f, calls, size)
                loops.close_stream(f)
            elif name == "pread":
                fd = loops.open_fd(d)
                run("warmup", loops.pread_loop, fd, 4, 4096)
                run(f"{name}/{mode}", loops.pread_loop, fd, calls, 4096)
                loops.close_fd(fd)
            elif name == "open-close":
                run("warmup", loops.open_close_loop, d, 4)
                run(f"{name}/{mode}", loops.open_close_loop, d, calls)
            elif name == "fopen-fclose":
                run("warmup", loops.fopen_fclose_loop, d, 4)
                run(f"{name}/{mode}", loops.fopen_fclose_loop, d, calls)
            elif name == "read-file":
                run("warmup", loops.read_file_loop, s, 4, 88_000)
                run(f"{name}/{mode}", loops.read_file_loop, s, calls, 88_000)
            elif name.startswith(("open-close-", "read-file-")):
                # (a load builds a new table and keeps the old: a wrapper may read it; a child can afford it)
                table(not name.endswith("-copy"))
                path = {"copy": staged["copy"], "unstaged": d, "served": staged["source"]}[name.split("-")[-1]]
                if name.startswith("open-close"):
                    run("warmup", loops.open_close_loop, path, 4)
                    run(f"{name}/{mode}", loops.open_close_loop, path, calls)
                else:
                    run("warmup", loops.read_file_loop, path, 4, 88_000)
                    run(f"{name}/{mode}", loops.read_file_loop, path, calls, 88_000)
                table(False)
            elif name == "collect":
                if mode == "plain":
                    continue
                shim.tfd_collect(out)                       # a fresh interval
                shim.tfd_free_collect(out)
                run("warmup", loops.threads_files_loop, many_paths, FILES_PER_THREAD,
                    calls // FILES_PER_THREAD, 88_000)
                run(f"{name}/{mode}", loops.bracketed_call, collect, int(ffi.cast("uintptr_t", out)))
                shards[mode] = out.n_shards
                shim.tfd_free_collect(out)
            elif name == "first-read":
                fresh = fresh_files(mode)
                run("warmup", loops.threads_distinct_files_loop, fresh, FILES_PER_THREAD, 1, 4096)
                run(f"{name}/{mode}", loops.threads_distinct_files_loop,
                    ctypes.cast(ctypes.byref(fresh, FILES_PER_THREAD * ctypes.sizeof(ctypes.c_char_p)),
                                ctypes.POINTER(ctypes.c_char_p)),
                    FILES_PER_THREAD, calls // FILES_PER_THREAD, 4096)
            elif name == "new-threads":
                run("warmup", loops.threads_files_loop, many_paths, FILES_PER_THREAD, 1, 88_000)
                run(f"{name}/{mode}", loops.threads_files_loop, many_paths, FILES_PER_THREAD,
                    calls // FILES_PER_THREAD, 88_000)
        if mode != "plain":
            shim.tfd_detach()
    if shards:
        (workdir / "shards.json").write_text(json.dumps(shards))
    return 0


def staged_files(ffi, shim, workdir: pathlib.Path, keep: list) -> dict:
    """A staged source of 88 KB, its copy under /dev/shm (mirrored, as the
    stager makes it: same size and mtime) and a table of STAGED_TABLE
    sources holding it, ready to load."""
    source = workdir / "staged.bin"
    source.write_bytes(os.urandom(88_000))
    root = pathlib.Path(tempfile.mkdtemp(prefix="tfd-ir-staged-", dir="/dev/shm"))
    copy = root / str(source).lstrip("/")
    copy.parent.mkdir(parents=True)
    shutil.copy2(source, copy)
    st = source.stat()
    sources = [str(workdir / f"absent/{i:07d}.bin") for i in range(STAGED_TABLE - 1)] + [str(source)]
    copies = [str(root) + s for s in sources]
    arrays = [[ffi.new("char[]", s.encode()) for s in x] for x in (sources, copies)]
    nums = [ffi.new("int64_t[]", [v] * len(sources)) for v in (st.st_size, st.st_mtime_ns, copy.stat().st_mtime_ns)]
    spec = ffi.new("tfd_staged_spec *")
    spec.n = len(sources)
    spec.sources, spec.copies = (ffi.new("const char *[]", a) for a in arrays)
    spec.sizes, spec.source_mtimes_ns, spec.copy_mtimes_ns = nums
    keep.append((arrays, nums, spec.sources, spec.copies))
    return {"spec": spec, "source": str(source).encode(), "copy": str(copy).encode(), "root": root}


def parse_dumps(outdir: pathlib.Path) -> dict:
    """{label: instructions} from callgrind's numbered dump files."""
    got = {}
    for p in outdir.glob("cg.out*"):
        text = p.read_text(errors="replace")
        m = re.search(r"^desc: Trigger: Client Request: (.*)$", text, re.M)
        t = re.search(r"^(?:totals|summary): (\d+)", text, re.M)
        if m and t and m.group(1) != "warmup":
            got[m.group(1).strip()] = int(t.group(1))
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=2048, help="calls per measured loop (a multiple of 64)")
    ap.add_argument("--only", nargs="*", default=[], help="paths to measure: " + ", ".join(p for p, _ in PATHS))
    ap.add_argument("--shim", help="a _native_shim*.so to measure instead of the installed one")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(pathlib.Path(args.child), args.calls, set(args.only), args.shim)
    if not shutil.which("valgrind"):
        print("valgrind is not installed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 1
    paths = [p for p, _ in PATHS if not args.only or p in args.only]
    got, shards = {}, {}
    with tempfile.TemporaryDirectory(prefix="tfd-ir-") as d:
        work = pathlib.Path(d)
        build(work, instructions=True)
        for path in paths:          # a process each: no path sees what another left behind
            out = work / path
            out.mkdir()
            cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=yes", f"--callgrind-out-file={out}/cg.out",
                   sys.executable, __file__, "--child", str(work), "--calls", str(args.calls), "--only", path]
            if args.shim:
                cmd += ["--shim", str(pathlib.Path(args.shim).resolve())]
            run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            if run.returncode != 0:
                print(run.stderr[-4000:], file=sys.stderr)
                return 1
            got.update(parse_dumps(out))
            if (work / "shards.json").exists():
                shards = json.loads((work / "shards.json").read_text())
    print(f"instructions per call (callgrind, user space, {args.calls} calls a loop; "
          f"the loop's own instructions are in every column and cancel in 'added')")
    print(f"{'path':18s} {'plain':>8s} {'counters':>9s} {'trace':>8s} {'added':>7s} {'+trace':>7s}  what")
    for name, what in PATHS:
        if name not in paths:
            continue
        v = {m: got.get(f"{name}/{m}", 0) / args.calls for m in MODES}
        print(f"{name:18s} {v['plain']:8.1f} {v['counters']:9.1f} {v['trace']:8.1f} "
              f"{v['counters'] - v['plain']:+7.1f} {v['trace'] - v['plain']:+7.1f}  {what}")
    if shards:
        print(f"(the collect folded {shards.get('counters', 0)} (thread, file) counters, "
              f"{shards.get('trace', 0)} with the trace)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
