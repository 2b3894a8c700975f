"""The per-file table as a tree reduction keyed by Darshan's 64-bit record
id, never by path strings: each group of ranks is combined into one piece
per id bucket (combine), then each bucket's pieces from every group into
its rows of the table (merge). Only numpy arrays travel between the two.

Sums, the ranks touching a file, and its path and mount (those of the
lowest rank holding it, as before) are reduced in the groups. The exact
min/median/max over ranks need every rank's value of a file, so each piece
also carries the (id, bytes, time in file calls) of every file a rank touched, sorted
by id: 24 bytes per rank and file, no more than the records that were
read, and each bucket's merge sorts only its share of them. A median kept
as a sketch would be smaller, but not the tables of before."""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from tfdarshan.analysis.tables import KERNEL_SUMS, RankFiles
from tfdarshan.capture.arrow_text import arrow_paths
from tfdarshan.measures.time_in_calls import FILE_TIME, PARTS, file_time

# the per-file table's columns and their types (Arrow strings: what Parquet and the readers keep)
FILE_TABLE = {"path": "string[pyarrow]", "mount": "string[pyarrow]", "bytes_read": "int64",
              "bytes_written": "int64", **{part: "float64" for part in PARTS}, "opens": "int64", "ranks": "int64",
              "bytes_min": "int64", "bytes_median": "float64", "bytes_max": "int64",
              # over ranks, each rank's file_time (reads + writes + metadata) of the file
              f"{FILE_TIME}_min": "float64", f"{FILE_TIME}_median": "float64", f"{FILE_TIME}_max": "float64",
              **{c: "int64" for c in KERNEL_SUMS}}
_SUMS = ("bytes_read", "bytes_written", *PARTS, "opens", "ranks", *KERNEL_SUMS)


@dataclasses.dataclass
class Piece:
    """The files of one id bucket as a group of ranks saw them."""
    ids: np.ndarray             # uint64, sorted, distinct
    paths: pa.Array             # strings: the lowest rank's name of the file
    mounts: pa.Array            # strings: its mount there (Arrow: sent between workers as buffers)
    first_rank: np.ndarray      # int64: that rank
    sums: Dict[str, np.ndarray]     # _SUMS over the group's ranks
    pair_ids: np.ndarray        # uint64, sorted: one entry per rank and file
    pair_bytes: np.ndarray      # int64: bytes read and written by that rank
    pair_time: np.ndarray       # float64: its file_time


def bucket_of(ids: np.ndarray, buckets: int) -> np.ndarray:
    """The bucket of each id (ids are hashes: the remainder spreads them evenly)."""
    return (ids % np.uint64(buckets)).astype(np.int64)


def _group_starts(sorted_ids: np.ndarray) -> np.ndarray:
    if not len(sorted_ids):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])


def combine(ranks: Sequence[RankFiles], buckets: int) -> List[Piece]:
    """One piece per bucket for a group of ranks."""
    ranks = sorted(ranks, key=lambda r: r.rank)
    cat = lambda field: (np.concatenate([getattr(r, field) for r in ranks]) if ranks   # noqa: E731
                         else np.zeros(0, dtype=object if field in ("paths", "mounts") else np.int64))
    ids = cat("ids").astype(np.uint64)
    rank = np.concatenate([np.full(len(r.ids), r.rank, dtype=np.int64) for r in ranks]) if ranks \
        else np.zeros(0, dtype=np.int64)
    # stable: within an id, rows stay in rank order, so a file's first row is its lowest rank's
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    starts = _group_starts(ids)
    values = {c: cat(c)[order] for c in ("bytes_read", "bytes_written", "opens")}
    for c in PARTS:
        values[c] = (np.concatenate([r.times[c] for r in ranks]) if ranks else np.zeros(0, dtype=np.float64))[order]
    values["ranks"] = np.ones(len(ids), dtype=np.int64)
    for c in KERNEL_SUMS:
        values[c] = (np.concatenate([r.kernel[c] for r in ranks]) if ranks else np.zeros(0, dtype=np.int64))[order]
    sums = {c: np.add.reduceat(v, starts) if len(starts) else v[:0] for c, v in values.items()}
    file_ids = ids[starts]
    paths, mounts, first = cat("paths")[order][starts], cat("mounts")[order][starts], rank[order][starts]
    pair_bytes = values["bytes_read"] + values["bytes_written"]
    pair_time = file_time(values)
    file_bucket, pair_bucket = bucket_of(file_ids, buckets), bucket_of(ids, buckets)
    pieces = []
    for b in range(buckets):
        f, p = file_bucket == b, pair_bucket == b
        pieces.append(Piece(file_ids[f], arrow_paths(paths[f], pa.large_string())[0],
                            arrow_paths(mounts[f], pa.large_string())[0], first[f], {c: v[f] for c, v in sums.items()},
                            ids[p], pair_bytes[p], pair_time[p]))
    return pieces


