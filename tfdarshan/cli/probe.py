"""`tfdarshan probe PATH`: measure the storage tier holding PATH (open and
stat latency, small-read latency, large-read bandwidth, with the page cache
defeated) and remember it for `tfdarshan recommend`."""
from __future__ import annotations

import argparse
import json

from tfdarshan.cli import path_arg


def add_parser(sub) -> None:
    p = sub.add_parser("probe", help="measure a storage tier", description=__doc__)
    p.add_argument("path", type=path_arg, help="a directory on the tier (a few files are written there and removed)")
    p.add_argument("--size", default="64M", help="size of the bandwidth test file (default 64M)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--no-save", action="store_true", help="do not store the result")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tfdarshan.advice import tiers
    tier = tiers.probe(args.path, size=tiers.parse_size(args.size))
    where = None if args.no_save else tiers.save_probe(tier)
    if args.json:
        print(json.dumps(tier.to_dict(), indent=1))
    else:
        print(f"{tier.label}: open {tier.open_latency * 1e6:.1f} µs, stat {tier.stat_latency * 1e6:.1f} µs, "
              f"read request {tier.read_latency * 1e6:.1f} µs + {tier.bandwidth / 2**20:.0f} MiB/s, "
              f"{(tier.capacity or 0) / 2**30:.1f} GiB free")
        if where:
            print(f"saved in {where}")
    return 0
