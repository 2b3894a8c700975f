"""The I/O tab's data: JSON-ready payloads computed from a session's
Snapshot and step series. Pure functions; the plugin only routes to them."""
from __future__ import annotations

import json
import math
import os
import pathlib
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from tfdarshan.capture import mounts as M
from tfdarshan.advice import file_table as report
from tfdarshan.logs.series import CUT_COLUMN
from tfdarshan.logs.logdir import Session, load_snapshot, load_steps, process_label
from tfdarshan.capture.snapshot import Snapshot

FILE_COLUMNS = report.COLUMNS
SIZE_BINS = ["0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M",
             "100M_1G", "1G_PLUS"]
TIMELINE_FILES = 8
# the tier of paths on no mount point: streams, files folded past the record cap
UNKNOWN_TIER = "unknown tier"
TIMELINE_SEGMENTS = 20000


class SessionData:
    """Everything the tab shows for one session (all hosts, or one)."""

    def __init__(self, session: Session, host: Optional[str]):
        hosts = [host] if host else list(session.hosts)
        self.snapshot: Snapshot = load_snapshot(session, host)
        self.steps, self.step_files = load_steps(session, host)
        stored = self.snapshot.meta.get("mounts") or []
        self.mounts = [M.Mount(p, t) for p, t in stored] or M.current()
        self.files = _file_table(self.snapshot, self.mounts)
        advice = session.directory / "advice.json"
        self.advice = _read_json(advice)
        coverage = [session.directory / f"{h}.coverage.json" for h in hosts]
        self.coverage = [c for c in (_read_json(p) for p in coverage) if c]


