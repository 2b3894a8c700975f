"""`tfdarshan joblog SESSION_DIR`: write (or write again) a multi-rank
session's Darshan job log from its ranks' own logs. The last rank to finish
writes it by itself; this is for a job whose ranks did not all finish (a
rank killed, a node lost), or for a session copied from elsewhere. It shows
its progress on stderr: a bar on a terminal, a line per stage otherwise."""
from __future__ import annotations

import argparse
import pathlib
import re
import sys

from tfdarshan.cli import path_arg
from tfdarshan.capture import cores
from tfdarshan.cli.progress import StageProgress
from tfdarshan.errors import TfdarshanError
from tfdarshan.measures.human import count

# what each stage of writing the job log reads (logs/joblog_stream.py)
STAGE_LABELS = {"names": "names and job records", "POSIX": "POSIX records", "STDIO": "STDIO records",
                "DXT_POSIX": "DXT traces"}


def add_parser(sub) -> None:
    p = sub.add_parser("joblog", help="write a multi-rank session's Darshan job log", description=__doc__)
    p.add_argument("session", type=path_arg, help="a session directory holding <host>.rank<r>.darshan logs, or a "
                                                   "log directory (its newest multi-rank session, or --session)")
    p.add_argument("--session", dest="session_name", help="session name in the log directory (default: newest)")
    p.add_argument("--nprocs", type=int, help="the job's process count (default: from the ranks' logs)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from tfdarshan.logs import joblog, live_log, skipping
    from tfdarshan.logs.darshan_log import read_job_record
    d = pathlib.Path(args.session)
    if not d.is_dir():
        raise TfdarshanError(f"{d}: not a directory")
    recovered = live_log.summary_line(live_log.recover_all(d))      # ranks killed before writing their logs
    if recovered:
        print(f"tfdarshan joblog: {recovered}", file=sys.stderr)
    d = session_directory(d, args.session_name)
    logs = {int(m.group(1)): p for p in sorted(d.glob("*.rank*.darshan"))
            if (m := re.fullmatch(r".*\.rank(\d+)\.darshan", p.name)) and not joblog.is_job_log(p.name)}
    if not logs:
        raise TfdarshanError(f"{d}: no <host>.rank<r>.darshan logs (not a multi-rank session)")
    meta = first_readable(logs)
    job = meta.get("job") or "job"
    size = args.nprocs or int(meta.get("world_size") or 0) or max(logs) + 1
    if size <= max(logs):
        raise TfdarshanError(f"--nprocs {size} is not above the highest rank found ({max(logs)})")
    out = d / joblog.job_log_name(job)
    if out.exists():
        raise TfdarshanError(f"{out}: already exists; remove it to write it again")
    skipped_logs = []
    progress = StageProgress("tfdarshan joblog", STAGE_LABELS, "rank log")
    try:
        written = joblog.write_job_log(d, logs, job, size, skipped=skipped_logs, progress=progress)
    finally:
        progress.close()
    if skipped_logs:
        print(f"tfdarshan joblog: {skipping.warning_line(skipped_logs, 'rank log')}", file=sys.stderr)
    skipped = len(skipped_logs)
    info = read_job_record(written)["metadata"]
    missing = sorted(set(range(size)) - set(logs))
    notes = [f"no log from rank{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing[:10]))}"
             f"{' ...' if len(missing) > 10 else ''}"] if missing else []
    partial = sorted(cores.parse(info.get("partial_ranks")) or ())
    if partial:
        many = len(partial) > 1
        notes.append(f"partial: rank{'s' if many else ''} {cores.ranges(partial).replace(',', ', ')}, ended without "
                     f"writing {'their logs' if many else 'its log'}: counted up to {'their' if many else 'its'} "
                     f"last collect")
    elif "partial_ranks" in info.get("omitted", "").split(","):
        notes.append("partial: ranks too scattered to list in the job log's metadata, ended without writing their "
                     "logs: each rank's log says whether it is partial")
    if skipped:
        notes.append(f"{skipped} unreadable rank log{'s' if skipped > 1 else ''} skipped: {skipping.names(skipped_logs)}")
    print(f"wrote {written}: {len(logs) - skipped} of {count(size, 'rank')}" + (f" ({'; '.join(notes)})" if notes else ""))
    return 0


def session_directory(d: pathlib.Path, name=None) -> pathlib.Path:
    """`d` itself when it holds rank logs (and no session was named), else
    the newest multi-rank session under it (or the one named)."""
    from tfdarshan.logs.logdir import find_sessions
    if name is None and any(RANK_LOG.fullmatch(p.name) for p in d.glob("*.rank*.darshan")):
        return d
    ranked = [s for s in find_sessions(d) if (name is None or s.name == name)
              and any(".rank" in h for h in s.hosts)]
    if not ranked:
        if name is not None:
            raise TfdarshanError(f"{d}: no multi-rank session named {name}")
        return d                         # said below: not a multi-rank session
    return max(ranked, key=lambda s: s.name).directory


RANK_LOG = re.compile(r".*\.rank(\d+)\.darshan")


def first_readable(logs) -> dict:
    """The job metadata of the lowest rank whose log's job record reads."""
    from tfdarshan.logs.darshan_log import read_job_record
    for r in sorted(logs):
        try:
            return read_job_record(logs[r])["metadata"]
        except (TfdarshanError, OSError):
            continue
    raise TfdarshanError(f"no readable rank log among {', '.join(p.name for p in list(logs.values())[:10])}")
