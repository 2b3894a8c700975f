"""What attaching adds to a job that opens files it has not seen: on the disk
and on the slow tier.

    python benchmarks/bench_new_files.py [--rounds 7] [--disk-files 4000] [--slow-files 150] [--dirs 10]

Every new file gets a record, and a record holds its file system's block
size (POSIX_FILE_ALIGNMENT). Each round reads two trees of files never seen
before, each file once (open, read, close: what a first epoch does), in
--dirs directories: one tree detached and one attached, in a shuffled
order, in this one process (the same interpreter and memory for both, so
that only attaching differs). The disk trees sit in a temporary directory;
the slow ones on the case studies' FUSE tier (case_studies/slowfs.c, needs
root and /dev/fuse) with its default latencies (4 ms a metadata call,
0.5 ms a read request), where a statfs(2) walks the path through the
daemon. Printed: per file, the detached time and what attaching added,
medians of the rounds with their 95 % intervals, and the ratio; the script
checks that every attached file was counted."""
from __future__ import annotations

import argparse
import os
import pathlib
import random
import statistics
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))    # case_studies/, from a clone
from intervals import median_interval  # noqa: E402


def make_tree(root: pathlib.Path, files: int, dirs: int) -> list:
    paths = []
    for i in range(files):
        d = root / f"d{i % dirs}"
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"f{i}.bin"
        p.write_bytes(os.urandom(1024))
        paths.append(str(p))
    return paths


def read_all(paths) -> float:
    """ns a file to open, read and close each of paths."""
    t = time.perf_counter_ns()
    for p in paths:
        with open(p, "rb") as f:
            f.read()
    return (time.perf_counter_ns() - t) / len(paths)


def measure(root: pathlib.Path, files: int, dirs: int, rounds: int, rng: random.Random) -> dict:
    import tfdarshan
    trees = [make_tree(root / f"t{i}", files, dirs) for i in range(2 * rounds)]
    got = {"plain": [], "attached": []}
    for r in range(rounds):
        order = ["plain", "attached"]
        rng.shuffle(order)
        for mode, tree in zip(order, trees[2 * r:2 * r + 2]):
            if mode == "attached":
                tfdarshan.attach()
            got[mode].append(read_all(tree))
            if mode == "attached":
                tfdarshan.detach()
                snap = tfdarshan.snapshot()
                seen = set(snap.posix.loc[snap.posix["POSIX_OPENS"] > 0, "path"])
                if not seen.issuperset(tree):
                    raise RuntimeError(f"counted {len(seen & set(tree))} of {len(tree)} files")
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
    print(f"{args.rounds} rounds of two new trees, detached and attached in a shuffled order, in one process; "
          f"files in {args.dirs} directories, each read once")
    with tempfile.TemporaryDirectory(prefix="bench-new-files-") as d:
        report("disk", measure(pathlib.Path(d) / "disk", args.disk_files, args.dirs, args.rounds, rng))
        if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
            print("slow tier: skipped (it needs root and /dev/fuse)")
            return 0
        from case_studies.slowfs import mounted
        os.mkdir(os.path.join(d, "root"))
        with mounted(os.path.join(d, "root"), os.path.join(d, "mnt")) as mnt:
            report("slow tier", measure(pathlib.Path(mnt), args.slow_files, args.dirs, args.rounds, rng))
    return 0


if __name__ == "__main__":
    sys.exit(main())
