"""What each file's reads cost now and would cost on a faster tier.

A file's own counters say what its calls took in this run, and one slow
call (a 4.9 ms open among 20 µs ones) would make it look worth staging.
The expected cost now is therefore taken from its peers: files on the same
mount whose mean request size is in the same factor-of-4 class. Per group,
the time of a metadata call (open or stat) and of a read request is the
mean over its files after clipping each file's figure to Tukey's far-out
fences (quartiles -+ 3 IQR): one call's outlier is cut back to what its
peers pay, while a tier's ordinary spread (cold reads of a disk) still
counts, so the totals match what a re-run pays (a plain median predicted
0.6 of the saving a re-run on real tiers achieved). The mean's 95 %
interval gives the range the advice quotes; a file with no peers has a
range from nothing to twice its cost.

Files read through mmap are candidates too, with their mapped bytes (an
estimate: kernel_io.py). Page faults are not calls, so no call measured
their time. What is measured is whether the steps that mapped the file's
pages read from storage (the step series' major page faults and block-
device read bytes): when they read nothing, on a file system where those
count its reads (a local disk's, or memory), the pages came from memory,
so the mapped part cost no storage time and staging saves nothing of it.
(FUSE and network file systems read past the block layer: there the
counts cannot say.) Otherwise it is priced by the
current tier's probed model when one is known (an estimate, said so), and
else left unpriced: no saving claimed, and said so. Never from other
files' reads. On the fast tier it is priced as reads of MAPPED_REQUEST
bytes (the kernel's read-around for a fault)."""
from __future__ import annotations

import os
from typing import Dict, Optional, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tfdarshan.advice import tiers as T
from tfdarshan.capture import mounts as M
from tfdarshan.capture.arrow_text import arrow_paths
from tfdarshan.capture.snapshot import Snapshot
from tfdarshan.measures.time_in_calls import input_io_time, parts_of

COLUMNS = ["path", "size", "tier", "opens", "stats", "reads", "bytes_read", "read_time", "meta_time",
           "current_time", "expected_time", "expected_low", "expected_high", "peers", "predicted_time",
           "saving", "saving_low", "saving_high", "rereads", "on_fast_tier", "meta_unit", "read_unit",
           "mmap_bytes", "mmap_priced"]
MAPPED_REQUEST = 128 * 1024
# how the mapped part of a file was priced (mmap_priced; "" when it was not)
IN_MEMORY = "in memory (the steps that mapped it read nothing from storage)"
PROBED = "the probed tier (an estimate)"
# file systems whose reads from storage the block layer counts (/proc/self/io read_bytes), or held in memory
COUNTED_STORAGE = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "jfs", "vfat", "exfat", "tmpfs",
                             "ramfs", "hugetlbfs"})


def file_costs(snap: Snapshot, fast: T.Tier, tiers: Sequence[T.Tier] = (),
               mapped_storage: Optional[Dict[str, Optional[int]]] = None) -> pd.DataFrame:
    """One row per file read in the snapshot: size, work done, time measured
    now, time expected now (from its peers, with a range), time predicted
    on `fast`, and the saving (expected minus predicted, with a range).
    bytes_read includes mmap_bytes; mmap_priced says how the mapped part
    was priced ("" when it was not). mapped_storage: per path read through
    mmap, what the steps that mapped it read from storage (mapped_input.
    storage_of_mapped: 0 for nothing; None, or a path missing: nobody counted)."""
    mapped = _mapped(snap)
    measured = _measured_costs(snap, fast, tiers)
    if not len(mapped):
        return measured
    return _with_mapped(snap, measured, mapped, fast, tiers, mapped_storage or {})


def _mapped(snap: Snapshot) -> pd.Series:
    """Bytes read through mappings, by POSIX record id (files with some)."""
    e = snap.extra
    if e.empty:
        return pd.Series(dtype=np.int64)
    e = e[(e["module"] == "POSIX") & (e["MMAP_BYTES"] > 0)]
    return e.groupby("record_id")["MMAP_BYTES"].sum()


