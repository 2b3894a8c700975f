"""One rank's log reduced to what the analysis tables are built from: its
files by record id (numpy arrays) and its rows of the per-rank tables.
Runs on a Dask worker; nothing here sees another rank's records."""
from __future__ import annotations

import dataclasses
import os
import pathlib
import re
from typing import Dict, Sequence, Tuple

import numpy as np
import pandas as pd

from tfdarshan.capture import counters as C
from tfdarshan.capture import kernel_io as K
from tfdarshan.errors import TfdarshanError
from tfdarshan.measures import input_wait as W
from tfdarshan.measures.time_in_calls import DARSHAN, PARTS
from tfdarshan.steps.series import SETUP_STEP

# time in file calls: its parts apart (measures/time_in_calls.py), never one "I/O time"
TIMES = {part: "float64" for part in PARTS}
FILE_ROWS = {"path": "object", "mount": "object", "rank": "int64", "bytes_read": "int64",
             "bytes_written": "int64", **TIMES, "opens": "int64"}
# what Darshan's counters cannot see, per file and summed over ranks (kernel_io.py):
# kernel-side copies and mapped reads (an estimate), by the step series' names
# (the *_once columns: each copy once, on its source else its destination, so that
# their sum over files is what the copies moved: kernel_io.ONCE)
KERNEL_SUMS = ("copy_bytes_read", "copy_bytes_written", "mmap_bytes", "copy_file_range_bytes", "sendfile_bytes",
               "splice_bytes", *K.SERIES_ONCE.values())
# the rank's coverage record (capture/coverage.py), NaN without one
COVERAGE = ("counted_bytes", "kernel_bytes", "excluded_bytes")
# input wait (measures/input_wait.py): a rank's share (RANK_SHARE) is its WAIT_TIME over its
# STEP_TIME, both summed over its counted steps; a step's WAIT_TIME is that step's seconds
RANK_ROWS = {"rank": "int64", "log": "object", "host": "object", "files": "int64", "bytes_read": "int64",
             "bytes_written": "int64", **TIMES, W.STEP_TIME: "float64", W.WAIT_TIME: "float64",
             W.RANK_SHARE: "float64", "opens": "int64", "duration": "float64", "setup_time": "float64",
             "setup_bytes": "int64", "partial": "bool", **{c: "float64" for c in COVERAGE}}
STEP_ROWS = {"step": "int64", "rank": "int64", "bytes_read": "int64", "bytes_written": "int64", **TIMES,
             W.WAIT_TIME: "float64", "duration": "float64", "counted": "bool"}
MOUNT_ROWS = {"mount": "object", "fstype": "object", "rank": "int64", "files": "int64", "bytes_read": "int64",
              "bytes_written": "int64", **TIMES, "opens": "int64"}


def empty(schema: Dict[str, str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in schema.items()})


def rank_of(stem: str, fallback: int) -> int:
    """<host>.rank<r> names its rank; other logs are numbered by position."""
    m = re.fullmatch(r".*\.rank(\d+)", stem)
    return int(m.group(1)) if m else fallback


@dataclasses.dataclass
class RankFiles:
    """One rank's files, each once by record id (its POSIX and STDIO records
    of a path added), sorted by id: what the per-file tree (file_tree.py)
    combines."""
    rank: int
    ids: np.ndarray             # uint64, sorted, distinct
    paths: np.ndarray           # object
    mounts: np.ndarray          # object
    bytes_read: np.ndarray      # int64
    bytes_written: np.ndarray   # int64
    opens: np.ndarray           # int64
    kernel: Dict[str, np.ndarray]   # KERNEL_SUMS: int64 each
    times: Dict[str, np.ndarray]    # time in calls, PARTS apart: float64 each


# a record whose id the name region does not name: keyed (and shown) as the path ""
UNNAMED = np.uint64(0)


