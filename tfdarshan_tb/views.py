"""The I/O tab's views: JSON-ready payloads computed from a loaded session
(session_data.SessionData: its Snapshot and step series). Functions of
the loaded session, what no request parameter changes kept in its memo
(session_data.Memo); the plugin only routes to them."""
from __future__ import annotations

import pathlib
import re
import shlex
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from tfdarshan.advice import training_input as TI
from tfdarshan.capture import kernel_io as K, mounts as M, served as SV
from tfdarshan.advice.compare import served_label
from tfdarshan.measures import input_wait
from tfdarshan.measures import bandwidth as B
from tfdarshan.measures import time_in_calls as T
from tfdarshan.steps.series import AFTER_STEPS, CUT_COLUMN, SETUP_STEP
from tfdarshan.logs.logdir import Session, partial_logs, process_label
from tfdarshan.errors import TfdarshanError
from tfdarshan.logs.darshan_log import read_job_record
from tfdarshan_tb import downsample
from tfdarshan_tb.session_data import FILE_COLUMNS, SessionData, _clean, coverage_card, display_path, mount_names

# entries of a step series that are not steps, left out of the per-step charts
OUTSIDE_STEPS = (SETUP_STEP, AFTER_STEPS)
# the table's first order: time spent, slowest first, input before what is not
DEFAULT_SORT = T.FILE_TIME
SIZE_BINS = ["0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M",
             "100M_1G", "1G_PLUS"]
# each bin by its lower bound: labels short enough to stand side by side on a narrow chart
SIZE_LABELS = ["0", "100", "1K", "10K", "100K", "1M", "4M", "10M", "100M", "1G"]
TIMELINE_FILES = 8
TIMELINE_SEGMENTS = 20000
# job metadata `source` of the sessions the tab names differently
FLIGHT_RECORDER, CAPTURE = "flight recorder", "profiler server capture"
PROCESS_STEM = re.compile(r".*_\d+")


def runs(sessions: List[Session]) -> Dict:
    out: Dict[str, list] = {}
    for s in sessions:
        first = _job_metadata(s.directory / f"{s.hosts[0]}.darshan")
        # <host>_<number>: a pid, or a profiler server's port (read only these logs' headers)
        captured = [PROCESS_STEM.fullmatch(h) is not None
                    and _job_metadata(s.directory / f"{h}.darshan").get("source") == CAPTURE for h in s.hosts]
        out.setdefault(s.run, []).append({"session": s.name, "hosts": list(s.hosts),
                                          "labels": [process_label(h, c) for h, c in zip(s.hosts, captured)],
                                          "ranks": sum(".rank" in h for h in s.hosts),
                                          "job_log": s.job_log, "origin": origin(first)})
    return {"runs": [{"run": r, "label": run_label(r), "sessions": v} for r, v in out.items()]}


TOP_LEVEL = "(top level of the log directory)"


def run_label(run: str) -> str:
    """How the selector names a run: its path, and the log directory itself
    (`tfdarshan run --logdir logs` writes there) in words, not as a dot."""
    return TOP_LEVEL if run == "." else run


def origin(metadata: Dict[str, str]) -> Optional[Dict]:
    """Why a flight-recorder session exists (its trigger and the recorder's
    sentence); None for every other session."""
    if metadata.get("source") != FLIGHT_RECORDER:
        return None
    return {"source": FLIGHT_RECORDER, "trigger": metadata.get("trigger") or "", "reason": metadata.get("reason") or ""}


def _job_metadata(log: pathlib.Path) -> Dict[str, str]:
    try:
        return read_job_record(log)["metadata"]
    except TfdarshanError:      # an unreadable log still lists; its views will say what is wrong
        return {}


def memo(d, key, make):
    """make(), worked out once per loaded session (session_data.Memo): what
    no request parameter changes. A loader without a memo works it out each time."""
    box = getattr(d, "memo", None)
    return make() if box is None else box.get(key, make)


def first_views(d: SessionData) -> None:
    """Work out what the page's first views need (session_data.Memo), as
    the page asks for them: the read-ahead calls this after loading the
    session the page opens first, so that those answers are ready."""
    for view in (verdict, steps, summary, mounts, files):
        view(d)


def summary(d: SessionData) -> Dict:
    return memo(d, "summary", lambda: _summary(d))


