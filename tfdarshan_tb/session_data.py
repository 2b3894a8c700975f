"""A session as the tab loads it, apart from the views that present it:
one process's log or a few, read directly (SessionData), and what both
loaders (this and rank_data.py, a many-rank session's tables) share: the
stored advice, the coverage card, display paths and mount names, JSON-safe
scalars, the progress lines of a long load, and the memo of what the views
work out once per loaded session (Memo). Nothing here imports a
view (tests/test_layout.py)."""
from __future__ import annotations

import json
import math
import os
import pathlib
import re
import tempfile
import threading
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from tfdarshan.advice import file_table as report
from tfdarshan.advice import training_input as TI
from tfdarshan.capture import coverage, mounts as M
from tfdarshan.capture.snapshot import Snapshot
from tfdarshan.logs.logdir import Session, load_snapshot, load_steps
from tfdarshan.measures import time_in_calls as T

# what a loader is told of a long load's stages (a line each); the default says nothing
Progress = Callable[[str], None]


def quiet(line: str) -> None:
    pass


# the file table, plus what a file is when it is not input (kind) and the time it cost
# in all: reads, writes and metadata
FILE_COLUMNS = report.COLUMNS[:report.COLUMNS.index("mount") + 1] + ["kind"] \
    + report.COLUMNS[report.COLUMNS.index("mount") + 1:report.COLUMNS.index(T.META_TIME) + 1] + [T.FILE_TIME] \
    + report.COLUMNS[report.COLUMNS.index(T.META_TIME) + 1:]
# the mount of paths on no mount point: files folded past the record cap
UNKNOWN_MOUNT = "unknown mount"


class Memo:
    """Values worked out once however many ask at the same time, the least
    recently asked dropped past `size`: the plugin's loaded sessions and
    answers (plugin.py), and what the views work out from a loaded session
    that no request parameter changes (the summary, the per-step series
    before they are cut to a chart's width, the file table's order). The
    read-ahead works out the page's first views before the page asks, and a
    request that comes while it does waits for its answer rather than
    working it out again. A value whose making raises is not kept."""

    def __init__(self, size: int = 16):
        self._size = size
        self._lock = threading.Lock()
        self._values: Dict = {}
        self._making: Dict = {}

    def _kept(self, key):
        """(True, value) if key is kept, moved to the newest; else (False, None). Under _lock."""
        if key not in self._values:
            return False, None
        value = self._values[key] = self._values.pop(key)
        return True, value

    def keys(self) -> List:
        """The keys kept now, the least recently asked first."""
        with self._lock:
            return list(self._values)

    def values(self) -> List:
        with self._lock:
            return list(self._values.values())

    def __len__(self):
        return len(self._values)

    def get(self, key, make: Callable):
        with self._lock:
            kept, value = self._kept(key)
            if kept:
                return value
            making = self._making.setdefault(key, threading.Lock())
        with making:
            with self._lock:
                kept, value = self._kept(key)
                if kept:
                    return value
            try:
                value = make()
            except BaseException:
                with self._lock:
                    self._making.pop(key, None)
                raise
            with self._lock:
                self._values[key] = value
                self._making.pop(key, None)
                while len(self._values) > self._size:
                    self._values.pop(next(iter(self._values)))
            return value


