"""One session directory for all ranks of a job, agreed through the file
system (the log directory every rank writes to), with no MPI call: the first
rank to link a marker file names the directory; the others read the name."""
from __future__ import annotations

import os
import pathlib
import time
import uuid
from typing import Callable

MARKER_MAX_AGE = 600.0      # seconds: ranks of one job start within this


def marker_path(profile_root: pathlib.Path, job: str) -> pathlib.Path:
    return profile_root / f".tfdarshan-job-{job}"


def job_directory(profile_root: pathlib.Path, job: str, new_name: Callable[[], str]) -> pathlib.Path:
    """The job's session directory under profile_root (plugins/profile),
    named by new_name() in whichever rank comes first."""
    profile_root.mkdir(parents=True, exist_ok=True)
    marker = marker_path(profile_root, job)
    for _ in range(100):
        try:
            if time.time() - marker.stat().st_mtime < MARKER_MAX_AGE:
                name = marker.read_text().strip()
                if name:
                    return profile_root / name
            marker.unlink()         # a finished job's, with the same id: start anew
        except FileNotFoundError:
            pass
        # link() is atomic and refuses an existing name: exactly one rank wins,
        # and readers never see a half-written marker
        name = new_name()
        tmp = profile_root / f".tfdarshan-job-{job}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
        tmp.write_text(name)
        try:
            os.link(tmp, marker)
            return profile_root / name
        except FileExistsError:
            continue
        finally:
            tmp.unlink()
    raise OSError(f"could not agree on a session directory for job {job} in {profile_root}")