def _summary(d: SessionData) -> Dict:
    snap = d.snapshot
    cells = input_wait.of_series(d.steps)
    steps = cells[cells["step"] >= 0]
    counted = cells[cells["counted"]]
    p, s = snap.posix, snap.stdio
    read = int(p["POSIX_BYTES_READ"].sum() + s["STDIO_BYTES_READ"].sum())
    written = int(p["POSIX_BYTES_WRITTEN"].sum() + s["STDIO_BYTES_WRITTEN"].sum())
    parts = [T.parts_of(p, "POSIX"), T.parts_of(s, "STDIO")]
    times = {part: float(sum(x[part].sum() for x in parts)) for part in T.PARTS}
    setup = cells[cells["step"] == SETUP_STEP]
    out = {"files": int(len(p) + len(s)), "bytes_read": read, "bytes_written": written,
           **time_figures(times, read, written),
           "duration": snap.end - snap.start, "processes": snap.meta.get("processes", 1),
           "steps": int(steps["step"].nunique()),
           "input_share": input_wait.share(counted["wait"].sum(), counted["duration"].sum()),
           "setup_time": float(setup["duration"].max()) if len(setup) else None,
           "setup_bytes": int(setup["bytes_read"].sum()) if len(setup) else None,
           "folded_files": snap.meta.get("folded_files", 0),
           "trace_dropped": snap.meta.get("trace_dropped", 0)}
    # beyond Darshan's counters (kernel_io.py): totals, and the files, named with how they were read
    beyond = K.per_file(snap.extra)
    e = snap.extra
    mapped = mapped_bytes(e["path"], e["MMAP_BYTES"]) if len(e) else {"mmap_bytes": 0, "runtime_mmap_bytes": 0}
    out.update(copy_bytes=K.copied_bytes(e),           # each copy once, though it is on both its files' rows
               **mapped,
               kernel_io_files=[{"path": display_path(r.path), "how": r.how} for r in beyond.head(20).itertuples()])
    out = {k: _clean(v) for k, v in out.items()}
    out["labels"] = time_labels(input_wait.SUM_OVER_PROCESSES if len(d.hosts) > 1 else None)
    out["input_label"] = input_label(len(d.hosts))
    out["origin"] = origin(snap.meta.get("job_metadata") or {})
    out["skipped_logs"] = list(snap.meta.get("skipped_logs") or [])
    out["partial_logs"] = partial_logs(d.session, d.hosts)
    if d.coverage:
        out["coverage"] = coverage_card(d.coverage)
    out["served"] = served_note(snap.meta.get("served"))
    return out


def time_figures(times, read, written) -> Dict:
    """The summary's and each step's times and bandwidth, from the parts
    of time in calls (reads, writes, metadata) and the bytes moved: the
    same figures whichever tables the tab reads (one log or many ranks')."""
    data = T.data_time(times)
    return {T.READ_TIME: times[T.READ_TIME], T.WRITE_TIME: times[T.WRITE_TIME], T.META_TIME: times[T.META_TIME],
            T.DATA_TIME: data, "bandwidth": B.bandwidth(read + written, data)}


def time_labels(over: Optional[str]) -> Dict[str, str]:
    """The words for time_figures' figures (time_in_calls.LABELS,
    bandwidth.LABEL), with what they are summed over (threads always;
    processes or ranks when there are several)."""
    also = f", {over}" if over else ""
    return {**{k: f"{T.LABELS[k]} (summed over threads{also})" for k in (*T.PARTS, T.DATA_TIME)},
            "bandwidth": f"bandwidth ({B.LABEL}{also})"}


def step_figures(g: pd.DataFrame) -> Dict:
    """The step chart's time series of per-step rows (time_figures' figures)."""
    f = time_figures({part: g[part].astype(np.float64) for part in T.PARTS}, g["bytes_read"], g["bytes_written"])
    return {k: [_clean(v) for v in np.asarray(f[k], dtype=np.float64)] for k in (T.DATA_TIME, T.META_TIME, "bandwidth")}


def served_note(meta: Optional[Dict]) -> Optional[Dict]:
    """What serving staged copies did (capture/served.py), with the line
    `recommend --compare` prints; None for a session that served none."""
    if not meta:
        return None
    s = SV.summary(meta)
    return {**{k: _clean(v) for k, v in s.items() if k != "not_served"}, "not_served": s["not_served"],
            "label": served_label(s)}


def input_label(processes: int) -> str:
    """The verdict's and the cards' words for input wait, from its one
    definition (the words analyze and recommend print beside the figure)."""
    return input_wait.job_label(processes).replace("ranks' steps", "processes' steps")


