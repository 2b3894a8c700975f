"""The live logs (capture/live.py) and step journals (logs/live_series.py)
that processes left behind when they died without writing their logs
(SIGKILL, the OOM killer, a launcher's SIGKILL after SIGTERM), turned into
ordinary Darshan logs marked partial: `<stem>.live` becomes `<stem>.darshan`,
with the counters as of the process's last collect and job metadata saying
so (`partial`: why, `last_collect`), and `<stem>.live-steps` its step series
(`<stem>.steps.parquet`, `<stem>.step_files.parquet`) as of the same collect.
Every reader of a log directory does this first (`recover_all`), so a killed
rank is in the job log, the tables, the advice and the tab like any other."""
from __future__ import annotations

import datetime
import os
import pathlib
from typing import Dict, List, Optional

import numpy as np

from tfdarshan.capture import _native, heatmap as H, live, live_reader, mounts as M
from tfdarshan.capture.recorder import EXT_FIELDS, Recorder
from tfdarshan.errors import TfdarshanError
from tfdarshan.logs import live_series
from tfdarshan.logs.darshan_log import write_darshan_log
from tfdarshan.steps import series

PARTIAL = "partial"          # the job metadata key a converted log carries: why it is partial
WHY = "ended without writing its log; counters and step series as of its last collect"
KILLED = "killed before writing its log; counters and step series as of its last collect"


def killed_after_signal(signum: int) -> str:
    return (f"told to stop by signal {signum}, then killed while writing its log; counters and step "
            f"series as of its last collect, after the signal")


def is_partial(meta: Dict) -> bool:
    """A snapshot read from a log (its meta) that does not hold the whole
    process: converted from a live log, or Darshan's own partial flag."""
    return bool(meta.get("partial")) or PARTIAL in (meta.get("job_metadata") or {})


def recover(session_dir) -> Dict[str, List]:
    """Convert the live logs in session_dir whose processes are gone.
    {"converted": [log paths], "running": [live files still written],
    "unreadable": [{"log", "reason"}]}."""
    out: Dict[str, List] = {"converted": [], "running": [], "unreadable": []}
    for path in sorted(pathlib.Path(session_dir).glob(f"*{live.SUFFIX}")):
        stem = path.name[: -len(live.SUFFIX)]
        target = path.with_name(stem + ".darshan")
        journal = path.with_name(stem + live_series.SUFFIX)
        try:
            if live.owner_alive(path):
                out["running"].append(path)
                continue
            if not target.exists():     # else the process wrote its log and died before removing this
                convert(path, target, journal)
                out["converted"].append(target)
                _remove_unfinished(path.parent, stem)
            _remove(journal)
            path.unlink()
        except (live_reader.LiveFileError, TfdarshanError, OSError, ValueError, KeyError) as e:
            out["unreadable"].append({"log": path.name, "reason": str(e).replace(f"{path}: ", "")})
    # a journal whose process wrote its log (and died before removing the journal)
    for journal in pathlib.Path(session_dir).glob(f"*{live_series.SUFFIX}"):
        stem = journal.name[: -len(live_series.SUFFIX)]
        if journal.with_name(stem + ".darshan").exists() and not journal.with_name(stem + live.SUFFIX).exists():
            _remove(journal)
    return out


def convert(path: pathlib.Path, target: pathlib.Path, journal: Optional[pathlib.Path] = None) -> pathlib.Path:
    """One live log as a Darshan log marked partial, and its step journal
    (when there is one) as the log's step series, written first: a reader
    that waits for the .darshan finds the series beside it."""
    state = live_reader.read(path)
    snap = to_snapshot(state)
    ident = state.identity
    when = datetime.datetime.fromtimestamp(state.refresh_wall).isoformat(timespec="seconds")
    why = killed_after_signal(state.ended_signal) if state.ended_signal else KILLED
    meta = dict(ident.get("metadata") or {}, **{PARTIAL: why, "last_collect": when,
                                                "pid": str(ident.get("pid", ""))})
    if journal is not None and journal.exists():
        meta.update(_write_series(journal, target, snap, ident))
    return write_darshan_log(snap, target, exe=ident.get("exe"), jobid=ident.get("jobid"), metadata=meta)


