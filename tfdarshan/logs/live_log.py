"""The live logs (capture/live.py) that processes left behind when they died
without writing their logs (SIGKILL, the OOM killer), turned into ordinary
Darshan logs marked partial: `<stem>.live` becomes `<stem>.darshan`, with
the counters as of the process's last collect and job metadata saying so
(`partial`, `last_collect`). `tfdarshan joblog` and `analyze` do this first,
so a killed rank is in the job log and the tables like any other."""
from __future__ import annotations

import datetime
import pathlib
from typing import Dict, List

import numpy as np

from tfdarshan.capture import _native, heatmap as H, live
from tfdarshan.capture.recorder import EXT_FIELDS, Recorder
from tfdarshan.errors import TfdarshanError
from tfdarshan.logs.darshan_log import write_darshan_log

PARTIAL = "partial"          # the job metadata key a converted log carries
WHY = "ended without writing its log; counters as of its last collect"


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
        target = path.with_name(path.name[: -len(live.SUFFIX)] + ".darshan")
        try:
            if live.owner_alive(path):
                out["running"].append(path)
                continue
            if not target.exists():     # else the process wrote its log and died before removing this
                convert(path, target)
                out["converted"].append(target)
            path.unlink()
        except (live.LiveFileError, TfdarshanError, OSError, ValueError, KeyError) as e:
            out["unreadable"].append({"log": path.name, "reason": str(e).replace(f"{path}: ", "")})
    return out


def convert(path: pathlib.Path, target: pathlib.Path) -> pathlib.Path:
    """One live log as a Darshan log marked partial."""
    state = live.read(path)
    snap = to_snapshot(state)
    ident = state.identity
    when = datetime.datetime.fromtimestamp(state.refresh_wall).isoformat(timespec="seconds")
    meta = dict(ident.get("metadata") or {}, **{PARTIAL: WHY, "last_collect": when,
                                                "pid": str(ident.get("pid", ""))})
    return write_darshan_log(snap, target, exe=ident.get("exe"), jobid=ident.get("jobid"), metadata=meta)


def to_snapshot(state: live.LiveState):
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
