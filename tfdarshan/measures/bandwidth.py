"""Bandwidth: bytes moved over the time inside the calls that moved them
(Darshan's per-file time, summed over threads), so it is the rate a call
sees, not the job's throughput. Read and write bandwidth divide by their
own part; the combined figure divides bytes read and written by
time_in_calls.data_time. Metadata time is never in it."""
from __future__ import annotations

import numpy as np

LABEL = "bytes / time in reads and writes"
READ_LABEL, WRITE_LABEL = "bytes read / time in reads", "bytes written / time in writes"


def bandwidth(moved, seconds):
    """Bytes per second: NaN where no time was spent (nothing to divide by).
    A scalar for scalars, an array for arrays or Series."""
    moved = np.asarray(moved, dtype=np.float64)
    seconds = np.asarray(seconds, dtype=np.float64)
    out = np.where(seconds > 0, moved / np.where(seconds > 0, seconds, 1.0), np.nan)
    return float(out) if out.ndim == 0 else out
