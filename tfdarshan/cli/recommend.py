"""`tfdarshan recommend LOGDIR_OR_LOG --fast-tier PATH`: which data to stage
on the fast tier, what it will save, and why.

The input is a Darshan log (ours or a site Darshan's) or a TensorBoard log
directory (its newest session, or --session). The fast tier's figures come
from `tfdarshan probe` (or a --tiers TOML file); an unknown tier is probed
on the spot. With a log directory the advice is also stored beside the
session, where the TensorBoard tab shows it. --manifest writes the staging
manifest for `tfdarshan stage`.

For a session of several ranks, findings on stragglers, a shared-file hot
spot, shard imbalance and metadata storms come from the session's analysis
tables (built by `tfdarshan analyze` first when absent). `--per-node` plans
what each node (host) copies to its own fast tier from what its ranks read,
with --capacity per node, and compares that with one set replicated on every
node; its manifest has a part per node for `tfdarshan stage --node`.

`--compare BEFORE AFTER` checks an earlier recommendation: predicted versus
achieved saving, from the run before staging and the run after.

This module parses and prints; the answers are assembled in advice/recommend.py."""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

from tfdarshan.cli import path_arg
from tfdarshan.errors import TfdarshanError
from tfdarshan.measures.human import count


def add_parser(sub) -> None:
    p = sub.add_parser("recommend", help="what to stage on the fast tier", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", nargs="?", type=path_arg, help="a Darshan log or a TensorBoard log directory")
    p.add_argument("--fast-tier", type=path_arg, help="a directory on the fast tier")
    p.add_argument("--capacity", help="room to plan with, with a unit (4G, 500MiB, 4096B) or as a share of "
                                      "the data read (10%%); default: the tier's free space")
    p.add_argument("--tiers", action="append", default=[], type=path_arg, help="TOML file declaring tiers")
    p.add_argument("--granularity", choices=["file", "dataset"], default="file",
                   help="stage single files (default), or whole datasets (files grouped by --dataset globs, "
                        "else by their shard pattern, such as img_*.jpg) all or nothing")
    p.add_argument("--dataset", action="append", default=[], metavar="GLOB",
                   help="group files matching GLOB into one dataset")
    p.add_argument("--session", help="session name in the log directory (default: newest)")
    p.add_argument("--format", choices=["text", "json", "html"], default="text",
                   help="the report as text (default), JSON, or a self-contained HTML page")
    p.add_argument("--output", type=path_arg, help="write the report here instead of standard output")
    p.add_argument("--manifest", type=path_arg, help="also write the staging manifest here")
    p.add_argument("--staging-root", type=path_arg, help="where copies go (default: FAST_TIER/tfdarshan-staged)")
    p.add_argument("--no-store", action="store_true", help="do not store advice.json beside the session")
    p.add_argument("--per-node", action="store_true",
                   help="a plan per node (host) of a multi-rank session, from its ranks' reads; --capacity is "
                        "per node; compares with one set replicated on every node")
    p.add_argument("--objective", choices=["critical-path", "total"],
                   help="what the plan minimises: the slowest rank's I/O time, step by step (critical-path, the "
                        "default for a session of several ranks: a synchronous step waits for its slowest rank), "
                        "or the I/O time summed over ranks and threads (total, the default for one process)")
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), type=path_arg,
                   help="a run before staging against one after it: step, training and window time, and the "
                        "staged files' I/O time against the prediction (log directories, session directories "
                        "or logs)")
    p.set_defaults(handler=run)


def say(line: str) -> None:
    """A line for the user beside the report: on standard error, named."""
    print(f"tfdarshan recommend: {line}", file=sys.stderr)


def parse_capacity(text):
    """--capacity as ("bytes", n) or ("share", fraction), or None when it was
    not given. Checked before anything slow (reading logs, probing a tier)."""
    from tfdarshan.advice import tiers as T
    if text is None:
        return None
    if text.endswith("%"):
        try:
            share = float(text[:-1]) / 100
        except ValueError:
            raise TfdarshanError(f"--capacity {text}: not a percentage") from None
        if not 0 <= share <= 1:      # also NaN and infinities, which int() later cannot take
            raise TfdarshanError(f"--capacity {text}: a percentage is between 0 and 100")
        return ("share", share)
    if text.strip().replace(".", "", 1).isdigit():
        # "10" could mean bytes, GB or a share: say which
        raise TfdarshanError(f"--capacity {text}: give a unit (e.g. {text}G, {text}MiB, {text}B) or a "
                             f"percentage ({text}%)")
    return ("bytes", T.parse_size(text))


