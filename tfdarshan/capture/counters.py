"""Darshan's counter names (read from PyDarshan's own tables) and how each
one is computed from the shim's rows and combined over a window."""
from __future__ import annotations

import functools
from typing import Dict, List

import numpy as np
import pandas as pd

MODULES = ("POSIX", "STDIO")

# How a counter behaves over a window (later minus earlier):
SUM = "sum"            # additive: later - earlier
MAX = "max"            # largest value seen in the window
FIRST = "first"        # earliest timestamp in the window (0 = never)
LAST = "last"          # latest timestamp in the window
MAXTIME = "maxtime"    # slowest call's duration, and (paired) its size
MAXTIME_SIZE = "maxtime_size"
STATIC = "static"      # a property of the file (mode, alignment)
TOP4 = "top4"          # the four commonest access sizes / strides
ZERO = "zero"          # rank statistics: zero outside MPI, as Darshan writes them

_STATIC = {"MODE", "RENAMED_FROM", "MEM_ALIGNMENT", "FILE_ALIGNMENT"}
_MAX = {"MAX_BYTE_READ", "MAX_BYTE_WRITTEN"}
_MAXTIME = {"F_MAX_READ_TIME": "MAX_READ_TIME_SIZE", "F_MAX_WRITE_TIME": "MAX_WRITE_TIME_SIZE"}
_DURATIONS = {"F_READ_TIME": "T_READ", "F_WRITE_TIME": "T_WRITE", "F_META_TIME": "T_META"}


@functools.lru_cache(maxsize=None)
def names(module: str) -> tuple:
    """(integer counter names, float counter names) in PyDarshan's order."""
    from darshan.backend.cffi_backend import counter_names, fcounter_names
    return tuple(counter_names(module)), tuple(fcounter_names(module))


def base(name: str) -> str:
    """POSIX_F_READ_TIME -> F_READ_TIME"""
    return name.split("_", 1)[1]


@functools.lru_cache(maxsize=None)
def kind(module: str, name: str) -> str:
    b = base(name)
    if "RANK" in b:
        return ZERO
    if b.startswith(("ACCESS", "STRIDE")):
        return TOP4
    if b in _STATIC:
        return STATIC
    if b in _MAX:
        return MAX
    if b in _MAXTIME:
        return MAXTIME
    if b in _MAXTIME.values():
        return MAXTIME_SIZE
    if b.endswith("_START_TIMESTAMP"):
        return FIRST
    if b.endswith("_END_TIMESTAMP"):
        return LAST
    return SUM


def columns(module: str) -> List[str]:
    ints, floats = names(module)
    return ["record_id", "path", *ints, *floats]


def empty_frame(module: str) -> pd.DataFrame:
    ints, floats = names(module)
    data = {"record_id": pd.Series(dtype=np.uint64), "path": pd.Series(dtype=object)}
    data.update({c: pd.Series(dtype=np.int64) for c in ints})
    data.update({c: pd.Series(dtype=np.float64) for c in floats})
    return pd.DataFrame(data)


def from_native(module: str, rows: np.ndarray, row_index: Dict[str, int], clock,
                ext_prefix: str = "") -> Dict[str, np.ndarray]:
    """Darshan counter columns computed from the shim's rows.

    `ext_prefix` picks the extremes: "" for the whole run, "I_" for the
    interval the rows were collected in. ACCESS/STRIDE come from the value
    tables and are left at zero here."""
    ints, floats = names(module)
    n = len(rows)
    out: Dict[str, np.ndarray] = {}

    def col(field):
        return rows[:, row_index[field]] if n else np.zeros(0, dtype=np.int64)

    for c in ints:
        b, k = base(c), kind(module, c)
        if k == SUM or k == STATIC:
            out[c] = col(b).astype(np.int64)
        elif k in (MAX, MAXTIME_SIZE):
            out[c] = col(ext_prefix + b).astype(np.int64)
        else:
            out[c] = np.zeros(n, dtype=np.int64)
    for c in floats:
        b, k = base(c), kind(module, c)
        if b in _DURATIONS:
            out[c] = clock.duration(col(_DURATIONS[b]))
        elif k == MAXTIME:
            out[c] = clock.duration(col(ext_prefix + b[2:]))
        elif k in (FIRST, LAST):
            event = b[2:].replace("_TIMESTAMP", "")   # F_READ_START_TIMESTAMP -> READ_START
            out[c] = clock.seconds(col(ext_prefix + event))
        else:
            out[c] = np.zeros(n, dtype=np.float64)
    return out


TOP4_COLUMNS = [f"POSIX_{w}{i}_{s}" for w, s2 in (("STRIDE", "STRIDE"), ("ACCESS", "ACCESS"))
                for s in (s2, "COUNT") for i in range(1, 5)]


def top4(values: pd.DataFrame) -> pd.DataFrame:
    """ACCESS1..4 and STRIDE1..4 (with counts) from value frequencies.

    Darshan keeps the four most frequent non-zero values, ties broken by the
    larger value first (DARSHAN_UPDATE_COMMON_VAL_COUNTERS)."""
    cols = TOP4_COLUMNS
    keep = (values["value"].to_numpy() != 0) & (values["count"].to_numpy() > 0)
    rid = values["record_id"].to_numpy(dtype=np.uint64)[keep]
    if not len(rid):
        return pd.DataFrame(columns=["record_id", *cols]).astype({"record_id": np.uint64})
    kind = values["kind"].to_numpy(dtype=np.int64)[keep]
    value = values["value"].to_numpy(dtype=np.int64)[keep]
    count = values["count"].to_numpy(dtype=np.int64)[keep]
    # by record, kind, then count and value both descending (lexsort: last key first)
    order = np.lexsort((-value, -count, kind, rid))
    rid, kind, value, count = rid[order], kind[order], value[order], count[order]
    group = np.r_[True, (rid[1:] != rid[:-1]) | (kind[1:] != kind[:-1])]
    starts = np.flatnonzero(group)
    rank = np.arange(len(rid)) - np.repeat(starts, np.diff(np.r_[starts, len(rid)]))
    top = rank < 4
    records, row = np.unique(rid, return_inverse=True)
    out = np.zeros((len(records), len(cols)), dtype=np.int64)
    # columns: STRIDE1..4, STRIDE counts 1..4, ACCESS1..4, ACCESS counts 1..4; kind 0 is access
    base = np.where(kind == 0, 8, 0)
    out[row[top], (base + rank)[top]] = value[top]
    out[row[top], (base + 4 + rank)[top]] = count[top]
    wide = pd.DataFrame(out, columns=cols)
    wide.insert(0, "record_id", records.astype(np.uint64))
    return wide