def _write_series(journal: pathlib.Path, target: pathlib.Path, snap, ident: Dict) -> Dict[str, str]:
    """The journal replayed into the series files beside `target`; the job
    metadata that says what it holds. A journal that cannot be read leaves
    the log without a series, and the metadata says why."""
    stem = target.name[: -len(".darshan")]
    try:
        steps, files, _ = live_series.replay(journal)
    except (TfdarshanError, OSError) as e:
        return {"steps_lost": str(e).replace(f"{journal}: ", "")}
    mounts = [M.Mount(p, t) for p, t in ident.get("mounts") or []] or M.current()
    series.write_parquet(steps, target.with_name(f"{stem}.steps.parquet"))
    series.write_parquet(series.with_paths(files, snap, mounts), target.with_name(f"{stem}.step_files.parquet"))
    real = steps[steps["step"] >= 0]["step"]
    return {"steps": f"{int(real.min())}:{int(real.max())}" if len(real) else "window"}


def _remove_unfinished(directory: pathlib.Path, stem: str) -> None:
    """What a process killed while writing its log left half-written: the
    temporary files of its Darshan log and step series (never renamed)."""
    for p in directory.glob(f".{stem}.darshan.*"):
        _remove(p)
    for suffix in (".steps.parquet", ".step_files.parquet"):
        _remove(directory / f".{stem}{suffix}.tmp")


def _remove(path: pathlib.Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def recover_all(logdir) -> Dict[str, List]:
    """recover() in every session directory under a log directory (or the
    directory itself) that holds a live log: what a reader does before it
    lists sessions, so that a process that died leaves a session that is seen."""
    root = pathlib.Path(logdir)
    out: Dict[str, List] = {"converted": [], "running": [], "unreadable": []}
    dirs = {p.parent for p in root.glob(f"*{live.SUFFIX}")}
    for parts in (("plugins", "profile"), ("plugins", "tfdarshan")):
        dirs |= {p.parent for p in root.glob(os.path.join("**", *parts, "*", f"*{live.SUFFIX}"))}
    for d in sorted(dirs):
        got = recover(d)
        for k in out:
            out[k].extend(got[k])
    return out


def to_snapshot(state: live_reader.LiveState):
    """The Snapshot of a live file's last refresh, as the process would have
    built it then (Darshan's counters from the same rows)."""
    clock = _native.Clock(*[state.identity["clock"][k] for k in ("origin_ticks", "ticks_per_second",
                                                                   "origin_unix_time", "uses_tsc")])
    names = state.identity["row_fields"]
    col = {f: i for i, f in enumerate(names)}
    pick = lambda fields: np.column_stack([state.rows[:, col[f]] if f in col else np.zeros(len(state.rows), np.int64)
                                           for f in fields]) if len(state.rows) else np.zeros((0, len(fields)), np.int64)
    cum = pick(_native.ROW_FIELDS)
    ext = pick([f"EXT_{f}" for f in EXT_FIELDS])
    n = int(state.index.max()) + 1 if len(state.index) else 0
    ids, paths, modules = np.zeros(n, np.uint64), np.full(n, None, dtype=object), np.zeros(n, np.int64)
    ids[state.index], modules[state.index] = state.ids, state.modules
    paths[state.index] = state.paths
    rec = Recorder.offline(ids, paths, modules, clock, state.counts)
    end = float(clock.seconds(np.array([state.refresh_ticks]))[0])
    meta = {"end": end, "hostname": state.identity.get("host"), "pid": state.identity.get("pid"),
            "mounts": state.identity.get("mounts") or [], "record_cap": state.identity.get("record_cap")}
    return rec.snapshot_of(state.index, cum, ext, state.values, meta, H.empty())


def summary_line(recovered: Dict[str, List]) -> str:
    """What recover() did, in one line ("" when it found nothing)."""
    parts = []
    if recovered["converted"]:
        parts.append(f"converted {len(recovered['converted'])} live log(s) of processes that died into partial "
                     f"logs: {', '.join(p.name for p in recovered['converted'][:10])}")
    if recovered["running"]:
        parts.append(f"left {len(recovered['running'])} live log(s) whose processes still run: "
                     f"{', '.join(p.name for p in recovered['running'][:10])}")
    if recovered["unreadable"]:
        parts.append("could not convert " + ", ".join(f"{u['log']} ({u['reason']})" for u in recovered["unreadable"][:10]))
    return "; ".join(parts)
