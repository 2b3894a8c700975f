"""What a step boundary costs, and what counting each step's reads from
storage (major page faults and /proc/self/io read_bytes, tf/steps.py) adds.

    python benchmarks/bench_step_marks.py [--steps 2000] [--rounds 7]

In one process with a profiling window open, each round times --steps
steps (tfdarshan.step(i) around one read of a small file) twice, each arm
first in every other round: with the storage counts, and with them replaced by a
function that returns zeros. Prints each arm's median per step with its
95 % interval over rounds, and the median of the per-round differences."""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))


def main(argv=None) -> int:
    from intervals import median_interval
    import tfdarshan
    from tfdarshan.tf import steps as S
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    counted = S.storage_reads

    def uncounted():
        return [0, 0]

    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "x.bin"
        path.write_bytes(os.urandom(4096))
        times = {"counted": [], "zeros": []}
        with tfdarshan.profile(logdir=os.path.join(d, "logs")):
            step = 0
            for r in range(args.rounds + 1):            # the first round warms up and is dropped
                # each arm first in every other round: a cost that grows with the steps taken so far
                # falls on both alike
                arms = list(times) if r % 2 else list(times)[::-1]
                for arm in arms:
                    S.storage_reads = counted if arm == "counted" else uncounted
                    t = time.perf_counter()
                    for _ in range(args.steps):
                        with tfdarshan.step(step):
                            with open(path, "rb") as f:
                                f.read()
                        step += 1
                    if r:
                        times[arm].append((time.perf_counter() - t) / args.steps)
        S.storage_reads = counted
    for arm, v in times.items():
        lo, hi = median_interval(v)
        print(f"{arm}: {1e6 * statistics.median(v):.1f} µs a step ({1e6 * lo:.1f}-{1e6 * hi:.1f}), "
              f"{args.rounds} rounds of {args.steps} steps")
    diff = [a - b for a, b in zip(times["counted"], times["zeros"])]
    lo, hi = median_interval(diff)
    print(f"added by the storage counts: {1e6 * statistics.median(diff):.1f} µs a step "
          f"({1e6 * lo:.1f}-{1e6 * hi:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
