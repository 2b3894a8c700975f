"""Writing genuine Darshan logs: what a snapshot's log holds, region by
region, written by log_stream on every core."""
from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import re
import socket
import sys
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy as np
import pandas as pd

from tfdarshan._version import __version__
from tfdarshan.capture import _native
from tfdarshan.capture import counters as C
from tfdarshan.capture import heatmap as H
from tfdarshan.capture import mounts as M
from tfdarshan.capture.snapshot import Snapshot
from tfdarshan.errors import DarshanLogError
from tfdarshan.logs import log_stream
from tfdarshan.logs.log_stream import JobRecord
from tfdarshan.logs.darshan_format import (DXT_HEADER, EXE_LEN, HEATMAP_HEADER, HEATMAP_NAMES, MOD, PSEUDO_FS,
                                            SEGMENT, darshan_util_version, fs_bytes, pack_names, record_dtype)


def job_id_from_environment(environ=os.environ) -> Optional[int]:
    """The batch scheduler's job id (its numeric part), if there is one."""
    for var in ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "COBALT_JOBID", "FLUX_JOB_ID", "JOB_ID",
                "OMPI_MCA_ess_base_jobid"):
        v = environ.get(var)
        if v:
            digits = re.match(r"\d+", v)
            if digits:
                return int(digits.group())
    return None


def _mounts_for_log(meta: dict, mounts: Optional[Iterable[M.Mount]]) -> List[Tuple[str, str]]:
    if mounts is None:
        stored = meta.get("mounts")
        mounts = [M.Mount(p, t) for p, t in stored] if stored else M.current()
    pairs = {(m.point, m.fstype) for m in mounts if m.fstype not in PSEUDO_FS}
    # longest mount point first, as Darshan stores them, so a prefix match finds the most specific
    return sorted(pairs, key=lambda pt: (-len(pt[0]), pt[0]))


def _sec_nsec(t: float) -> Tuple[int, int]:
    return int(t), int((t % 1) * 1e9)


def job_record(meta: dict, t0: float, t1: float, *, exe: Optional[str] = None, jobid: Optional[int] = None,
               mounts: Optional[Iterable[M.Mount]] = None, metadata: Optional[Dict[str, str]] = None,
               nprocs: int = 1) -> JobRecord:
    """The job region of a log whose snapshot has `meta` and spans t0..t1
    (seconds after meta's origin_unix_time)."""
    origin = float(meta.get("origin_unix_time", 0.0))
    text = {"lib_ver": darshan_util_version(), "tfdarshan": __version__,
            "hostname": str(meta.get("hostname", socket.gethostname()))}
    # what the counters alone cannot say: files past the record cap, trace drops
    for key in ("folded_files", "trace_dropped"):
        if meta.get(key):
            text[key] = str(int(meta[key]))
    text.update({k: str(v) for k, v in (metadata or {}).items()})
    exe_text = (exe if exe is not None else " ".join(sys.argv) or sys.executable).encode(errors="surrogateescape")
    return JobRecord(
        uid=os.getuid(), start=_sec_nsec(origin + t0), end=_sec_nsec(origin + t1), nprocs=nprocs,
        jobid=jobid if jobid is not None else (job_id_from_environment() or int(meta.get("pid", os.getpid()))),
        metadata=metadata_lines(text),
        exe=exe_text[:EXE_LEN].split(b"\0")[0],
        mounts=[(fstype.encode()[:EXE_LEN - 1], os.fsencode(point)[:EXE_LEN - 1])
                for point, fstype in _mounts_for_log(meta, mounts)])


# the job record's metadata text: put_job adds a newline to text that lacks one, then a NUL
METADATA_BYTES = 1022
# kept for the line that names what did not fit
OMITTED_ROOM = 160