def reduce_log(log: str, rank: int) -> Tuple[RankFiles, Dict[str, object]]:
    """One log's files, and its rows of the per-rank tables: {"ranks": a
    dict (RANK_ROWS), "steps": a DataFrame (STEP_ROWS), "mounts": a dict of
    columns (MOUNT_ROWS)}; rows(...) makes frames of several. Raises
    TfdarshanError or OSError for a log (or step series) that cannot be
    read: analyze() names it."""
    from tfdarshan.capture import mounts as M
    from tfdarshan.logs.live_log import is_partial
    rows, meta = _records(log)
    rows = _with_kernel_files(rows, pathlib.Path(log))
    mounts = [M.Mount(p, t) for p, t in meta.get("mounts") or []] or M.current()
    paths = rows["path"]
    # the standard streams are on no mount: named as the tab names them
    rows["mount"] = np.where(np.isin(paths, M.STREAM_PATHS), M.STREAMS,
                             np.array(M.points_of(paths, mounts), dtype=object)) if len(paths) else paths
    steps = _steps(pathlib.Path(log), rank)
    real = steps[steps["counted"]]
    step_time, wait_time = float(real["duration"].sum()), float(real[W.WAIT_TIME].sum())
    setup = steps[steps["step"] == SETUP_STEP]
    rank_row = {
        "rank": rank, "log": pathlib.Path(log).name[: -len(".darshan")], "host": str(meta.get("hostname") or ""),
        "files": len(paths), "bytes_read": int(rows["bytes_read"].sum()),
        "bytes_written": int(rows["bytes_written"].sum()),
        **{part: float(rows[part].sum()) for part in PARTS}, W.STEP_TIME: step_time, W.WAIT_TIME: wait_time,
        W.RANK_SHARE: W.share(wait_time, step_time) if step_time > 0 else np.nan,
        "opens": int(rows["opens"].sum()), "duration": float(meta.get("end", 0.0)) - float(meta.get("start", 0.0)),
        "setup_time": float(setup["duration"].sum()) if len(setup) else np.nan,
        "setup_bytes": int(setup["bytes_read"].sum()), "partial": is_partial(meta),
        **_coverage(pathlib.Path(log))}
    # per mount (sorted by mount point, as a groupby would give them): numpy, not a groupby per log
    codes, points = pd.factorize(rows["mount"], sort=True)
    fstypes = {m.point: m.fstype for m in mounts}
    by_mount = {"mount": np.asarray(points, dtype=object),
                "fstype": np.array([fstypes.get(p, "") for p in points], dtype=object),
                "rank": np.full(len(points), rank, dtype=np.int64),
                "files": np.bincount(codes, minlength=len(points)).astype(np.int64)}
    for c in ("bytes_read", "bytes_written", *PARTS, "opens"):
        by_mount[c] = np.zeros(len(points), dtype=rows[c].dtype)
        np.add.at(by_mount[c], codes, rows[c])
    return _per_id(rank, rows), {"ranks": rank_row, "steps": steps, "mounts": by_mount}


def rows(reduced: Sequence[Dict[str, object]]) -> Dict[str, pd.DataFrame]:
    """The per-rank tables' frames {"ranks", "steps", "mounts"} of several
    reduce_log results (their second halves)."""
    if not reduced:
        return {"ranks": empty(RANK_ROWS), "steps": empty(STEP_ROWS), "mounts": empty(MOUNT_ROWS)}
    mounts = {c: np.concatenate([r["mounts"][c] for r in reduced]) for c in MOUNT_ROWS}
    return {"ranks": pd.DataFrame([r["ranks"] for r in reduced], columns=list(RANK_ROWS)).astype(RANK_ROWS),
            "steps": pd.concat([r["steps"] for r in reduced], ignore_index=True).astype(STEP_ROWS),
            "mounts": pd.DataFrame(mounts, columns=list(MOUNT_ROWS)).astype(MOUNT_ROWS)}


def _per_id(rank: int, rows: Dict[str, np.ndarray]) -> RankFiles:
    """A rank's rows (a file may have a POSIX and a STDIO record) added by id."""
    ids = rows["id"]
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    first = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if len(ids) else np.zeros(0, dtype=np.int64)
    total = lambda c: np.add.reduceat(rows[c][order], first) if len(first) else rows[c][:0]   # noqa: E731
    return RankFiles(rank, ids[first], rows["path"][order][first], rows["mount"][order][first],
                     total("bytes_read"), total("bytes_written"), total("opens"),
                     {c: total(c) for c in KERNEL_SUMS}, {c: total(c) for c in PARTS})


