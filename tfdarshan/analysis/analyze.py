"""`analyze(session_dir)`: a session's logs reduced on Dask into partitioned
Parquet tables in <session>/analysis/:

    files/   per file: totals over ranks, ranks that touched it, min/median/max
             of bytes and I/O time over those ranks
    ranks/   per rank: totals, its host, and its input wait share of step time
    steps/   per step and rank: bytes, I/O time, input wait, duration
    mounts/  per mount: totals over ranks
    rank_mounts/  per rank and mount: files, bytes, I/O time, opens (which
             tier each rank reads from, and how hard it opens files there)
    skipped.json  the logs left out because they could not be read, and why

Each log is read by one task (tables.reduce_log); the per-file figures are
then combined by a Dask groupby, so no process holds every rank's records."""
from __future__ import annotations

import json
import pathlib
import shutil
from typing import Dict, List, Optional

import pandas as pd

from tfdarshan.analysis import tables
from tfdarshan.errors import TfdarshanError
from tfdarshan.logs import live_log, skipping
from tfdarshan.analysis.engine import engine

TABLES = ("files", "ranks", "steps", "mounts", "rank_mounts")
SKIPPED = "skipped.json"        # the logs left out as unreadable, and why
# the tables' layout: tables of another version are built again
VERSION = "3"


def rank_logs(session_dir: pathlib.Path) -> List[pathlib.Path]:
    """The per-process logs of a session (a job log would count them twice)."""
    from tfdarshan.logs import joblog
    return sorted(p for p in pathlib.Path(session_dir).glob("*.darshan") if not joblog.is_job_log(p.name))


def analyze(session_dir, *, scheduler: Optional[str] = None, out: Optional[pathlib.Path] = None) -> Dict:
    """Write the tables; returns {"where": engine, "ranks": logs analysed,
    "skipped": [{"log", "reason"}] of unreadable logs left out, "recovered":
    live logs of killed processes turned into partial logs first
    (logs/live_log.recover), "tables": {name: path}}. TfdarshanError when
    no log is readable."""
    import dask
    import dask.dataframe as dd
    session_dir = pathlib.Path(session_dir)
    recovered = live_log.recover(session_dir)       # processes killed before writing their logs
    logs = rank_logs(session_dir)
    if not logs:
        raise ValueError(f"{session_dir}: no Darshan logs to analyze")
    out = pathlib.Path(out) if out else session_dir / "analysis"
    ranks = [tables.rank_of(p.name[: -len(".darshan")], i) for i, p in enumerate(logs)]
    if len(set(ranks)) != len(ranks):
        ranks = list(range(len(logs)))      # stems that do not name distinct ranks: by position
    with engine(scheduler, len(logs)) as where:
        reduced = [dask.delayed(tables.reduce_log)(str(p), r) for p, r in zip(logs, ranks)]
        frames = {name: dd.from_delayed([dask.delayed(lambda d, n=name: d[n])(x) for x in reduced],
                                        meta=tables.empty(schema), verify_meta=False)
                  for name, schema in (("files", tables.FILE_ROWS), ("ranks", tables.RANK_ROWS),
                                       ("steps", tables.STEP_ROWS), ("mounts", tables.MOUNT_ROWS))}
        per_file = _per_file(frames["files"], len(logs))
        # a file several ranks read is one file of its mount: distinct paths, not the ranks' counts summed
        distinct = per_file.groupby("mount")["path"].count().rename("files")
        per_mount = frames["mounts"].groupby("mount").agg(
            {"fstype": "first", "bytes_read": "sum", "bytes_written": "sum", "io_time": "sum",
             "opens": "sum"}).join(distinct).reset_index()
        tmp = out.with_name(out.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        written = {}
        for name, frame in (("files", per_file), ("ranks", frames["ranks"]), ("steps", frames["steps"]),
                            ("mounts", per_mount), ("rank_mounts", frames["mounts"])):
            frame.to_parquet(tmp / name, write_index=False)
            written[name] = out / name
        analyzed = set(pd.read_parquet(tmp / "ranks", columns=["log"])["log"])
        skipped = [{"log": p.name, "reason": _why_unreadable(p)} for p in logs
                   if p.name[: -len(".darshan")] not in analyzed]
        if len(skipped) == len(logs):
            shutil.rmtree(tmp, ignore_errors=True)
            raise TfdarshanError(f"{session_dir}: no readable log; {skipping.warning_line(skipped)}")
        (tmp / SKIPPED).write_text(json.dumps(skipped))
        (tmp / "VERSION").write_text(VERSION)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)                     # a reader never sees half the tables
    return {"where": where, "ranks": len(logs) - len(skipped), "skipped": skipped, "recovered": recovered,
            "tables": written}


