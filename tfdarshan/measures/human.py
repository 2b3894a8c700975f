"""How a figure is written for a person: sizes in binary units, durations
from microseconds to seconds, shares as percentages, counts with their nouns in agreement ("1 file",
"2 files"). Every report, the console table and `analyze` write figures
with these."""
from __future__ import annotations

import math
from typing import Optional


def _missing(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def human_bytes(n: float) -> str:
    if _missing(n):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n}"


def human_time(s: float) -> str:
    if _missing(s):
        return "-"
    a = abs(s)
    if 0 < a < 1e-5:                # a cached call: "0 µs" would say it costs nothing
        return f"{s * 1e6:.1f} µs"
    if a < 1e-3:
        return f"{s * 1e6:.0f} µs"
    if a < 1:
        return f"{s * 1e3:.1f} ms"
    return f"{s:.2f} s"


def percent(share: Optional[float], digits: int = 1) -> str:
    """A share (0..1) as "12.5 %"; "-" for an unknown one."""
    return "-" if _missing(share) else f"{100 * share:.{digits}f} %"


def noun(n: float, singular: str, plural: str = "") -> str:
    """The noun that agrees with n: "file" for 1, "files" otherwise."""
    return singular if n == 1 else (plural or singular + "s")


def count(n: float, singular: str, plural: str = "") -> str:
    """n with its noun in agreement, thousands separated: "1 file", "1,024 files"."""
    shown = f"{int(n):,}" if float(n).is_integer() else f"{n:,}"
    return f"{shown} {noun(n, singular, plural)}"