def metadata_lines(text: Dict[str, str]) -> bytes:
    """The job record's "key=value" lines, each whole. Past METADATA_BYTES a
    line that does not fit is left out and its key named in a last line,
    `omitted=`: a value cut short would be read back as another value (a
    node's CPU ranges, a list of ranks), where a missing one is read as
    unknown. Keys first in `text` are kept first."""
    lines = [(k, f"{k}={str(v).replace(chr(10), ' ')}\n".encode(errors="backslashreplace"))
             for k, v in text.items()]
    if sum(len(line) for _, line in lines) <= METADATA_BYTES:
        return b"".join(line for _, line in lines)
    room, kept, omitted = METADATA_BYTES - OMITTED_ROOM, [], []
    for key, line in lines:
        if len(line) <= room:
            kept.append(line)
            room -= len(line)
        else:
            omitted.append(key.replace(",", " "))
    note = ("omitted=" + ",".join(omitted)).encode(errors="backslashreplace")
    if len(note) > OMITTED_ROOM - 1:        # (keys cut at a comma, the rest said to exist)
        cut = note.rfind(b",", 0, OMITTED_ROOM - 5)
        note = (note[:cut] + b"," if cut > 0 else b"omitted=") + b"..."
    return b"".join(kept) + note + b"\n"


def rebase_times(values: np.ndarray, by: float) -> np.ndarray:
    """Re-base timestamps; 0 stays "never"."""
    return np.where(values != 0, np.maximum(values - by, 1e-9), 0.0)


# records in one zlib stream (~5.6 MiB of POSIX): a stream is built and
# deflated by one worker, so a log's streams compress on every core
STREAM_RECORDS = 8192


def timestamp_columns(module: str) -> List[int]:
    """Which floating-point counters are times (0 = never) rather than durations."""
    return [j for j, name in enumerate(C.names(module)[1]) if C.kind(module, name) in (C.FIRST, C.LAST)]


def frame_records(module: str, frame: pd.DataFrame, rank: int) -> np.ndarray:
    """A snapshot frame's rows in Darshan's record layout; a `rank` column
    (a job log's) beats `rank`."""
    return RecordSource(module, frame, rank, None).records(0, len(frame))


class RecordSource:
    """A snapshot frame's counters as one array a column, from which any run
    of its rows is built in Darshan's record layout. Built in parts (one a
    stream) so no copy of a whole module's records is ever held; a part's
    copies release the GIL, so parts are built on several threads.

    t0: timestamps (0 = never) are re-based to it; None leaves them."""

    def __init__(self, module: str, frame: pd.DataFrame, rank: int, t0: Optional[float]):
        ints, floats = C.names(module)
        self.module, self.n, self.t0 = module, len(frame), t0
        self.ids = frame["record_id"].to_numpy(dtype=np.uint64)
        self.rank = frame["rank"].to_numpy(dtype=np.int64) if "rank" in frame else int(rank)
        self.ints = [frame[c].to_numpy(dtype=np.int64) for c in ints]
        self.floats = [frame[c].to_numpy(dtype=np.float64) for c in floats]
        self.stamps = set(timestamp_columns(module))

    def records(self, lo: int, hi: int) -> np.ndarray:
        rec = np.empty(hi - lo, dtype=record_dtype(self.module))
        rec["id"] = self.ids[lo:hi]
        rec["rank"] = self.rank[lo:hi] if isinstance(self.rank, np.ndarray) else self.rank
        c, f = rec["c"], rec["f"]
        for j, col in enumerate(self.ints):
            c[:, j] = col[lo:hi]
        for j, col in enumerate(self.floats):
            f[:, j] = rebase_times(col[lo:hi], self.t0) if self.t0 is not None and j in self.stamps else col[lo:hi]
        return rec

    def parts(self, size: int = STREAM_RECORDS) -> List[Callable[[], np.ndarray]]:
        """Functions that build the records, `size` at a time, in order."""
        return [functools.partial(self.records, lo, min(lo + size, self.n)) for lo in range(0, self.n, size)]


