"""Mount points and file-system types: which storage tier a path lives on."""
from __future__ import annotations

import dataclasses
import os
from typing import Dict, Iterable, List, Optional


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


def mount_of(path: str, mounts: Iterable[Mount]) -> Optional[Mount]:
    """The longest mount point that is a prefix of path (by whole components)."""
    best = None
    for m in mounts:
        p = m.point.rstrip("/") or "/"
        if path == p or path.startswith(p if p == "/" else p + "/"):
            if best is None or len(p) > len(best.point.rstrip("/") or "/"):
                best = m
    return best


def points_of(paths: Iterable[str], mounts: Iterable[Mount]) -> List[str]:
    """The mount point of every path ("" when none), looked up once per
    directory: a run can touch a million files in a few thousand directories."""
    mounts = list(mounts)
    exact = {m.point.rstrip("/") or "/": m.point for m in mounts}    # a file can be a mount point
    by_dir: Dict[str, str] = {}
    out = []
    for path in paths:
        if path in exact:
            out.append(exact[path])
            continue
        d = os.path.dirname(path)
        if d not in by_dir:
            m = mount_of(d, mounts)
            by_dir[d] = m.point if m else ""
        out.append(by_dir[d])
    return out


def label(path: str, mounts: Iterable[Mount]) -> str:
    m = mount_of(path, mounts)
    return f"{m.point} ({m.fstype})" if m else "?"
