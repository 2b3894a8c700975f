"""Storage tiers: a mount point with measured (or declared) speeds.

`probe(path)` measures, on the file system holding path, the latency of
open and stat, the open rate that several openers at once reach (what a
metadata server, or a node's kernel, sustains for this client), the latency
of a small read and the bandwidth of large sequential reads, with the page
cache defeated by
posix_fadvise(POSIX_FADV_DONTNEED). Tiers that cannot be probed from here
(a burst buffer, node-local NVMe, Lustre) are declared in TOML:

    [[tier]]
    path = "/mnt/nvme"          # mount point or directory
    name = "node-local NVMe"    # optional
    capacity = "800G"           # optional: free space to plan with
    open_latency = 20e-6        # seconds per open (and close)
    stat_latency = 5e-6         # seconds per stat
    read_latency = 80e-6        # seconds of fixed cost per read request
    bandwidth = "3G"            # bytes per second for large reads
    open_rate = 50000           # opens (and closes) per second the tier sustains
"""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import re
import shutil
import statistics
import sys
import tempfile
import time
from typing import Dict, Iterable, List, Optional, Tuple

import numpy as np

from tfdarshan.capture import _native
from tfdarshan.capture import mounts as M
from tfdarshan.errors import TfdarshanError

UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 10**3, "KIB": 1 << 10, "M": 1 << 20, "MB": 10**6,
         "MIB": 1 << 20, "G": 1 << 30, "GB": 10**9, "GIB": 1 << 30, "T": 1 << 40, "TB": 10**12, "TIB": 1 << 40}
OPEN_RATE_SECONDS = 1.0        # at most, for the concurrent-open measurement
FIELDS = ("open_latency", "stat_latency", "read_latency", "bandwidth", "open_rate")
OPENERS = 4                 # parallel openers of the open-rate probe (threads: os.open releases the GIL)
MAX_SIZE = 1 << 63          # bytes; beyond any file system, and still an int64


def parse_size(text) -> int:
    """'10%' is not a size; '64M', '1.5G', '2TiB', 4096 are."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if not 0 <= text <= MAX_SIZE:      # also NaN and infinities
            raise ValueError(f"size must be between 0 and {MAX_SIZE}: {text}")
        return int(text)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).upper() not in UNITS:
        raise ValueError(f"not a size: {text!r} (examples: 4096, 64M, 1.5G, 2TiB)")
    value = float(m.group(1)) * UNITS[m.group(2).upper()]
    if value > MAX_SIZE:                    # int(inf) would raise OverflowError
        raise ValueError(f"size too large: {text!r}")
    return int(value)


@dataclasses.dataclass(frozen=True)
class Tier:
    path: str                       # mount point (or the directory declared)
    fstype: str = ""
    name: str = ""
    open_latency: float = 0.0       # s per open+close
    stat_latency: float = 0.0       # s per stat
    read_latency: float = 0.0       # s fixed cost per read request (beyond bytes/bandwidth)
    bandwidth: float = 0.0          # bytes/s, large sequential reads, cold
    open_rate: float = 0.0          # opens+closes/s with OPENERS at once (0: not measured or declared)
    capacity: Optional[int] = None  # bytes free to plan with
    source: str = "declared"        # "probe" or "declared"
    measured_at: float = 0.0
    spread: Tuple[Tuple[str, float, float], ...] = ()   # a probe's (field, lowest, highest) over its repeats

    @property
    def label(self) -> str:
        return self.name or f"{self.path} ({self.fstype or '?'})"

    def time(self, opens, stats, reads, nbytes):
        """Predicted seconds of I/O calls for that much work on this tier."""
        return (opens * self.open_latency + stats * self.stat_latency + reads * self.read_latency
                + (nbytes / self.bandwidth if self.bandwidth > 0 else 0.0))

    def to_dict(self) -> Dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: Dict) -> "Tier":
        if not isinstance(d, dict) or "path" not in d:
            raise ValueError("a tier needs a path")
        kw = {}
        for f in dataclasses.fields(cls):
            if f.name in d:
                kw[f.name] = d[f.name]
        for f in FIELDS:
            v = kw.get(f, 0.0)
            v = parse_size(v) if f == "bandwidth" and isinstance(v, str) else v
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not 0 <= v <= sys.float_info.max:
                raise ValueError(f"tier {d.get('path')!r}: {f} must be a finite non-negative number")
            kw[f] = float(v)
        if kw.get("capacity") is not None:
            kw["capacity"] = parse_size(kw["capacity"])
        for f in ("path", "fstype", "name", "source"):
            if f in kw and not isinstance(kw[f], str):
                raise ValueError(f"tier {d.get('path')!r}: {f} must be text")
        if not kw["path"]:
            raise ValueError("a tier needs a non-empty path")
        if "spread" in kw:
            kw["spread"] = _spread_of(kw["spread"], d.get("path"))
        return cls(**kw)

    def range_of(self, field: str) -> Optional[Tuple[float, float]]:
        """(lowest, highest) of a probed figure over the probe's repeats."""
        return next(((lo, hi) for f, lo, hi in self.spread if f == field), None)


