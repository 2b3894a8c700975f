"""Staging manifests: which files to copy where, with each source's size
and SHA-256 (`recommend --manifest` writes one, `stage` reads it back,
checked: a manifest is user input). The JSON helpers and the progress bar
the stager shares live here too."""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import socket
import time
from typing import Dict, Iterable, List, Optional

from tfdarshan.capture import _native
from tfdarshan.errors import TfdarshanError

FORMAT = "tfdarshan.manifest/1"
CHUNK = 4 << 20


def sha256_of(path, chunk: int = CHUNK) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(chunk)
            if not b:
                return h.hexdigest()
            h.update(b)


def _load_json(path: pathlib.Path, what: str, kind=None):
    """The JSON in path (None if there is none); `kind`, when given, is
    the type the top level must have."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, UnicodeDecodeError) as e:
        raise TfdarshanError(f"{path}: unreadable {what} ({e})") from None
    except RecursionError:
        raise TfdarshanError(f"{path}: unreadable {what} (nested too deeply)") from None
    if kind is not None and not isinstance(data, kind):
        raise TfdarshanError(f"{path}: unreadable {what} (not a JSON {kind.__name__})")
    return data


def _write_json(path: pathlib.Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # a name of this writer's own: nodes staging from one manifest on a shared file system write at once
    tmp = path.with_name(f".{path.name}.{socket.gethostname()}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


# ---------------------------------------------------------------- manifest
def destination_for(source: str, root: str) -> str:
    """The staged copy mirrors the source's absolute path under root."""
    return os.path.join(root, os.path.abspath(source).lstrip("/"))


def make_manifest(sources: Iterable[str], root: str, *, progress: bool = False) -> Dict:
    """The manifest of the sources that still exist; those gone since the
    run (a temporary file renamed away, data deleted) are listed under
    `vanished`, never a failure. A source that is there but unreadable is."""
    root = os.path.abspath(root)      # a relative fast tier must still give absolute destinations
    entries, vanished, items = [], [], []
    with _native.suppressed():
        for s in sources:
            try:
                items.append((s, os.stat(s).st_size))
            except FileNotFoundError:
                vanished.append(os.path.abspath(s))
            except OSError as e:
                raise TfdarshanError(f"{s}: cannot read to checksum it ({e.strerror})") from None
        bar = _bar(sum(size for _, size in items), "checksums", progress)
        for s, _ in items:
            try:
                size = os.stat(s).st_size
                digest = sha256_of(s)
            except FileNotFoundError:           # gone while the others were checksummed
                vanished.append(os.path.abspath(s))
                continue
            except OSError as e:
                raise TfdarshanError(f"{s}: cannot read to checksum it ({e.strerror})") from None
            entries.append({"source": os.path.abspath(s), "destination": destination_for(s, root),
                            "size": size, "sha256": digest})
            bar.update(size)
    bar.close()
    return {"format": FORMAT, "created": time.time(), "root": root, "entries": entries, "vanished": vanished}


def vanished_line(manifest: Dict, limit: int = 3) -> str:
    """The sentence naming the files a manifest left out as gone since the run, "" for none."""
    gone = manifest.get("vanished") or []
    if not gone:
        return ""
    more = f" and {len(gone) - limit} more" if len(gone) > limit else ""
    return (f"{len(gone)} recommended file{'s' if len(gone) != 1 else ''} no longer exist{'s' if len(gone) == 1 else ''}"
            f" (gone since the run), left out of the manifest: {', '.join(gone[:limit])}{more}")


def make_node_manifest(node_sources: Dict[str, List[str]], root: str, *, progress: bool = False) -> Dict:
    """One manifest for several nodes: every file once in `entries` (one
    checksum each), and under `nodes` the sources each node stages; the root
    is the same path on every node (its own fast tier)."""
    union = sorted({s for sources in node_sources.values() for s in sources})
    m = make_manifest(union, root, progress=progress)
    kept = {e["source"] for e in m["entries"]}
    m["nodes"] = {h: sorted(x for x in (os.path.abspath(s) for s in sources) if x in kept)
                  for h, sources in sorted(node_sources.items())}
    return m


