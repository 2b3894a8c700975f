"""Per-step series cut to what a chart can draw: its steps split into one
bucket per pixel of the chart's width, each bucket kept as its minimum and
its maximum, so an isolated spike survives. Pure functions over numpy."""
from __future__ import annotations

from typing import Dict, Optional, Sequence

import numpy as np

# the widths a client may ask for (pixels); beyond them a chart gains nothing
MIN_WIDTH, MAX_WIDTH = 50, 8000


def starts(n: int, width: Optional[int]) -> Optional[np.ndarray]:
    """The first index of each of `width` buckets over n points in order, or
    None when the points fit (at most two a bucket: nothing to gain)."""
    if width is None or n <= 2 * width:
        return None
    return np.unique((np.arange(width, dtype=np.int64) * n) // width)


def minmax(y: Sequence, first: np.ndarray) -> np.ndarray:
    """Each bucket of y (buckets begin at `first`) as two values, its
    minimum and its maximum, in the order they occur; NaN (a missing value)
    only where a bucket has nothing else."""
    y = np.asarray([np.nan if v is None else v for v in y], dtype=np.float64)
    n = len(y)
    bucket = np.repeat(np.arange(len(first)), np.diff(np.append(first, n)))
    with np.errstate(invalid="ignore"):
        lo = np.fmin.reduceat(y, first)       # fmin/fmax: NaN only when the whole bucket is NaN
        hi = np.fmax.reduceat(y, first)
    index = np.arange(n)
    where_lo = np.minimum.reduceat(np.where(y == lo[bucket], index, n), first)
    where_hi = np.minimum.reduceat(np.where(y == hi[bucket], index, n), first)
    low_first = where_lo <= where_hi
    out = np.empty(2 * len(first))
    out[0::2] = np.where(low_first, lo, hi)
    out[1::2] = np.where(low_first, hi, lo)
    return out


def any_of(flags: Sequence[bool], first: np.ndarray) -> np.ndarray:
    """Each bucket of a flag series as two copies of whether any of it is set."""
    return np.repeat(np.logical_or.reduceat(np.asarray(flags, dtype=bool), first), 2)


def step_pairs(steps: Sequence[int], first: np.ndarray) -> np.ndarray:
    """Where each bucket's two values are drawn: its first and its last step
    (every series of a chart shares them, so stacked and grouped series line up)."""
    steps = np.asarray(steps)
    last = np.append(first[1:], len(steps)) - 1
    out = np.empty(2 * len(first), dtype=steps.dtype)
    out[0::2], out[1::2] = steps[first], steps[last]
    return out


def note(n: int, first: np.ndarray) -> Dict:
    """What a chart says about a downsampled series (None when it is whole)."""
    return {"steps": int(n), "buckets": int(len(first)),
            "text": f"downsampled: {n} steps in {len(first)} buckets, min and max kept"}


def series(steps: Sequence[int], columns: Dict[str, Sequence], flags: Dict[str, Sequence[bool]],
           width: Optional[int]) -> Optional[Dict]:
    """steps and each column cut to `width` buckets, or None when they fit:
    {"steps": [...], column: [...], flag: [...], "downsampled": note}."""
    first = starts(len(steps), width)
    if first is None:
        return None
    out = {"steps": step_pairs(steps, first).tolist(), "downsampled": note(len(steps), first)}
    for name, y in columns.items():
        out[name] = None if y is None else [None if v != v else float(v) for v in minmax(y, first)]
    for name, f in flags.items():
        out[name] = any_of(f, first).tolist()
    return out