def _spread_of(value, path) -> Tuple[Tuple[str, float, float], ...]:
    ok = isinstance(value, (list, tuple)) and all(
        isinstance(e, (list, tuple)) and len(e) == 3 and e[0] in FIELDS
        and all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= sys.float_info.max
                for x in e[1:]) for e in value)
    if not ok:
        raise ValueError(f"tier {path!r}: spread must be a list of [field, lowest, highest]")
    return tuple((str(f), float(lo), float(hi)) for f, lo, hi in value)


# ------------------------------------------------------------------ probing
def _evict(fd: int) -> None:
    os.fdatasync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def probe(path, *, size: int = 64 << 20, small_reads: int = 64, opens: int = 200, repeats: int = 5) -> Tier:
    """Measure the tier holding `path` (a directory we may write into):
    each figure is the median of `repeats` measurements, and the tier keeps
    their lowest and highest (one cold read of a disk varied by almost 2x)."""
    root = pathlib.Path(path)
    if not root.is_dir():
        raise TfdarshanError(f"{root}: not a directory")
    if shutil.disk_usage(root).free < size * 2:
        raise TfdarshanError(f"{root}: not enough free space for a {size >> 20} MiB probe")
    mount = M.mount_of(str(root.resolve()), M.current())
    with _native.suppressed(), tempfile.TemporaryDirectory(prefix=".tfdarshan-probe-", dir=root) as d:
        big = pathlib.Path(d, "big.bin")
        chunk = os.urandom(1 << 20)
        with open(big, "wb") as f:
            for _ in range(max(1, size >> 20)):
                f.write(chunk)
            f.flush()
            _evict(f.fileno())
        small = [pathlib.Path(d, f"s{i}") for i in range(16)]
        for p in small:
            p.write_bytes(b"x" * 4096)
        runs = [_measure_once(big, small, opens, small_reads) for _ in range(max(1, repeats))]
    figures = {f: statistics.median(r[f] for r in runs) for f in runs[0]}
    return Tier(path=mount.point if mount else str(root), fstype=mount.fstype if mount else "",
                capacity=shutil.disk_usage(root).free, source="probe", measured_at=time.time(),
                spread=tuple((f, min(r[f] for r in runs), max(r[f] for r in runs)) for f in runs[0]),
                **figures)


