"""The step series on disk: per-step and per-step-per-file Parquet tables
beside each Darshan log, their columns, and reading them back checked."""
from __future__ import annotations

import os
import pathlib

import numpy as np
import pandas as pd
import pyarrow

from tfdarshan.capture import kernel_io as K
from tfdarshan.errors import TfdarshanError
# the optional columns that input wait reads: the step cut short, wall time with input in flight
from tfdarshan.measures.input_wait import CUT_COLUMN, IO_WALL_COLUMN  # noqa: F401

FIELDS = {  # series column: shim field
    "bytes_read": "BYTES_READ", "bytes_written": "BYTES_WRITTEN", "reads": "READS", "writes": "WRITES",
    "opens": "OPENS", "stats": "STATS", "seeks": "SEEKS", "zero_reads": "ZERO_READS",
    "read_time": "T_READ", "write_time": "T_WRITE", "meta_time": "T_META",
    **K.SERIES,     # kernel-side copies and mapped reads, which Darshan's counters cannot see
}
TIME_FIELDS = ("read_time", "write_time", "meta_time", *K.SERIES_TIME_FIELDS)
# series written before these columns existed read them as zero
OPTIONAL_FIELDS = tuple(K.SERIES)

# a step's totals: the per-file fields summed, except that a copy between two
# recorded files is on both their rows, so its mechanism's bytes are summed
# from the fields that hold each copy once (kernel_io.ONCE), which are not
# columns of their own there
STEP_FIELDS = [c for c in FIELDS if c not in K.SERIES_ONCE.values()]
STEP_COLUMNS = ["step", "start", "end", "files", *STEP_FIELDS]
# step labels that are not training steps: a window without step markers is
# one entry; a window with them has its set-up (before the first step
# began) and its wind-down (after the last step ended) apart
WINDOW_STEP, SETUP_STEP, AFTER_STEPS = -1, -2, -3
NOT_STEPS = {WINDOW_STEP: "the window (no step markers)", SETUP_STEP: "set-up, before the first step",
             AFTER_STEPS: "after the last step"}
# optional (older series and the flight recorder's lack them, and then nobody
# counted): what the process read from storage in the step beyond its calls'
# bytes: major page faults, and bytes read from block devices (tf/steps.py)
STORAGE_COLUMNS = ("major_faults", "storage_read_bytes")
FILE_COLUMNS = ["step", "record_id", "module", *FIELDS]


def step_totals(sums) -> dict:
    """A step's totals (STEP_FIELDS) from its files' fields summed (a
    mapping of FIELDS' names to sums, such as a Series): every byte once."""
    return {c: sums[K.SERIES_ONCE.get(c, c)] for c in STEP_FIELDS}


def with_paths(files: pd.DataFrame, snap, mounts) -> pd.DataFrame:
    """The per-file rows with each file's path and mount point, named from
    the snapshot of the same window (a file whose only I/O was kernel-side
    has its path in `extra` alone)."""
    from tfdarshan.capture import mounts as M
    files = files.copy()
    # a file's path from STDIO, else POSIX, else extra (the later tables win)
    named = pd.concat([t[["record_id", "path"]] for t in (snap.extra, snap.posix, snap.stdio)], ignore_index=True)
    named = named.drop_duplicates("record_id", keep="last")
    # each file once (a series repeats it every step it was read in), then every row
    codes, ids = pd.factorize(files["record_id"].to_numpy(np.uint64))
    at = pd.Index(named["record_id"].to_numpy(np.uint64)).get_indexer(ids)
    paths = np.append(named["path"].to_numpy(dtype=object), "")[at]
    points = M.points_of(pd.Series(paths, dtype=object), mounts) if len(paths) else np.zeros(0, dtype=object)
    files["path"] = pd.Series(paths[codes] if len(codes) else paths, dtype=object, index=files.index)
    files["mount"] = points[codes] if len(codes) else points
    return files


