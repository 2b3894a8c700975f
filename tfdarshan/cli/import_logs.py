"""`tfdarshan import LOG... --logdir DIR`: put existing Darshan logs (ours or
a site-wide Darshan's) into a TensorBoard log directory, where the I/O tab
and the staging advisor find them.

Each log becomes a profiling session: DIR/RUN/plugins/tfdarshan/SESSION/HOST.darshan.
Every log is checked before any is copied; sources are never modified."""
from __future__ import annotations

import argparse
import pathlib
import re
import shutil

from tqdm import tqdm

from tfdarshan.cli import path_arg
from tfdarshan.errors import TfdarshanError
from tfdarshan.logs.logdir import session_root


def add_parser(sub) -> None:
    p = sub.add_parser("import", help="put Darshan logs into a TensorBoard log directory",
                       description=__doc__)
    p.add_argument("logs", nargs="+", metavar="LOG", type=path_arg, help="Darshan log files")
    p.add_argument("--logdir", required=True, type=path_arg, help="TensorBoard log directory")
    p.add_argument("--run", default="imported", help="run name inside the log directory (default: imported)")
    p.set_defaults(handler=run)


def safe_name(text: str, fallback: str) -> str:
    """A file-system and URL friendly name: letters, digits, '._-'."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")
    return name[:100] or fallback


def run(args: argparse.Namespace) -> int:
    from tfdarshan.logs.darshan_log import read_darshan_log
    logdir = pathlib.Path(args.logdir)
    if logdir.exists() and not logdir.is_dir():
        raise TfdarshanError(f"{logdir}: exists and is not a directory")
    run_name = safe_name(args.run, "imported")
    profile = session_root(logdir / run_name, beside_xprof=False)
    plan, taken, seen = [], set(), set()
    for log in tqdm(args.logs, desc="checking logs", unit="log", disable=len(args.logs) < 20 or None):
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
    for src, dest, snap in plan:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        print(f"{src} -> {dest} ({len(snap.posix)} POSIX files, {len(snap.stdio)} STDIO files)")
    return 0