def _measure_once(big: pathlib.Path, small, opens: int, small_reads: int) -> Dict[str, float]:
    # open+close and stat of existing files
    t = time.perf_counter()
    for i in range(opens):
        os.close(os.open(small[i % len(small)], os.O_RDONLY))
    open_lat = (time.perf_counter() - t) / opens
    t = time.perf_counter()
    for i in range(opens):
        os.stat(small[i % len(small)])
    stat_lat = (time.perf_counter() - t) / opens
    # cold 4 KiB reads at scattered offsets, then cold 1 MiB sequential reads
    fd = os.open(big, os.O_RDONLY)
    try:
        _evict(fd)
        n_blocks = max(1, os.fstat(fd).st_size // 4096)
        step = max(1, n_blocks // small_reads)
        lat = []
        for i in range(small_reads):
            t = time.perf_counter()
            os.pread(fd, 4096, ((i * step * 7919) % n_blocks) * 4096)
            lat.append(time.perf_counter() - t)
        _evict(fd)
        total, t = 0, time.perf_counter()
        while True:
            b = os.pread(fd, 1 << 20, total)
            if not b:
                break
            total += len(b)
        bandwidth = total / max(time.perf_counter() - t, 1e-9)
    finally:
        os.close(fd)
    return {"open_latency": open_lat, "stat_latency": stat_lat, "bandwidth": bandwidth,
            "read_latency": max(statistics.median(lat) - 4096 / bandwidth, 0.0),
            "open_rate": _open_rate(small, max(opens, 1000))}


def _open_rate(small, opens: int, seconds: float = OPEN_RATE_SECONDS) -> float:
    """Opens+closes per second with OPENERS threads opening at once, each
    `opens` times or for `seconds`, whichever ends first (a slow shared file
    system takes milliseconds an open): one opener's latency hides how the
    tier behaves under the many ranks of a job (a shared metadata server, a
    node's dentry locks)."""
    import threading
    start = threading.Barrier(OPENERS + 1)
    done = [0] * OPENERS

    def opener(k: int) -> None:
        start.wait()
        deadline = time.perf_counter() + seconds
        for i in range(opens):
            os.close(os.open(small[(i + k) % len(small)], os.O_RDONLY))
            done[k] = i + 1
            if time.perf_counter() > deadline:
                break

    threads = [threading.Thread(target=opener, args=(k,)) for k in range(OPENERS)]
    for th in threads:
        th.start()
    start.wait()
    t = time.perf_counter()
    for th in threads:
        th.join()
    return sum(done) / max(time.perf_counter() - t, 1e-9)


# ------------------------------------------------------------------ storing
def default_store() -> pathlib.Path:
    base = os.environ.get("TFDARSHAN_TIERS") or os.path.join(
        os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "tfdarshan", "tiers.json")
    return pathlib.Path(base)


def load(paths: Iterable = ()) -> List[Tier]:
    """Probed tiers from the store, then declared ones from TOML files
    (a declared tier replaces a probed one with the same path)."""
    tiers: Dict[str, Tier] = {}
    store = default_store()
    if store.exists():
        try:
            for d in json.loads(store.read_text()):
                t = Tier.from_dict(d)
                tiers[t.path] = t
        except (ValueError, TypeError, RecursionError) as e:
            raise TfdarshanError(f"{store}: unreadable tier store ({e})") from None
    for p in paths:
        for t in load_toml(p):
            tiers[t.path] = t
    return list(tiers.values())


def save_probe(tier: Tier) -> pathlib.Path:
    store = default_store()
    store.parent.mkdir(parents=True, exist_ok=True)
    existing = []
    if store.exists():
        try:
            existing = [d for d in json.loads(store.read_text())
                        if isinstance(d, dict) and d.get("path") != tier.path]
        except (ValueError, TypeError, RecursionError):    # a damaged store is replaced, not fatal
            existing = []
    tmp = store.with_name(f".{store.name}.{os.getpid()}.tmp")     # probes on several nodes may share a store
    tmp.write_text(json.dumps(existing + [tier.to_dict()], indent=2))
    os.replace(tmp, store)
    return store


def load_toml(path) -> List[Tier]:
    try:
        import tomllib
    except ModuleNotFoundError:          # Python < 3.11
        import tomli as tomllib
    p = pathlib.Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise TfdarshanError(f"{p}: cannot read ({e.strerror})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise TfdarshanError(f"{p}: not valid TOML ({e})") from None
    except RecursionError:
        raise TfdarshanError(f"{p}: not valid TOML (nested too deeply)") from None
    entries = data.get("tier")
    if not isinstance(entries, list) or not entries:
        raise TfdarshanError(f"{p}: expected one or more [[tier]] tables")
    out = []
    for i, d in enumerate(entries):
        try:
            out.append(Tier.from_dict({**d, "source": "declared"}))
        except (ValueError, TypeError) as e:
            raise TfdarshanError(f"{p}: tier {i + 1}: {e}") from None
    return out


def point_of(path: str, mounts: Optional[Iterable[M.Mount]] = None) -> str:
    """The mount point of the file system holding path ("/" when no mount
    table says otherwise)."""
    m = M.mount_of(path, M.current() if mounts is None else mounts)
    return m.point if m else "/"


def tier_for(path: str, tiers: Iterable[Tier], mounts: Optional[Iterable[M.Mount]] = None) -> Optional[Tier]:
    """The known tier holding `path`: among the tiers on path's own file
    system (mount), the one whose directory is the longest prefix of it. A
    tier measured at an enclosing mount point is another file system (a
    probe of "/" says nothing of /dev/shm or a FUSE mount below it)."""
    mounts = M.current() if mounts is None else list(mounts)
    point = point_of(path, mounts)
    return M.longest_prefix(path, [t for t in tiers if point_of(t.path, mounts) == point], lambda t: t.path)


def labels_of(paths, tiers: Iterable[Tier], mounts: Iterable[M.Mount]) -> np.ndarray:
    """tier_for(path).label for each path ("" where no tier is known),
    looked up once a mount point and directory, not once a file."""
    tiers, mounts = list(tiers), list(mounts)
    paths = np.asarray(list(paths), dtype=object)
    out = np.full(len(paths), "", dtype=object)
    if not tiers or not len(paths):
        return out
    dirs = np.array([os.path.dirname(p) for p in paths], dtype=object)
    uniq, where = np.unique(dirs, return_inverse=True)
    # a directory's tier holds its files unless a tier is declared for one file itself (rare): check those
    exact = {t.path for t in tiers}
    for i, d in enumerate(uniq):
        t = tier_for(d + "/", tiers, mounts)
        out[where == i] = t.label if t else ""
    for j in np.flatnonzero(np.isin(paths, list(exact))):
        t = tier_for(paths[j], tiers, mounts)
        out[j] = t.label if t else ""
    return out


def on_tier(paths, tier: Tier, mounts: Iterable[M.Mount]) -> np.ndarray:
    """Which paths already sit on the tier: inside its directory and on the
    same file system as it (a mount inside the tier's directory is another
    file system: data on a FUSE mount below "/" is not on "/")."""
    mounts = list(mounts)
    paths = list(paths)
    prefix = tier.path.rstrip("/") or "/"
    point = point_of(prefix, mounts)
    inside = np.array([prefix == "/" or p == prefix or p.startswith(prefix + "/") for p in paths], dtype=bool)
    if not mounts or not len(paths):
        return inside
    return inside & (np.array([x or "/" for x in M.points_of(paths, mounts)], dtype=object) == point)


def evict_cache(paths: Iterable) -> int:
    """Drop the page-cache copies of files (no root needed), so the next
    read comes from the device; returns how many files were evicted."""
    n = 0
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except OSError:
            continue
        try:
            os.fdatasync(fd)      # dirty pages are not dropped, only clean ones
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            n += 1
        finally:
            os.close(fd)
    return n
