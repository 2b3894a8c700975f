"""Per-file figures from a Snapshot, as a DataFrame and as console text."""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np
import pandas as pd

from tfdarshan.capture import counters as C
from tfdarshan.capture import kernel_io as K
from tfdarshan.capture import mounts as M
from tfdarshan.capture.snapshot import Snapshot
from tfdarshan.measures import time_in_calls as T
from tfdarshan.measures.bandwidth import bandwidth
from tfdarshan.measures.human import count, human_bytes, percent


COLUMNS = ["path", "interface", "mount", "bytes_read", "bytes_written", "reads", "writes", "opens", "stats",
           "read_time", "write_time", "meta_time", "bandwidth", "mean_request", "seq_fraction", "zero_reads",
           # beyond Darshan's counters (kernel_io.py): how the rest moved, and how much
           "how", "copy_bytes_read", "copy_bytes_written", "copy_time", "mmap_bytes"]


def file_table(snap: Snapshot, mount_table: Optional[Iterable[M.Mount]] = None) -> pd.DataFrame:
    """One row per file and interface (POSIX, STDIO): what a user asks
    first about their input. The rows add up to the session's totals.

    bandwidth = bytes moved / data_time, the time spent in reads and writes
    (measures/bandwidth.py); metadata time (open, stat, seek, close) is separate.
    A figure nobody counted is NaN, not 0: STDIO has no stat or sequential
    counters, and a Darshan log shows 0-byte reads only through its trace.
    Darshan's columns hold Darshan's counters only; kernel-side copies and
    mapped reads (mmap_bytes, an estimate) have their own columns, and
    `how` names the mechanisms ("sendfile, mmap"). A file with only those
    in the window has 0 in Darshan's columns."""
    parts = [t for t in (_rows(snap.posix, "POSIX", snap), _rows(snap.stdio, "STDIO", snap),
                         _rows(kernel_only_rows(snap), "POSIX", snap)) if len(t)]
    if not parts:
        return pd.DataFrame(columns=COLUMNS)
    t = pd.concat(parts, ignore_index=True)
    t.insert(2, "mount", M.labels(t["path"], mount_table if mount_table is not None else M.current()))
    # busiest first, whatever moved the bytes
    moved = t["bytes_read"] + t["copy_bytes_read"] + t["mmap_bytes"]
    order = np.lexsort((-t["bytes_written"].to_numpy(np.float64), -moved.to_numpy(np.float64)))
    return t.iloc[order].reset_index(drop=True)[COLUMNS]


def kernel_only_rows(snap: Snapshot) -> pd.DataFrame:
    """Darshan-shaped zero rows for the POSIX files whose only I/O in the
    snapshot was kernel-side (a memmap read in a window opened after it)."""
    e = snap.extra
    if e.empty:
        return C.empty_frame("POSIX")
    e = e[(e["module"] == "POSIX") & K.active(e) & ~e["record_id"].isin(snap.posix["record_id"])]
    if e.empty:
        return C.empty_frame("POSIX")
    frame = C.empty_frame("POSIX").reindex(range(len(e)))
    frame = frame.fillna({c: 0 for c in frame.columns if c not in ("record_id", "path")})
    frame["record_id"] = e["record_id"].to_numpy()
    frame["path"] = pd.Series(e["path"].to_numpy(), dtype=object)
    return frame


def _rows(p: pd.DataFrame, module: str, snap: Snapshot) -> pd.DataFrame:
    if p.empty:
        return p

    def c(name):
        col = f"{module}_{name}"
        return p[col].astype(np.float64) if col in p else pd.Series(np.nan, index=p.index)

    kernel = _kernel_columns(snap, p, module)
    times = {part: c(counter) for part, counter in T.DARSHAN.items()}     # read_time, write_time, meta_time
    zero = pd.Series(np.nan, index=p.index)
    if module == "POSIX" and snap.meta.get("zero_reads_known", True):
        counted = snap.extra.set_index("record_id")["ZERO_READS"] if len(snap.extra) else pd.Series(dtype=np.int64)
        zero = pd.Series(counted.reindex(p["record_id"].values).fillna(0).to_numpy(np.float64), index=p.index)
    # request size and sequential share are over the data reads: the
    # end-of-file read (0 bytes, and sequential by Darshan's rule) would
    # halve both for a file read in one request
    eof = zero.fillna(0.0)
    data_reads = c("READS") - eof
    moved = c("BYTES_READ") + c("BYTES_WRITTEN")
    ops = data_reads + c("WRITES")
    follow_ons = data_reads - 1             # the first read of a file is never sequential
    seq = (c("SEQ_READS") - eof).clip(lower=0)
    return pd.DataFrame({
        "path": p["path"].astype(object), "interface": module,
        "bytes_read": p[f"{module}_BYTES_READ"], "bytes_written": p[f"{module}_BYTES_WRITTEN"],
        "reads": p[f"{module}_READS"], "writes": p[f"{module}_WRITES"], "opens": p[f"{module}_OPENS"],
        "stats": c("STATS"),
        **times,
        "bandwidth": bandwidth(moved, T.data_time(times)),
        "mean_request": np.where(ops > 0, moved / ops.where(ops > 0, 1), np.nan),
        "seq_fraction": np.where(follow_ons > 0, seq / follow_ons.where(follow_ons > 0, 1), np.nan),
        "zero_reads": zero, **kernel,
    })


