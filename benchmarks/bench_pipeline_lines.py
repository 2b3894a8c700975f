"""Instructions and cache misses per file of the wrapped calls in a real
tf.data pipeline, counted by callgrind's cache simulation.

    python benchmarks/bench_pipeline_lines.py [--files 600] [--passes 2] [--ll-bytes 8388608]

bench_pipeline.py times the pipeline, and its native loop (one file read
over and over) sees the wrapped calls with all their state in the caches.
In a real input pipeline each file is read once a pass, by a thread new to
it, with the whole dataset streaming through the caches in between: every
line of a file's state the shim touches (its record, its shard's sums,
extremes and value trackers, the path cache) is a miss. This runs the same
pipeline as bench_pipeline.py (files of about 88 KB read with
tf.io.read_file in a parallel map) under `valgrind --tool=callgrind
--cache-sim=yes`, counting only inside the shim's wrappers (tfd_w_*, with
the real calls they make and everything they call), and prints per file
read: instructions, data reads and writes, and first-level and last-level
misses. The last level is simulated with --ll-bytes (8 MiB by default:
smaller than a pass over the files, as a real dataset is larger than any
cache). Counts, not times: they do not move with the machine's load.
Under valgrind TensorFlow runs about 50x slower; keep --files small.

Beside the wrappers and all they call, it prints the shim's own part (the
functions of tfdarshan's library: the real calls' user-space part in libc
left out), and the same count for the calls tf.io.read_file makes, made
over and over on one file from C (benchmarks/hotloop.c), all state warm:
the loop bench_pipeline.py times natively. With --json FILE the counts go
to FILE, where bench_pipeline.py --counts FILE turns them into the
deterministic estimate it prints beside its timed figure."""
from __future__ import annotations

import argparse
import collections
import ctypes
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
MARKS = r"""
#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_zero(void) { CALLGRIND_ZERO_STATS; }
void cg_dump(const char *s) { CALLGRIND_DUMP_STATS_AT(s); }
"""
MODES = ("counters", "trace")
WARM_CALLS = 2_000          # the warm loop's files (one file, read over and over)
SHIM = "_native_shim"       # the shim library's name (tfdarshan/_native_shim*.so)
EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