def rank_tables(session_dir):
    """The analysis tables of a session of enough ranks for rank findings
    (built by `tfdarshan analyze` first when absent or stale), else None."""
    from tfdarshan.advice import distributed
    from tfdarshan.analysis.analyze import rank_logs, tables_of
    return tables_of(session_dir) if len(rank_logs(session_dir)) >= distributed.MIN_RANKS else None


def run(args: argparse.Namespace) -> int:
    if args.compare:
        return compare(args)
    if not args.source or not args.fast_tier:
        raise TfdarshanError("give a log or log directory and --fast-tier PATH")
    if not os.path.isdir(args.fast_tier):
        raise TfdarshanError(f"--fast-tier {args.fast_tier}: not a directory")
    capacity = parse_capacity(args.capacity)
    if args.per_node:
        return per_node(args, capacity)
    from tfdarshan.advice import recommend as R, render
    rec = R.advise(args.source, args.fast_tier, capacity=capacity, toml_files=args.tiers,
                   granularity=args.granularity, globs=args.dataset, session=args.session, objective=args.objective,
                   rank_tables=rank_tables, say=say)
    emit(args, {"text": render.render_text, "json": render.render_json,
                "html": render.render_html}[args.format](rec.advice))
    session_dir = rec.source.session_dir
    if session_dir is not None and not args.no_store:
        from tfdarshan.advice.manifest import _write_json
        _write_json(session_dir / "advice.json", rec.advice.to_dict())
    if args.manifest:
        from tfdarshan.advice.manifest import vanished_line
        manifest = R.staging_manifest(rec, staging_root(args), progress=sys.stderr.isatty())
        pathlib.Path(args.manifest).write_text(json.dumps(manifest, indent=1))
        if manifest["vanished"]:
            say(vanished_line(manifest))
        print(f"wrote the staging manifest {args.manifest} ({count(len(manifest['entries']), 'file')})", file=sys.stderr)
    if rec.source.picked:
        say(f"read {rec.source.picked}")
    return 0


def staging_root(args: argparse.Namespace) -> str:
    return args.staging_root or os.path.join(args.fast_tier, "tfdarshan-staged")


def emit(args: argparse.Namespace, text: str) -> None:
    """The report to --output, else standard output."""
    if args.output:
        pathlib.Path(args.output).write_text(text)
        print(f"wrote {args.output}")
    else:
        print(text)


def per_node(args: argparse.Namespace, capacity) -> int:
    """A plan per host of the session's rank table, and the manifest with a part per node."""
    from tfdarshan.advice import recommend as R, render
    from tfdarshan.advice.manifest import vanished_line
    from tfdarshan.analysis.analyze import tables_of
    if args.format == "html":
        raise TfdarshanError("--per-node reports as text or json")
    plans, findings, session = R.per_node(args.source, args.fast_tier, capacity=capacity, toml_files=args.tiers,
                                          session=args.session, tables=tables_of, say=say)
    emit(args, (render.render_node_plans_json if args.format == "json" else render.render_node_plans)(plans, findings))
    if args.manifest:
        manifest = R.node_manifest(plans, staging_root(args), args.source, session.directory,
                                   progress=sys.stderr.isatty())
        if manifest["vanished"]:
            say(vanished_line(manifest))
        pathlib.Path(args.manifest).write_text(json.dumps(manifest, indent=1))
        print(f"wrote the staging manifest {args.manifest} ({count(len(manifest['entries']), 'file')} for "
              f"{count(len(plans.nodes), 'node')}; each node runs `tfdarshan stage {args.manifest}`)", file=sys.stderr)
    return 0


def compare(args: argparse.Namespace) -> int:
    """A run before staging against one after it: step, training and
    window time first, then the staged files' I/O time against the
    prediction. Exit 2 when AFTER read none of the staged copies, 1 when it
    read some files from their sources instead."""
    from tfdarshan.advice import recommend as R, render
    r = R.compare(args.compare[0], args.compare[1], manifest=args.manifest, session=args.session, say=say)
    n = r["staged_files"]
    if r["copies_read"] == 0:
        raise TfdarshanError(
            f"AFTER ({args.compare[1]}) read none of the {n} staged copies"
            + (f" but {r['sources_read']} of their sources" if r["sources_read"] else "")
            + ": nothing to compare. Did it run under `tfdarshan run --staged`, or its input pipeline use "
              "tfdarshan.staged_paths()?")
    print(json.dumps(r, indent=1) if args.format == "json" else render.compare_text(r))
    if r["sources_read"]:
        say(f"warning: AFTER read {r['sources_read']} of the {n} staged files from "
            f"their sources, not their copies; the saving above covers the copies only")
        return 1
    return 0
