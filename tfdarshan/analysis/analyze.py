"""`analyze(session_dir)`: a session's logs reduced on Dask into partitioned
Parquet tables in <session>/analysis/:

    files/   per file: totals over ranks, ranks that touched it, min/median/max
             of bytes and of file_time (reads, writes, metadata) over those ranks
    ranks/   per rank: totals, its host, and its input wait share of step time
    steps/   per step and rank: bytes, time in calls, input wait, duration
    mounts/  per mount: totals over ranks
    rank_mounts/  per rank and mount: files, bytes, time in calls, opens (which
             mount each rank reads from, and how hard it opens files there)
    skipped.json  the logs left out because they could not be read, and why

Two stages of tasks. Each task of the first reads a group of logs
(tables.reduce_log), writes the group's per-rank rows, and combines its
files by record id into one piece per id bucket (file_tree.combine). Each
task of the second merges one bucket's pieces into its rows of the
per-file table (file_tree.merge). No path string is shuffled, no process
holds every rank's records, and each table is written once, by the task
that computed it."""
from __future__ import annotations

import json
import math
import pathlib
import shutil
from typing import Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

import pandas as pd
import pyarrow

from tfdarshan.analysis import file_tree, tables
from tfdarshan.analysis.engine import engine
from tfdarshan.errors import TfdarshanError
from tfdarshan.logs import live_log, skipping
from tfdarshan.measures.time_in_calls import PARTS

TABLES = ("files", "ranks", "steps", "mounts", "rank_mounts")
SKIPPED = "skipped.json"        # the logs left out as unreadable, and why
SCHEMA = "schema.json"          # each table's columns and their types, as written
# the tables' layout: tables of another version are built again
VERSION = "6"
GROUPS = 32                     # about this many tasks read the logs (progress in as many steps)
PAIRS_A_BUCKET = 64 * 10_000    # (rank, file) values one merge task sorts, roughly
Progress = Callable[[str, int, int], None]      # (stage, done, total), as cli/progress.py takes it
STAGES = {"read": "reading rank logs", "files": "merging per-file figures by record id"}


def rank_logs(session_dir: pathlib.Path) -> List[pathlib.Path]:
    """The per-process logs of a session (a job log would count them twice)."""
    from tfdarshan.logs import joblog
    return sorted(p for p in pathlib.Path(session_dir).glob("*.darshan") if not joblog.is_job_log(p.name))


def analyze(session_dir, *, scheduler: Optional[str] = None, out: Optional[pathlib.Path] = None,
            progress: Optional[Progress] = None) -> Dict:
    """Write the tables; returns {"where": engine, "ranks": logs analysed,
    "skipped": [{"log", "reason"}] of unreadable logs left out, "recovered":
    live logs of killed processes turned into partial logs first
    (logs/live_log.recover), "tables": {name: path}}. TfdarshanError when
    no log is readable. progress(stage, done, total) is told of each stage
    (STAGES) and each task done."""
    import dask
    session_dir = pathlib.Path(session_dir)
    recovered = live_log.recover(session_dir)       # processes killed before writing their logs
    logs = rank_logs(session_dir)
    if not logs:
        raise ValueError(f"{session_dir}: no Darshan logs to analyze")
    out = pathlib.Path(out) if out else session_dir / "analysis"
    ranks = [tables.rank_of(p.name[: -len(".darshan")], i) for i, p in enumerate(logs)]
    if len(set(ranks)) != len(ranks):
        ranks = list(range(len(logs)))      # stems that do not name distinct ranks: by position
    groups = _groups([(str(p), r) for p, r in zip(logs, ranks)])
    buckets = _buckets(len(logs) * _files_a_log(logs[0]))
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    for name in TABLES:
        (tmp / name).mkdir(parents=True)
    tell = progress or (lambda stage, done, total: None)
    with engine(scheduler, len(logs)) as where:
        read = [dask.delayed(read_group, pure=False)(g, i, str(tmp), buckets) for i, g in enumerate(groups)]
        tell("read", 0, len(logs))
        done_logs = [0]

        def read_one(i: int) -> None:
            done_logs[0] += len(groups[i])
            tell("read", done_logs[0], len(logs))

        parts = where.run(read, read_one, keep=True)
        per_rank = where.run([dask.delayed(_per_rank_part, pure=False)(p) for p in parts])
        tell("files", 0, buckets)
        merges = [dask.delayed(merge_bucket, pure=False)(
            [dask.delayed(_piece, pure=False)(p, b) for p in parts], b, str(tmp)) for b in range(buckets)]
        merged = [0]

        def merge_one(i: int) -> None:
            merged[0] += 1
            tell("files", merged[0], buckets)

        counts = where.run(merges, merge_one)
        del parts
        skipped = [s for _, group_skipped in per_rank for s in group_skipped]
        if len(skipped) == len(logs):
            shutil.rmtree(tmp, ignore_errors=True)
            raise TfdarshanError(f"{session_dir}: no readable log; {skipping.warning_line(skipped)}")
        rank_mounts = pd.concat([m for m, _ in per_rank], ignore_index=True)
        _write(_per_mount(rank_mounts, pd.concat(counts)), tmp / "mounts" / "part.0.parquet")
        (tmp / SKIPPED).write_text(json.dumps(skipped))
        (tmp / SCHEMA).write_text(json.dumps({name: _columns(next((tmp / name).glob("*.parquet")))
                                              for name in TABLES}))
        (tmp / "VERSION").write_text(VERSION)
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)                     # a reader never sees half the tables
    return {"where": where.where, "ranks": len(logs) - len(skipped), "skipped": skipped, "recovered": recovered,
            "tables": {name: out / name for name in TABLES}}


