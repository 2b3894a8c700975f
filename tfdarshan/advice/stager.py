"""Copy recommended files to the fast tier, safely.

A manifest lists source, destination, size and SHA-256 of every file. The
stager copies each to `<destination>.partial`, checks the copy's checksum
against the manifest's, and only then renames it into place and records it
in the staging map. It never writes over an existing file or touches a
source, refuses when the destination lacks room, and resumes where an
interrupted run stopped. A copy keeps its source's permission bits and
mtime, and what this host now holds is recorded with the source's size and
mtime (capture/served.py's held file), which `tfdarshan run --staged`
serves from inside the shim. `staged_paths(paths)` gives a tf.data pipeline
the staged copies by their own paths instead."""
from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import socket
import time
from typing import Dict, Iterable, List, Optional

from tfdarshan.capture import _native, served
from tfdarshan.capture.served import staging_map_path  # noqa: F401 (where it always was)
from tfdarshan.advice.manifest import (CHUNK, FORMAT, _bar, _load_json, _write_json,  # noqa: F401 (re-exported)
                                       destination_for, load_manifest, make_manifest, make_node_manifest,
                                       node_part, sha256_of, vanished_line)
from tfdarshan.errors import TfdarshanError
from tfdarshan.measures.human import count

FLUSH_SECONDS = 1.0
STAGED_MANIFEST = "staged.manifest.json"    # beside the session whose advice was staged


# ------------------------------------------------------------------ staging
class StageResult:
    def __init__(self):
        self.staged: List[Dict] = []
        self.skipped: List[Dict] = []       # already staged (resumed run)
        self.failed: List[tuple] = []       # (entry, reason)

    @property
    def ok(self) -> bool:
        return not self.failed


def stage(manifest_path, *, progress: bool = True, node: Optional[str] = None) -> StageResult:
    """Copy every entry not yet staged (of a per-node manifest, those of
    `node`, by default this host). Raises TfdarshanError when nothing can
    start (bad manifest, no room); per-file problems are reported in the
    result and leave everything else as it was."""
    mpath = pathlib.Path(manifest_path)
    m = load_manifest(mpath)
    entries = node_part(m, node)
    # each node's progress apart: the manifest may sit on a file system all nodes share
    state_path = mpath.with_name(mpath.name + (f".{node or socket.gethostname()}" if "nodes" in m else "")
                                 + ".state.json")
    state = _load_json(state_path, "staging state", dict) or {"done": {}}
    _load_json(staging_map_path(), "staging map", dict)    # damaged, it would only fail after the first copy
    done: Dict[str, str] = state.get("done", {})
    if not isinstance(done, dict):
        raise TfdarshanError(f"{state_path}: unreadable staging state (done is not a JSON object)")
    result = StageResult()
    todo = []
    held = served.read_held()
    unheld: Dict[str, Dict] = {}        # staged here earlier, not yet in the held file
    for e in entries:
        if done.get(e["destination"]) == e["sha256"] and os.path.exists(e["destination"]):
            result.skipped.append(e)
            if held.get(e["source"], {}).get("copy") != e["destination"]:
                unheld.update(_held_now(e))
        else:
            todo.append(e)
    need = sum(e["size"] for e in todo)
    root = m.get("root") or _existing_parent(todo[0]["destination"]) if todo else None
    root_id = None
    if todo:
        if not os.path.isdir(os.path.dirname(root.rstrip("/")) or "/"):
            raise TfdarshanError(f"{root}: its parent directory does not exist; nothing copied")
        os.makedirs(root, exist_ok=True)
        st = os.stat(root)
        root_id = (st.st_dev, st.st_ino)
        free = shutil.disk_usage(root).free
        if need > free:
            raise TfdarshanError(f"{root}: needs {need / 2**20:.1f} MiB free for {count(len(todo), 'file')}, "
                                 f"has {free / 2**20:.1f} MiB; nothing copied")
    bar = _bar(need, "staging", progress)
    unrecorded: Dict[str, str] = {}     # staged since the last flush: source -> copy
    last_flush = time.monotonic()

    def flush():
        # copies reach the disk before the state, the map and the held file
        # say they exist; one sync a second, not an fsync and three JSON
        # rewrites per file
        nonlocal last_flush
        last_flush = time.monotonic()
        if unrecorded:
            _sync(root)
            _write_json(state_path, {"done": done})
            _record_mapping(dict(unrecorded))
            unrecorded.clear()
        if unheld:
            served.record_held(dict(unheld))
            unheld.clear()

    with _native.suppressed():
        try:
            _stage_all(todo, root, root_id, done, unrecorded, unheld, result, bar,
                       lambda: time.monotonic() - last_flush > FLUSH_SECONDS and flush())
        finally:
            flush()
    bar.close()
    if result.staged or result.skipped:
        _remember_staged(m, mpath)
    return result


def _stage_all(todo, root, root_id, done, unrecorded, unheld, result, bar, maybe_flush) -> None:
    for e in todo:
        try:
            _check_root(root, root_id)
            unheld.update(_stage_one(e))
            done[e["destination"]] = e["sha256"]
            unrecorded[e["source"]] = e["destination"]
            result.staged.append(e)
            maybe_flush()
        except _Vanished as v:
            # the fast tier went away (unmounted?): never recreate it on whatever is underneath
            result.failed.extend((x, str(v)) for x in todo[todo.index(e):])
            break
        except _Refused as r:
            result.failed.append((e, str(r)))
        except OSError as err:
            result.failed.append((e, f"{err.strerror or err} ({err.filename or e['destination']})"))
            if err.errno in (28, 122):       # ENOSPC, EDQUOT: the rest will not fit either
                break
            try:
                _check_root(root, root_id)
            except _Vanished as v:
                result.failed.extend((x, str(v)) for x in todo[todo.index(e) + 1:])
                break
        finally:
            bar.update(e["size"])


