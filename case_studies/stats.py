"""Medians with intervals, and the claims the intervals allow.

With fewer than BOOTSTRAP_MIN values the interval is the range (min–max),
which for n = 5 independent runs covers the median with probability
1 − 2/2^5 ≈ 94 %; from BOOTSTRAP_MIN values on, a 95 % percentile bootstrap
of the median (fixed seed, so RESULTS.md is reproducible from the JSON)."""
from __future__ import annotations

from typing import Dict, Sequence

import numpy as np

BOOTSTRAP_MIN = 10
RESAMPLES = 10_000


def summary(values: Sequence[float]) -> Dict:
    """{"median", "lo", "hi", "n", "method", "values"} of the finite values."""
    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if len(v) == 0:
        return {"median": None, "lo": None, "hi": None, "n": 0, "method": "", "values": []}
    if len(v) < BOOTSTRAP_MIN:
        lo, hi, method = float(v.min()), float(v.max()), "min–max"
    else:
        rng = np.random.default_rng(0)
        meds = np.median(rng.choice(v, (RESAMPLES, len(v))), axis=1)
        lo, hi, method = float(np.percentile(meds, 2.5)), float(np.percentile(meds, 97.5)), "95 % bootstrap"
    return {"median": float(np.median(v)), "lo": lo, "hi": hi, "n": int(len(v)), "method": method,
            "values": [float(x) for x in v]}


def above_zero(s: Dict) -> bool:
    """The interval lies wholly above zero."""
    return s["n"] > 0 and s["lo"] > 0


def below_zero(s: Dict) -> bool:
    return s["n"] > 0 and s["hi"] < 0


def contains(s: Dict, x: float) -> bool:
    return s["n"] > 0 and s["lo"] <= x <= s["hi"]


def spread(s: Dict) -> float:
    """(max − min) / median of the runs: how far repeated runs differ."""
    v = s["values"]
    return (max(v) - min(v)) / abs(s["median"]) if v and s["median"] else float("nan")


def fmt(s: Dict, scale: float = 1.0, unit: str = "", digits: int = 1, sign: bool = False) -> str:
    """'12.3 s [11.9, 13.0]' (median [interval])."""
    if not s or s["n"] == 0:
        return "–"
    f = f"{{:{'+' if sign else ''}.{digits}f}}"
    u = f" {unit}" if unit else ""
    return f"{f.format(s['median'] * scale)}{u} [{f.format(s['lo'] * scale)}, {f.format(s['hi'] * scale)}]"
