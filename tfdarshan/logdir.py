"""Profiling sessions in a TensorBoard log directory, as the I/O tab and the
advisor see them: <logdir>/<run>/plugins/profile/<session>/<host>.darshan
(plus step series), merged over the processes that wrote into a session."""
from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from tfdarshan.darshan_log import read_darshan_log
from tfdarshan.errors import TfdarshanError
from tfdarshan.snapshot import Snapshot, combine

PROFILE = os.path.join("plugins", "profile")


@dataclasses.dataclass(frozen=True)
class Session:
    run: str                 # path of the run relative to the logdir ("." for the logdir itself)
    name: str                # the session directory's name (its start time)
    directory: pathlib.Path
    hosts: tuple             # <host> or <host>_<pid> stems with a .darshan log


def find_sessions(logdir) -> List[Session]:
    root = pathlib.Path(logdir)
    out = []
    for log in sorted(root.glob(os.path.join("**", PROFILE, "*", "*.darshan"))):
        d = log.parent
        run_dir = d.parent.parent.parent
        run = os.path.relpath(run_dir, root)
        out.append((run, d.name, d, log.name[: -len(".darshan")]))
    sessions: Dict[tuple, List[str]] = {}
    for run, name, d, host in out:
        sessions.setdefault((run, name, d), []).append(host)
    return [Session(run, name, d, tuple(sorted(h))) for (run, name, d), h in sorted(sessions.items())]


def load_snapshot(session: Session, host: Optional[str] = None) -> Snapshot:
    """One host's log, or all of the session's merged."""
    hosts = [host] if host else list(session.hosts)
    return combine([read_darshan_log(session.directory / f"{h}.darshan") for h in hosts])


def load_steps(session: Session, host: Optional[str] = None):
    """(per-step totals, per-step per-file rows), with a `host` column;
    empty frames for logs that came without a series (imported logs).
    A series that is unreadable or not ours raises TfdarshanError."""
    from tfdarshan.steps import FILE_COLUMNS, STEP_COLUMNS
    steps, files = [], []
    for h in ([host] if host else session.hosts):
        s, f = session.directory / f"{h}.steps.parquet", session.directory / f"{h}.step_files.parquet"
        if os.path.lexists(s):
            steps.append(read_series(s, STEP_COLUMNS).assign(host=h))
        if os.path.lexists(f):
            files.append(read_series(f, FILE_COLUMNS).assign(host=h))
    return (pd.concat(steps, ignore_index=True) if steps else pd.DataFrame(),
            pd.concat(files, ignore_index=True) if files else pd.DataFrame())


SERIES_TEXT = ("module", "path", "mount")


def read_series(path: pathlib.Path, columns) -> pd.DataFrame:
    """A step-series parquet file, checked: every column in `columns`
    present, its text columns text and the others finite numbers (the
    views group and add them)."""
    import pyarrow
    from tfdarshan.session import read_parquet
    if not path.is_file():
        raise TfdarshanError(f"{path}: step series is not a regular file")
    try:
        df = read_parquet(path)
    except (pyarrow.ArrowException, OSError, ValueError, TypeError, KeyError) as e:   # damage, as pyarrow sees it
        raise TfdarshanError(f"{path}: unreadable step series ({_first_line(e)})") from None
    missing = [c for c in columns if c not in df]
    if missing:
        raise TfdarshanError(f"{path}: not a step series (no column {', '.join(missing)})")
    for c in SERIES_TEXT:
        # (the columns of a window without I/O come back as float64, and are fine)
        if c in df and len(df) and pd.api.types.infer_dtype(df[c], skipna=False) != "string":
            raise TfdarshanError(f"{path}: step series column {c} is not text")
    for c in columns:
        if c in SERIES_TEXT:
            continue
        v = df[c]
        if not pd.api.types.is_numeric_dtype(v) or pd.api.types.is_bool_dtype(v):
            raise TfdarshanError(f"{path}: step series column {c} is {v.dtype}, not numbers")
        if len(v) and not np.isfinite(v.to_numpy(dtype=np.float64)).all():
            raise TfdarshanError(f"{path}: step series column {c} holds NaN or infinite values")
    return df


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