def _sync(root: str) -> None:
    """syncfs() on the staging directory's file system (os.sync() where
    the C library has none)."""
    try:
        fd = os.open(root, os.O_RDONLY)
    except OSError:
        return                          # gone: the next check reports it
    try:
        libc = _libc()
        if libc is None or libc.syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def _libc():
    import ctypes
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _remember_staged(m: Dict, manifest_path: pathlib.Path) -> None:
    """Keep the staged manifest beside the session its advice came from:
    `recommend --compare` checks against it, even after advice.json was
    rewritten by a later `recommend`."""
    session = (m.get("advice") or {}).get("session")
    if isinstance(session, str) and os.path.isdir(session):
        _write_json(pathlib.Path(session) / STAGED_MANIFEST,
                    {**m, "staged_from": os.path.abspath(manifest_path), "staged_at": time.time()})


def staged_manifest_of(session_dir, before: str) -> Dict:
    """The manifest staged from a session's advice, for `--compare`."""
    if session_dir is None:
        raise TfdarshanError(f"--compare: {before} is a log, not a log directory; give --manifest (the one staged)")
    p = pathlib.Path(session_dir) / STAGED_MANIFEST
    if not p.exists():
        raise TfdarshanError(f"--compare: nothing was staged from {session_dir} (no {STAGED_MANIFEST}); stage a "
                             f"manifest from `recommend --manifest`, or give --manifest")
    return load_manifest(p)


class _Refused(Exception):
    pass


class _Vanished(Exception):
    pass


def _check_root(root: str, root_id) -> None:
    try:
        st = os.stat(root)
    except OSError:
        raise _Vanished(f"the staging directory {root} vanished; stopped") from None
    if (st.st_dev, st.st_ino) != root_id:
        raise _Vanished(f"the staging directory {root} was replaced; stopped")


def _held(e: Dict, source: os.stat_result) -> Dict[str, Dict]:
    """What the held file says of a copy in place: the source's size and
    mtime as they were when it was staged, the copy's own mtime."""
    return {e["source"]: {"copy": e["destination"], "size": source.st_size, "mtime_ns": source.st_mtime_ns,
                          "copy_mtime_ns": os.stat(e["destination"]).st_mtime_ns, "staged_at": time.time()}}


def _held_now(e: Dict) -> Dict[str, Dict]:
    """A copy staged before the held file existed, when source and copy still
    have the manifest's size (else it is not recorded, and not served)."""
    try:
        st = os.stat(e["source"])
        if st.st_size == e["size"] == os.stat(e["destination"]).st_size:
            return _held(e, st)
    except OSError:
        pass
    return {}


def _stage_one(e: Dict) -> Dict[str, Dict]:
    """Copy one entry; what the held file records of it."""
    src, dst = e["source"], e["destination"]
    try:
        st = os.stat(src)
    except OSError as err:
        raise _Refused(f"source {src} is unreadable ({err.strerror})") from None
    if st.st_size != e["size"]:
        raise _Refused(f"source {src} changed since the manifest (size {st.st_size}, expected {e['size']})")
    if os.path.lexists(dst):
        # not ours to overwrite; adopt it only if it already is the right copy
        if os.path.isfile(dst) and not os.path.islink(dst) and sha256_of(dst) == e["sha256"]:
            return _held(e, st)
        raise _Refused(f"{dst} exists and is not this file's copy; not overwriting")
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    partial = dst + ".partial"
    h = hashlib.sha256()
    try:
        with open(src, "rb") as fi, open(partial, "wb") as fo:
            while True:
                b = fi.read(CHUNK)
                if not b:
                    break
                h.update(b)
                fo.write(b)
            fo.flush()          # durable before it is recorded: stage() syncs before each flush
        if h.hexdigest() != e["sha256"]:
            raise _Refused(f"source {src} changed since the manifest (checksum differs)")
        # the copy itself, read back, must match before it counts as staged
        if sha256_of(partial) != e["sha256"]:
            raise _Refused(f"the copy {dst} does not match its source; not staged")
        after = os.stat(src)
        if (after.st_size, after.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
            raise _Refused(f"source {src} changed while it was copied; not staged")
        # a stat of the copy answers as the source's would, but for the inode
        os.chmod(partial, st.st_mode & 0o777)
        os.utime(partial, ns=(st.st_atime_ns, st.st_mtime_ns))
        if os.path.lexists(dst):
            raise _Refused(f"{dst} appeared while copying; not overwriting")
        os.rename(partial, dst)
        return _held(e, st)
    except BaseException:
        try:
            os.unlink(partial)
        except OSError:
            pass
        raise


def _existing_parent(path: str) -> str:
    p = os.path.dirname(path)
    while p and not os.path.isdir(p):
        p = os.path.dirname(p)
    return p or "/"


def _record_mapping(new: Dict[str, str]) -> None:
    path = staging_map_path()
    current = _load_json(path, "staging map", dict) or {}
    current.update(new)
    _write_json(path, current)


def staged_paths(paths: Iterable, mapping: Optional[Dict[str, str]] = None) -> List[str]:
    """For each path, its staged copy where one exists (and still has the
    source's size), else the path itself."""
    if mapping is None:
        mapping = _load_json(staging_map_path(), "staging map", dict) or {}
    out = []
    for p in paths:
        p = os.fsdecode(p) if isinstance(p, bytes) else str(p)
        dst = mapping.get(os.path.abspath(p))
        try:
            if dst and os.path.getsize(dst) == os.path.getsize(p):
                out.append(dst)
                continue
        except OSError:
            pass
        out.append(p)
    return out