def _pieces(buf: bytes) -> List[Callable[[], memoryview]]:
    """Functions that give `buf` a stream's worth at a time."""
    view = memoryview(buf)
    return [functools.partial(view.__getitem__, slice(lo, lo + log_stream.STREAM_BYTES))
            for lo in range(0, len(buf), log_stream.STREAM_BYTES)]


def dxt_buffer(dxt: pd.DataFrame, t0: float, hostname: str, rank: int) -> bytes:
    """One DXT record per file: header, its writes, then its reads, as DXT
    stores them. Vectorised: a long trace has millions of segments."""
    op = dxt["op"].to_numpy()
    keep = (op == "read") | (op == "write")
    if not keep.any():
        return b""
    rid = dxt["record_id"].to_numpy()[keep]
    is_read = (op[keep] == "read")
    order = np.lexsort((np.arange(len(rid)), is_read, rid))   # by file, writes first, in trace order
    seg = np.zeros(len(order), dtype=SEGMENT)
    for field in ("offset", "length"):
        seg[field] = dxt[field].to_numpy()[keep][order]
    for field in ("start", "end"):
        seg[field] = np.maximum(dxt[field].to_numpy()[keep][order] - t0, 0.0)
    rid, is_read = rid[order], is_read[order]
    files, starts, counts = np.unique(rid, return_index=True, return_counts=True)
    reads = np.add.reduceat(is_read.astype(np.int64), starts)
    host = hostname.encode()[:63]
    body = seg.tobytes()
    size = SEGMENT.itemsize
    parts = []
    for f, start, count, nread in zip(files.tolist(), starts.tolist(), counts.tolist(), reads.tolist()):
        parts.append(DXT_HEADER.pack(int(f), rank, 0, host, count - nread, nread))
        parts.append(body[start * size:(start + count) * size])
    return b"".join(parts)


def _heatmap_buffer(snap: Snapshot, t0: float, t1: float) -> Tuple[bytes, List[Tuple[int, str]]]:
    width, bins = H.darshan_bins(snap._heat, t0, t1)
    parts, names = [], []
    for module, name in HEATMAP_NAMES.items():
        if not (bins[module]["read"].any() or bins[module]["write"].any()):
            continue    # Darshan drops empty heatmaps (and its summary cannot plot them)
        rid = _native.darshan_hash(name)
        nbins = len(bins[module]["read"])
        parts.append(HEATMAP_HEADER.pack(rid, 0, width, nbins, 0, 0))
        parts.append(bins[module]["write"].astype("<i8").tobytes())
        parts.append(bins[module]["read"].astype("<i8").tobytes())
        names.append((rid, name))
    return b"".join(parts), names


@dataclasses.dataclass
class LogParts:
    """What a log holds, in the order its regions are written: the name
    region's records, then (module, its raw bytes as functions that build
    them a stream at a time) by ascending module id."""
    ids: np.ndarray
    names: List[bytes]
    modules: List[Tuple[str, List[Callable[[], object]]]]

    def name_region(self) -> bytes:
        return pack_names(self.ids, self.names)[0].tobytes() if len(self.ids) else b""


def log_parts(snap: Snapshot, *, heatmap: bool = True, rank: int = 0) -> LogParts:
    """The regions a log of `snap` holds after its job region (see write_darshan_log)."""
    t0, t1 = snap.start, max(snap.end, snap.start)
    modules = [(m, RecordSource(m, snap.frame(m), rank, t0).parts()) for m in ("POSIX", "STDIO")
               if len(snap.frame(m))]
    ids = [snap.frame(m)["record_id"].to_numpy(dtype=np.uint64) for m in ("POSIX", "STDIO")]
    names = fs_bytes(snap.frame("POSIX")["path"]) + fs_bytes(snap.frame("STDIO")["path"])
    hostname = str(snap.meta.get("hostname", socket.gethostname()))
    dxt = snap._dxt
    if len(dxt) and "rank" in dxt:
        # a job log's trace: one DXT record per file and rank, as each rank wrote it
        modules.append(("DXT_POSIX", _pieces(b"".join(dxt_buffer(g, t0, str(g["host"].iat[0]), int(r))
                                                      for r, g in dxt.groupby("rank", sort=True)))))
    elif len(dxt):
        modules.append(("DXT_POSIX", _pieces(dxt_buffer(dxt, t0, hostname, rank))))
    if heatmap:
        buf, heat_names = _heatmap_buffer(snap, t0, t1)
        if buf:
            modules.append(("HEATMAP", _pieces(buf)))
        ids.append(np.array([rid for rid, _ in heat_names], dtype=np.uint64))
        names += [n.encode() for _, n in heat_names]
    return LogParts(np.concatenate(ids), names, sorted(modules, key=lambda m: MOD[m[0]]))


