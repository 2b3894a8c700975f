"""`tfdarshan stage MANIFEST`: copy the files a recommendation chose to the
fast tier, checking every copy's checksum before it counts; resumable, never
overwrites or deletes, refuses without room. What this host now holds is
recorded (with each source's size and mtime) for `tfdarshan run --staged`,
which serves the copies without a change to the script; pipelines can also
read them through tfdarshan.staged_paths(paths). A per-node manifest
(`recommend --per-node`) is staged from each node: this host's part, or
--node's."""
from __future__ import annotations

import argparse
import sys

from tfdarshan.cli import one_line, path_arg


def add_parser(sub) -> None:
    p = sub.add_parser("stage", help="copy recommended files to the fast tier", description=__doc__)
    p.add_argument("manifest", type=path_arg, help="the manifest written by `tfdarshan recommend --manifest`")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--node", help="with a per-node manifest: stage this node's part (default: this host's name)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tfdarshan.advice.stager import stage, staging_map_path
    from tfdarshan.capture.served import held_path
    from tfdarshan.measures.human import count
    r = stage(args.manifest, progress=not args.quiet and sys.stderr.isatty(), node=args.node)
    print(f"staged {count(len(r.staged), 'file')}, {len(r.skipped)} already staged, {len(r.failed)} failed; "
          f"map: {staging_map_path()}; this host's copies: {held_path()}")
    for e, why in r.failed:
        print(f"tfdarshan stage: {one_line(e['source'])}: {one_line(why)}", file=sys.stderr)
    return 0 if r.ok else 1