class SessionData:
    """Everything the tab shows for one session (all hosts, or one)."""

    def __init__(self, session: Session, host: Optional[str], progress: Progress = quiet):
        hosts = [host] if host else list(session.hosts)
        self.hosts = hosts
        self.memo = Memo()
        progress(f"reading {len(hosts)} Darshan log{'s' if len(hosts) > 1 else ''}")
        read = {}       # (the per-file series, read once for both)
        self.snapshot: Snapshot = load_snapshot(session, host, read=read)
        progress(f"read {len(self.snapshot.posix) + len(self.snapshot.stdio)} file records; reading the step series")
        self.steps, self.step_files = load_steps(session, host, self.snapshot.meta.get("skipped_logs") or (), read=read)
        self.session = session
        stored = self.snapshot.meta.get("mounts") or []
        self.mounts = [M.Mount(p, t) for p, t in stored] or M.current()
        progress(f"read {len(self.steps)} step rows; building the file table")
        self.files = _file_table(self.snapshot, self.mounts, self.step_files)
        self.advice, self.advice_problem = stored_advice(session.directory / "advice.json")
        coverage = [session.directory / f"{h}.coverage.json" for h in hosts]
        self.coverage = [c for c in (read_json(p) for p in coverage) if c]
        real = os.path.realpath(session.directory)
        # (a profile linked in from elsewhere is not this session's to read)
        profiles = [x for x in sorted(session.directory.glob("*.xplane.pb"))
                    if os.path.realpath(x).startswith(real + os.sep)]
        if profiles:
            progress(f"reading XProf's analysis of {len(profiles)} profile{'s' if len(profiles) > 1 else ''}")
        self.xprof = xprof_input(profiles)


XPROF_STEP_NUMBER = re.compile(r"(-?\d+)\s*$")


def xprof_input(profiles: List[pathlib.Path]) -> Optional[Dict]:
    """XProf's own view of input wait, from its input-pipeline analysis of
    the session's profiles: per step, the time the step waited for input (s),
    and the input-bound percentage (input time over step time, as XProf's
    overview page states it). None without a profile; {"error": ...} when
    XProf cannot read it."""
    if not profiles:
        return None
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:
        return {"error": "XProf is not installed"}
    try:
        # XProf caches its analysis beside the profile it converts: convert
        # links in a scratch directory, so that the log directory is only read
        with tempfile.TemporaryDirectory(prefix="tfdarshan-xprof-") as scratch:
            links = []
            for x in profiles:
                link = pathlib.Path(scratch, x.name)
                link.symlink_to(os.path.realpath(x))
                links.append(str(link))
            data, _ = raw_to_tool_data.xspace_to_tool_data(links, "input_pipeline_analyzer", {})
        tables = json.loads(data)
    except Exception as e:      # a foreign converter on a file we did not write: its failure leaves ours
        return {"error": f"XProf could not analyse the profile ({type(e).__name__})"}
    table = next((t for t in tables if isinstance(t, dict)
                  and {"stepnum", "infeedTimeMs", "stepTimeMs"} <= {c.get("id") for c in t.get("cols", [])}), None)
    if table is None:
        return {"error": "XProf's analysis has no step table"}
    ids = [c.get("id") for c in table["cols"]]
    waited, spent = {}, {}
    for row in table.get("rows", []):
        cells = dict(zip(ids, (c.get("v") for c in row.get("c", []))))
        m = XPROF_STEP_NUMBER.search(str(cells.get("stepnum", "")))
        if not m or not isinstance(cells.get("stepTimeMs"), (int, float)):
            continue
        n = int(m.group(1))
        waited[n] = waited.get(n, 0.0) + float(cells.get("infeedTimeMs") or 0.0) / 1e3
        spent[n] = spent.get(n, 0.0) + float(cells["stepTimeMs"]) / 1e3
    total = sum(spent.values())
    return {"input_percent": 100.0 * sum(waited.values()) / total if total > 0 else None,
            "steps": waited, "measured": total > 0}


def read_json(path: pathlib.Path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


ADVICE_LISTS = ("selection", "left_out", "findings")


def stored_advice(path: pathlib.Path) -> Tuple[Optional[Dict], Optional[str]]:
    """(the advice `recommend` stored, None) when there is some of the shape
    the page draws; (None, why) when the file is there but unreadable or of
    another shape (damaged, hand-edited); (None, None) without one."""
    if not os.path.lexists(path):
        return None, None
    try:
        with open(path, encoding="utf-8") as f:
            a = json.load(f)
    except (OSError, ValueError) as e:
        return None, f"advice.json is unreadable ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    wrong = "not an object" if not isinstance(a, dict) else next(
        (f"its {k} is not a list of objects" for k in ADVICE_LISTS
         if k in a and not (isinstance(a[k], list) and all(isinstance(x, dict) for x in a[k]))), None) or next(
        (f"its {k} is not text" for k in ("summary",) if k in a and not isinstance(a[k], str)), None) or (
        "its plans have no report" if "plans" in a and not (isinstance(a["plans"], dict)
                                                             and isinstance(a["plans"].get("report"), str)) else None)
    return (None, f"advice.json is not advice: {wrong}") if wrong else (a, None)