def check_destination(path: pathlib.Path, snap: Snapshot, rank: int, nprocs: int) -> None:
    """DarshanLogError unless a log of `snap` may be written at `path`."""
    if path.exists():
        raise DarshanLogError(f"{path}: already exists; not overwriting")
    if not path.parent.is_dir():
        raise DarshanLogError(f"{path}: directory {path.parent} does not exist")
    ranks = [int(rank)] + [int(f["rank"].max()) for f in (snap.posix, snap.stdio, snap.dxt) if "rank" in f and len(f)]
    if max(ranks) >= nprocs:
        # libdarshan-util's readers abort the process on such a log
        raise DarshanLogError(f"{path}: a record of rank {max(ranks)} in a log of {nprocs} process(es)")


def _deflated(item):
    """(region, one zlib stream of what `build` makes; nothing for nothing)."""
    region, build = item
    raw = build()
    return region, log_stream.deflate(raw) if len(raw) else b""


def write_darshan_log(snap: Snapshot, path, *, exe: Optional[str] = None, jobid: Optional[int] = None,
                      mounts: Optional[Iterable[M.Mount]] = None, metadata: Optional[Dict[str, str]] = None,
                      heatmap: bool = True, rank: int = 0, nprocs: int = 1) -> pathlib.Path:
    """Write `snap` as a Darshan log (format 3.41, modules POSIX, STDIO,
    DXT_POSIX when traced, HEATMAP). The file appears complete or not at all.

    rank: the rank every record is tagged with (a frame's `rank` column,
    as a job log has, wins); nprocs: the job's process count.

    Times in the log are relative to the snapshot's start (the job start).
    An existing file is not overwritten.

    Written by log_stream (each region a run of zlib streams, built and
    deflated on every core), byte for byte what libdarshan-util's writer
    would store once inflated (tests/oracles/libdarshan_util_writer.py)."""
    path = pathlib.Path(path)
    check_destination(path, snap, rank, nprocs)
    rec = job_record(snap.meta, snap.start, max(snap.end, snap.start), exe=exe, jobid=jobid, mounts=mounts,
                     metadata=metadata, nprocs=nprocs)
    parts = log_parts(snap, heatmap=heatmap, rank=rank)
    # every stream in the order the file holds them: the job region, the
    # names, then each module's; built and deflated ahead on the workers
    streams = [(-2, functools.partial(log_stream.job_region, rec)), (-1, parts.name_region)]
    streams += [(MOD[module], build) for module, builds in parts.modules for build in builds]
    workers = os.cpu_count() or 1
    try:
        writer = log_stream.StreamWriter(path)
    except OSError as e:
        raise DarshanLogError(f"{path}: cannot write the log ({e.strerror})") from None
    try:
        with log_stream.workers(workers) as pool:
            for region, stream in log_stream.in_order(pool, _deflated, streams, 2 * workers):
                if region != writer.region:
                    writer.start(region)
                writer.write(stream)
        return writer.close()
    except OSError as e:            # a full disk, a quota: one clear line, no half-written file
        writer.abandon()
        raise DarshanLogError(f"{path}: cannot write the log ({e.strerror or e})") from None
    except BaseException:
        writer.abandon()
        raise