def node_part(m: Dict, node: Optional[str]) -> List[Dict]:
    """The entries `node` stages: all of them for a manifest without a
    per-node section, else that node's (TfdarshanError if it has none)."""
    if "nodes" not in m:
        if node is not None:
            raise TfdarshanError(f"--node {node}: the manifest has no per-node part (recommend --per-node writes one)")
        return m["entries"]
    if node is None:
        node = socket.gethostname()
    if node not in m["nodes"]:
        raise TfdarshanError(f"the manifest has no part for node {node!r} (its nodes: "
                             f"{', '.join(sorted(m['nodes'])[:8])}{', ...' if len(m['nodes']) > 8 else ''}); "
                             f"give --node")
    mine = set(m["nodes"][node])
    return [e for e in m["entries"] if e["source"] in mine]


def load_manifest(path) -> Dict:
    p = pathlib.Path(path)
    m = _load_json(p, "manifest")
    if m is None:
        raise TfdarshanError(f"{p}: no such manifest")
    if not isinstance(m, dict) or m.get("format") != FORMAT or not isinstance(m.get("entries"), list):
        raise TfdarshanError(f"{p}: not a tfdarshan staging manifest")
    root = m.get("root")
    if root is not None and not (isinstance(root, str) and _clean_path(root)):
        raise TfdarshanError(f"{p}: root must be an absolute path without '..'")
    advice = m.get("advice")
    if advice is not None and not (isinstance(advice, dict) and _number_or_none(advice.get("predicted_saving"))):
        raise TfdarshanError(f"{p}: advice must be an object with a numeric predicted_saving")
    seen = set()
    for i, e in enumerate(m["entries"]):
        ok = (isinstance(e, dict) and isinstance(e.get("source"), str) and isinstance(e.get("destination"), str)
              and isinstance(e.get("size"), int) and not isinstance(e.get("size"), bool)
              and 0 <= e["size"] < 1 << 63
              and isinstance(e.get("sha256"), str) and re.fullmatch("[0-9a-f]{64}", e["sha256"]) is not None)
        if not ok:
            raise TfdarshanError(f"{p}: entry {i + 1} is malformed (needs source, destination, size, sha256)")
        if not (_clean_path(e["source"]) and _clean_path(e["destination"])):
            raise TfdarshanError(f"{p}: entry {i + 1}: paths must be absolute, without '..' or NUL")
        if root is not None and not os.path.normpath(e["destination"]).startswith(os.path.normpath(root) + "/"):
            raise TfdarshanError(f"{p}: entry {i + 1}: destination {e['destination']} is outside the root {root}")
        if e["destination"] in seen or os.path.abspath(e["destination"]) == os.path.abspath(e["source"]):
            raise TfdarshanError(f"{p}: entry {i + 1}: destination {e['destination']} repeats or is its source")
        seen.add(e["destination"])
    nodes = m.get("nodes")
    if nodes is not None:
        sources = {e["source"] for e in m["entries"]}
        if not (isinstance(nodes, dict) and all(isinstance(h, str) and h and isinstance(v, list)
                                                and all(isinstance(x, str) and x in sources for x in v)
                                                for h, v in nodes.items())):
            raise TfdarshanError(f"{p}: nodes must map host names to lists of the entries' sources")
    return m


def _clean_path(path: str) -> bool:
    """Absolute, no '..' component (a staged copy must stay under its
    root), no NUL (the OS refuses it half-way through staging)."""
    return os.path.isabs(path) and ".." not in path.split("/") and "\0" not in path


def _number_or_none(v) -> bool:
    return v is None or isinstance(v, (int, float)) and not isinstance(v, bool)


def _bar(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm
    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=desc, disable=not enabled,
                leave=False)