def _kernel_columns(snap: Snapshot, p: pd.DataFrame, module: str) -> dict:
    """The kernel-side columns of rows p (0 and "" where there were none)."""
    e = snap.extra
    e = e[e["module"] == module].drop_duplicates("record_id").set_index("record_id") if len(e) else e
    ids = p["record_id"].to_numpy()
    if e.empty:
        zeros = np.zeros(len(p))
        return {"how": pd.Series([""] * len(p), index=p.index, dtype=object), "copy_bytes_read": zeros,
                "copy_bytes_written": zeros, "copy_time": zeros, "mmap_bytes": zeros}
    e = e.reindex(ids)
    known = e["module"].notna().to_numpy()
    e = e.fillna({c: 0 for c in K.FIELDS})
    how = np.where(known, K.how_read(e.fillna({"path": ""})).to_numpy(), "")
    return {"how": pd.Series(how, index=p.index, dtype=object),
            "copy_bytes_read": e["COPY_BYTES_READ"].to_numpy(np.float64),
            "copy_bytes_written": e["COPY_BYTES_WRITTEN"].to_numpy(np.float64),
            "copy_time": (e["COPY_READ_TIME"] + e["COPY_WRITE_TIME"]).to_numpy(np.float64),
            "mmap_bytes": e["MMAP_BYTES"].to_numpy(np.float64)}


def render_text(table: pd.DataFrame, limit: int = 20, width: int = 60) -> str:
    """The per-file table for a terminal: the busiest files first."""
    if table.empty:
        return "no file I/O recorded"
    rows = []
    for r in table.head(limit).itertuples():
        path = r.path if len(r.path) <= width else "..." + r.path[-(width - 3):]
        rows.append([path, r.mount, human_bytes(r.bytes_read), f"{r.reads}",
                     human_bytes(r.mean_request), f"{r.read_time * 1e3:.2f}",
                     "-" if np.isnan(r.bandwidth) else f"{r.bandwidth / 2**20:.0f}",
                     "-" if np.isnan(r.seq_fraction) else percent(r.seq_fraction, 0),
                     "?" if np.isnan(r.zero_reads) else f"{r.zero_reads:.0f}", f"{r.opens}", r.interface,
                     _beyond(r)])
    head = ["file", "mount", "read", "reads", "mean req", "read ms", "MiB/s", "seq", "0-len", "opens", "via",
            "beyond Darshan"]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = lambda cells: "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    lines = [fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]
    if len(table) > limit:
        lines.append(f"... and {count(len(table) - limit, 'more file')}")
    total_read = table["bytes_read"].sum()
    read_seconds = table["read_time"].sum()
    lines.append(f"{count(len(table), 'file')}, {human_bytes(total_read)} read in {count(int(table['reads'].sum()), 'read')}, "
                 f"{read_seconds:.3f} s in reads"
                 + (f" ({bandwidth(total_read, read_seconds) / 2**20:.0f} MiB/s)" if read_seconds > 0 else ""))
    lines.append("mean req and seq count data reads only (not the 0-byte read at a file's end); "
                 "'?' is a figure the log does not hold")
    if (table["copy_bytes_read"] + table["copy_bytes_written"] + table["mmap_bytes"]).sum() > 0:
        lines.append("beyond Darshan: bytes Darshan's counters miss, counted by tfdarshan: kernel-side copies "
                     "(read/written) and reads through mmap (~: " + K.ESTIMATE_NOTE.split(": ", 1)[1] + ")")
    return "\n".join(lines)


def _beyond(r) -> str:
    """The kernel-side figures of a row, short: "5.0 MiB/0 B sendfile", "~64.0 MiB mmap"."""
    parts = []
    if r.copy_bytes_read or r.copy_bytes_written:
        parts.append(f"{human_bytes(r.copy_bytes_read)}/{human_bytes(r.copy_bytes_written)}")
    if r.mmap_bytes:
        parts.append(f"~{human_bytes(r.mmap_bytes)}")
    return f"{' '.join(parts)} {r.how}" if parts else ""
