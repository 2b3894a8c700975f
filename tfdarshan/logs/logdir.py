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

import numpy as np
import pandas as pd

from tfdarshan.errors import TfdarshanError
from tfdarshan.logs import joblog, skipping
from tfdarshan.logs.darshan_log import read_darshan_log
from tfdarshan.steps.series import FILE_COLUMNS, STEP_COLUMNS, read_series
from tfdarshan.capture import kernel_io as K, served
from tfdarshan.capture.snapshot import Snapshot, combine, extra_frame

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


def partial_logs(session: Session, hosts: Optional[List[str]] = None) -> List[Dict[str, str]]:
    """The logs of the session (or of `hosts`) that hold their process only
    in part: it was killed before writing its log, and the log was made from
    what it had recorded (logs/live_log.py). Each {"log": stem, "label": how
    the tab names it, "reason": why, from the log's metadata, "last_collect"};
    a log whose header cannot be read is not listed (its readers say why)."""
    from tfdarshan.logs.darshan_log import read_job_record
    from tfdarshan.logs.live_log import PARTIAL
    out = []
    for h in (session.hosts if hosts is None else hosts):
        try:
            meta = read_job_record(session.directory / f"{h}.darshan")["metadata"]
        except (TfdarshanError, OSError):
            continue
        if PARTIAL in meta:
            out.append({"log": h, "label": process_label(h), "reason": meta[PARTIAL],
                        "last_collect": meta.get("last_collect", "")})
    return out


def cores_per_node(session: Session) -> List[Dict]:
    """Per node of the session's ranks, how many ranks ran there and on how
    many cores: {"node", "ranks", "cores"}, the cores the union of the
    ranks' recorded affinities (else the node's count; None when no log
    says). Logs without a hostname or whose header cannot be read are left out."""
    from tfdarshan.capture import cores
    from tfdarshan.logs.darshan_log import read_job_record
    nodes: Dict[str, Dict] = {}
    for h in session.hosts:
        if ".rank" not in h:
            continue
        try:
            meta = read_job_record(session.directory / f"{h}.darshan")["metadata"]
        except (TfdarshanError, OSError):
            continue
        if not meta.get("hostname"):
            continue
        n = nodes.setdefault(meta["hostname"], {"ranks": 0, "cpus": set(), "every_affinity": True, "node_cpus": None})
        n["ranks"] += 1
        mine = cores.parse(meta.get("cpus"))
        if mine is None:
            n["every_affinity"] = False
        else:
            n["cpus"] |= mine
        if str(meta.get("node_cpus", "")).isdigit():
            n["node_cpus"] = int(meta["node_cpus"])
    return [{"node": k, "ranks": v["ranks"],
             "cores": len(v["cpus"]) if v["every_affinity"] and v["cpus"] else v["node_cpus"]}
            for k, v in sorted(nodes.items())]


def _read_series(path: pathlib.Path, columns, read: Optional[Dict]) -> pd.DataFrame:
    """read_series, once a file when `read` (a dict kept by the caller
    across load_snapshot and load_steps) is given: both read the per-file
    series, 100,000s of rows in a large session. Its frames are not changed."""
    if read is None:
        return read_series(path, columns)
    key = (os.fspath(path), tuple(columns))
    if key not in read:
        read[key] = read_series(path, columns)
    return read[key]


def load_snapshot(session: Session, host: Optional[str] = None, stems: Optional[List[str]] = None,
                  read: Optional[Dict] = None) -> Snapshot:
    """One host's log, the logs named by `stems` (a node's ranks), or all of
    the session's merged. Of several logs, unreadable ones are skipped and
    listed in meta["skipped_logs"] ({"log", "reason"}); when none is
    readable, the first one's error is raised. read: series files already
    read (_read_series)."""
    hosts = [host] if host else list(stems) if stems else list(session.hosts)
    if len(hosts) == 1:
        snaps, skipped = {hosts[0]: read_darshan_log(session.directory / f"{hosts[0]}.darshan")}, []
    else:
        snaps, skipped = skipping.read_logs({h: session.directory / f"{h}.darshan" for h in hosts})
        if not snaps:
            read_darshan_log(session.directory / f"{hosts[0]}.darshan")     # raises its error
    out = combine([_with_served(_with_series_extra(snap, session.directory / f"{h}.step_files.parquet", read),
                                session.directory / f"{h}.darshan")
                   for h, snap in snaps.items()])
    out.meta["skipped_logs"] = skipped
    return out


