"""I/O that Darshan's counters cannot see, as tfdarshan counts it beside
them: kernel-side copies (copy_file_range, sendfile, splice) and data read
through memory-mapped files. The one definition of these figures: their
columns in snapshots (Snapshot.extra) and in the step series, the labels of
the mechanisms, and the per-file summary the file table, the tab, the
advice and the coverage report use. Darshan's own counters never hold them.

Copies are exact (the bytes each call returned, on its source and its
destination file, with the call's time). Mapped bytes are an estimate: the
pages of a mapping the process had in its page tables at some sample
(/proc/self/pagemap, at every collect and before a mapping goes). The
kernel maps cached neighbours with each fault (64 KiB of fault-around, or a
whole large folio: 2 MiB on ext4 here), so scattered access is overcounted;
pages reclaimed between two samples are missed."""
from __future__ import annotations

from typing import Dict, List

import numpy as np
import pandas as pd

# snapshot column: the shim's field. The step series uses the same names in
# lower case (copy_bytes_read, ...); times are seconds there and here.
FIELDS = {
    "COPY_BYTES_READ": "KC_BYTES_READ",          # read from this file by kernel-side copies
    "COPY_BYTES_WRITTEN": "KC_BYTES_WRITTEN",    # written to it by them
    "COPY_READ_TIME": "T_KC_READ",               # time of the copies that read it
    "COPY_WRITE_TIME": "T_KC_WRITE",             # time of the copies that wrote it
    "COPY_TIME": "T_KC",                         # each copy once (its source, else its destination): sums add up
    "COPY_FILE_RANGE_BYTES": "KC_CFR_BYTES",     # bytes each mechanism moved in or out of the file
    "SENDFILE_BYTES": "KC_SENDFILE_BYTES",
    "SPLICE_BYTES": "KC_SPLICE_BYTES",
    "MMAP_BYTES": "MMAP_BYTES",                  # brought in through mappings (an estimate)
    # each copy once, by mechanism (on its source, else its destination, as COPY_TIME): sums over
    # files are what the calls returned, where the columns above count a copy on both its files
    "COPY_FILE_RANGE_ONCE": "KC_CFR_ONCE",
    "SENDFILE_ONCE": "KC_SENDFILE_ONCE",
    "SPLICE_ONCE": "KC_SPLICE_ONCE",
}
TIME_FIELDS = ("COPY_READ_TIME", "COPY_WRITE_TIME", "COPY_TIME")
SERIES = {c.lower(): f for c, f in FIELDS.items()}
SERIES_TIME_FIELDS = tuple(c.lower() for c in TIME_FIELDS)

# a mechanism's bytes per file (both ends of a copy) -> the same counted once a copy
ONCE = {"COPY_FILE_RANGE_BYTES": "COPY_FILE_RANGE_ONCE", "SENDFILE_BYTES": "SENDFILE_ONCE",
        "SPLICE_BYTES": "SPLICE_ONCE"}
SERIES_ONCE = {k.lower(): v.lower() for k, v in ONCE.items()}
# a step's totals (steps/series.py) hold each copy once in the mechanisms' own columns
STEP_COPY_COLUMNS = tuple(SERIES_ONCE)

# how a file's data moved, as the table and the tab label it: the column that says so
MECHANISMS = {"copy_file_range": "COPY_FILE_RANGE_BYTES", "sendfile": "SENDFILE_BYTES",
              "splice": "SPLICE_BYTES", "mmap": "MMAP_BYTES"}
ESTIMATE_NOTE = ("mmap bytes are an estimate: pages the process mapped, read from /proc/self/pagemap; the kernel "
                 "maps neighbouring cached pages at each fault, so scattered reads are overcounted")
# /proc/self/io counts copy_file_range and sendfile in rchar/wchar, but neither splice nor page faults
KERNEL_COUNTED = ("COPY_FILE_RANGE_BYTES", "SENDFILE_BYTES")


def empty_columns(n: int = 0) -> Dict[str, np.ndarray]:
    return {c: np.zeros(n, dtype=np.float64 if c in TIME_FIELDS else np.int64) for c in FIELDS}


def dtypes() -> Dict[str, type]:
    return {c: (np.float64 if c in TIME_FIELDS else np.int64) for c in FIELDS}


def from_rows(rows: np.ndarray, row_index: Dict[str, int], ticks_per_second: float) -> Dict[str, np.ndarray]:
    """The columns from the shim's rows (times from ticks to seconds)."""
    out = {}
    for c, f in FIELDS.items():
        v = rows[:, row_index[f]] if len(rows) else np.zeros(0, dtype=np.int64)
        out[c] = v / ticks_per_second if c in TIME_FIELDS else v.astype(np.int64)
    return out


