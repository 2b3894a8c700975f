"""`tfdarshan run [options] script.py args...` (or `-m module args...`):
profile a whole training script without changing it, and without LD_PRELOAD.

Attaches before the script starts and writes the run's Darshan log and step
series into LOGDIR/plugins/tfdarshan/<time>/ when it ends: normally, on an
uncaught exception, on SIGTERM, or through os._exit. With --steps A:B only
training steps A to B are recorded (Keras batches, Trace(step_num=...) or
tfdarshan.step markers). With --flight-recorder DURATION nothing is
written at the end: the last DURATION of I/O is kept in memory and written
as a session when a step is slow, on SIGUSR2, or when the script calls
tfdarshan.flight_recorder().dump(). With --children, Python processes it starts
(subprocess, multiprocessing spawn) attach too and write <host>_<pid> files
into the same directory; forked children always count on their own.

A log directory that cannot take a probe file is refused before the script
starts (exit 2). Logs that cannot be written there at the end go to a
fallback directory ($TFDARSHAN_FALLBACK_DIR, else ~/.cache/tfdarshan/unsaved,
else $TMPDIR), named on stderr; the exit status is the script's own. While
it runs, each process keeps <stem>.live in the session directory: if it is
killed, `tfdarshan joblog` or `analyze` turns that into a partial log.

With --staged, each read-only open and stat of a file `tfdarshan stage`
copied to this node is served from its copy, without changing the script:
all that this node holds, or those of MANIFEST (--staged=MANIFEST, or a
path ending in .json right after --staged). A source is served only while
it has the size and mtime it had when staged (checked at its first use);
writes, directories and any error on the copy go to the source. Launchers
set TFDARSHAN_STAGED (all, or a manifest's path) instead. A run that served
none says so on stderr; the exit status is still the script's.

The first-use check is one metadata request to each source's storage,
inside the training steps that first open it: on a slow shared tier it
takes back part of what staging saves in a job's first epoch
(benchmarks/bench_staged_check.py). --staged-check ahead (or
TFDARSHAN_STAGED_CHECK=ahead) checks every source before the script starts
instead, as staged_paths() does; a source changed between that check and
its first open is then not seen."""
from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import re
import runpy
import sys
from typing import List, Optional

