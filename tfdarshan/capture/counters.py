"""Darshan's counter names (read from libdarshan-util's own tables) and how
each one is computed from the shim's rows and combined over a window."""
from __future__ import annotations

import functools
import glob
import importlib.util
import pathlib
from typing import Dict, List, Optional

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
    """(integer counter names, float counter names) in PyDarshan's order:
    libdarshan-util's `<module>_counter_names` arrays, up to their
    <MODULE>_NUM_INDICES end mark.

    Read through a binding of our own, not PyDarshan's backend: importing
    that changes the process's working directory while it loads the library
    (darshan.discover_darshan.find_utils), and a profiled program's threads
    opening relative paths at that moment (the flight recorder's first dump
    runs beside the training) would not find their files."""
    ffi, lib = _darshan_util()
    out = []
    for f in ("", "f_"):
        array, end = getattr(lib, f"{module.lower()}_{f}counter_names"), f"{module}_{f.upper()}NUM_INDICES"
        got = []
        while True:
            name = ffi.string(array[len(got)]).decode()
            if name == end:
                break
            got.append(name)
        out.append(tuple(got))
    return tuple(out)


def darshan_util_path() -> Optional[str]:
    """The libdarshan-util the installed `darshan` package ships, found
    without importing the package (its import loads PyDarshan's backend,
    which changes the working directory: see names()); None without one."""
    spec = importlib.util.find_spec("darshan")
    if spec is None or not spec.origin:
        return None
    found = sorted(glob.glob(str(pathlib.Path(spec.origin).resolve().parent.parent / "darshan.libs" /
                                 "libdarshan-util*.so*")))
    return found[0] if found else None


@functools.lru_cache(maxsize=None)
def _darshan_util():
    """(ffi, lib) for libdarshan-util's counter-name tables."""
    import cffi
    path = darshan_util_path()
    if path is None:
        raise ImportError("libdarshan-util not found next to the darshan package")
    ffi = cffi.FFI()
    ffi.cdef("".join(f"extern char *{m.lower()}_{f}counter_names[];" for m in MODULES for f in ("", "f_")))
    return ffi, ffi.dlopen(path)


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
