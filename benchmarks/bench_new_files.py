"""What attaching adds to a job that opens files it has not seen: on the disk
and on the slow tier.

    python benchmarks/bench_new_files.py [--rounds 7] [--disk-files 4000] [--slow-files 150] [--dirs 10]

Every new file gets a record, and a record holds its file system's block
size (POSIX_FILE_ALIGNMENT). Each round runs fresh processes, plain and
attached in a shuffled order, that each read every file of a tree once
(open, read, close: what a first epoch does) in --dirs directories; a
process's own loop is timed, so the interpreter's start is left out. The
disk tree sits in a temporary directory; the slow one on the case studies'
FUSE tier (case_studies/slowfs.c, needs root and /dev/fuse) with its
default latencies (4 ms a metadata call, 0.5 ms a read request), where a
statfs(2) walks the path through the daemon. Printed: per file, the plain
time and what attaching added, medians of the rounds with their 95 %
intervals, and the ratio."""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))    # case_studies/, from a clone
from intervals import median_interval  # noqa: E402

CHILD = """
import json, os, sys, time
import tfdarshan
root, attach = sys.argv[1], sys.argv[2] == "attached"
files = [os.path.join(root, d, f) for d in sorted(os.listdir(root)) for f in sorted(os.listdir(os.path.join(root, d)))]
if attach:
    tfdarshan.attach()
t = time.perf_counter_ns()
for p in files:
    with open(p, "rb") as f:
        f.read()
ns = (time.perf_counter_ns() - t) / len(files)
if attach:
    snap = tfdarshan.snapshot()
    counted = int((snap.posix["path"].str.startswith(root + "/") & (snap.posix["POSIX_OPENS"] > 0)).sum())
    if counted != len(files):
        sys.exit(f"counted {counted} of {len(files)} files")
print(json.dumps({"ns": ns}))
"""


def make_tree(root: pathlib.Path, files: int, dirs: int) -> None:
    for i in range(files):
        d = root / f"d{i % dirs}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.bin").write_bytes(os.urandom(4096))


def one(root: str, mode: str) -> float:
    r = subprocess.run([sys.executable, "-c", CHILD, root, mode], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"{mode} run failed: {r.stderr.strip()[-500:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])["ns"]


def measure(root: str, rounds: int, rng: random.Random) -> dict:
    got = {"plain": [], "attached": []}
    for _ in range(rounds):
        order = ["plain", "attached"]
        rng.shuffle(order)
        for mode in order:
            got[mode].append(one(root, mode))
    return got


def report(name: str, got: dict) -> None:
    plain = [ns / 1e3 for ns in got["plain"]]
    added = [(a - p) / 1e3 for a, p in zip(got["attached"], got["plain"])]
    ratio = [a / p for a, p in zip(got["attached"], got["plain"])]
    plo, phi = median_interval(plain)
    alo, ahi = median_interval(added)
    rlo, rhi = median_interval(ratio)
    print(f"{name:10s} plain {statistics.median(plain):9.1f} us a file [{plo:.1f}, {phi:.1f}]   "
          f"added {statistics.median(added):+9.1f} us [{alo:+.1f}, {ahi:+.1f}]   "
          f"ratio {statistics.median(ratio):.3f} [{rlo:.3f}, {rhi:.3f}]")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--disk-files", type=int, default=4000)
    ap.add_argument("--slow-files", type=int, default=150)
    ap.add_argument("--dirs", type=int, default=10)
    args = ap.parse_args(argv)
    if args.rounds < 5:
        ap.error("--rounds must be at least 5")
    rng = random.Random(1)
    print(f"{args.rounds} rounds, plain and attached in a shuffled order, fresh processes; "
          f"files in {args.dirs} directories, each read once")
    with tempfile.TemporaryDirectory(prefix="bench-new-files-") as d:
        disk = pathlib.Path(d) / "disk"
        make_tree(disk, args.disk_files, args.dirs)
        report("disk", measure(str(disk), args.rounds, rng))
        if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
            print("slow tier: skipped (it needs root and /dev/fuse)")
            return 0
        from case_studies.slowfs import mounted
        make_tree(pathlib.Path(d) / "root", args.slow_files, args.dirs)
        with mounted(os.path.join(d, "root"), os.path.join(d, "mnt")) as mnt:
            report("slow tier", measure(str(mnt), args.rounds, rng))
    return 0


if __name__ == "__main__":
    sys.exit(main())
