"""Mount points and file-system types (/proc/self/mountinfo): which mount a
path lives on, and the label a person reads for it."""
from __future__ import annotations

import dataclasses
import os
from typing import Callable, Iterable, List, Optional, TypeVar

import numpy as np
import pandas as pd

from tfdarshan.capture.arrow_text import arrow_paths

T = TypeVar("T")

# Darshan's records of the standard streams are on no storage: their "mount"
STREAM_PATHS = ("<STDIN>", "<STDOUT>", "<STDERR>")
STREAMS = "standard streams"


@dataclasses.dataclass(frozen=True)
class Mount:
    point: str
    fstype: str
    source: str = ""


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> List[Mount]:
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        f = left.split()
        r = right.split()
        if not sep or len(f) < 5 or len(r) < 2:
            continue
        mounts.append(Mount(_unescape(f[4]), r[0], _unescape(r[1])))
    return mounts


def current() -> List[Mount]:
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
            return parse_mountinfo(f.read())
    except OSError:
        return []


def longest_prefix(path: str, items: Iterable[T], directory: Callable[[T], str]) -> Optional[T]:
    """The item whose directory is the longest prefix of path, by whole
    components ("/data" holds "/data/x", not "/database")."""
    best, best_len = None, -1
    for item in items:
        p = directory(item).rstrip("/") or "/"
        if (path == p or path.startswith(p if p == "/" else p + "/")) and len(p) > best_len:
            best, best_len = item, len(p)
    return best


def mount_of(path: str, mounts: Iterable[Mount]) -> Optional[Mount]:
    """The mount holding path."""
    return longest_prefix(path, mounts, lambda m: m.point)


def points_of(paths: Iterable[str], mounts: Iterable[Mount]) -> np.ndarray:
    """The mount point of every path ("" when none), looked up once per
    directory: a run can touch a million files in a few thousand directories."""
    codes, points = point_codes(paths, mounts)
    return np.asarray(points, dtype=object)[codes] if len(codes) else np.zeros(0, dtype=object)


def point_codes(paths: Iterable[str], mounts: Iterable[Mount]):
    """points_of as (a code a path, the mount points the codes index; a point
    may be listed twice). Vectorised with Arrow's string kernels; `paths`
    may be an Arrow string array already."""
    import pyarrow as pa
    import pyarrow.compute as pc
    mounts = list(mounts)
    exact = {m.point.rstrip("/") or "/": m.point for m in mounts}    # a file can be a mount point
    if isinstance(paths, (pa.Array, pa.ChunkedArray)):
        text = paths
    else:
        text, _ = arrow_paths(paths if isinstance(paths, pd.Series) else list(paths))
    if not len(text):
        return np.zeros(0, dtype=np.int64), []
    codes, heads = _directory_codes(text)
    points = []
    for head in heads:
        m = mount_of(head.rstrip("/") or head, mounts)      # dirname keeps a root of slashes whole
        points.append(m.point if m else "")
    if exact:
        at = pc.index_in(text, value_set=pa.array(list(exact), type=pa.string()))
        hit = np.asarray(at.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        codes[hit] = len(points) + at.to_numpy(zero_copy_only=False)[hit].astype(np.int64)
        points += list(exact.values())
    return codes, points


def _directory_codes(text):
    """(a code a path, the directories the codes index): each path's
    directory with its trailing slashes (os.path.dirname's head), once a
    directory, by Arrow's string kernels."""
    import pyarrow.compute as pc
    heads = pc.replace_substring_regex(text, r"[^/]*$", "").dictionary_encode()
    return heads.indices.to_numpy(zero_copy_only=False).astype(np.int64), heads.dictionary.to_pylist()


def label(path: str, mounts: Iterable[Mount]) -> str:
    """The mount holding path as a person reads it: "point (fstype)", "?" on none."""
    m = mount_of(path, mounts)
    return f"{m.point} ({m.fstype})" if m else "?"


def labels(paths: pd.Series, mounts: Iterable[Mount]) -> list:
    """The label of each path's mount, looked up once per directory; the
    standard streams are STREAMS."""
    mounts = list(mounts)
    if not len(paths):
        return []
    text, _ = arrow_paths(paths)
    codes, heads = _directory_codes(text)
    # (a head keeps its trailing slashes: "/a//" is in the mounts "/a/" is in; "" is a relative path's)
    by_dir = np.asarray([label(h if h.endswith("/") else h + "/", mounts) for h in heads] + [STREAMS], dtype=object)
    codes[np.asarray(pd.Series(paths, dtype=object).isin(STREAM_PATHS), dtype=bool)] = len(heads)
    return by_dir[codes].tolist()
