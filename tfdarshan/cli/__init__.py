"""The `tfdarshan` command: one module per subcommand, registered below.

Expected failures (bad arguments, unreadable files) print one line to
stderr and exit with status 2; nothing is written half-way."""
from __future__ import annotations

import argparse
import importlib
import re
import sys
from typing import List, Optional

from tfdarshan._version import __version__
from tfdarshan.errors import TfdarshanError

# module names under tfdarshan.cli; each has add_parser(subparsers), which sets handler=run
SUBCOMMANDS = ["demo", "import_logs", "run", "probe", "recommend", "stage", "joblog", "analyze"]


def path_arg(text: str) -> str:
    """argparse type for paths: an empty string (an unset shell variable)
    would otherwise mean the current directory."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return text


DURATION_UNITS = {"": 1.0, "s": 1.0, "ms": 1e-3, "m": 60.0, "min": 60.0, "h": 3600.0}


def duration_arg(text: str) -> float:
    """argparse type for durations: 120, 120s, 500ms, 2m, 1h (seconds, > 0)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-z]*)\s*", text or "")
    if not m or m.group(2) not in DURATION_UNITS:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (examples: 120s, 500ms, 2m, 1h)")
    seconds = float(m.group(1)) * DURATION_UNITS[m.group(2)]
    if not 0 < seconds < 10 * 365 * 86400:
        raise argparse.ArgumentTypeError(f"duration out of range: {text!r}")
    return seconds


def one_line(message) -> str:
    """The message (an exception, a path) with control characters escaped
    (newlines in file names, in library messages): an error stays one line."""
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: repr(m.group())[1:-1], str(message))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfdarshan", description="Darshan-compatible I/O profiling for TensorFlow training.")
    parser.add_argument("--version", action="version", version=f"tfdarshan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMANDS:
        importlib.import_module(f"tfdarshan.cli.{name}").add_parser(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # a subcommand whose options argparse cannot take as they are rewrites them first (run --staged)
    if argv and argv[0] in SUBCOMMANDS:
        normalize = getattr(importlib.import_module(f"tfdarshan.cli.{argv[0]}"), "normalize_argv", None)
        argv = argv[:1] + normalize(argv[1:]) if normalize else argv
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (TfdarshanError, OSError, ValueError) as e:
        print(f"tfdarshan {args.command}: error: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tfdarshan {args.command}: interrupted", file=sys.stderr)
        return 130
