"""Staged copies served in place of their sources (`tfdarshan run --staged`,
`attach(staged=...)`, TFDARSHAN_STAGED): what this node holds, loading it
into the shim, and the one definition of what serving did, per file and in
sum, as the run's end, the logs, `recommend --compare` and the tab read it.

`stage` writes what it copied on this host into the held file
(`held.<host>.json` beside the staging map), with the source's size and
mtime as they were when it copied and the copy's mtime. The shim
(native/staged.c, redirect.c) serves a read-only open, fopen or stat of a
source from its copy once the source's first use found the source
unchanged and the copy in place; the call is recorded under the program's
path, so record ids stay the program's.

Bytes served: a read does not say which open its descriptor came from
(that would change the read path), so a file's bytes count as served when
every open of it in the process was served ("throughout"); a file opened
from both its copy and its source is counted apart, as partly served."""
from __future__ import annotations

import json
import os
import pathlib
import socket
import threading
import time
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from tfdarshan.capture import _native, mounts as M
from tfdarshan.errors import TfdarshanError

ENV = "TFDARSHAN_STAGED"                # "all" (everything this node holds) or a manifest's path
HELD_FORMAT = "tfdarshan.held/1"
ALL = "all"
COUNTS = _native.STAGED_COUNTS
OPEN_COUNTS = ("served_opens", "served_fopens")
NOT_SERVED = ("source_opens", "fallback_opens")     # an open that was not served: the file is partly served
SIDE_SUFFIX = ".served.json"             # beside a process's log in its session directory


# --------------------------------------------------------------- held copies
def staging_map_path() -> pathlib.Path:
    """Where staged copies are recorded: $TFDARSHAN_STAGING_MAP or
    ~/.local/share/tfdarshan/staged.json."""
    p = os.environ.get("TFDARSHAN_STAGING_MAP") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "tfdarshan", "staged.json")
    return pathlib.Path(p)


def held_path(host: Optional[str] = None) -> pathlib.Path:
    """What this host holds, beside the staging map (one file per host: the
    map may sit in a home directory every node shares)."""
    return staging_map_path().with_name(f"held.{host or node()}.json")


def read_held(host: Optional[str] = None) -> Dict[str, Dict]:
    """{source: {copy, size, mtime_ns, copy_mtime_ns, staged_at}} of the copies
    `stage` made on this host."""
    p = held_path(host)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, UnicodeDecodeError, RecursionError) as e:
        raise TfdarshanError(f"{p}: unreadable record of staged copies ({e})") from None
    files = data.get("files") if isinstance(data, dict) and data.get("format") == HELD_FORMAT else None
    if not isinstance(files, dict):
        raise TfdarshanError(f"{p}: not a tfdarshan record of staged copies")
    return {s: f for s, f in files.items() if _held_entry_ok(s, f)}


def _held_entry_ok(source, f) -> bool:
    ints = ("size", "mtime_ns", "copy_mtime_ns")
    return (isinstance(source, str) and source.startswith("/") and isinstance(f, dict)
            and isinstance(f.get("copy"), str) and f["copy"].startswith("/")
            and all(isinstance(f.get(k), int) and not isinstance(f.get(k), bool) for k in ints))


def record_held(new: Dict[str, Dict], host: Optional[str] = None) -> None:
    """Add copies this host now holds (what `stage` calls after copying)."""
    p = held_path(host)
    current = read_held(host)
    current.update(new)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"format": HELD_FORMAT, "host": host or node(),
                               "files": current}, indent=1))
    os.replace(tmp, p)


def manifest_sources(path) -> set:
    """The sources a staging manifest lists (only what serving needs of it);
    of a per-node manifest, this node's part: each node serves its own."""
    p = pathlib.Path(path)
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
        sources = {e["source"] for e in m["entries"]}
        if isinstance(m.get("nodes"), dict):
            sources &= set(m["nodes"].get(node()) or ())
        return sources
    except FileNotFoundError:
        raise TfdarshanError(f"{p}: no such manifest") from None
    except (OSError, ValueError, UnicodeDecodeError, RecursionError, KeyError, TypeError) as e:
        raise TfdarshanError(f"{p}: not a tfdarshan staging manifest ({e})") from None


# ------------------------------------------------------------------ serving
class Table:
    """The staged copies loaded into the shim, in its entry order."""

    def __init__(self, spec: str, sources: List[str], copies: List[str]):
        self.spec, self.sources, self.copies = spec, sources, copies
        self.copy_mounts = M.points_of(pd.Series(copies, dtype=object), M.current()) if copies else []


