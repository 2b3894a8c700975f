"""Recommending over 1,000,000 files.

    python benchmarks/bench_recommend.py [--files N]

Budget (issue 21): at most 2 s on this kind of machine (issue 6 asked 5 s).
Prints the wall and CPU time of the one recommend() call (the machine may be shared)."""
from __future__ import annotations

import argparse
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    from bench_log import synthetic_snapshot
    from tfdarshan.advice import advisor
    from tfdarshan.advice.tiers import Tier
    snap = synthetic_snapshot(args.files)
    fast = Tier(path="/dev/shm", fstype="tmpfs", open_latency=2e-6, stat_latency=2e-6, read_latency=1e-6,
                bandwidth=3.5e9)
    total = int(snap.posix["POSIX_MAX_BYTE_READ"].sum())
    t, cpu = time.perf_counter(), time.process_time()
    a = advisor.recommend(snap, fast, capacity=total // 10)
    elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    print(f"{args.files} files: recommended {len(a.chosen)} files in {elapsed:.2f} s ({cpu:.2f} s of CPU; budget 2 s); "
          f"predicted saving {a.saving(a.chosen):.1f} s vs {a.saving(a.baselines['under_2mb']):.1f} s "
          f"for files under 2 MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
