"""One rank's log reduced to the rows the analysis tables are built from.
Runs on a Dask worker: it reads one log (and its step series) and returns
small frames; nothing here sees another rank's records."""
from __future__ import annotations

import pathlib
import re
from typing import Dict

import numpy as np
import pandas as pd

from tfdarshan.logs import input_wait
from tfdarshan.logs.series import SETUP_STEP

FILE_ROWS = {"path": "object", "mount": "object", "rank": "int64", "bytes_read": "int64",
             "bytes_written": "int64", "io_time": "float64", "opens": "int64"}
# the rank's coverage record (capture/coverage.py), NaN without one
COVERAGE = ("counted_bytes", "kernel_bytes", "excluded_bytes")
# input_wait (a share, per rank) and a step's input_wait (seconds) are input_wait.py's:
# wait_time and step_time are the sums over the rank's counted steps
RANK_ROWS = {"rank": "int64", "log": "object", "host": "object", "files": "int64", "bytes_read": "int64",
             "bytes_written": "int64", "io_time": "float64", "step_time": "float64", "wait_time": "float64",
             "input_wait": "float64", "opens": "int64", "duration": "float64", "setup_time": "float64",
             "setup_bytes": "int64", "partial": "bool", **{c: "float64" for c in COVERAGE}}
STEP_ROWS = {"step": "int64", "rank": "int64", "bytes_read": "int64", "io_time": "float64",
             "input_wait": "float64", "duration": "float64", "counted": "bool"}
MOUNT_ROWS = {"mount": "object", "fstype": "object", "rank": "int64", "files": "int64", "bytes_read": "int64",
              "bytes_written": "int64", "io_time": "float64", "opens": "int64"}


def empty(schema: Dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in schema.items()})


def rank_of(stem: str, fallback: int) -> int:
    """<host>.rank<r> names its rank; other logs are numbered by position."""
    m = re.fullmatch(r".*\.rank(\d+)", stem)
    return int(m.group(1)) if m else fallback


def reduce_log(log: str, rank: int) -> Dict[str, pd.DataFrame]:
    """{"files", "ranks", "steps", "mounts"} rows of one log; no rows at all
    for a log (or step series) that cannot be read: analyze() names it."""
    from tfdarshan.errors import TfdarshanError
    try:
        return _reduce(log, rank)
    except (TfdarshanError, OSError):
        return {name: empty(schema) for name, schema in (("files", FILE_ROWS), ("ranks", RANK_ROWS),
                                                         ("steps", STEP_ROWS), ("mounts", MOUNT_ROWS))}


def _reduce(log: str, rank: int) -> Dict[str, pd.DataFrame]:
    from tfdarshan.capture import mounts as M
    from tfdarshan.logs.darshan_log import read_darshan_log
    from tfdarshan.logs.live_log import is_partial
    snap = read_darshan_log(log)
    parts = []
    for module in ("POSIX", "STDIO"):
        f = snap.frame(module)
        if len(f):
            parts.append(pd.DataFrame({
                "path": f["path"].astype(object), "rank": rank,
                "bytes_read": f[f"{module}_BYTES_READ"].astype("int64"),
                "bytes_written": f[f"{module}_BYTES_WRITTEN"].astype("int64"),
                "io_time": (f[f"{module}_F_READ_TIME"] + f[f"{module}_F_WRITE_TIME"]
                            + f[f"{module}_F_META_TIME"]).astype("float64"),
                "opens": f[f"{module}_OPENS"].astype("int64")}))
    mounts = [M.Mount(p, t) for p, t in snap.meta.get("mounts") or []] or M.current()
    files = pd.concat(parts, ignore_index=True) if parts else empty(FILE_ROWS)
    # the standard streams are on no mount: named as the tab names them
    files["mount"] = np.where(files["path"].isin(M.STREAM_PATHS), M.STREAMS,
                              M.points_of(files["path"], mounts)) if len(files) else pd.Series(dtype=object)
    files = files[list(FILE_ROWS)].astype(FILE_ROWS)
    steps = _steps(pathlib.Path(log), rank)
    real = steps[steps["counted"]]
    step_time, wait_time = float(real["duration"].sum()), float(real["input_wait"].sum())
    setup = steps[steps["step"] == SETUP_STEP]
    ranks = pd.DataFrame([{
        "rank": rank, "log": pathlib.Path(log).name[: -len(".darshan")], "host": str(snap.meta.get("hostname") or ""), "files": len(files),
        "bytes_read": int(files["bytes_read"].sum()), "bytes_written": int(files["bytes_written"].sum()),
        "io_time": float(files["io_time"].sum()), "step_time": step_time, "wait_time": wait_time,
        "input_wait": input_wait.share(wait_time, step_time) if step_time > 0 else np.nan,
        "opens": int(files["opens"].sum()), "duration": float(snap.end - snap.start),
        "setup_time": float(setup["duration"].sum()) if len(setup) else np.nan,
        "setup_bytes": int(setup["bytes_read"].sum()), "partial": is_partial(snap.meta),
        **_coverage(pathlib.Path(log))}]).astype(RANK_ROWS)
    by_mount = files.groupby("mount", as_index=False).agg(
        files=("path", "size"), bytes_read=("bytes_read", "sum"), bytes_written=("bytes_written", "sum"),
        io_time=("io_time", "sum"), opens=("opens", "sum")) if len(files) else empty(MOUNT_ROWS)
    fstypes = {m.point: m.fstype for m in mounts}
    by_mount["fstype"] = by_mount["mount"].map(fstypes).fillna("")
    by_mount["rank"] = rank
    return {"files": files, "ranks": ranks, "steps": steps, "mounts": by_mount[list(MOUNT_ROWS)].astype(MOUNT_ROWS)}


def _coverage(log: pathlib.Path) -> Dict[str, float]:
    """The coverage record beside a log (NaN where it has none, or not a number)."""
    import json
    try:
        c = json.loads(log.with_name(log.name[: -len(".darshan")] + ".coverage.json").read_text())
    except (OSError, ValueError):
        c = {}
    ok = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0   # noqa: E731
    return {k: float(c[k]) if isinstance(c, dict) and ok(c.get(k)) else np.nan for k in COVERAGE}


def _steps(log: pathlib.Path, rank: int) -> pd.DataFrame:
    from tfdarshan.logs.series import STEP_COLUMNS, read_series
    series = log.with_name(log.name[: -len(".darshan")] + ".steps.parquet")
    if not series.exists():
        return empty(STEP_ROWS)
    s = input_wait.of_series(read_series(series, STEP_COLUMNS))
    return pd.DataFrame({
        "step": s["step"].astype("int64"), "rank": rank, "bytes_read": s["bytes_read"].astype("int64"),
        "io_time": (s["read_time"] + s["write_time"] + s["meta_time"]).astype("float64"),
        "input_wait": s["wait"], "duration": s["duration"], "counted": s["counted"]}).astype(STEP_ROWS)
