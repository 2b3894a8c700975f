"""Bytes per time bin, binned the way Darshan's heatmap module bins them.

The shim reports bytes per fine bin (25 ms). A snapshot keeps them as rows
(start, width, kind, bytes), with start in seconds since the clock origin;
`darshan_bins` turns rows into Darshan's layout for a log that starts at t0:
0.1 s bins, doubled until at most 200 cover the span (darshan-heatmap.c)."""
from __future__ import annotations

import math
from typing import Dict, Tuple

import numpy as np
import pandas as pd

KINDS = {0: ("POSIX", "read"), 1: ("POSIX", "write"), 2: ("STDIO", "read"), 3: ("STDIO", "write")}
INITIAL_WIDTH = 0.1
MAX_BINS = 200
COLUMNS = ["start", "width", "kind", "bytes"]


def empty() -> pd.DataFrame:
    return pd.DataFrame({"start": pd.Series(dtype=np.float64), "width": pd.Series(dtype=np.float64),
                         "kind": pd.Series(dtype=np.int8), "bytes": pd.Series(dtype=np.int64)})


def from_fine(bins: np.ndarray, width_seconds: float) -> pd.DataFrame:
    """Rows from the shim's (bin number, kind, bytes)."""
    if len(bins) == 0:
        return empty()
    return pd.DataFrame({"start": bins[:, 0] * width_seconds, "width": width_seconds,
                         "kind": bins[:, 1].astype(np.int8), "bytes": bins[:, 2]})


def compact(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per (start, width, kind)."""
    if rows.empty:
        return empty()
    return rows.groupby(["start", "width", "kind"], as_index=False)["bytes"].sum()[COLUMNS]


def darshan_layout(span: float) -> Tuple[float, int]:
    """(bin width, number of bins) Darshan ends with for a run of `span` seconds."""
    width = INITIAL_WIDTH
    while span > width * MAX_BINS:
        width *= 2.0
    return width, max(1, min(MAX_BINS, math.ceil(span / width)))


def darshan_bins(rows: pd.DataFrame, t0: float, t1: float) -> Tuple[float, Dict[str, Dict[str, np.ndarray]]]:
    """Per module and direction, bytes per Darshan bin for a log covering [t0, t1].

    Each fine row's bytes go to the Darshan bins it overlaps, in proportion
    to the overlap, as heatmap_update() spreads a call over its duration."""
    width, nbins = darshan_layout(max(t1 - t0, 0.0))
    out = {m: {d: np.zeros(nbins, dtype=np.int64) for d in ("read", "write")} for m in ("POSIX", "STDIO")}
    if rows.empty:
        return width, out
    s = rows["start"].to_numpy() - t0
    e = s + rows["width"].to_numpy()
    b = rows["bytes"].to_numpy()
    k = rows["kind"].to_numpy()
    first = np.clip(np.floor(s / width).astype(np.int64), 0, nbins - 1)
    last = np.clip(np.floor(np.maximum(e - 1e-12, s) / width).astype(np.int64), 0, nbins - 1)
    for kind, (module, direction) in KINDS.items():
        sel = k == kind
        arr = out[module][direction]
        single = sel & (first == last)
        np.add.at(arr, first[single], b[single])
        for i in np.nonzero(sel & (first != last))[0]:
            dur = e[i] - s[i]
            given = 0
            for j in range(first[i], last[i] + 1):
                lo, hi = max(s[i], j * width), min(e[i], (j + 1) * width)
                part = int(round(b[i] * (hi - lo) / dur)) if j < last[i] else int(b[i]) - given
                arr[j] += part
                given += part
    return width, out


def rebin(rows: pd.DataFrame, width: float) -> pd.DataFrame:
    """Coarsen rows onto a grid of `width` from time 0 (grids here nest)."""
    if rows.empty:
        return empty()
    start = np.floor(rows["start"].to_numpy() / width + 1e-9) * width
    out = pd.DataFrame({"start": start, "width": width, "kind": rows["kind"].to_numpy(),
                        "bytes": rows["bytes"].to_numpy()})
    return compact(out)


def subtract(later: pd.DataFrame, earlier: pd.DataFrame) -> pd.DataFrame:
    """Bytes in later's bins not already in earlier's."""
    if earlier.empty or later.empty:
        return later.copy()
    width = max(later["width"].max(), earlier["width"].max())
    a, b = rebin(later, width), rebin(earlier, width)
    m = a.merge(b, on=["start", "width", "kind"], how="left", suffixes=("", "_e"))
    m["bytes"] = m["bytes"] - m["bytes_e"].fillna(0).astype(np.int64)
    return m[m["bytes"] > 0][COLUMNS].reset_index(drop=True)


class Accumulator:
    """A run-long heatmap like Darshan's: 0.1 s bins from the origin,
    doubling in width whenever 200 no longer cover the run."""

    def __init__(self):
        self.width = INITIAL_WIDTH
        self.bins = np.zeros((len(KINDS), MAX_BINS), dtype=np.int64)

    def add_fine(self, bins: np.ndarray, width: float) -> None:
        """The shim's (bin number, kind, bytes) rows, bins of `width` seconds."""
        if len(bins) == 0:
            return
        start = bins[:, 0] * width
        last = float(start.max()) + width
        while last > self.width * MAX_BINS:
            self.bins = self.bins.reshape(len(KINDS), MAX_BINS // 2, 2).sum(axis=2)
            self.bins = np.concatenate([self.bins, np.zeros_like(self.bins)], axis=1)
            self.width *= 2
        idx = np.clip((start / self.width + 1e-9).astype(np.int64), 0, MAX_BINS - 1)
        np.add.at(self.bins, (bins[:, 1].astype(np.int64), idx), bins[:, 2])

    def rows(self) -> pd.DataFrame:
        k, i = np.nonzero(self.bins)
        if len(k) == 0:
            return empty()
        return pd.DataFrame({"start": i * self.width, "width": self.width, "kind": k.astype(np.int8),
                             "bytes": self.bins[k, i]})