def display_path(p: str) -> str:
    """A path as text: bytes that are not UTF-8 are shown as \\xNN."""
    try:
        return os.fsencode(p).decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:      # a lone surrogate that no byte escapes to
        return p.encode("utf-8", "backslashreplace").decode("utf-8")


def _file_table(snap: Snapshot, mounts: List[M.Mount], step_files: Optional[pd.DataFrame] = None) -> pd.DataFrame:
    """report.file_table with what each file is (training_input.kinds) and
    displayable paths."""
    t = report.file_table(snap, mount_table=mounts)
    if t.empty:
        return pd.DataFrame(columns=FILE_COLUMNS)
    t["mount"] = mount_names(t["mount"])
    t["kind"] = TI.kinds(t["path"], TI.read_in_steps(t["path"], step_files))
    t[T.FILE_TIME] = t[list(T.PARTS)].sum(axis=1, min_count=1)      # (STDIO's NaN parts count as none)
    t = t[FILE_COLUMNS]
    odd = t["path"].map(lambda p: not p.isascii())
    if odd.any():
        t.loc[odd, "path"] = t.loc[odd, "path"].map(display_path)
    return t


def mount_names(labels) -> list:
    """Mount labels (capture/mounts.py's label) as every chart and the file table name them."""
    if isinstance(labels, pd.Series):
        labels = labels.tolist()            # (a column of Arrow text is slow to walk value by value)
    return [UNKNOWN_MOUNT if label == "?" else label for label in labels]


def _clean(v):
    """JSON-safe scalars: NaN and infinities become null."""
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return None if not math.isfinite(float(v)) else float(v)
    return v


def coverage_card(records: List[Dict]) -> Optional[Dict]:
    """The coverage card over a session's processes (or a job's ranks): their
    buckets added up (capture/coverage.py), the lowest process's data
    coverage beside it. Records that are not coverage are left out."""
    def number(c, k):
        v = c.get(k)
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 else None
    good = [c for c in records if isinstance(c, dict) and number(c, "counted_bytes") is not None
            and number(c, "kernel_bytes") is not None]
    if not good:
        return None
    excluded = [number(c, "excluded_bytes") for c in good]
    out = coverage.summarize(sum(int(c["counted_bytes"]) for c in good), sum(int(c["kernel_bytes"]) for c in good),
                             None if None in excluded else sum(int(x) for x in excluded))
    each = [coverage.summarize(int(c["counted_bytes"]), int(c["kernel_bytes"]), x)["share"]
            for c, x in zip(good, excluded)]
    each = [x for x in each if x is not None]
    # what a Darshan log alone holds of it, and the files beyond its counters (with how they were read)
    darshan = [number(c, "darshan_bytes") for c in good]
    kernel = sum(int(c["kernel_bytes"]) for c in good)
    beyond = [f for c in good for f in (c.get("beyond_darshan") or []) if isinstance(f, dict)]
    return {**{k: _clean(v) if not isinstance(v, (list, str)) else v for k, v in out.items()},
            "processes": len(good), "lowest": _clean(min(each)) if each else None,
            "darshan_share": _clean(min(sum(darshan) / kernel, 1.0)) if None not in darshan and kernel > 0 else None,
            "beyond_darshan": [{**f, "path": display_path(str(f.get("path", "")))}
                               for f in beyond[:coverage.LISTED_FILES]],
            "beyond_darshan_files": sum(int(number(c, "beyond_darshan_files") or 0) for c in good)}