_lock = threading.Lock()
_table: Optional[Table] = None


def loaded() -> Optional[Table]:
    return _table if _native.staged_loaded() else None


def serve(spec: Optional[str], *, check_ahead: bool = False) -> Table:
    """Serve what this node holds (spec "all") or holds of a manifest (its
    path) from now on; spec None stops serving. check_ahead: check every
    source now rather than at its first use (one stat of each source and
    its copy, before the program needs them)."""
    global _table
    with _lock:
        if spec is None:
            _native.load_staged([], [], [], [], [])
            _table = None
            return Table("", [], [])
        held = read_held()
        if spec != ALL:
            wanted = manifest_sources(spec)
            held = {s: f for s, f in held.items() if s in wanted}
        sources = sorted(held)
        rows = [held[s] for s in sources]
        copies = [r["copy"] for r in rows]
        _native.load_staged(sources, copies, [r["size"] for r in rows], [r["mtime_ns"] for r in rows],
                            [r["copy_mtime_ns"] for r in rows])
        _table = Table(spec, sources, copies)
    if check_ahead:
        with _native.suppressed():
            for i in range(len(sources)):
                _native.check_staged(i)
    return _table


# --------------------------------------------------------- what serving did
FILE_KEYS = ("path", "copy", "served_from", "state", *COUNTS, "throughout", "bytes")


def process_files() -> pd.DataFrame:
    """Per staged file this process has used: its counts since the process
    began (a fork's child since the fork), state and mount of its copy."""
    t = loaded()
    rows = _native.staged_used() if t else np.zeros((0, _native.STAGED_ROW), dtype=np.int64)
    idx = rows[:, 0].astype(np.int64)
    df = pd.DataFrame({"path": pd.Series([t.sources[i] for i in idx] if t else [], dtype=object),
                       "copy": pd.Series([t.copies[i] for i in idx] if t else [], dtype=object),
                       "served_from": pd.Series([t.copy_mounts[i] for i in idx] if t else [], dtype=object),
                       "state": pd.Series([_native.STAGED_STATES.get(int(s), "unknown") for s in rows[:, 1]],
                                          dtype=object)})
    for k, c in enumerate(COUNTS):
        df[c] = rows[:, 2 + k].astype(np.int64)
    return df


def process_meta() -> Optional[Dict]:
    """meta["served"] of this process so far, without bytes (they need its
    counters: Snapshot.meta["served"] has them)."""
    t = loaded()
    if t is None:
        return None
    files = process_files()
    files["throughout"] = throughout(files)
    files["bytes"] = 0
    return _as_meta(files, t.spec)


def node() -> str:
    """This node's name, as the held file and per-node manifests know it."""
    return socket.gethostname()


def describe(spec: str) -> str:
    """How a run names what it was asked to serve."""
    return "asked to serve staged copies" + ("" if spec == ALL else f" of {spec}")


def _bytes_read(posix: pd.DataFrame, stdio: pd.DataFrame, paths) -> np.ndarray:
    """Bytes each path read through POSIX and STDIO in a snapshot's frames."""
    got = pd.concat([posix.groupby("path")["POSIX_BYTES_READ"].sum() if len(posix) else pd.Series(dtype=np.int64),
                     stdio.groupby("path")["STDIO_BYTES_READ"].sum() if len(stdio) else pd.Series(dtype=np.int64)])
    got = got.groupby(level=0).sum() if len(got) else got
    return np.asarray([int(got.get(p, 0)) for p in paths], dtype=np.int64)


def throughout(files: pd.DataFrame) -> np.ndarray:
    """Files every open of which (there was one) was served from the copy."""
    if files.empty:
        return np.zeros(0, dtype=bool)
    return ((files[list(OPEN_COUNTS)].sum(axis=1) > 0) & (files[list(NOT_SERVED)].sum(axis=1) == 0)).to_numpy()


def snapshot_meta(posix: pd.DataFrame, stdio: pd.DataFrame) -> Optional[Dict]:
    """meta["served"] of a snapshot of this process since it began, or None
    when no staged copies are loaded."""
    t = loaded()
    if t is None:
        return None
    files = process_files()
    files["throughout"] = throughout(files)
    files["bytes"] = np.where(files["throughout"], _bytes_read(posix, stdio, files["path"]), 0)
    return _as_meta(files, t.spec)


def _as_meta(files: pd.DataFrame, spec: str) -> Dict:
    return {"staged": spec, "files": [[_plain(v) for v in row] for row in files[list(FILE_KEYS)].itertuples(False)]}