def _groups(logs: List[Tuple[str, int]]) -> List[List[Tuple[str, int]]]:
    """The logs in about GROUPS groups of consecutive ranks (neighbours tend
    to share files, so a group combines them)."""
    logs = sorted(logs, key=lambda x: x[1])
    size = max(1, math.ceil(len(logs) / GROUPS))
    return [logs[i:i + size] for i in range(0, len(logs), size)]


def _files_a_log(log: pathlib.Path) -> int:
    """Roughly how many files one log holds, from its size (about 100 bytes a
    record compressed): enough to size the merge."""
    try:
        return max(1, log.stat().st_size // 100)
    except OSError:
        return 1


def _buckets(pairs: int) -> int:
    """How many merge tasks: each sorts about PAIRS_A_BUCKET values, at most 64."""
    return max(1, min(64, pairs // PAIRS_A_BUCKET))


def read_group(logs: Sequence[Tuple[str, int]], group: int, tmp: str, buckets: int):
    """(pieces per bucket, rank_mounts rows, skipped logs) of a group of logs;
    its rows of the ranks, steps and rank_mounts tables are written here."""
    files, reduced, skipped = [], [], []
    for log, rank in logs:
        try:
            rank_files, rank_rows = tables.reduce_log(log, rank)
        except (TfdarshanError, OSError) as e:
            skipped.append({"log": pathlib.Path(log).name, "reason": skipping.reason_of(log, e)})
            continue
        files.append(rank_files)
        reduced.append(rank_rows)
    frames = tables.rows(reduced)
    for name, table in (("ranks", "ranks"), ("steps", "steps"), ("mounts", "rank_mounts")):
        _write(frames[name], pathlib.Path(tmp) / table / f"part.{group}.parquet")
    return file_tree.combine(files, buckets), frames["mounts"], skipped


def _piece(part, bucket: int) -> file_tree.Piece:
    return part[0][bucket]


def _per_rank_part(part) -> Tuple[pd.DataFrame, List[Dict[str, str]]]:
    return part[1], part[2]


def merge_bucket(pieces: Sequence[file_tree.Piece], bucket: int, tmp: str) -> pd.Series:
    """Write one bucket's rows of the per-file table; its files per mount."""
    files = file_tree.merge(pieces)
    _write(files, pathlib.Path(tmp) / "files" / f"part.{bucket}.parquet")
    return files["mount"].astype(object).value_counts()


def _per_mount(rank_mounts: pd.DataFrame, files_per_mount: pd.Series) -> pd.DataFrame:
    """Per mount: the ranks' sums, and its distinct files (a file several
    ranks read is one file of its mount, not the ranks' counts summed)."""
    distinct = files_per_mount.groupby(level=0).sum().rename("files")
    return rank_mounts.groupby("mount").agg(
        {"fstype": "first", "bytes_read": "sum", "bytes_written": "sum", **dict.fromkeys(PARTS, "sum"),
         "opens": "sum"}).join(distinct).reset_index()


def _write(frame: pd.DataFrame, path: pathlib.Path) -> None:
    """One part of a table; text as Arrow strings, so that every part (an
    empty one too) has the same schema."""
    text = {c: "string[pyarrow]" for c in frame.columns if pd.api.types.is_string_dtype(frame[c].dtype)}
    frame.astype(text).to_parquet(path, index=False, write_page_checksum=True)


def skipped_logs(session_dir) -> List[Dict[str, str]]:
    """The logs the session's analysis left out ({"log", "reason"}); [] when
    the list cannot be read (tables_fresh() then has them rebuilt)."""
    found = _skipped(pathlib.Path(session_dir) / "analysis" / SKIPPED)
    return [] if found is None else found


def _skipped(path: pathlib.Path) -> Optional[List[Dict[str, str]]]:
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ok = isinstance(found, list) and all(isinstance(s, dict) and isinstance(s.get("log"), str)
                                         and isinstance(s.get("reason"), str) for s in found)
    return found if ok else None


def tables_fresh(session_dir) -> bool:
    """Whether <session>/analysis holds every table, of this version, newer
    than the newest rank log, with a list of the logs it left out."""
    d = pathlib.Path(session_dir) / "analysis"
    newest = max((p.stat().st_mtime for p in rank_logs(session_dir)), default=0.0)
    try:
        return all((d / n).exists() for n in TABLES) and d.stat().st_mtime >= newest \
            and (d / "VERSION").read_text() == VERSION and _skipped(d / SKIPPED) is not None \
            and isinstance(json.loads((d / SCHEMA).read_text()), dict)
    except (OSError, ValueError):
        return False


def ensure_tables(session_dir, *, scheduler: Optional[str] = None) -> pathlib.Path:
    """<session>/analysis, built first when a table is missing or older than
    the newest rank log."""
    if not tables_fresh(session_dir):
        analyze(session_dir, scheduler=scheduler)
    return pathlib.Path(session_dir) / "analysis"


# what a damaged table raises when read or used: pyarrow's errors (OSError,
# ValueError), a column gone or renamed (KeyError), of another type (TypeError)
DAMAGE = (pyarrow.ArrowException, OSError, ValueError, KeyError, TypeError, IndexError)
T = TypeVar("T")


def with_tables(session_dir, use: Callable[[pathlib.Path], T], *, scheduler: Optional[str] = None,
                rebuilt: Callable[[str], None] = lambda reason: None) -> T:
    """use(<session>/analysis), the tables built first when missing or stale.
    The tables are derived (the rank logs are the record): when use() fails
    on them (a table truncated, a flipped bit its page checksum catches, a
    column gone), they are built again from the rank logs, rebuilt(reason)
    is told, and use() runs once more; TfdarshanError if it fails again."""
    where = ensure_tables(session_dir, scheduler=scheduler)
    try:
        return use(where)
    except DAMAGE as e:
        reason = _first_line(e)
    rebuilt(reason)
    analyze(session_dir, scheduler=scheduler)
    try:
        return use(where)
    except DAMAGE as e:
        raise TfdarshanError(f"{where}: the analysis tables are unreadable, even rebuilt ({_first_line(e)})") \
            from None


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def tables_of(session_dir, *, scheduler: Optional[str] = None) -> Dict[str, pd.DataFrame]:
    """The per-file, per-rank and per-mount tables (not the larger step
    table), built first when absent or stale, again when damaged."""
    return with_tables(session_dir, lambda d: {n: read_table(d.parent, n) for n in TABLES if n != "steps"},
                       scheduler=scheduler)


def read_table(session_dir, name: str) -> pd.DataFrame:
    """One analysis table, whole (they are small: per file, rank, mount),
    checked: each part's pages against their checksums, its columns against
    those written (ValueError). Parts are read one by one: a dataset would
    take its columns from the first part and fill a damaged one's with nulls."""
    import pyarrow.parquet as pq
    d = pathlib.Path(session_dir) / "analysis"
    want = json.loads((d / SCHEMA).read_text()).get(name)
    parts = []
    for part in sorted((d / name).glob("*.parquet")):
        t = pq.read_table(part, page_checksum_verification=True)
        if [[f.name, str(f.type)] for f in t.schema] != want:
            raise ValueError(f"{part.name} of the {name} table: not the columns the analysis wrote")
        parts.append(t)
    if not parts:
        raise ValueError(f"the {name} table has no parts")
    return pyarrow.concat_tables(parts).to_pandas()


def _columns(part: pathlib.Path) -> List[List[str]]:
    import pyarrow.parquet as pq
    return [[f.name, str(f.type)] for f in pq.read_schema(part)]
