"""Profiling sessions in a TensorBoard log directory, as the I/O tab and the
advisor see them: <logdir>/<run>/plugins/profile/<session>/<host>.darshan
(plus step series), merged over the processes that wrote into a session."""
from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Dict, List, Optional

import pandas as pd

from tfdarshan.darshan_log import read_darshan_log
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
    empty frames for logs that came without a series (imported logs)."""
    from tfdarshan.session import read_parquet
    steps, files = [], []
    for h in ([host] if host else session.hosts):
        s, f = session.directory / f"{h}.steps.parquet", session.directory / f"{h}.step_files.parquet"
        if s.exists():
            steps.append(read_parquet(s).assign(host=h))
        if f.exists():
            files.append(read_parquet(f).assign(host=h))
    return (pd.concat(steps, ignore_index=True) if steps else pd.DataFrame(),
            pd.concat(files, ignore_index=True) if files else pd.DataFrame())
