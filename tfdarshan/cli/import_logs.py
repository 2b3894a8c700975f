"""`tfdarshan import LOG... --logdir DIR`: put existing Darshan logs (ours or
a site-wide Darshan's) into a TensorBoard log directory, where the I/O tab
and the staging advisor find them.

Each log file becomes a profiling session: DIR/RUN/plugins/tfdarshan/SESSION/HOST.darshan.
A directory is a session of ours (a session directory: its processes' logs
and step series are copied together, as one session) or a log directory
(each of its sessions so); processes in it that were killed before writing
their logs are turned into partial logs first (their live logs, in place).
Every log is checked before any is copied; logs are never modified."""
from __future__ import annotations

import argparse
import pathlib
import re
import shutil
import sys

from tfdarshan.cli import path_arg
from tfdarshan.cli.progress import StageProgress
from tfdarshan.errors import TfdarshanError
from tfdarshan.logs.logdir import session_root


STAGES = {"check": "checking logs", "copy": "copying logs"}
MANY = 20           # logs: from this many on, import shows its progress


class _Quiet:
    def __call__(self, stage: str, done: int, total: int) -> None:
        pass

    def close(self) -> None:
        pass


_quiet = _Quiet()


def add_parser(sub) -> None:
    p = sub.add_parser("import", help="put Darshan logs into a TensorBoard log directory",
                       description=__doc__)
    p.add_argument("logs", nargs="+", metavar="LOG", type=path_arg,
                   help="Darshan log files, session directories or log directories")
    p.add_argument("--logdir", required=True, type=path_arg, help="TensorBoard log directory")
    p.add_argument("--run", default="imported", help="run name inside the log directory (default: imported)")
    p.set_defaults(handler=run)


def safe_name(text: str, fallback: str) -> str:
    """A file-system and URL friendly name: letters, digits, '._-'."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")
    return name[:100] or fallback


def run(args: argparse.Namespace) -> int:
    logdir = pathlib.Path(args.logdir)
    if logdir.exists() and not logdir.is_dir():
        raise TfdarshanError(f"{logdir}: exists and is not a directory")
    run_name = safe_name(args.run, "imported")
    profile = session_root(logdir / run_name, beside_xprof=False)
    plan, taken, seen = [], set(), set()
    # a bar a stage on a terminal, a line a stage otherwise (on stderr: stdout lists the
    # copies); a few logs are checked and copied in moments, and show none
    progress = StageProgress("tfdarshan import", STAGES, "log") if len(args.logs) >= MANY else _quiet
    try:
        files = _expand(args.logs)
        _check(files, profile, plan, taken, seen, progress)
        progress("copy", 0, len(plan))
        for i, (src, dest, snap) in enumerate(plan, 1):
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest)
            if snap is None:
                print(f"{src} -> {dest}")
            else:
                print(f"{src} -> {dest} ({len(snap.posix)} POSIX files, {len(snap.stdio)} STDIO files)")
            progress("copy", i, len(plan))
    finally:
        progress.close()
    return 0


# what a process leaves beside its log in a session directory, copied with it
BESIDE = (".steps.parquet", ".step_files.parquet", ".coverage.json")


def _expand(sources):
    """The logs to import: a file as given, each a session of its own; the
    processes' logs of each session a directory holds, as (session name,
    session directory, [logs]) that stay together."""
    from tfdarshan.logs import live_log
    from tfdarshan.logs.logdir import find_sessions, session_at
    out = []
    for src in sources:
        path = pathlib.Path(src)
        if not path.is_dir():
            out.append(src)
            continue
        said = live_log.summary_line(live_log.recover_all(path))
        if said:
            print(f"tfdarshan import: {said}", file=sys.stderr)
        here = session_at(path)
        sessions = [here] if here else find_sessions(path)
        if not sessions:
            raise TfdarshanError(f"{path}: no Darshan logs or profiling sessions in this directory")
        for s in sessions:
            logs = [s.directory / f"{h}.darshan" for h in s.hosts] + ([s.directory / s.job_log] if s.job_log else [])
            out.append((s.name, s.directory, logs))
    return out


def _check(logs, profile, plan, taken, seen, progress) -> None:
    """Read every log (refusing a bad one) and plan where each goes, before any is copied."""
    from tfdarshan.logs.darshan_log import read_darshan_log
    progress("check", 0, len(logs))
    for i, log in enumerate(logs, 1):
        if isinstance(log, tuple):
            _check_session(*log, profile, plan, taken, seen)
            progress("check", i, len(logs))
            continue
        if pathlib.Path(log).resolve() in seen:
            raise TfdarshanError(f"{log}: given twice")
        seen.add(pathlib.Path(log).resolve())
        snap = read_darshan_log(log)       # refuses bad logs with a clear message
        host = safe_name(str(snap.meta.get("hostname") or ""), "host")
        stem = safe_name(pathlib.Path(log).name.removesuffix(".darshan"), "session")
        # logs of the same name (every rank's vm.darshan) each get a session of their own
        session, n = stem, 1
        while session in taken or (profile / session).exists():
            n += 1
            session = f"{stem}-{n}"
        taken.add(session)
        plan.append((pathlib.Path(log), profile / session / f"{host}.darshan", snap))
        progress("check", i, len(logs))


def _check_session(name, directory, logs, profile, plan, taken, seen) -> None:
    """A session's logs, each checked, planned into one new session of the
    same name (numbered when taken), under their own names."""
    from tfdarshan.logs.darshan_log import read_darshan_log, read_job_record
    from tfdarshan.logs.joblog import is_job_log
    if directory.resolve() in seen:
        raise TfdarshanError(f"{directory}: given twice")
    seen.add(directory.resolve())
    base, n, session = safe_name(name, "session"), 1, safe_name(name, "session")
    while session in taken or (profile / session).exists():
        n += 1
        session = f"{base}-{n}"
    taken.add(session)
    for log in logs:
        if is_job_log(log.name):
            read_job_record(log)            # its header at least: its records are the ranks' own
            plan.append((log, profile / session / log.name, None))
            continue
        snap = read_darshan_log(log)        # refuses bad logs with a clear message
        plan.append((log, profile / session / log.name, snap))
        stem = log.name[: -len(".darshan")]
        for suffix in BESIDE:
            extra = directory / f"{stem}{suffix}"
            if extra.is_file():
                plan.append((extra, profile / session / extra.name, None))
