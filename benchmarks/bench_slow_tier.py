"""How closely `tfdarshan probe` measures the case studies' slow tier.

    python benchmarks/bench_slow_tier.py [--probes N]

Mounts the slow FUSE tier (case_studies/slowfs.c; needs root and /dev/fuse)
twice, once latency-bound (5 ms a lookup or open, 10 ms a read request) and
once bandwidth-bound (40 MiB/s), probes each N times and prints, for every
figure, the probed value over the configured one as a median with its
range, and the probes' spread (highest minus lowest over the median). The
tests assert only the bounds sleeping guarantees (tests/case_studies/test_slow_tier.py);
this is where the accuracy is measured, on a quiet machine."""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import tempfile

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))   # case_studies/, from a clone

MiB = 2**20
LATENCY = dict(meta_latency=0.005, read_latency=0.010, bandwidth="0")
BANDWIDTH = dict(meta_latency=0, read_latency=0, bandwidth="40M")


def probes(config: dict, n: int):
    from case_studies.slowfs import mounted
    from tfdarshan.advice import tiers
    with tempfile.TemporaryDirectory(prefix="bench-slowfs-") as d:
        os.mkdir(os.path.join(d, "root"))
        with mounted(os.path.join(d, "root"), os.path.join(d, "mnt"), **config) as mnt:
            return [tiers.probe(mnt, size=16 << 20, opens=30, small_reads=16, repeats=5) for _ in range(n)]


def row(name: str, values, configured: float) -> str:
    ratios = [v / configured for v in values]
    spread = (max(values) - min(values)) / statistics.median(values)
    return (f"{name:28s} probed/configured {statistics.median(ratios):.3f} "
            f"[{min(ratios):.3f}, {max(ratios):.3f}]   spread of the probes {100 * spread:.1f} %")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", type=int, default=5)
    args = ap.parse_args(argv)
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("the slow tier needs root and /dev/fuse", file=sys.stderr)
        return 2
    lat = probes(LATENCY, args.probes)
    bw = probes(BANDWIDTH, args.probes)
    print(f"{args.probes} probes of each tier (median [min, max]):")
    # three metadata calls an open: the lookup of each of two components, and the open
    print(row("open latency (3 x 5 ms)", [p.open_latency for p in lat], 3 * LATENCY["meta_latency"]))
    print(row("read request latency (10 ms)", [p.read_latency for p in lat], LATENCY["read_latency"]))
    print(row("bandwidth (40 MiB/s)", [p.bandwidth for p in bw], 40 * MiB))
    return 0


if __name__ == "__main__":
    sys.exit(main())