def files(d: SessionData, sort: Optional[str] = None, order: str = "desc", offset: int = 0,
          limit: int = 50, query: str = "", step: Optional[int] = None) -> Dict:
    """A page of the file table; with `step`, only the files that step
    touched (their figures are still the session's). Unless a column is
    asked for, the slowest files first (table_page: input before what is not)."""
    t = d.files
    sort = sort or DEFAULT_SORT
    if step is not None:
        t = t[_touched_in(d, step, t)]
        return {**table_page(t, FILE_COLUMNS, sort, order, offset, limit, query), "step": step}
    # every page of one order comes from the same sort of the whole table (a 100k-file sort is 0.1-0.2 s)
    rows = memo(d, ("files", sort, order, query), lambda: ordered(t, FILE_COLUMNS, sort, order, query).index)
    return {**page_rows(t.loc[rows[offset: offset + limit]], FILE_COLUMNS, len(rows), sort, order, offset),
            "step": step}


def table_page(t: pd.DataFrame, columns: List[str], sort: str, order: str, offset: int, limit: int,
               query: str) -> Dict:
    """Rows offset..offset+limit of a file table, filtered by path and
    sorted. In the first order (DEFAULT_SORT, descending: every page the
    same) the files that are not input (a kind) come after the others."""
    t = ordered(t, columns, sort, order, query)
    return page_rows(t.iloc[offset: offset + limit], columns, len(t), sort, order, offset)


def ordered(t: pd.DataFrame, columns: List[str], sort: str, order: str, query: str) -> pd.DataFrame:
    """table_page's rows (filtered by path), all of them in its order."""
    if sort not in columns:
        raise ValueError(f"cannot sort by {sort!r}")
    if order not in ("asc", "desc"):
        raise ValueError(f"order must be asc or desc, not {order!r}")
    if query:
        t = t[t["path"].str.contains(query, regex=False, na=False)]
    t = t.sort_values(sort, ascending=(order == "asc"), kind="stable", na_position="last")
    if sort == DEFAULT_SORT and order == "desc" and "kind" in t:
        t = t.iloc[np.argsort((t["kind"].to_numpy(dtype=object) != "").astype(np.int8), kind="stable")]
    return t


def page_rows(page: pd.DataFrame, columns: List[str], total: int, sort: str, order: str, offset: int) -> Dict:
    """A page of table rows, JSON-safe, with the table's length and order."""
    rows = [[_clean(v) for v in row] for row in page[columns].itertuples(index=False)]
    return {"total": int(total), "offset": offset, "columns": columns, "rows": rows, "sort": sort, "order": order}


def _touched_in(d: SessionData, step: int, t: pd.DataFrame) -> pd.Series:
    """Which rows of the file table (path, interface) the step series lists
    for this step."""
    sf = d.step_files
    if sf.empty or "path" not in sf:
        return pd.Series(False, index=t.index)
    rows = sf[sf["step"] == step]
    keys = {(display_path(p), m) for p, m in zip(rows["path"], rows["module"])}
    return pd.Series([(p, i) in keys for p, i in zip(t["path"], t["interface"])], index=t.index, dtype=bool)


def cut_to_width(out: Dict, width: Optional[int], columns: List[str], flags: List[str] = (),
                 nested: Optional[str] = None) -> Dict:
    """A per-step payload with its series (out[c] for c in columns, each
    list of out[nested]) cut to `width` buckets of min and max when the
    steps outnumber what the chart can draw (downsample.py). The payload's
    "downsampled" says so; None when every step is there."""
    cols = {c: out[c] for c in columns if out.get(c) is not None}
    inner = dict(out.get(nested) or {}) if nested else {}
    cols.update({("nested", k): v for k, v in inner.items()})
    cut = downsample.series(out["steps"], cols, {f: out[f] for f in flags}, width)
    if cut is None:
        return {**out, "downsampled": None}
    fresh = {k: v for k, v in cut.items() if not isinstance(k, tuple)}
    if nested:
        fresh[nested] = {k[1]: v for k, v in cut.items() if isinstance(k, tuple)}
    return {**out, **fresh}


def verdict(d: SessionData, width: Optional[int] = None) -> Dict:
    """Step time split into file I/O (ours), other input wait (XProf's input
    time beyond ours, when the session has an XProf profile) and the rest;
    with several processes, each step's bars are the mean over them."""
    out = memo(d, "verdict", lambda: _verdict(d))
    return cut_to_width(out, width, VERDICT_SERIES, ["cut_by_window_end"]) if out["steps"] else out


