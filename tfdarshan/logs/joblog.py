"""One Darshan job log for a multi-rank session, as Darshan's MPI build
writes it: nprocs = the ranks, every record tagged with its rank, files that
every rank opened reduced to one record with rank -1.

Ranks finish on their own, without MPI: each rank, once its own log is
complete, leaves a marker in the session directory; the rank that finds
every rank's marker writes the job log (a lock file makes that one rank)."""
from __future__ import annotations

import os
import pathlib
import re
from typing import Dict, Optional

import pandas as pd

from tfdarshan.capture import counters as C
from tfdarshan.errors import DarshanLogError
from tfdarshan.logs import live_log, skipping
from tfdarshan.logs.darshan_log import write_darshan_log
from tfdarshan.logs.reduction import reduce_job
from tfdarshan.capture.snapshot import Snapshot, combine, empty_dxt, empty_extra, empty_values

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
                  skipped: Optional[list] = None) -> pathlib.Path:
    """Read each rank's log and write `<job>.job.darshan` beside them. An
    unreadable rank log is skipped (the job log's metadata names it); a
    partial one (its process was killed: logs/live_log.py) is included, and
    the metadata says so. DarshanLogError when no rank log is readable.
    `skipped`, when given, gets {"log", "reason"} of each log left out."""
    snaps, left_out = skipping.read_logs({r: logs[r] for r in sorted(logs)})
    if skipped is not None:
        skipped.extend(left_out)        # the caller's list: {"log", "reason"} of each left out
    skipped = left_out
    if not snaps:
        raise DarshanLogError(f"{run_dir}: no readable rank log; " + skipping.warning_line(skipped))
    ranks = sorted(snaps)
    # one timeline: each rank's times re-based to the earliest rank's origin
    origin = min(float(s.meta.get("origin_unix_time", 0.0)) for s in snaps.values())
    shifts = {r: float(s.meta.get("origin_unix_time", 0.0)) - origin for r, s in snaps.items()}
    frames = {}
    for module in C.MODULES:
        by_rank = {}
        for r, s in snaps.items():
            f = s.frame(module)
            for c in C.names(module)[1]:
                if C.kind(module, c) in (C.FIRST, C.LAST):
                    f[c] = f[c].where(f[c] == 0, f[c] + shifts[r])
            by_rank[r] = f
        frames[module] = reduce_job(by_rank, module, nprocs or len(ranks))
    whole = combine(list(snaps.values()))
    meta = dict(whole.meta, origin_unix_time=origin)
    # each rank's trace on the job's timeline, kept per rank (DXT is never reduced)
    traces = [s.dxt.assign(start=s.dxt["start"] + shifts[r], end=s.dxt["end"] + shifts[r], rank=r,
                           host=str(s.meta.get("hostname", ""))) for r, s in snaps.items() if len(s.dxt)]
    dxt = pd.concat(traces, ignore_index=True) if traces else empty_dxt()
    job_snap = Snapshot(frames["POSIX"], frames["STDIO"], empty_values(), empty_extra(), dxt, meta)
    first = snaps[ranks[0]].meta
    if jobid is None:
        jobid = first.get("jobid")
    metadata = {"job": job, "ranks": str(len(ranks)), "source": "job",
                "hosts": ",".join(sorted({str(s.meta.get("hostname", "")) for s in snaps.values()}))}
    if skipped:
        metadata.update(skipped=str(len(skipped)), skipped_logs=skipping.names(skipped))
    partial = [str(r) for r in ranks if live_log.is_partial(snaps[r].meta)]
    if partial:
        metadata["partial_ranks"] = ",".join(partial)
    return write_darshan_log(job_snap, run_dir / job_log_name(job), exe=first.get("exe"),
                             jobid=int(jobid) if jobid is not None else None, metadata=metadata,
                             heatmap=False, nprocs=nprocs or len(ranks))