def active(extra: pd.DataFrame) -> pd.Series:
    """Rows of an extra table with any kernel-side I/O."""
    if extra.empty:
        return pd.Series(False, index=extra.index)
    return (extra[list(FIELDS)] != 0).any(axis=1)


def how_read(extra: pd.DataFrame) -> pd.Series:
    """Per row, the mechanisms that moved its data ("sendfile, mmap"), "" for none."""
    if extra.empty:
        return pd.Series([], dtype=object, index=extra.index)
    return pd.Series(how_of({name: extra[col].to_numpy() for name, col in MECHANISMS.items()}, len(extra)),
                     index=extra.index, dtype=object)


def how_of_table(t: pd.DataFrame) -> np.ndarray:
    """how_of() for a table with the step series' column names (the analysis tables')."""
    return how_of({name: t[col.lower()].to_numpy() for name, col in MECHANISMS.items()}, len(t))


def how_of(bytes_by_mechanism: Dict[str, np.ndarray], n: int) -> np.ndarray:
    """Per row, the mechanisms (MECHANISMS' names) with bytes, joined; "" for
    none. Each distinct set of mechanisms is joined once: a job's file
    table has 100,000s of rows."""
    if not bytes_by_mechanism or not n:
        return np.full(n, "", dtype=object)
    # each row's set of mechanisms as a bit mask; each mask's text joined once
    names = list(bytes_by_mechanism)
    mask = np.zeros(n, dtype=np.int64)
    for bit, name in enumerate(names):
        mask |= (np.asarray(bytes_by_mechanism[name]) > 0).astype(np.int64) << bit
    masks = np.unique(mask)
    texts = np.array([", ".join(name for bit, name in enumerate(names) if m >> bit & 1) for m in masks], dtype=object)
    return texts[np.searchsorted(masks, mask)]


def per_file(extra: pd.DataFrame) -> pd.DataFrame:
    """One row per file with kernel-side I/O: path, module, bytes read
    (copies read + mapped), bytes written by copies, time in copies, the
    mapped bytes (an estimate) and how it was read; busiest first."""
    cols = ["record_id", "path", "module", "bytes_read", "bytes_written", "copy_time", "mmap_bytes", "how"]
    if extra.empty:
        return pd.DataFrame(columns=cols)
    e = extra[active(extra)]
    if e.empty:
        return pd.DataFrame(columns=cols)
    out = pd.DataFrame({
        "record_id": e["record_id"].to_numpy(), "path": pd.Series(e["path"].to_numpy(), dtype=object),
        "module": e["module"].to_numpy(),
        "bytes_read": (e["COPY_BYTES_READ"] + e["MMAP_BYTES"]).to_numpy(),
        "bytes_written": e["COPY_BYTES_WRITTEN"].to_numpy(),
        "copy_time": (e["COPY_READ_TIME"] + e["COPY_WRITE_TIME"]).to_numpy(),
        "mmap_bytes": e["MMAP_BYTES"].to_numpy(), "how": how_read(e).to_numpy()})
    return out.sort_values(["bytes_read", "bytes_written"], ascending=False, kind="stable").reset_index(drop=True)


def copied_bytes(extra: pd.DataFrame) -> int:
    """Bytes moved by kernel-side copies, each copy once (what the calls
    returned): a copy between two recorded files is on both of their rows."""
    if extra.empty:
        return 0
    return int(sum(extra[c].sum() for c in ONCE.values()))


def copied_bytes_of_table(t: pd.DataFrame) -> int:
    """copied_bytes() for a table with the step series' column names."""
    if t.empty:
        return 0
    return int(sum(t[c].sum() for c in SERIES_ONCE.values() if c in t))


def kernel_counted_bytes(extra: pd.DataFrame) -> int:
    """What of the copies /proc/self/io also counts (its rchar and wchar
    see copy_file_range and sendfile, not splice), for the coverage share."""
    if extra.empty:
        return 0
    return int(sum(extra[c].sum() for c in KERNEL_COUNTED))


def describe(files: pd.DataFrame, limit: int = 5) -> List[str]:
    """Lines naming the files per_file() lists: "<path>: 64.0 MiB through mmap (estimate)"."""
    out = []
    for r in files.head(limit).itertuples():
        parts = []
        if r.bytes_read - r.mmap_bytes > 0:
            parts.append(f"{_mib(r.bytes_read - r.mmap_bytes)} read")
        if r.bytes_written > 0:
            parts.append(f"{_mib(r.bytes_written)} written")
        if r.mmap_bytes > 0:
            parts.append(f"{_mib(r.mmap_bytes)} through mmap (estimate)")
        out.append(f"{r.path}: {', '.join(parts)} by {r.how}")
    if len(files) > limit:
        out.append(f"... and {len(files) - limit} more files")
    return out


def describe_bytes(n: float) -> str:
    """Bytes as describe() writes them: "64.0 MiB"."""
    return _mib(n)


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n:.0f} B"