def _verdict(d: SessionData) -> Dict:
    """verdict()'s payload, every step."""
    cells = input_wait.of_series(d.steps)
    xp = d.xprof
    n = len(d.hosts)
    # the job's figure, or one process's of several (named as such: it is not the job's)
    alone = len(d.session.hosts) > n
    out = {"series": bool(len(d.steps)), "steps": [], "share": None, "label": input_label(n),
           "name": input_wait.ONE_OF if alone else input_wait.JOB,
           "over": input_wait.MEAN_OVER_PROCESSES if n > 1 else None,
           "xprof": None if xp is None else {"error": xp.get("error"), "measured": bool(xp.get("measured")),
                                             "input_percent": _clean(xp.get("input_percent"))}}
    g = input_wait.per_step(cells, n)
    if not len(g):
        return out
    other = None
    if xp and xp.get("measured"):
        waited = g["step"].map(xp["steps"]).fillna(0.0)
        other = np.clip(waited - g["wait"], 0.0, g["duration"] - g["wait"])
    rest = g["duration"] - g["wait"] - (other if other is not None else 0.0)
    # a step the window's end cut short may hold profiler shutdown: shown, not counted
    cut = ~g["counted"].to_numpy(dtype=bool)
    out.update(steps=[int(x) for x in g["step"]], duration=[_clean(x) for x in g["duration"]],
               file_io=[_clean(x) for x in g["wait"]],
               other_input=None if other is None else [_clean(x) for x in other],
               compute=[_clean(max(x, 0.0)) for x in rest], cut_by_window_end=cut.tolist(),
               share=_clean(input_wait.series_share(d.steps)))
    return out


def mapped_bytes(paths: pd.Series, mmap_bytes: pd.Series) -> Dict[str, int]:
    """Bytes read through mmap, the data's apart from the MPI runtime's own
    shared memory (training_input.RUNTIME: mapped, not data), as the
    advice and `analyze` tell them apart."""
    runtime = TI.reasons(paths) == TI.RUNTIME
    v = mmap_bytes.to_numpy(np.int64)
    return {"mmap_bytes": int(v[~runtime].sum()), "runtime_mmap_bytes": int(v[runtime].sum())}


def _runtime_mapped(step_files: pd.DataFrame, steps: pd.Series) -> np.ndarray:
    """Per step, the bytes read through mmap of the MPI runtime's own
    segments (mapped_bytes' runtime part), which the step chart's mmap
    series leaves out as the card does."""
    if step_files.empty or "mmap_bytes" not in step_files or "path" not in step_files:
        return np.zeros(len(steps), np.int64)
    # (each distinct path judged once: the series repeats a file's path every step it is read in)
    codes, paths = pd.factorize(step_files["path"], use_na_sentinel=False)
    r = step_files[(TI.reasons(pd.Series(paths, dtype=object)) == TI.RUNTIME)[codes]]
    return r.groupby("step")["mmap_bytes"].sum().reindex(steps.to_numpy()).fillna(0).to_numpy(np.int64)


# the verdict's and the step chart's per-step series (steps, flags and notes aside)
VERDICT_SERIES = ["duration", "file_io", "other_input", "compute"]
STEP_SERIES = ["duration", "bytes_read", "bytes_written", "ops", T.DATA_TIME, T.META_TIME, "bandwidth",
               "copy_bytes", "mmap_bytes"]


def steps(d: SessionData, width: Optional[int] = None) -> Dict:
    """Per step, summed over the session's processes (the set-up and the
    wind-down are not steps: the summary gives the set-up); cut to `width`
    buckets when longer (cut_to_width)."""
    out = memo(d, "steps", lambda: _steps(d))
    return cut_to_width(out, width, STEP_SERIES, ["cut_by_window_end"], nested="mounts") if out["steps"] else out