def _read_json(path: pathlib.Path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def display_path(p: str) -> str:
    """A path as text: bytes that are not UTF-8 are shown as \\xNN."""
    return os.fsencode(p).decode("utf-8", "backslashreplace")


def _file_table(snap: Snapshot, mounts: List[M.Mount]) -> pd.DataFrame:
    """report.file_table with displayable paths."""
    t = report.file_table(snap, mount_table=mounts)
    if t.empty:
        return t
    t["tier"] = _tier_names(t["tier"])
    odd = t["path"].map(lambda p: not p.isascii())
    if odd.any():
        t.loc[odd, "path"] = t.loc[odd, "path"].map(display_path)
    return t


def _tier_names(labels) -> list:
    """Tier labels as every chart and the file table name them."""
    return [UNKNOWN_TIER if label == "?" else label for label in labels]


def _clean(v):
    """JSON-safe scalars: NaN and infinities become null."""
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return None if not math.isfinite(float(v)) else float(v)
    return v


def runs(sessions: List[Session]) -> Dict:
    out: Dict[str, list] = {}
    for s in sessions:
        out.setdefault(s.run, []).append({"session": s.name, "hosts": list(s.hosts),
                                          "labels": [process_label(h) for h in s.hosts],
                                          "ranks": sum(".rank" in h for h in s.hosts),
                                          "job_log": s.job_log})
    return {"runs": [{"run": r, "sessions": v} for r, v in out.items()]}


def summary(d: SessionData) -> Dict:
    snap = d.snapshot
    # a window without step markers has one pseudo-step (-1): no step time to
    # share; a step the window's end cut short may hold profiler shutdown
    steps = d.steps[d.steps["step"] >= 0] if len(d.steps) else d.steps
    whole = steps[~steps[CUT_COLUMN]] if len(steps) else steps
    p, s = snap.posix, snap.stdio
    read = int(p["POSIX_BYTES_READ"].sum() + s["STDIO_BYTES_READ"].sum())
    written = int(p["POSIX_BYTES_WRITTEN"].sum() + s["STDIO_BYTES_WRITTEN"].sum())
    io_time = float(p["POSIX_F_READ_TIME"].sum() + p["POSIX_F_WRITE_TIME"].sum()
                    + s["STDIO_F_READ_TIME"].sum() + s["STDIO_F_WRITE_TIME"].sum())
    meta_time = float(p["POSIX_F_META_TIME"].sum() + s["STDIO_F_META_TIME"].sum())
    out = {"files": int(len(p) + len(s)), "bytes_read": read, "bytes_written": written,
           "io_time": io_time, "meta_time": meta_time,
           "bandwidth": (read + written) / io_time if io_time > 0 else None,
           "duration": snap.end - snap.start, "processes": snap.meta.get("processes", 1),
           "steps": int(len(steps)), "input_share": None,
           "folded_files": snap.meta.get("folded_files", 0),
           "trace_dropped": snap.meta.get("trace_dropped", 0)}
    if len(whole):
        span = float((whole["end"] - whole["start"]).sum())
        waited = float(whole["read_time"].sum() + whole["meta_time"].sum())
        # I/O calls of the input pipeline against the steps' wall time (across its threads)
        out["input_share"] = waited / span if span > 0 else None
    out = {k: _clean(v) for k, v in out.items()}
    if d.coverage:
        out["coverage"] = d.coverage
    return out


def files(d: SessionData, sort: str = "bytes_read", order: str = "desc", offset: int = 0,
          limit: int = 50, query: str = "") -> Dict:
    t = d.files
    if query:
        t = t[t["path"].str.contains(query, regex=False, na=False)]
    if sort not in FILE_COLUMNS:
        raise ValueError(f"cannot sort by {sort!r}")
    if order not in ("asc", "desc"):
        raise ValueError(f"order must be asc or desc, not {order!r}")
    t = t.sort_values(sort, ascending=(order == "asc"), kind="stable", na_position="last")
    page = t.iloc[offset: offset + limit]
    rows = [[_clean(v) for v in row] for row in page[FILE_COLUMNS].itertuples(index=False)]
    return {"total": int(len(t)), "offset": offset, "columns": FILE_COLUMNS, "rows": rows}


def steps(d: SessionData) -> Dict:
    st = d.steps
    if st.empty:
        return {"steps": [], "mounts": {}}
    st = st.groupby("step", as_index=False).agg(
        start=("start", "min"), end=("end", "max"), bytes_read=("bytes_read", "sum"),
        bytes_written=("bytes_written", "sum"), reads=("reads", "sum"), writes=("writes", "sum"),
        read_time=("read_time", "sum"), write_time=("write_time", "sum"), meta_time=("meta_time", "sum"),
        files=("files", "sum"), cut=(CUT_COLUMN, "any"))
    io = st["read_time"] + st["write_time"]
    bw = np.where(io > 0, (st["bytes_read"] + st["bytes_written"]) / io.where(io > 0, 1), np.nan)
    out = {"steps": st["step"].tolist(), "duration": (st["end"] - st["start"]).tolist(),
           "cut_by_window_end": st["cut"].tolist(),
           "bytes_read": st["bytes_read"].tolist(), "bytes_written": st["bytes_written"].tolist(),
           "ops": (st["reads"] + st["writes"]).tolist(), "io_time": io.tolist(),
           "meta_time": st["meta_time"].tolist(), "bandwidth": [_clean(v) for v in bw], "mounts": {}}
    sf = d.step_files
    if not sf.empty and "mount" in sf:
        # the series store mount points: name them as the file table and the tier views do
        points = sf["mount"].unique()
        name = dict(zip(points, _tier_names(M.label(m, d.mounts) if m else "?" for m in points)))
        g = sf.assign(tier=sf["mount"].map(name)).groupby(["tier", "step"], as_index=False)["bytes_read"].sum()
        for tier, part in g.groupby("tier"):
            series = part.set_index("step")["bytes_read"].reindex(st["step"]).fillna(0)
            out["mounts"][tier] = [int(x) for x in series]
    return out


def histograms(d: SessionData) -> Dict:
    p = d.snapshot.posix
    return {"bins": SIZE_BINS,
            "read": [int(p[f"POSIX_SIZE_READ_{b}"].sum()) for b in SIZE_BINS],
            "write": [int(p[f"POSIX_SIZE_WRITE_{b}"].sum()) for b in SIZE_BINS]}


def mounts(d: SessionData) -> Dict:
    t = d.files
    if t.empty:
        return {"mounts": []}
    g = t.groupby("tier", as_index=False).agg(files=("path", "size"), bytes_read=("bytes_read", "sum"),
                                              bytes_written=("bytes_written", "sum"),
                                              read_time=("read_time", "sum"), meta_time=("meta_time", "sum"))
    # the file table has no write time: the same tiers, from the log's records
    p = d.snapshot.posix
    tiers = _tier_names(report.tiers_of(p["path"], d.mounts))
    g["write_time"] = g["tier"].map(p["POSIX_F_WRITE_TIME"].groupby(tiers).sum()).fillna(0.0)
    for op, moved in (("read", "bytes_read"), ("write", "bytes_written")):
        spent = g[f"{op}_time"]
        g[f"{op}_bandwidth"] = np.where(spent > 0, g[moved] / spent.where(spent > 0, 1), np.nan)
    return {"mounts": [{k: _clean(v) for k, v in r.items()} for r in g.to_dict("records")]}


def timeline(d: SessionData) -> Dict:
    dxt = d.snapshot.dxt
    if dxt.empty:
        return {"available": False, "files": []}
    names = {r: display_path(p) for r, p in zip(d.snapshot.posix["record_id"], d.snapshot.posix["path"])}
    top = dxt.groupby("record_id")["length"].sum().sort_values(ascending=False).index[:TIMELINE_FILES]
    t0 = d.snapshot.start
    out = []
    per_file = TIMELINE_SEGMENTS // max(1, len(top))
    for rid in top:
        seg = dxt[dxt["record_id"] == rid].head(per_file)
        out.append({"path": names.get(rid, str(rid)), "op": seg["op"].tolist(),
                    "start": (seg["start"] - t0).round(9).tolist(),
                    "duration": (seg["end"] - seg["start"]).round(9).tolist(),
                    "offset": seg["offset"].tolist(), "length": seg["length"].tolist()})
    return {"available": True, "files": out, "truncated": int(len(dxt)) > TIMELINE_SEGMENTS}


def advice(d: SessionData) -> Dict:
    return {"available": d.advice is not None, "advice": d.advice}