def _with_served(snap: Snapshot, log: pathlib.Path) -> Snapshot:
    """What serving staged copies did, from beside the log (capture/served.py)."""
    m = served.read_beside(log)
    return dataclasses.replace(snap, meta={**snap.meta, "served": m}) if m else snap


def _with_series_extra(snap: Snapshot, step_files: pathlib.Path, read: Optional[Dict] = None) -> Snapshot:
    """A Darshan log has no slot for reads that returned 0 bytes, nor for
    kernel-side copies and mapped reads; the step series beside it counts
    them per file (with the path of a file Darshan's tables lack), so the
    session on disk shows and advises what the live process did."""
    if not os.path.lexists(step_files):
        return snap
    files = _read_series(step_files, FILE_COLUMNS, read)
    series = {c.upper(): c for c in K.SERIES}
    has_path = "path" in files and len(files)
    g = files.groupby(["record_id", "module"], sort=False).agg(
        {"zero_reads": "sum", **{c: "sum" for c in K.SERIES}, **({"path": "first"} if has_path else {})}) \
        if len(files) else pd.DataFrame(columns=["zero_reads", *K.SERIES])
    ids = snap.posix["record_id"].to_numpy()
    keys = pd.MultiIndex.from_arrays([ids, ["POSIX"] * len(ids)], names=["record_id", "module"])
    kernel = g[(g[list(K.SERIES)] != 0).any(axis=1)] if len(g) else g
    keys = keys.union(kernel.index) if len(kernel) else keys
    rows = g.reindex(keys)
    known = snap.meta.get("zero_reads_known") and len(snap.extra)
    zero = (snap.extra.set_index(["record_id", "module"])["ZERO_READS"].reindex(keys) if known
            else rows["zero_reads"])
    # a file's path from the series, else from the log's name records (the last of a repeated id)
    logged = snap.posix.drop_duplicates("record_id", keep="last")
    from_log = pd.Series(logged["path"].to_numpy(object), index=logged["record_id"].to_numpy(), dtype=object) \
        .reindex(keys.get_level_values(0)).fillna("").to_numpy(object)
    paths = rows["path"].to_numpy(object) if has_path else np.full(len(rows), None, dtype=object)
    given = pd.notna(paths) & (paths != "")
    extra = pd.DataFrame({"record_id": keys.get_level_values(0).astype("uint64"),
                          "module": keys.get_level_values(1),
                          "path": pd.Series(np.where(given, paths, from_log), dtype=object),
                          "ZERO_READS": zero.fillna(0).astype("int64").to_numpy(),
                          **{col: rows[c].fillna(0).to_numpy() for col, c in series.items()}})
    return dataclasses.replace(snap, _extra=extra_frame(extra), meta={**snap.meta, "zero_reads_known": True})


def load_steps(session: Session, host: Optional[str] = None, skipped=(), read: Optional[Dict] = None):
    """(per-step totals, per-step per-file rows), with a `host` column;
    empty frames for logs that came without a series (imported logs), and
    for the logs load_snapshot skipped (`skipped`: its meta["skipped_logs"]).
    A series that is unreadable or not ours raises TfdarshanError. read:
    as load_snapshot's."""
    steps, files = [], []
    left_out = {s["log"] for s in skipped}
    for h in [x for x in ([host] if host else session.hosts) if f"{x}.darshan" not in left_out]:
        s, f = session.directory / f"{h}.steps.parquet", session.directory / f"{h}.step_files.parquet"
        if os.path.lexists(s):
            steps.append(read_series(s, STEP_COLUMNS).assign(host=h))
        if os.path.lexists(f):
            files.append(_read_series(f, FILE_COLUMNS, read).assign(host=h))
    return (pd.concat(steps, ignore_index=True) if steps else pd.DataFrame(),
            pd.concat(files, ignore_index=True) if files else pd.DataFrame())
