"""`tfdarshan probe PATH`: measure the storage tier holding PATH (open and
stat latency, the open rate of several openers at once, small-read latency,
large-read bandwidth, with the page cache defeated) and remember it for
`tfdarshan recommend`."""
from __future__ import annotations

import argparse
import json

from tfdarshan.cli import path_arg
from tfdarshan.errors import TfdarshanError
from tfdarshan.measures.human import count


def add_parser(sub) -> None:
    p = sub.add_parser("probe", help="measure a storage tier", description=__doc__)
    p.add_argument("path", type=path_arg, help="a directory on the tier (a few files are written there and removed)")
    p.add_argument("--size", default="64M", help="size of the bandwidth test file (default 64M)")
    p.add_argument("--repeats", type=int, default=5, help="measure this many times; figures are medians (default 5)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.add_argument("--no-save", action="store_true", help="do not store the result")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tfdarshan.advice import tiers
    if not 1 <= args.repeats <= 100:
        raise TfdarshanError(f"--repeats {args.repeats}: between 1 and 100")
    tier = tiers.probe(args.path, size=tiers.parse_size(args.size), repeats=args.repeats)
    where = None if args.no_save else tiers.save_probe(tier)
    if args.json:
        print(json.dumps(tier.to_dict(), indent=1))
    else:
        def figure(field, scale, unit, digits):
            lo_hi = tier.range_of(field)
            value = f"{getattr(tier, field) * scale:.{digits}f} {unit}"
            return value + (f" ({lo_hi[0] * scale:.{digits}f}–{lo_hi[1] * scale:.{digits}f})" if lo_hi else "")
        print(f"{tier.label}, {'medians of ' if args.repeats != 1 else ''}{count(args.repeats, 'run')} (lowest–highest): "
              f"open {figure('open_latency', 1e6, 'µs', 1)}, stat {figure('stat_latency', 1e6, 'µs', 1)}, "
              f"{figure('open_rate', 1e-3, 'k opens/s', 0)} with {tiers.OPENERS} openers, "
              f"read request {figure('read_latency', 1e6, 'µs', 1)} + {figure('bandwidth', 2**-20, 'MiB/s', 0)}, "
              f"{(tier.capacity or 0) / 2**30:.1f} GiB free")
        if where:
            print(f"saved in {where}")
    return 0