def _spread(values: np.ndarray, starts: np.ndarray, ends: np.ndarray):
    """(min, median, max) of each group's values, groups [start, end) of a
    sorted id array. The median of an even count is the mean of the middle
    two, as pandas takes it."""
    n = len(values)
    group = np.repeat(np.arange(len(starts), dtype=np.int64), ends - starts)
    # values sorted within each group by one sort of integers: (group, the value's rank among all)
    by_value = np.argsort(values)
    key = group[by_value] * n + np.arange(n, dtype=np.int64)
    key.sort()
    v = values[by_value[key % n]] if n else values
    lo, hi = starts + (ends - starts - 1) // 2, starts + (ends - starts) // 2
    median = (v[lo].astype(np.float64) + v[hi].astype(np.float64)) / 2
    return v[starts], median, v[ends - 1]


def merge(pieces: Sequence[Piece]) -> pd.DataFrame:
    """A bucket's rows of the per-file table from its pieces of every group."""
    pieces = list(pieces)
    ids = np.concatenate([p.ids for p in pieces]).astype(np.uint64)
    first_rank = np.concatenate([p.first_rank for p in pieces])
    # by id, then by each piece's lowest rank: a file's first row names its path and mount
    order = np.lexsort((first_rank, ids))
    ids = ids[order]
    starts = _group_starts(ids)
    sums = {c: np.concatenate([p.sums[c] for p in pieces])[order] for c in _SUMS}
    sums = {c: np.add.reduceat(v, starts) if len(starts) else v[:0] for c, v in sums.items()}
    first_rows = order[starts]
    pick = lambda field: pa.concat_arrays([getattr(p, field) for p in pieces]).take(first_rows)   # noqa: E731
    pair_ids = np.concatenate([p.pair_ids for p in pieces]).astype(np.uint64)
    pair_order = np.argsort(pair_ids, kind="stable")
    pair_ids = pair_ids[pair_order]
    pair_starts = _group_starts(pair_ids)
    pair_ends = np.r_[pair_starts[1:], len(pair_ids)].astype(np.int64)
    if not np.array_equal(pair_ids[pair_starts], ids[starts]) or \
            not np.array_equal(pair_ends - pair_starts, sums["ranks"]):
        raise AssertionError("per-file tree: the pieces' files and their ranks' values disagree")
    b_min, b_med, b_max = _spread(np.concatenate([p.pair_bytes for p in pieces])[pair_order], pair_starts, pair_ends)
    t_min, t_med, t_max = _spread(np.concatenate([p.pair_time for p in pieces])[pair_order], pair_starts, pair_ends)
    text = lambda field: pd.arrays.ArrowStringArray(pick(field).cast(pa.string()))     # noqa: E731
    table = pd.DataFrame({"path": text("paths"), "mount": text("mounts"), **sums,
                          "bytes_min": b_min, "bytes_median": b_med, "bytes_max": b_max,
                          f"{FILE_TIME}_min": t_min, f"{FILE_TIME}_median": t_med, f"{FILE_TIME}_max": t_max})
    return table[list(FILE_TABLE)].astype(FILE_TABLE)
