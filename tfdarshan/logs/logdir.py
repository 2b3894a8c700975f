"""Profiling sessions in a TensorBoard log directory, as the I/O tab and the
advisor see them: <logdir>/<run>/plugins/<root>/<session>/<host>.darshan
(plus step series), merged over the processes that wrote into a session.

<root> is `profile` for a session beside XProf's own profile (tf.profiler,
Keras' profile_batch: the trace viewer shows our I/O there) and `tfdarshan`
for the rest (`run`, `import`, `profile(logdir=...)`): XProf lists every
directory under plugins/profile, and would offer those as empty profiles."""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
from typing import Dict, List, Optional

import pandas as pd

from tfdarshan.errors import TfdarshanError
from tfdarshan.logs import joblog
from tfdarshan.logs.series import FILE_COLUMNS, STEP_COLUMNS, read_series
from tfdarshan.logs.darshan_log import read_darshan_log
from tfdarshan.capture.snapshot import Snapshot, combine

XPROF_ROOT = ("plugins", "profile")
OWN_ROOT = ("plugins", "tfdarshan")


def session_root(logdir, *, beside_xprof: bool) -> pathlib.Path:
    """Where a session of ours goes under a TensorBoard run directory."""
    return pathlib.Path(logdir, *(XPROF_ROOT if beside_xprof else OWN_ROOT))


@dataclasses.dataclass(frozen=True)
class Session:
    run: str                 # path of the run relative to the logdir ("." for the logdir itself)
    name: str                # the session directory's name (its start time)
    directory: pathlib.Path
    hosts: tuple             # <host>, <host>_<pid> or <host>.rank<r> stems with a .darshan log
    job_log: Optional[str] = None   # a multi-rank session's <job>.job.darshan (Darshan's MPI-style log)


def find_sessions(logdir) -> List[Session]:
    root = pathlib.Path(logdir)
    out = []
    logs = [log for parts in (XPROF_ROOT, OWN_ROOT) for log in root.glob(os.path.join("**", *parts, "*", "*.darshan"))]
    for log in sorted(logs):
        d = log.parent
        run_dir = d.parent.parent.parent
        run = os.path.relpath(run_dir, root)
        out.append((run, d.name, d, log.name))
    sessions: Dict[tuple, List[str]] = {}
    jobs: Dict[tuple, str] = {}
    for run, name, d, log in out:
        if joblog.is_job_log(log):
            # the ranks' own logs hold the same records: reading both would count them twice
            jobs[(run, name, d)] = log
        else:
            sessions.setdefault((run, name, d), []).append(log[: -len(".darshan")])
    return [Session(run, name, d, tuple(sorted(h, key=_process_order)), jobs.get((run, name, d)))
            for (run, name, d), h in sorted(sessions.items())]


def session_at(directory) -> Optional[Session]:
    """The session a directory is itself (it holds <host>.darshan logs), or
    None: commands given a session directory read it as it is."""
    d = pathlib.Path(directory)
    logs = sorted(p.name for p in d.glob("*.darshan"))
    hosts = [n[: -len(".darshan")] for n in logs if not joblog.is_job_log(n)]
    if not hosts:
        return None
    job = next((n for n in logs if joblog.is_job_log(n)), None)
    return Session(".", d.name, d, tuple(sorted(hosts, key=_process_order)), job)


def pick_session(logdir, name: Optional[str] = None):
    """(the session named `name`, else the newest, and how many there are);
    TfdarshanError when there is none."""
    sessions = [s for s in find_sessions(logdir) if not name or s.name == name]
    if not sessions:
        raise TfdarshanError(f"{logdir}: no profiling session" + (f" named {name}" if name else ""))
    return max(sessions, key=lambda s: s.name), len(sessions)     # session names are their start times


def _process_order(stem: str):
    """Ranks in numeric order (rank2 before rank10), other stems by name."""
    m = re.fullmatch(r"(.*)\.rank(\d+)", stem)
    return (m.group(1), int(m.group(2))) if m else (stem, -1)


def process_label(stem: str, capture: bool = False) -> str:
    """How the tab names a process: "vm rank 3", "vm pid 412" or "vm"; a
    profiler server capture's <host>_<port> is "vm port 6009"."""
    m = re.fullmatch(r"(.*)\.rank(\d+)", stem)
    if m:
        return f"{m.group(1)} rank {m.group(2)}"
    m = re.fullmatch(r"(.*)_(\d+)", stem)
    return f"{m.group(1)} {'port' if capture else 'pid'} {m.group(2)}" if m else stem


def load_snapshot(session: Session, host: Optional[str] = None, stems: Optional[List[str]] = None) -> Snapshot:
    """One host's log, the logs named by `stems` (a node's ranks), or all of
    the session's merged."""
    hosts = [host] if host else list(stems) if stems else list(session.hosts)
    return combine([_with_zero_reads(read_darshan_log(session.directory / f"{h}.darshan"),
                                     session.directory / f"{h}.step_files.parquet") for h in hosts])


def _with_zero_reads(snap: Snapshot, step_files: pathlib.Path) -> Snapshot:
    """A Darshan log has no slot for reads that returned 0 bytes; the step
    series beside it counts them per file, so advice from the session on
    disk equals advice from the live process, traced or not."""
    if snap.meta.get("zero_reads_known") or not os.path.lexists(step_files):
        return snap
    files = read_series(step_files, FILE_COLUMNS)
    files = files[files["module"] == "POSIX"]
    zero = files.groupby("record_id")["zero_reads"].sum() if len(files) else pd.Series(dtype="int64")
    ids = snap.posix["record_id"].to_numpy()
    extra = pd.DataFrame({"record_id": ids, "module": "POSIX",
                          "ZERO_READS": zero.reindex(ids).fillna(0).astype("int64").to_numpy()})
    return dataclasses.replace(snap, _extra=extra, meta={**snap.meta, "zero_reads_known": True})


def load_steps(session: Session, host: Optional[str] = None):
    """(per-step totals, per-step per-file rows), with a `host` column;
    empty frames for logs that came without a series (imported logs).
    A series that is unreadable or not ours raises TfdarshanError."""
    steps, files = [], []
    for h in ([host] if host else session.hosts):
        s, f = session.directory / f"{h}.steps.parquet", session.directory / f"{h}.step_files.parquet"
        if os.path.lexists(s):
            steps.append(read_series(s, STEP_COLUMNS).assign(host=h))
        if os.path.lexists(f):
            files.append(read_series(f, FILE_COLUMNS).assign(host=h))
    return (pd.concat(steps, ignore_index=True) if steps else pd.DataFrame(),
            pd.concat(files, ignore_index=True) if files else pd.DataFrame())