from tfdarshan.cli import duration_arg, path_arg
from tfdarshan.errors import TfdarshanError


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="profile a whole script", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--logdir", default="tfdarshan_logs", type=path_arg,
                   help="TensorBoard log directory (default: tfdarshan_logs)")
    p.add_argument("--steps", metavar="A:B", help="record only training steps A to B (inclusive)")
    p.add_argument("--trace", action="store_true", help="also keep the per-operation trace (DXT)")
    p.add_argument("--children", action="store_true", help="attach in Python child processes too")
    p.add_argument("--staged", nargs="?", const="all", metavar="MANIFEST", type=path_arg,
                   help="serve the staged copies this node holds (of MANIFEST) in place of their sources")
    p.add_argument("--staged-check", choices=["first-use", "ahead"], default=None,
                   help="check each staged source at its first open (default) or all of them before the script "
                        "starts (ahead: off the training steps)")
    fr = p.add_argument_group("flight recorder (leave it on in production)")
    fr.add_argument("--flight-recorder", metavar="DURATION", type=duration_arg,
                    help="keep the last DURATION (e.g. 120s) of I/O and write it when a step is slow or on SIGUSR2")
    fr.add_argument("--slow-factor", type=float, default=3.0,
                    help="a step is slow above this many times the running median (default 3, after 20 steps)")
    fr.add_argument("--dump-gap", metavar="DURATION", type=duration_arg, default=300.0,
                    help="at most one automatic (slow-step) dump per DURATION (default 300s); "
                         "SIGUSR2 and dump() have their own 1 s gap")
    fr.add_argument("--max-dumps", type=int, default=10, help="automatic dumps in all (default 10)")
    fr.add_argument("--ring-memory", metavar="SIZE", default="64MiB",
                    help="memory for the recorded seconds (default 64MiB)")
    p.add_argument("-m", dest="module", metavar="MODULE", help="run a module, like python -m")
    p.add_argument("script", nargs="?", help="the script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    p.set_defaults(handler=run)


def normalize_argv(argv: List[str]) -> List[str]:
    """`run --staged script.py ...`: --staged takes a value only when it is
    a manifest (ends in .json); otherwise the script that follows is the
    script (argparse would take it as the manifest)."""
    out, i = list(argv), 0
    while i < len(out):
        a = out[i]
        if a == "--":
            break
        if a == "--staged":
            if not (i + 1 < len(out) and out[i + 1].endswith(".json")):
                out[i] = "--staged=all"
            return out
        if not a.startswith("-"):
            break                   # the script: what follows is its own
        i += 2 if a in VALUE_OPTIONS else 1
    return out


VALUE_OPTIONS = {"--logdir", "--steps", "--staged-check", "--flight-recorder", "--slow-factor", "--dump-gap",
                 "--max-dumps", "--ring-memory", "-m"}


def parse_steps(text):
    if text is None:
        return None
    a, sep, b = text.partition(":")
    try:
        first, last = int(a), int(b if sep else a)
    except ValueError:
        raise TfdarshanError(f"--steps must look like A:B with integers, got {text!r}") from None
    if first < 0 or last < first:
        raise TfdarshanError(f"--steps {text}: need 0 <= A <= B")
    return first, last


def flight_policy(args):
    """The flight recorder's settings, checked before anything starts; None without it."""
    from tfdarshan.advice.tiers import parse_size
    if args.flight_recorder is None:
        return None
    if args.steps:
        raise TfdarshanError("--flight-recorder and --steps do not go together: the recorder keeps "
                             "the last seconds, whatever the steps")
    if not args.slow_factor > 1:
        raise TfdarshanError(f"--slow-factor must be above 1, got {args.slow_factor}")
    if args.max_dumps < 0:
        raise TfdarshanError(f"--max-dumps must be 0 or more, got {args.max_dumps}")
    try:
        memory = parse_size(args.ring_memory)
    except ValueError as e:
        raise TfdarshanError(f"--ring-memory: {e}") from None
    if memory < 1 << 20:
        raise TfdarshanError(f"--ring-memory {args.ring_memory}: at least 1MiB")
    return {"seconds": args.flight_recorder, "slow_factor": args.slow_factor, "min_gap": args.dump_gap,
            "max_dumps": args.max_dumps, "memory_cap": memory}


def check_module(name: str) -> None:
    """Refuse -m MODULE like python -m would, before anything starts."""
    try:
        found = importlib.util.find_spec(name) is not None
    except (ImportError, ValueError) as e:       # a missing parent package, a relative or empty name
        raise TfdarshanError(f"-m {name}: {e}") from None
    if not found:
        raise TfdarshanError(f"-m {name}: no module named {name}")


# `tfdarshan run -- python train.py`: the interpreter named before the script
PYTHON = re.compile(r"python(\d+(\.\d+)*)?")


def interpreter_given(args: argparse.Namespace) -> None:
    """Accept `python script.py ...` and `python -m module ...` as the
    script and its arguments: the script runs in tfdarshan's own Python
    (which is said, when it is not the one named). Other interpreter
    options are refused with what to type instead."""
    named, rest = args.script, list(args.args)
    if rest[:1] == ["-m"] and len(rest) >= 2:
        args.module, args.script, args.args = rest[1], None, rest[2:]
        if args.args:
            args.script, args.args = args.args[0], args.args[1:]
        what = f"-m {args.module}"
    elif rest and not rest[0].startswith("-"):
        args.script, args.args = rest[0], rest[1:]
        what = args.script
    else:
        raise TfdarshanError(f"{named} {' '.join(rest)}".strip() + ": give the script itself, without the "
                             "interpreter or its options: tfdarshan run [options] script.py args... "
                             "(or -m module args...)")
    import shutil
    found = shutil.which(named) if os.sep not in named else named
    if not found or os.path.realpath(found) != os.path.realpath(sys.executable):
        print(f"tfdarshan run: running {what} in this Python ({sys.executable}), not {named}", file=sys.stderr)


def prepared_run(args: argparse.Namespace, steps, flight):
    """The WholeRun, once the log directory has taken a probe file (and the
    ranks of a job have agreed on their session directory): a log directory
    that cannot take the logs is refused before the script starts."""
    from tfdarshan.logs.destination import check_writable
    from tfdarshan.logs.logdir import session_root
    from tfdarshan.tf import runner
    try:
        check_writable(session_root(args.logdir, beside_xprof=False))
        return runner.WholeRun(args.logdir, steps=steps, trace=args.trace, children=args.children, flight=flight,
                               staged=staged_spec(args.staged))
    except OSError as e:
        raise TfdarshanError(f"--logdir {args.logdir}: cannot write the logs there "
                             f"({e.strerror or e}); the script was not started") from None


def staged_spec(value: Optional[str]) -> Optional[str]:
    """--staged's value: "all", or the manifest's absolute path (children
    started elsewhere inherit it), refused now when it cannot be read."""
    from tfdarshan.capture import served
    if value in (None, served.ALL):
        return value
    served.manifest_sources(value)
    return os.path.abspath(value)


def run(args: argparse.Namespace) -> int:
    steps = parse_steps(args.steps)
    staged_spec(args.staged)
    if args.staged_check is not None:
        if args.staged is None:
            raise TfdarshanError("--staged-check: needs --staged")
        # the environment, so that child processes check the same way
        os.environ["TFDARSHAN_STAGED_CHECK"] = args.staged_check
    flight = flight_policy(args)
    # refused before attaching: a mistake must not leave a log behind
    if os.path.exists(args.logdir) and not os.path.isdir(args.logdir):
        raise TfdarshanError(f"--logdir {args.logdir}: exists and is not a directory")
    if not args.module and args.script and PYTHON.fullmatch(os.path.basename(args.script)):
        interpreter_given(args)
    if args.module:
        check_module(args.module)
        target, argv = args.module, [args.module] + ([args.script] if args.script else []) + args.args
    else:
        if not args.script:
            raise TfdarshanError("nothing to run: give a script (or -m module)")
        script = pathlib.Path(args.script)
        if not script.is_file():
            raise TfdarshanError(f"{script}: no such script (usage: tfdarshan run [options] script.py args..., "
                                 f"or -m module args...)")
        target, argv = str(script), [str(script)] + args.args
    run = prepared_run(args, steps, flight)
    sys.argv = argv                 # before start: the live log names the program as the log will
    run.start()
    code = 0
    try:
        if args.module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.path.insert(0, str(pathlib.Path(target).resolve().parent))
            runpy.run_path(target, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 1
    finally:
        run.finish()
    return code
