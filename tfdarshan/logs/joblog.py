"""One Darshan job log for a multi-rank session, as Darshan's MPI build
writes it: nprocs = the ranks, every record tagged with its rank, files that
every rank opened reduced to one record with rank -1.

Ranks finish on their own, without MPI: each rank, once its own log is
complete, leaves a marker in the session directory; the rank that finds
every rank's marker writes the job log (a lock file makes that one rank),
streaming over the rank logs (joblog_stream.py)."""
from __future__ import annotations

import os
import pathlib
import re
from typing import Dict, Optional

from tfdarshan.errors import DarshanLogError
from tfdarshan.logs import joblog_stream
from tfdarshan.logs.joblog_stream import Progress

JOB_SUFFIX = ".job.darshan"
DONE = ".tfdarshan-done.rank"
LOCK = ".tfdarshan-joblog.lock"


def job_log_name(job: str) -> str:
    return f"{job}{JOB_SUFFIX}"


def is_job_log(name: str) -> bool:
    return name.endswith(JOB_SUFFIX)


def rank_finished(run_dir: pathlib.Path, rank, stem: str) -> Optional[pathlib.Path]:
    """Called by each rank once `<stem>.darshan` is complete; the last rank
    to call writes the job log and gets its path (the others get None)."""
    marker = run_dir / f"{DONE}{rank.rank}"
    marker.write_text(stem)
    done = done_ranks(run_dir)
    if len(done) < rank.size:
        return None
    try:
        os.close(os.open(run_dir / LOCK, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return None         # another rank saw them all at the same time
    return write_job_log(run_dir, done, rank.job, rank.size)


def done_ranks(run_dir: pathlib.Path) -> Dict[int, pathlib.Path]:
    """{rank: its log} for the ranks that left a marker."""
    out = {}
    for m in run_dir.glob(f"{DONE}*"):
        number = m.name[len(DONE):]
        if re.fullmatch(r"\d+", number):
            out[int(number)] = run_dir / f"{m.read_text().strip()}.darshan"
    return out


def write_job_log(run_dir: pathlib.Path, logs: Dict[int, pathlib.Path], job: str,
                  nprocs: Optional[int] = None, jobid: Optional[int] = None, *,
                  skipped: Optional[list] = None, progress: Optional[Progress] = None) -> pathlib.Path:
    """Read each rank's log and write `<job>.job.darshan` beside them. An
    unreadable rank log is skipped (the job log's metadata names it); a
    partial one (its process was killed: logs/live_log.py) is included, and
    the metadata says so. DarshanLogError when no rank log is readable.
    `skipped`, when given, gets {"log", "reason"} of each log left out;
    `progress(stage, done, total)` hears of each rank read (joblog_stream.STAGES)."""
    path = run_dir / job_log_name(job)
    if path.exists():
        raise DarshanLogError(f"{path}: already exists; not overwriting")
    written, left_out = joblog_stream.write(run_dir, path, logs, job, nprocs, jobid, progress)
    if skipped is not None:
        skipped.extend(left_out)        # the caller's list: {"log", "reason"} of each left out
    return written
