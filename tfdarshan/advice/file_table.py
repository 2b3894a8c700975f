"""Per-file figures from a Snapshot, as a DataFrame and as console text."""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np
import pandas as pd

from tfdarshan.capture import mounts as M
from tfdarshan.capture.snapshot import Snapshot


def file_table(snap: Snapshot, mount_table: Optional[Iterable[M.Mount]] = None) -> pd.DataFrame:
    """One row per POSIX file: what a user asks first about their input.

    bandwidth = bytes moved / time spent in reads and writes (Darshan's
    per-file I/O time); metadata time (open, stat, seek, close) is separate."""
    p = snap.posix
    if p.empty:
        return pd.DataFrame(columns=["path", "tier", "bytes_read", "bytes_written", "reads", "writes",
                                     "opens", "stats", "read_time", "meta_time", "bandwidth",
                                     "mean_request", "seq_fraction", "zero_reads"])
    mts = list(mount_table) if mount_table is not None else M.current()
    zero = snap.extra.set_index("record_id")["ZERO_READS"] if len(snap.extra) else pd.Series(dtype=np.int64)
    io_time = p["POSIX_F_READ_TIME"] + p["POSIX_F_WRITE_TIME"]
    moved = p["POSIX_BYTES_READ"] + p["POSIX_BYTES_WRITTEN"]
    ops = p["POSIX_READS"] + p["POSIX_WRITES"]
    t = pd.DataFrame({
        "path": p["path"].astype(object),
        "tier": tiers_of(p["path"], mts),
        "bytes_read": p["POSIX_BYTES_READ"],
        "bytes_written": p["POSIX_BYTES_WRITTEN"],
        "reads": p["POSIX_READS"],
        "writes": p["POSIX_WRITES"],
        "opens": p["POSIX_OPENS"],
        "stats": p["POSIX_STATS"],
        "read_time": p["POSIX_F_READ_TIME"],
        "meta_time": p["POSIX_F_META_TIME"],
        "bandwidth": np.where(io_time > 0, moved / io_time.where(io_time > 0, 1), np.nan),
        "mean_request": np.where(ops > 0, moved / ops.where(ops > 0, 1), np.nan),
        "seq_fraction": np.where(p["POSIX_READS"] > 0,
                                 p["POSIX_SEQ_READS"] / p["POSIX_READS"].where(p["POSIX_READS"] > 0, 1), np.nan),
        "zero_reads": zero.reindex(p["record_id"].values).fillna(0).astype(np.int64).values,
    })
    return t.sort_values(["bytes_read", "bytes_written"], ascending=False).reset_index(drop=True)


def tiers_of(paths: pd.Series, mounts) -> list:
    """The storage tier label of each path, looked up once per directory."""
    import os
    dirs = paths.map(os.path.dirname)
    label = {d: M.label(d + "/", mounts) for d in dirs.unique()}
    return dirs.map(label).tolist()


def human_bytes(n: float) -> str:
    if n is None or (isinstance(n, float) and np.isnan(n)):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n}"


def human_time(s: float) -> str:
    if s is None or (isinstance(s, float) and np.isnan(s)):
        return "-"
    a = abs(s)
    if a < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if a < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def render_text(table: pd.DataFrame, limit: int = 20, width: int = 60) -> str:
    """The per-file table for a terminal: the busiest files first."""
    if table.empty:
        return "no file I/O recorded"
    rows = []
    for r in table.head(limit).itertuples():
        path = r.path if len(r.path) <= width else "..." + r.path[-(width - 3):]
        rows.append([path, r.tier, human_bytes(r.bytes_read), f"{r.reads}",
                     human_bytes(r.mean_request), f"{r.read_time * 1e3:.2f}",
                     "-" if np.isnan(r.bandwidth) else f"{r.bandwidth / 2**20:.0f}",
                     "-" if np.isnan(r.seq_fraction) else f"{100 * r.seq_fraction:.0f}%",
                     f"{r.zero_reads}", f"{r.opens}"])
    head = ["file", "tier", "read", "reads", "mean req", "read ms", "MiB/s", "seq", "0-len", "opens"]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = lambda cells: "  ".join(str(c).ljust(w) if i < 2 else str(c).rjust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    lines = [fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in rows]
    if len(table) > limit:
        lines.append(f"... and {len(table) - limit} more files")
    total_read = table["bytes_read"].sum()
    total_time = table["read_time"].sum()
    lines.append(f"{len(table)} files, {human_bytes(total_read)} read in {table['reads'].sum()} reads, "
                 f"{total_time:.3f} s in reads"
                 + (f" ({total_read / total_time / 2**20:.0f} MiB/s)" if total_time > 0 else ""))
    return "\n".join(lines)
