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

FIELDS = {  # series column: shim field
    "bytes_read": "BYTES_READ", "bytes_written": "BYTES_WRITTEN", "reads": "READS", "writes": "WRITES",
    "opens": "OPENS", "stats": "STATS", "seeks": "SEEKS", "zero_reads": "ZERO_READS",
    "read_time": "T_READ", "write_time": "T_WRITE", "meta_time": "T_META",
    **K.SERIES,     # kernel-side copies and mapped reads, which Darshan's counters cannot see
}
TIME_FIELDS = ("read_time", "write_time", "meta_time", *K.SERIES_TIME_FIELDS)
# series written before these columns existed read them as zero
OPTIONAL_FIELDS = tuple(K.SERIES)

STEP_COLUMNS = ["step", "start", "end", "files", *FIELDS]
# step labels that are not training steps: a window without step markers is
# one entry; a window with them has its set-up (before the first step
# began) and its wind-down (after the last step ended) apart
WINDOW_STEP, SETUP_STEP, AFTER_STEPS = -1, -2, -3
NOT_STEPS = {WINDOW_STEP: "the window (no step markers)", SETUP_STEP: "set-up, before the first step",
             AFTER_STEPS: "after the last step"}
# optional (older series lack it): the step the window's end cut short, whose
# duration may include profiler shutdown
CUT_COLUMN = "cut_by_window_end"
# optional (older series, imported logs and retimed ones lack it): seconds of
# the step during which a read or metadata call was in flight on any thread,
# the union of the calls' intervals (native/records_busy.c); never more than
# the step, however many threads read at once
IO_WALL_COLUMN = "io_wall"
FILE_COLUMNS = ["step", "record_id", "module", *FIELDS]


def write_parquet(df: pd.DataFrame, path: pathlib.Path) -> pathlib.Path:
    tmp = path.with_name(f".{path.name}.tmp")
    # paths may hold surrogate escapes (non-UTF-8 names): store them as bytes
    df = df.copy()
    if "path" in df:
        df["path"] = [os.fsencode(p) for p in df["path"]]
    df.to_parquet(tmp, index=False)
    os.replace(tmp, path)
    return path


def read_parquet(path) -> pd.DataFrame:
    df = pd.read_parquet(path)
    if "path" in df:
        df["path"] = pd.Series([os.fsdecode(p) for p in df["path"]], dtype=object)
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
    if "start" in columns:                  # a per-step table
        if CUT_COLUMN not in df:
            df[CUT_COLUMN] = False
        elif len(df) and not pd.api.types.is_bool_dtype(df[CUT_COLUMN]):
            raise TfdarshanError(f"{path}: step series column {CUT_COLUMN} is {df[CUT_COLUMN].dtype}, not true/false")
        df[CUT_COLUMN] = df[CUT_COLUMN].astype(bool)
    return df


def _first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