def _plain(v):
    return v.item() if isinstance(v, np.generic) else v


def frame(meta: Optional[Dict]) -> pd.DataFrame:
    """meta["served"]'s files as a table (FILE_KEYS)."""
    rows = (meta or {}).get("files") or []
    df = pd.DataFrame(rows, columns=list(FILE_KEYS))
    for c in (*COUNTS, "bytes"):
        df[c] = df[c].astype(np.int64)
    df["throughout"] = df["throughout"].astype(bool)
    return df


def window(later: Optional[Dict], earlier: Optional[Dict], posix: pd.DataFrame,
           stdio: pd.DataFrame) -> Optional[Dict]:
    """meta["served"] of the window between two snapshots: counts are the
    difference, the state and "throughout" the later one's, bytes those the
    window's frames read of the files served throughout."""
    if later is None:
        return None
    a, b = frame(later), frame(earlier)
    if len(b):
        b = b.set_index("path").reindex(a["path"])
        for c in COUNTS:
            a[c] = a[c].to_numpy() - b[c].fillna(0).astype(np.int64).to_numpy()
    a["bytes"] = np.where(a["throughout"], _bytes_read(posix, stdio, a["path"]), 0)
    active = (a[list(COUNTS)].to_numpy() != 0).any(axis=1) | (a["bytes"].to_numpy() != 0)
    return _as_meta(a[active], later.get("staged", ""))


def combine(metas: List[Optional[Dict]]) -> Optional[Dict]:
    """One meta["served"] for several processes (ranks): counts and bytes
    add; a file is served throughout when it was in every process that
    used it; its state is "serving" only when it was in all of them."""
    metas = [m for m in metas if m]
    if not metas:
        return None
    if len(metas) == 1:
        return metas[0]
    df = pd.concat([frame(m) for m in metas], ignore_index=True)
    g = df.groupby("path", sort=True)
    out = g.agg({"copy": "first", "served_from": "first", **{c: "sum" for c in (*COUNTS, "bytes")},
                 "throughout": "all"}).reset_index()
    states = g["state"].agg(lambda s: "serving" if (s == "serving").all() else next(x for x in s if x != "serving"))
    out["state"] = states.reindex(out["path"]).to_numpy()
    return _as_meta(out, metas[0].get("staged", ""))


def summary(meta: Optional[Dict]) -> Dict:
    """What serving did, in sum: opens (open/openat and fopen) and stats
    served from copies, the bytes of files served throughout, the files
    served, those partly served, the fallbacks to a source after an error
    on its copy, and the files not served by why; `served_from` is the
    mount most opens were served from."""
    f = frame(meta)
    opens = f[list(OPEN_COUNTS)].sum(axis=1) if len(f) else pd.Series(dtype=np.int64)
    served = f[opens > 0]
    mount = (served.groupby("served_from")[list(OPEN_COUNTS)].sum().sum(axis=1).idxmax()
             if len(served) else None)
    refused = f[(f["state"] != "serving") & (f["state"] != "unchecked")] if len(f) else f
    return {"staged": (meta or {}).get("staged"), "served_from": mount, "opens": int(opens.sum()),
            "stats": int(f["served_stats"].sum()), "bytes": int(f["bytes"].sum()),
            "files": int(len(served)), "files_throughout": int(f["throughout"].sum()),
            "files_partly": int((opens > 0).sum() - f["throughout"].sum()),
            "fallbacks": int(f["fallback_opens"].sum() + f["fallback_stats"].sum()),
            "not_served": {k: int(v) for k, v in refused["state"].value_counts().sort_index().items()}}


def write_beside(meta: Optional[Dict], log_path: pathlib.Path) -> Optional[pathlib.Path]:
    """The window's served files beside its log (<stem>.served.json)."""
    if not meta:
        return None
    p = log_path.with_name(log_path.name[: -len(".darshan")] + SIDE_SUFFIX)
    p.write_text(json.dumps({**meta, "written": time.time()}))
    return p


def read_beside(log_path: pathlib.Path) -> Optional[Dict]:
    """meta["served"] written beside a log, or None (none, or unreadable:
    what serving did is then unknown, as for any log without it)."""
    p = pathlib.Path(log_path)
    p = p.with_name(p.name[: -len(".darshan")] + SIDE_SUFFIX)
    try:
        m = json.loads(p.read_text(encoding="utf-8"))
        frame(m)
        return m
    except (OSError, ValueError, TypeError, KeyError, UnicodeDecodeError):
        return None