def child(workdir: pathlib.Path, files: int, passes: int) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, str(HERE))
    import tensorflow as tf
    import tfdarshan
    from tfdarshan.capture import _native
    from bench_pipeline import make_files, pipeline
    marks = ctypes.CDLL(str(workdir / "libmarks.so"))
    marks.cg_dump.argtypes = [ctypes.c_char_p]
    paths = make_files(workdir / "files", files)
    ds = pipeline(tf, paths)

    def run_pass():
        return sum(int(tf.reduce_sum(x)) for x in ds)
    sys.path.insert(0, str(HERE))
    from bench_instructions import build, load_loops
    loops = load_loops(build(workdir, instructions=True))
    marks.cg_start()
    run_pass()                      # tf.data and the page cache warm, detached
    for mode in MODES:
        tfdarshan.attach()
        _native.set_trace(mode == "trace", 256 << 20)
        run_pass()                  # every file's record made: a later pass is the steady state
        marks.cg_zero()
        for _ in range(passes):
            run_pass()
        marks.cg_dump(mode.encode())
        if mode == "counters":      # the warm loop bench_pipeline.py times: one file, its state in the caches
            sample = paths[len(paths) // 2].encode()
            loops.read_file_loop(sample, 64, os.path.getsize(paths[len(paths) // 2]))
            loops.ir_label(b"warm")
            loops.read_file_loop(sample, WARM_CALLS, os.path.getsize(paths[len(paths) // 2]))
        tfdarshan.detach()
    return 0


def own_costs(text: str, names: dict) -> dict:
    """{event: count} of the functions in the shim's own library: self costs
    (a cost line right after calls= is the call's inclusive cost, skipped),
    by the object each fn= belongs to. `names` carries callgrind's
    compressed object names from one dump file to the next."""
    ob, own, after_call = "", collections.Counter(), False
    for line in text.splitlines():
        if line.startswith(("ob=", "cob=")):
            m = re.match(r"c?ob=(?:\((\d+)\))?\s*(.*)", line)
            if m.group(2) and m.group(1):
                names[m.group(1)] = m.group(2)
            if line.startswith("ob="):
                ob = m.group(2) or names.get(m.group(1), "")
        elif line.startswith("calls="):
            after_call = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            if not after_call and SHIM in ob:
                for event, v in zip(EVENTS, line.split()[1:]):
                    own[event] += int(v)
            after_call = False
    return dict(own)


def dumps(out: pathlib.Path) -> dict:
    """{label: {event: count}} from callgrind's numbered dump files, and
    {label + "-own": ...} for the shim's own functions."""
    got, names = {}, {}
    for f in sorted(out.glob("cg.out.*"), key=lambda f: int(f.name.rsplit(".", 1)[1])):
        text = f.read_text(errors="replace")
        label = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.M)
        totals = re.search(r"^totals: (.*)$", text, re.M)
        own = own_costs(text, names)
        if label and totals:
            got[label.group(1)] = dict(zip(EVENTS, map(int, totals.group(1).split())))
            got[label.group(1) + "-own"] = own
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=600)
    ap.add_argument("--passes", type=int, default=2, help="measured passes over the files per mode")
    ap.add_argument("--ll-bytes", type=int, default=8 << 20, help="simulated last-level cache")
    ap.add_argument("--json", help="write the counts per file to this file (for bench_pipeline.py --counts)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(pathlib.Path(args.child), args.files, args.passes)
    if not shutil.which("valgrind"):
        print("valgrind is not installed (Debian: apt-get install valgrind)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="tfd-lines-", dir=os.environ.get("TFD_BENCH_DIR")) as d:
        work = pathlib.Path(d)
        (work / "files").mkdir()
        (work / "marks.c").write_text(MARKS)
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(work / "marks.c"), "-o", str(work / "libmarks.so")],
                       check=True)
        out = work / "cg"
        out.mkdir()
        cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes", f"--LL={args.ll_bytes},16,64",
               "--instr-atstart=no", "--toggle-collect=tfd_w_*", f"--callgrind-out-file={out}/cg.out",
               sys.executable, __file__, "--child", str(work), "--files", str(args.files),
               "--passes", str(args.passes)]
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if proc.returncode:
            print(proc.stderr[-2000:], file=sys.stderr)
            return proc.returncode
        got = dumps(out)
    reads = args.files * args.passes
    print(f"per file read by tf.io.read_file in a tf.data pipeline ({args.files} files x {args.passes} passes, "
          f"simulated last level {args.ll_bytes >> 20} MiB): the shim's wrappers and all they call")
    print(f"  {'':28s} {'instr':>7s} {'reads':>6s} {'writes':>6s} {'L1 miss':>8s} {'LL miss':>8s} "
          f"{'(read':>6s} {'write)':>6s}")
    per_file = {}
    for label, what, n in [(m, m, reads) for m in MODES] + [(m + "-own", m + ", the shim's own", reads) for m in MODES] + \
            [("warm-own", "warm loop, the shim's own", WARM_CALLS)]:
        c = got.get(label)
        if not c:
            print(f"  {what}: no dump", file=sys.stderr)
            continue
        per = per_file[label] = {k: c.get(k, 0) / n for k in EVENTS}
        print(f"  {what:28s} {per['Ir']:7.0f} {per['Dr']:6.0f} {per['Dw']:6.0f} "
              f"{per['D1mr'] + per['D1mw']:8.1f} {per['DLmr'] + per['DLmw']:8.1f} {per['DLmr']:6.1f} {per['DLmw']:6.1f}")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"files": args.files, "passes": args.passes,
                                                       "ll_bytes": args.ll_bytes, "per_file": per_file}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