def _with_mapped(snap: Snapshot, measured: pd.DataFrame, mapped: pd.Series, fast: T.Tier,
                 tiers: Sequence[T.Tier], storage: Dict[str, Optional[int]]) -> pd.DataFrame:
    """The measured files' costs plus their mapped part, and rows for files
    only read through mappings."""
    names = dict(zip(snap.posix["record_id"], snap.posix["path"]))
    names.update(zip(snap.extra["record_id"], snap.extra["path"]))
    mapped_paths = {names.get(r, ""): int(b) for r, b in mapped.items()}
    rows = measured
    only = [x for x in mapped_paths if x not in set(measured["path"])]
    mounts = [M.Mount(m, t) for m, t in snap.meta.get("mounts") or []] or M.current()
    extra = [_mapped_only_row(x, fast, tiers, mounts) for x in only]
    out = pd.concat([rows, pd.DataFrame(extra, columns=COLUMNS)], ignore_index=True) if extra \
        else rows.reset_index(drop=True)
    # (an empty measured table has no types to give the rows added to it)
    out = out.astype({c: float for c in COLUMNS if c not in ("path", "tier", "on_fast_tier", "mmap_priced")})
    out = out.astype({"on_fast_tier": bool, "size": np.int64, "mmap_bytes": np.int64})
    for i, path in enumerate(out["path"]):
        b = mapped_paths.get(path, 0)
        if not b:
            continue
        requests = -(-b // MAPPED_REQUEST)
        mount = M.mount_of(path, mounts)
        read = storage.get(path) if mount is not None and mount.fstype in COUNTED_STORAGE else None
        now, how = _mapped_now(path, b, requests, tiers, read, mounts)
        on_fast = bool(out.at[i, "on_fast_tier"])
        later = fast.time(0, 0, requests, b) if now and not on_fast else (now or 0.0)
        gain = max((now or 0.0) - later, 0.0)
        for c in ("expected_time", "expected_low", "expected_high"):
            out.at[i, c] = float(out.at[i, c]) + (now or 0.0)
        out.at[i, "predicted_time"] = float(out.at[i, "predicted_time"]) + later
        for c in ("saving", "saving_low", "saving_high"):
            out.at[i, c] = float(out.at[i, c]) + gain
        out.at[i, "bytes_read"] = int(out.at[i, "bytes_read"]) + b
        out.at[i, "mmap_bytes"], out.at[i, "mmap_priced"] = b, how
        out.at[i, "rereads"] = out.at[i, "bytes_read"] / max(int(out.at[i, "size"]), 1)
    return out[COLUMNS].reset_index(drop=True)


def _mapped_only_row(path: str, fast: T.Tier, tiers: Sequence[T.Tier], mounts=None) -> dict:
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    mounts = mounts if mounts is not None else M.current()
    tier = T.tier_for(path, tiers, mounts) if tiers else None
    return {"path": path, "size": size, "tier": tier.label if tier else "", "opens": 0, "stats": 0, "reads": 0,
            "bytes_read": 0, "read_time": 0.0, "meta_time": 0.0, "current_time": 0.0, "expected_time": 0.0,
            "expected_low": 0.0, "expected_high": 0.0, "peers": 0, "predicted_time": 0.0, "saving": 0.0,
            "saving_low": 0.0, "saving_high": 0.0, "rereads": 0.0,
            "on_fast_tier": bool(T.on_tier([path], fast, mounts)[0]),
            "meta_unit": 0.0, "read_unit": 0.0, "mmap_bytes": 0, "mmap_priced": ""}


def _mapped_now(path: str, nbytes: int, requests: int, tiers, read_from_storage: Optional[int], mounts=None):
    """(seconds the mapped part costs now, how it was priced) or (None, "")."""
    if read_from_storage == 0:
        return 0.0, IN_MEMORY
    tier = T.tier_for(path, tiers, mounts) if tiers else None
    if tier is not None:
        return tier.time(0, 0, requests, nbytes), PROBED
    return None, ""


def _measured_costs(snap: Snapshot, fast: T.Tier, tiers: Sequence[T.Tier]) -> pd.DataFrame:
    """file_costs of the files read through calls Darshan counts."""
    p = snap.posix
    if p.empty:
        return pd.DataFrame(columns=COLUMNS)
    p = p[p["POSIX_READS"] > 0]
    sizes = _sizes(snap, p)
    opens, stats, reads = (p[c].to_numpy(np.float64) for c in ("POSIX_OPENS", "POSIX_STATS", "POSIX_READS"))
    current = input_io_time(parts_of(p, "POSIX")).to_numpy()
    mounts = [M.Mount(m, t) for m, t in snap.meta.get("mounts") or []] or M.current()
    paths = p["path"]
    # the paths as Arrow text once: the mount and fast-tier tests both take it
    text, exact = arrow_paths(paths.astype(object).to_numpy() if paths.dtype == object else paths)
    expected, peers, units, (codes, points) = _expected_now(p, opens + stats, reads, mounts, text)
    predicted = fast.time(opens, stats, reads, p["POSIX_BYTES_READ"].to_numpy())
    # on the fast tier: inside its directory and on its file system (a mount below it is another one)
    prefix = fast.path.rstrip("/") or "/"
    if prefix != "/":
        on_fast = np.asarray(pc.or_(pc.starts_with(text, prefix + "/"), pc.equal(text, prefix))
                             .to_numpy(zero_copy_only=False), dtype=bool)
    else:
        on_fast = np.ones(len(p), dtype=bool)
    if on_fast.any():
        file_points = np.asarray([x or "/" for x in points], dtype=object)[codes]
        on_fast &= file_points == T.point_of(prefix, mounts)
    labels = T.labels_of(p["path"], tiers, mounts) if tiers else ""
    saving = {k: np.where(on_fast, 0.0, np.maximum(v - predicted, 0.0)) for k, v in expected.items()}
    return pd.DataFrame({
        "path": _text_column(text, paths) if exact else paths.to_numpy(dtype=object), "size": sizes,
        "tier": labels,
        "opens": p["POSIX_OPENS"].to_numpy(), "stats": p["POSIX_STATS"].to_numpy(),
        "reads": p["POSIX_READS"].to_numpy(), "bytes_read": p["POSIX_BYTES_READ"].to_numpy(),
        "read_time": p["POSIX_F_READ_TIME"].to_numpy(), "meta_time": p["POSIX_F_META_TIME"].to_numpy(),
        "current_time": current, "expected_time": expected["mid"], "expected_low": expected["low"],
        "expected_high": expected["high"], "peers": peers,
        "predicted_time": np.where(on_fast, expected["mid"], predicted),
        "saving": saving["mid"], "saving_low": saving["low"], "saving_high": saving["high"],
        "rereads": p["POSIX_BYTES_READ"].to_numpy() / np.maximum(sizes, 1), "on_fast_tier": on_fast,
        # expected seconds per metadata call and per read: a part of the file's work costs its share
        "meta_unit": units[0], "read_unit": units[1],
        "mmap_bytes": np.zeros(len(p), dtype=np.int64), "mmap_priced": "",
    }).reset_index(drop=True)


def _text_column(text: pa.Array, paths: pd.Series):
    """The paths as the column pandas would make of them (its text type for
    Python strings), from the Arrow text already made: not converted again."""
    dtype = pd.Series(np.array([""], dtype=object)).dtype
    if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
        return pd.Series(text.to_pandas(types_mapper={pa.string(): dtype}.get)).array
    return paths.astype(object).to_numpy() if paths.dtype == object else paths.array


def _sizes(snap: Snapshot, p: pd.DataFrame) -> np.ndarray:
    """A file read until a read returned 0 bytes was read to its end: its
    size is the last byte read + 1; others are asked (or, if gone, sized by
    what was read of them)."""
    zero = (snap.extra.drop_duplicates("record_id").set_index("record_id")["ZERO_READS"]
            .reindex(p["record_id"].to_numpy()).fillna(0).to_numpy() if len(snap.extra) else np.zeros(len(p)))
    sizes = p["POSIX_MAX_BYTE_READ"].to_numpy(dtype=np.int64) + 1
    for i in np.nonzero(zero == 0)[0]:
        try:
            sizes[i] = os.stat(p["path"].iat[i]).st_size
        except OSError:
            pass
    return sizes


def _expected_now(p: pd.DataFrame, meta_calls: np.ndarray, reads: np.ndarray, mounts, text=None):
    """({"low", "mid", "high"} expected seconds per file, peers per file,
    (expected seconds per metadata call, per read) per file, and
    M.point_codes of the paths: (codes, mount points))."""
    mean_request = p["POSIX_BYTES_READ"].to_numpy(np.float64) / reads
    size_class = np.floor(np.log(np.maximum(mean_request, 1.0)) / np.log(4.0)).astype(np.int64)
    # the peer group (mount, size class) as one integer: grouping a million
    # files by "<mount>:<class>" strings took seconds
    codes, points = M.point_codes(p["path"] if text is None else text, mounts)
    # one code a mount point (point_codes may list a point twice)
    mount_code = pd.factorize(np.asarray(points, dtype=object))[0][codes].astype(np.int64) if len(codes) \
        else codes
    class_code = size_class - (size_class.min() if len(size_class) else 0)
    group = mount_code * (int(class_code.max()) + 1 if len(class_code) else 1) + class_code
    calls = np.maximum(meta_calls, 1.0)   # a file with no counted open or stat paid its metadata time per file
    out = {k: np.zeros(len(p)) for k in ("low", "mid", "high")}
    units = []
    for unit, count in ((p["POSIX_F_META_TIME"].to_numpy() / calls, calls),
                        (p["POSIX_F_READ_TIME"].to_numpy() / reads, reads)):
        low, mid, high = _group_means(pd.Series(unit), group)
        out["low"] += count * low
        out["mid"] += count * mid
        out["high"] += count * high
        units.append(mid)
    _, where, counts = np.unique(group, return_inverse=True, return_counts=True)
    peers = counts[where].astype(np.int64)
    return out, peers, units, (codes, points)


def _group_means(unit: pd.Series, group: np.ndarray):
    """Per file, its group's clipped mean of `unit` and that mean's 95 % interval."""
    g = unit.groupby(group)
    # a group's quartiles computed once a group (its peers are few groups), spread back by position
    codes = pd.factorize(group, sort=True)[0]
    q1 = pd.Series(g.agg(lambda x: x.quantile(0.25)).to_numpy()[codes], index=unit.index)
    q3 = pd.Series(g.agg(lambda x: x.quantile(0.75)).to_numpy()[codes], index=unit.index)
    clipped = unit.clip(q1 - 3 * (q3 - q1), q3 + 3 * (q3 - q1))
    by = clipped.groupby(group)
    mean, std, n = by.transform("mean"), by.transform("std").fillna(0.0), by.transform("size")
    half = np.where(n > 1, 1.96 * std / np.sqrt(n), mean)   # one file: no evidence of its spread
    return (np.maximum(mean - half, 0.0).to_numpy(), mean.to_numpy(), (mean + half).to_numpy())
