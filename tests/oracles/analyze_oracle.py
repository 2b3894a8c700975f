"""Regression oracle, kept on purpose: an earlier implementation, not used by
tfdarshan, that tests compare the current one with.

The oracle for `analyze` (tfdarshan/analysis/): the tables as they were
built before the per-file reduction by record id, each log reduced into
pandas frames (read_darshan_log) and the per-file rows shuffled by path
string across Dask. old_tables(session_dir) gives {name: DataFrame} for
files, ranks, steps, mounts and rank_mounts, computed on Dask's threaded
scheduler in this process."""
from __future__ import annotations

import pathlib
from typing import Dict

import numpy as np
import pandas as pd

from tfdarshan.analysis import tables
from tfdarshan.analysis.tables import FILE_ROWS, MOUNT_ROWS, RANK_ROWS, STEP_ROWS, _coverage, _steps, empty
from tfdarshan.measures import input_wait as W

# the parts of time in calls, and Darshan's counter of each (as the oracle reads them itself)
COUNTERS = {"read_time": "F_READ_TIME", "write_time": "F_WRITE_TIME", "meta_time": "F_META_TIME"}
SUMS = dict.fromkeys(COUNTERS, "sum")
from tfdarshan.steps.series import SETUP_STEP


def old_tables(session_dir) -> Dict[str, pd.DataFrame]:
    """The five tables as the old graph computed them (sorted, index reset)."""
    import dask
    import dask.dataframe as dd
    from tfdarshan.analysis.analyze import rank_logs
    logs = rank_logs(session_dir)
    ranks = [tables.rank_of(p.name[: -len(".darshan")], i) for i, p in enumerate(logs)]
    if len(set(ranks)) != len(ranks):
        ranks = list(range(len(logs)))
    with dask.config.set(scheduler="threads"):
        reduced = [dask.delayed(reduce_log)(str(p), r) for p, r in zip(logs, ranks)]
        frames = {name: dd.from_delayed([dask.delayed(lambda d, n=name: d[n])(x) for x in reduced],
                                        meta=empty(schema), verify_meta=False)
                  for name, schema in (("files", FILE_ROWS), ("ranks", RANK_ROWS),
                                       ("steps", STEP_ROWS), ("mounts", MOUNT_ROWS))}
        per_file = _per_file(frames["files"], len(logs))
        distinct = per_file.groupby("mount")["path"].count().rename("files")
        per_mount = frames["mounts"].groupby("mount").agg(
            {"fstype": "first", "bytes_read": "sum", "bytes_written": "sum", **SUMS,
             "opens": "sum"}).join(distinct).reset_index()
        out = dask.compute({"files": per_file, "ranks": frames["ranks"], "steps": frames["steps"],
                            "mounts": per_mount, "rank_mounts": frames["mounts"]})[0]
    keys = {"files": ["path"], "ranks": ["rank"], "steps": ["rank", "step"], "mounts": ["mount"],
            "rank_mounts": ["rank", "mount"]}
    return {n: f.sort_values(keys[n]).reset_index(drop=True) for n, f in out.items()}


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
                **{part: f[f"{module}_{c}"].astype("float64") for part, c in COUNTERS.items()},
                "opens": f[f"{module}_OPENS"].astype("int64")}))
    mounts = [M.Mount(p, t) for p, t in snap.meta.get("mounts") or []] or M.current()
    files = pd.concat(parts, ignore_index=True) if parts else empty(FILE_ROWS)
    # the standard streams are on no mount: named as the tab names them
    files["mount"] = np.where(files["path"].isin(M.STREAM_PATHS), M.STREAMS,
                              M.points_of(files["path"], mounts)) if len(files) else pd.Series(dtype=object)
    files = files[list(FILE_ROWS)].astype(FILE_ROWS)
    steps = _steps(pathlib.Path(log), rank)
    real = steps[steps["counted"]]
    step_time, wait_time = float(real["duration"].sum()), float(real[W.WAIT_TIME].sum())
    setup = steps[steps["step"] == SETUP_STEP]
    ranks = pd.DataFrame([{
        "rank": rank, "log": pathlib.Path(log).name[: -len(".darshan")], "host": str(snap.meta.get("hostname") or ""), "files": len(files),
        "bytes_read": int(files["bytes_read"].sum()), "bytes_written": int(files["bytes_written"].sum()),
        **{part: float(files[part].sum()) for part in COUNTERS}, W.STEP_TIME: step_time, W.WAIT_TIME: wait_time,
        W.RANK_SHARE: W.share(wait_time, step_time) if step_time > 0 else np.nan,
        "opens": int(files["opens"].sum()), "duration": float(snap.end - snap.start),
        "setup_time": float(setup["duration"].sum()) if len(setup) else np.nan,
        "setup_bytes": int(setup["bytes_read"].sum()), "partial": is_partial(snap.meta),
        **_coverage(pathlib.Path(log))}]).astype(RANK_ROWS)
    by_mount = files.groupby("mount", as_index=False).agg(
        files=("path", "size"), bytes_read=("bytes_read", "sum"), bytes_written=("bytes_written", "sum"),
        **{part: (part, "sum") for part in COUNTERS}, opens=("opens", "sum")) if len(files) else empty(MOUNT_ROWS)
    fstypes = {m.point: m.fstype for m in mounts}
    by_mount["fstype"] = by_mount["mount"].map(fstypes).fillna("")
    by_mount["rank"] = rank
    return {"files": files, "ranks": ranks, "steps": steps, "mounts": by_mount[list(MOUNT_ROWS)].astype(MOUNT_ROWS)}


def _per_file(files, logs: int):
    """Per path: sums over ranks, ranks touching it, min/median/max over ranks.
    Each path's rows are shuffled into one partition and reduced there by
    pandas: exact medians, and one pass (a groupby of sums joined to a
    groupby of spreads failed in Dask's planner at 1,024 partitions)."""
    meta = _per_file_part(tables.empty(tables.FILE_ROWS))
    return files.shuffle("path", npartitions=max(1, min(64, logs // 16))).map_partitions(_per_file_part, meta=meta)


def _per_file_part(files: pd.DataFrame) -> pd.DataFrame:
    per_rank = files.groupby(["path", "rank"], as_index=False).agg(
        {"mount": "first", "bytes_read": "sum", "bytes_written": "sum", **SUMS, "opens": "sum"})
    per_rank["bytes"] = per_rank["bytes_read"] + per_rank["bytes_written"]
    per_rank["file_time"] = per_rank["read_time"] + per_rank["write_time"] + per_rank["meta_time"]
    g = per_rank.groupby("path")
    totals = g.agg({"mount": "first", "bytes_read": "sum", "bytes_written": "sum", **SUMS,
                    "opens": "sum", "rank": "count"}).rename(columns={"rank": "ranks"})
    spread = g.agg({"bytes": ["min", "median", "max"], "file_time": ["min", "median", "max"]})
    spread.columns = [f"{c}_{s}" for c, s in spread.columns]
    # string[pyarrow]: what Dask makes of text columns elsewhere, and what its parquet writer can infer
    return totals.join(spread).reset_index().astype({"path": "string[pyarrow]", "mount": "string[pyarrow]",
                                                     "bytes_median": "float64", "file_time_median": "float64"})