def prepare_writer() -> None:
    """Load what writing a series needs (pyarrow's Parquet writer and pandas'
    glue) now: a process told to end has about a second to write its logs."""
    import io
    pd.DataFrame({"x": [0]}).to_parquet(io.BytesIO())


def write_parquet(df: pd.DataFrame, path: pathlib.Path) -> pathlib.Path:
    """Written with a CRC a page, which read_parquet checks: a flipped bit in
    a step's numbers is an unreadable series, not a wrong figure."""
    tmp = path.with_name(f".{path.name}.tmp")
    # paths may hold surrogate escapes (non-UTF-8 names): store them as bytes
    df = df.copy()
    if "path" in df:
        # each distinct path encoded once: a series repeats a file's path every step it is read in
        codes, uniq = pd.factorize(df["path"])
        encoded = np.array([os.fsencode(p) for p in uniq] + [b""], dtype=object)
        df["path"] = encoded[codes]
    df.to_parquet(tmp, index=False, write_page_checksum=True)
    os.replace(tmp, path)
    return path


def read_parquet(path) -> pd.DataFrame:
    """(pages written without a CRC, by older versions, are read unchecked)"""
    df = pd.read_parquet(path, page_checksum_verification=True)
    if "path" in df:
        # each distinct path decoded once: a series repeats a file's path every step it is read in
        # (a missing path is a value too, and fails to decode as it always did)
        codes, uniq = pd.factorize(df["path"], use_na_sentinel=False)
        decoded = np.array([os.fsdecode(p) for p in uniq], dtype=object)
        df["path"] = pd.Series(decoded[codes], dtype=object)
    return df


SERIES_TEXT = ("module", "path", "mount")


def read_series(path: pathlib.Path, columns) -> pd.DataFrame:
    """A step-series parquet file, checked: every column in `columns`
    present, its text columns text and the others finite numbers (the
    views group and add them)."""
    if not path.is_file():
        raise TfdarshanError(f"{path}: step series is not a regular file")
    try:
        df = read_parquet(path)
    except (pyarrow.ArrowException, OSError, ValueError, TypeError, KeyError) as e:   # damage, as pyarrow sees it
        raise TfdarshanError(f"{path}: unreadable step series ({_first_line(e)})") from None
    for c in OPTIONAL_FIELDS:
        if c in columns and c not in df:
            df[c] = np.zeros(len(df), dtype=np.float64 if c in TIME_FIELDS else np.int64)
    missing = [c for c in columns if c not in df]
    if missing:
        raise TfdarshanError(f"{path}: not a step series (no column {', '.join(missing)})")
    for c in SERIES_TEXT:
        # (the columns of a window without I/O come back as float64, and are fine)
        if c in df and len(df) and pd.api.types.infer_dtype(df[c], skipna=False) != "string":
            raise TfdarshanError(f"{path}: step series column {c} is not text")
    for c in columns:
        if c in SERIES_TEXT:
            continue
        v = df[c]
        if not pd.api.types.is_numeric_dtype(v) or pd.api.types.is_bool_dtype(v):
            raise TfdarshanError(f"{path}: step series column {c} is {v.dtype}, not numbers")
        if len(v) and not np.isfinite(v.to_numpy(dtype=np.float64)).all():
            raise TfdarshanError(f"{path}: step series column {c} holds NaN or infinite values")
    for c in STORAGE_COLUMNS:
        if c in df and not (pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
                            and (not len(df) or (df[c].to_numpy(np.float64) >= 0).all())):
            raise TfdarshanError(f"{path}: step series column {c} is not counts")
    if "start" in columns:                  # a per-step table
        if CUT_COLUMN not in df:
            df[CUT_COLUMN] = False
        elif len(df) and not pd.api.types.is_bool_dtype(df[CUT_COLUMN]):
            raise TfdarshanError(f"{path}: step series column {CUT_COLUMN} is {df[CUT_COLUMN].dtype}, not true/false")
        df[CUT_COLUMN] = df[CUT_COLUMN].astype(bool)
    return df


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
