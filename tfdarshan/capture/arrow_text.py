"""Paths as Arrow text, for vectorised tests on a million paths.

Arrow holds UTF-8 only, but a path is bytes: a name that is not UTF-8
reaches Python as surrogate escapes (os.fsdecode), which Arrow refuses.
Such a path is given in its display form instead, each undecodable byte
written as \\xNN (as the tab shows it), so prefix and pattern tests still
see every valid character, and callers learn that the text is not exact."""
from __future__ import annotations

from typing import Tuple

import pyarrow as pa


def arrow_paths(values, type: pa.DataType = pa.string()) -> Tuple[pa.Array, bool]:
    """(the paths as an Arrow array of `type`, whether every path is exact)."""
    try:
        return pa.array(values, type=type), True
    except (UnicodeEncodeError, pa.ArrowInvalid):
        shown = [v.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                 if isinstance(v, str) else v for v in list(values)]
        return pa.array(shown, type=type), False