def _with_kernel_files(rows: Dict[str, np.ndarray], log: pathlib.Path) -> Dict[str, np.ndarray]:
    """The rows with KERNEL_SUMS columns, from the step series beside the
    log: a file's figures on its first row (its POSIX and STDIO rows are
    added by id later), and a row of its own for a file only the kernel-side
    figures hold (a memmap made before the window, say)."""
    n = len(rows["id"])
    rows = {**rows, **{c: np.zeros(n, dtype=np.int64) for c in KERNEL_SUMS}}
    got = _kernel_files(log)
    if got is None:
        return rows
    ids, paths, sums = got
    order = np.argsort(rows["id"], kind="stable")
    sorted_ids = rows["id"][order]
    at = np.searchsorted(sorted_ids, ids)
    found = sorted_ids[np.minimum(at, n - 1)] == ids if n else np.zeros(len(ids), dtype=bool)
    first_row = order[at[found]]          # the stable sort keeps an id's first row first
    for c in KERNEL_SUMS:
        rows[c][first_row] += sums[c][found]
    new = ~found
    if not new.any():
        return rows
    zeros = {c: np.zeros(int(new.sum()), dtype=v.dtype) for c, v in rows.items()}
    extra = {**zeros, "id": ids[new], "path": paths[new], **{c: sums[c][new] for c in KERNEL_SUMS}}
    return {c: np.concatenate([rows[c], extra[c]]) for c in rows}


def _kernel_files(log: pathlib.Path):
    """(ids, paths, {column: sums}) of the files with kernel-side figures in
    the rank's step series, sorted by id; None when it has none. Its coverage
    record, or else the series' Parquet statistics, say when there are none,
    so most ranks never read the series for them."""
    import json
    from tfdarshan.steps.series import read_series
    stem = log.name[: -len(".darshan")]
    try:
        cov = json.loads(log.with_name(stem + ".coverage.json").read_text())
    except (OSError, ValueError):
        cov = None
    if isinstance(cov, dict) and cov.get("beyond_darshan_files") == 0:
        return None
    series = log.with_name(stem + ".step_files.parquet")
    if not series.exists() or _all_zero(series, KERNEL_SUMS):
        return None
    try:
        files = read_series(series, ["record_id", *KERNEL_SUMS])
    except TfdarshanError:
        return None       # a damaged series costs only these figures: the rank's Darshan records still count
    files = files[(files[list(KERNEL_SUMS)] != 0).any(axis=1)]
    if files.empty:
        return None
    g = files.groupby("record_id", sort=True).agg(
        {**{c: "sum" for c in KERNEL_SUMS}, **({"path": "first"} if "path" in files else {})})
    paths = g["path"].to_numpy(dtype=object) if "path" in g else np.full(len(g), None, dtype=object)
    paths = np.array([p if isinstance(p, str) else "" for p in paths], dtype=object)
    return (g.index.to_numpy().astype(np.uint64), paths,
            {c: g[c].to_numpy().astype(np.int64) for c in KERNEL_SUMS})