def _steps(d: SessionData) -> Dict:
    """steps()'s payload, every step."""
    st = d.steps
    if not st.empty:
        st = st[~st["step"].isin(list(OUTSIDE_STEPS))]
    if st.empty:
        return {"steps": [], "mounts": {}, "downsampled": None}
    st = st.groupby("step", as_index=False).agg(
        start=("start", "min"), end=("end", "max"), bytes_read=("bytes_read", "sum"),
        bytes_written=("bytes_written", "sum"), reads=("reads", "sum"), writes=("writes", "sum"),
        read_time=("read_time", "sum"), write_time=("write_time", "sum"), meta_time=("meta_time", "sum"),
        files=("files", "sum"), cut=(CUT_COLUMN, "any"), mmap_bytes=("mmap_bytes", "sum"),
        **{c: (c, "sum") for c in K.STEP_COPY_COLUMNS})
    out = {"steps": st["step"].tolist(), "duration": (st["end"] - st["start"]).tolist(),
           "over": input_wait.SUM_OVER_PROCESSES if len(d.hosts) > 1 else None,
           "cut_by_window_end": st["cut"].tolist(),
           "bytes_read": st["bytes_read"].tolist(), "bytes_written": st["bytes_written"].tolist(),
           "ops": (st["reads"] + st["writes"]).tolist(), **step_figures(st), "mounts": {},
           # beyond Darshan's counters: what kernel-side copies moved, what mappings brought in (an estimate)
           "copy_bytes": st[list(K.STEP_COPY_COLUMNS)].sum(axis=1).astype(np.int64).tolist(),
           "mmap_bytes": (st["mmap_bytes"] - _runtime_mapped(d.step_files, st["step"])).clip(lower=0).tolist()}
    sf = d.step_files
    if not sf.empty:
        sf = sf[sf["step"].isin(st["step"]) & ~(sf["path"].isin(M.STREAM_PATHS) if "path" in sf else False)]
    if not sf.empty and "mount" in sf:
        # the series store mount points: name them as the file table and the mount views do
        points = sf["mount"].unique()
        name = dict(zip(points, mount_names(M.label(m, d.mounts) if m else "?" for m in points)))
        g = sf.assign(mount=sf["mount"].map(name)).groupby(["mount", "step"], as_index=False)["bytes_read"].sum()
        for mount, part in g.groupby("mount"):
            series = part.set_index("step")["bytes_read"].reindex(st["step"]).fillna(0)
            out["mounts"][mount] = [int(x) for x in series]
    return out


def histograms(d: SessionData) -> Dict:
    p = d.snapshot.posix
    return {"bins": SIZE_BINS, "labels": SIZE_LABELS,
            "read": [int(p[f"POSIX_SIZE_READ_{b}"].sum()) for b in SIZE_BINS],
            "write": [int(p[f"POSIX_SIZE_WRITE_{b}"].sum()) for b in SIZE_BINS]}


def mounts(d: SessionData, offset: int = 0, limit: Optional[int] = None) -> Dict:
    """Per mount, a page of them (offset, limit: all by default)."""
    rows = memo(d, "mounts", lambda: _mount_rows(d))
    if rows is None:
        return {"mounts": [], "total": 0, "offset": offset}
    return {**page_of(rows, offset, limit, "mounts"),
            "over": input_wait.SUM_OVER_PROCESSES if len(d.hosts) > 1 else None}


def _mount_rows(d: SessionData) -> Optional[List[Dict]]:
    """mounts()'s rows, every mount; None without a file on storage."""
    t = d.files
    if t.empty:
        return None
    t = t[t["mount"] != M.STREAMS]          # not storage: the file table lists them
    if t.empty:
        return None
    # (the file table's mounts: looking every path's mount up again cost half a second at 100k files)
    g = t.groupby("mount", as_index=False).agg(files=("path", "size"), bytes_read=("bytes_read", "sum"),
                                              bytes_written=("bytes_written", "sum"),
                                              read_time=("read_time", "sum"), write_time=("write_time", "sum"),
                                              meta_time=("meta_time", "sum"))
    return with_bandwidth(g).to_dict("records")


def with_bandwidth(g: pd.DataFrame) -> pd.DataFrame:
    """Per row (a mount), read and write bandwidth, each over its own part of the time."""
    return g.assign(read_bandwidth=B.bandwidth(g["bytes_read"], g[T.READ_TIME]),
                    write_bandwidth=B.bandwidth(g["bytes_written"], g[T.WRITE_TIME]))


def page_of(rows: List[Dict], offset: int, limit: Optional[int], name: str) -> Dict:
    """Rows offset..offset+limit of a small table of records, JSON-safe,
    with the whole table's length."""
    page = rows[offset: None if limit is None else offset + limit]
    return {name: [{k: _clean(v) for k, v in r.items()} for r in page], "total": len(rows), "offset": offset}


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
    shown = sum(len(f["op"]) for f in out)
    held = int(dxt["record_id"].isin(top).sum())
    return {"available": True, "files": out, "truncated": int(len(dxt)) > TIMELINE_SEGMENTS,
            "shown": shown, "held": held, "per_file": per_file}


def recommend_command(target: str, session: str) -> str:
    """The command that stores advice for a session, for the user to run
    with their fast tier's directory in place of <path>."""
    return f"tfdarshan recommend {shlex.quote(target)} --session {shlex.quote(session)} --fast-tier <path>"


def advice(d: SessionData, target: Optional[str] = None) -> Dict:
    """The stored advice; without it, the command that makes it (target: the
    directory `recommend` should search for the session)."""
    out = {"available": d.advice is not None, "advice": d.advice}
    if d.advice_problem:
        out["problem"] = d.advice_problem        # the page says it, beside the command that makes it again
    if d.advice is None and target:
        out["command"] = recommend_command(target, d.session.name)
    return out
