"""The interval every benchmark quotes beside a median."""
from __future__ import annotations


def median_interval(values, resamples: int = 10_000):
    """95 % percentile-bootstrap interval of the median (fixed seed)."""
    import numpy as np
    v = np.asarray(values, dtype=float)
    meds = np.median(np.random.default_rng(0).choice(v, (resamples, len(v))), axis=1)
    return float(np.percentile(meds, 2.5)), float(np.percentile(meds, 97.5))