def _records(log: str) -> Tuple[Dict[str, np.ndarray], dict]:
    """A log's POSIX then STDIO records as columns {"id", "path", "bytes_read",
    "bytes_written", read_time, write_time, meta_time, "opens"}, and its snapshot meta. Current-
    format logs are decoded here from the two module regions alone (the
    trace and heatmap stay compressed); older ones are read by PyDarshan."""
    from tfdarshan.logs.darshan_checker import check_module_region, inspect_log
    from tfdarshan.logs.darshan_format import names_at
    from tfdarshan.logs.darshan_reader import decode_records, meta_from_regions
    info = inspect_log(log, modules=False)
    parts = []
    if info["current"]:
        meta = meta_from_regions(log, info)
        names = names_at(info["names_raw"], *info["name_bytes"])
        name_ids, name_paths = names[0], np.array(names[1], dtype=object)
        # a damaged log may name an id twice: the last name wins, as read_darshan_log reads it
        order = np.argsort(name_ids, kind="stable")
        # (a log with no records names none: nothing to keep, and no last one)
        last = np.r_[name_ids[order][1:] != name_ids[order][:-1], True][: len(name_ids)]
        name_ids, name_paths = name_ids[order][last], name_paths[order][last]
        with open(log, "rb") as f:
            for module in ("POSIX", "STDIO"):
                if module not in info["maps"]:
                    continue
                off, length = info["maps"][module]
                raw = os.pread(f.fileno(), length, off)
                rec = decode_records(module, check_module_region(module, raw, info["comp_type"],
                                                                 info["mod_ver"][module], log))
                ints, floats = (list(x) for x in C.names(module))
                c, fl = rec["c"], rec["f"]
                ids = rec["id"].astype(np.uint64)
                at = np.minimum(np.searchsorted(name_ids, ids), max(len(name_ids) - 1, 0))
                named = name_ids[at] == ids if len(name_ids) else np.zeros(len(ids), dtype=bool)
                parts.append({
                    "id": np.where(named, ids, UNNAMED),
                    "path": np.where(named, name_paths[at] if len(name_paths) else "", "").astype(object),
                    "bytes_read": c[:, ints.index(f"{module}_BYTES_READ")].astype(np.int64),
                    "bytes_written": c[:, ints.index(f"{module}_BYTES_WRITTEN")].astype(np.int64),
                    **{part: fl[:, floats.index(f"{module}_{counter}")].astype(np.float64)
                       for part, counter in DARSHAN.items()},
                    "opens": c[:, ints.index(f"{module}_OPENS")].astype(np.int64)})
    else:
        from tfdarshan.logs.darshan_log import read_darshan_log
        snap = read_darshan_log(log)
        meta = snap.meta
        for module in ("POSIX", "STDIO"):
            f = snap.frame(module)
            path = f["path"].to_numpy(dtype=object)
            parts.append({
                "id": np.where(path == "", UNNAMED, f["record_id"].to_numpy(np.uint64)), "path": path,
                "bytes_read": f[f"{module}_BYTES_READ"].to_numpy(np.int64),
                "bytes_written": f[f"{module}_BYTES_WRITTEN"].to_numpy(np.int64),
                **{part: f[f"{module}_{counter}"].to_numpy(np.float64) for part, counter in DARSHAN.items()},
                "opens": f[f"{module}_OPENS"].to_numpy(np.int64)})
    cols = ("id", "path", "bytes_read", "bytes_written", *PARTS, "opens")
    if not parts:
        return {c: np.zeros(0, dtype={"id": np.uint64, "path": object, **dict.fromkeys(PARTS, np.float64)}.get(c, np.int64))
                for c in cols}, meta
    return {c: np.concatenate([p[c] for p in parts]) for c in cols}, meta


def _all_zero(path: pathlib.Path, columns) -> bool:
    """Whether a Parquet file's own statistics (its footer, not its data)
    say that every one of `columns` it has is 0 in every row."""
    import pyarrow
    import pyarrow.parquet as pq
    try:
        md = pq.ParquetFile(path).metadata
    except (pyarrow.ArrowException, OSError):
        return False            # the reader that follows names the damage
    names = md.schema.names
    for g in range(md.num_row_groups):
        for j in (names.index(c) for c in columns if c in names):
            st = md.row_group(g).column(j).statistics
            if st is None or not st.has_min_max or st.min != 0 or st.max != 0:
                return False
    return True


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
    from tfdarshan.steps.series import STEP_COLUMNS, read_series
    series = log.with_name(log.name[: -len(".darshan")] + ".steps.parquet")
    if not series.exists():
        return empty(STEP_ROWS)
    s = W.of_series(read_series(series, STEP_COLUMNS))
    return pd.DataFrame({
        "step": s["step"].astype("int64"), "rank": rank, "bytes_read": s["bytes_read"].astype("int64"),
        "bytes_written": s["bytes_written"].astype("int64"), **{part: s[part].astype("float64") for part in PARTS},
        W.WAIT_TIME: s["wait"], "duration": s["duration"], "counted": s["counted"]}).astype(STEP_ROWS)
