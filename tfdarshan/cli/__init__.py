"""The `tfdarshan` command: one module per subcommand, registered below.

Expected failures (bad arguments, unreadable files) print one line to
stderr and exit with status 2; nothing is written half-way."""
from __future__ import annotations

import argparse
import importlib
import sys
from typing import List, Optional

from tfdarshan.errors import TfdarshanError

# module names under tfdarshan.cli; each has add_parser(subparsers), which sets handler=run
SUBCOMMANDS = ["demo", "import_logs", "run", "probe", "recommend", "stage"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfdarshan", description="Darshan-compatible I/O profiling for TensorFlow training.")
    from tfdarshan import __version__
    parser.add_argument("--version", action="version", version=f"tfdarshan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in SUBCOMMANDS:
        importlib.import_module(f"tfdarshan.cli.{name}").add_parser(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except TfdarshanError as e:
        print(f"tfdarshan {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"tfdarshan {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"tfdarshan {args.command}: interrupted", file=sys.stderr)
        return 130