def _why_unreadable(log: pathlib.Path) -> str:
    """What reduce_log met in a log it left out (read again: they are few)."""
    try:
        tables._reduce(str(log), 0)
    except (TfdarshanError, OSError) as e:
        return skipping.reason_of(log, e)
    return "unreadable while analysing"


def skipped_logs(session_dir) -> List[Dict[str, str]]:
    """The logs the session's analysis left out ({"log", "reason"})."""
    try:
        return json.loads((pathlib.Path(session_dir) / "analysis" / SKIPPED).read_text())
    except (OSError, ValueError):
        return []


def _per_file(files, logs: int):
    """Per path: sums over ranks, ranks touching it, min/median/max over ranks.
    Each path's rows are shuffled into one partition and reduced there by
    pandas: exact medians, and one pass (a groupby of sums joined to a
    groupby of spreads failed in Dask's planner at 1,024 partitions)."""
    meta = _per_file_part(tables.empty(tables.FILE_ROWS))
    return files.shuffle("path", npartitions=max(1, min(64, logs // 16))).map_partitions(_per_file_part, meta=meta)


def _per_file_part(files: pd.DataFrame) -> pd.DataFrame:
    per_rank = files.groupby(["path", "rank"], as_index=False).agg(
        {"mount": "first", "bytes_read": "sum", "bytes_written": "sum", "io_time": "sum", "opens": "sum"})
    per_rank["bytes"] = per_rank["bytes_read"] + per_rank["bytes_written"]
    g = per_rank.groupby("path")
    totals = g.agg({"mount": "first", "bytes_read": "sum", "bytes_written": "sum", "io_time": "sum",
                    "opens": "sum", "rank": "count"}).rename(columns={"rank": "ranks"})
    spread = g.agg({"bytes": ["min", "median", "max"], "io_time": ["min", "median", "max"]})
    spread.columns = [f"{c}_{s}" for c, s in spread.columns]
    # string[pyarrow]: what Dask makes of text columns elsewhere, and what its parquet writer can infer
    return totals.join(spread).reset_index().astype({"path": "string[pyarrow]", "mount": "string[pyarrow]",
                                                     "bytes_median": "float64", "io_time_median": "float64"})


def tables_fresh(session_dir) -> bool:
    """Whether <session>/analysis holds every table, of this version, newer
    than the newest rank log."""
    d = pathlib.Path(session_dir) / "analysis"
    newest = max((p.stat().st_mtime for p in rank_logs(session_dir)), default=0.0)
    try:
        return all((d / n).exists() for n in (*TABLES, SKIPPED)) and d.stat().st_mtime >= newest \
            and (d / "VERSION").read_text() == VERSION
    except OSError:
        return False


def ensure_tables(session_dir, *, scheduler: Optional[str] = None) -> pathlib.Path:
    """<session>/analysis, built first when a table is missing or older than
    the newest rank log."""
    if not tables_fresh(session_dir):
        analyze(session_dir, scheduler=scheduler)
    return pathlib.Path(session_dir) / "analysis"


def tables_of(session_dir, *, scheduler: Optional[str] = None) -> Dict[str, pd.DataFrame]:
    """The per-file, per-rank and per-mount tables (not the larger step
    table), built first when absent or stale."""
    ensure_tables(session_dir, scheduler=scheduler)
    return {n: read_table(session_dir, n) for n in TABLES if n != "steps"}


def read_table(session_dir, name: str) -> pd.DataFrame:
    """One analysis table, whole (they are small: per file, rank, mount)."""
    return pd.read_parquet(pathlib.Path(session_dir) / "analysis" / name)
