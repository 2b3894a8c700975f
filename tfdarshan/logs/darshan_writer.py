"""Writing genuine Darshan logs with Darshan's own log library."""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import pathlib
import re
import socket
import sys
import tempfile
from typing import Dict, Iterable, Iterator, List, Optional, Tuple

import numpy as np
import pandas as pd

from tfdarshan._version import __version__
from tfdarshan.capture import _native
from tfdarshan.capture import counters as C
from tfdarshan.capture import heatmap as H
from tfdarshan.capture import mounts as M
from tfdarshan.capture.snapshot import Snapshot
from tfdarshan.errors import DarshanLogError
from tfdarshan.logs.darshan_format import (DXT_HEADER, EXE_LEN, HEATMAP_HEADER, HEATMAP_NAMES, MOD, MOD_VER,
                                            PSEUDO_FS, SEGMENT, darshan_util_version, ffi, fs_bytes, library,
                                            pack_names, record_dtype)


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


@dataclasses.dataclass(frozen=True)
class JobRecord:
    """A log's job region as put_job, put_exe and put_mounts take it: the
    job's fields, its metadata text, the command line and the mount table
    (fstype, mount point) as bytes, cut to Darshan's buffers."""
    uid: int
    start: Tuple[int, int]          # seconds, nanoseconds
    end: Tuple[int, int]
    nprocs: int
    jobid: int
    metadata: bytes
    exe: bytes
    mounts: List[Tuple[bytes, bytes]]


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
        # 1,022 bytes at most: put_job adds a newline to text that lacks one, then a NUL
        metadata="".join(f"{k}={str(v).replace(chr(10), ' ')}\n" for k, v in text.items()).encode()[:1022],
        exe=exe_text[:EXE_LEN].split(b"\0")[0],
        mounts=[(fstype.encode()[:EXE_LEN - 1], os.fsencode(point)[:EXE_LEN - 1])
                for point, fstype in _mounts_for_log(meta, mounts)])


def rebase_times(values: np.ndarray, by: float) -> np.ndarray:
    """Re-base timestamps; 0 stays "never"."""
    return np.where(values != 0, np.maximum(values - by, 1e-9), 0.0)


CHUNK_RECORDS = 8192          # records handed to the library at a time (~5.6 MiB of POSIX)
CHUNK_BYTES = 64 << 20        # the most of any other module's data in one call


def timestamp_columns(module: str) -> List[int]:
    """Which floating-point counters are times (0 = never) rather than durations."""
    return [j for j, name in enumerate(C.names(module)[1]) if C.kind(module, name) in (C.FIRST, C.LAST)]


def frame_records(module: str, frame: pd.DataFrame, rank: int) -> np.ndarray:
    """A snapshot frame's rows in Darshan's record layout; a `rank` column
    (a job log's) beats `rank`."""
    ints, floats = C.names(module)
    rec = np.zeros(len(frame), dtype=record_dtype(module))
    rec["id"] = frame["record_id"].to_numpy(dtype=np.uint64)
    rec["rank"] = frame["rank"].to_numpy(dtype=np.int64) if "rank" in frame else rank
    rec["c"] = frame[list(ints)].to_numpy(dtype=np.int64)
    rec["f"] = frame[list(floats)].to_numpy(dtype=np.float64)
    return rec


def _module_chunks(module: str, frame: pd.DataFrame, t0: float, rank: int) -> Iterator[bytes]:
    """Records in Darshan's layout, CHUNK_RECORDS at a time, times re-based to t0."""
    stamps = timestamp_columns(module)
    for lo in range(0, len(frame), CHUNK_RECORDS):
        rec = frame_records(module, frame.iloc[lo:lo + CHUNK_RECORDS], rank)
        rec["f"][:, stamps] = rebase_times(rec["f"][:, stamps], t0)
        yield rec.tobytes()


def _pieces(buf: bytes) -> Iterator[bytes]:
    for lo in range(0, len(buf), CHUNK_BYTES):
        yield buf[lo:lo + CHUNK_BYTES]


class _Library:
    """libdarshan-util's calls for one log, made in order on a thread of
    their own: the library compresses (in C, without the GIL) while the
    caller builds the next chunk. A call is not waited for unless the one
    two before it is still running, which bounds the chunks held. At
    interpreter shutdown (logs written from atexit) no thread can start:
    the calls are then made in the caller's thread."""

    def __init__(self):
        self._pool: Optional[concurrent.futures.ThreadPoolExecutor] = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="tfdarshan-log-writer")
        self._pending: List[concurrent.futures.Future] = []
        self.ok = True

    @staticmethod
    def _run(fn, args) -> bool:
        with _native.suppressed():          # the shim must not count its own log
            return fn(*args) == 0

    def call(self, fn, *args) -> None:
        if not self.ok:
            return                          # a call failed: the log is lost, the rest is moot
        if self._pool is not None:
            try:
                self._pending.append(self._pool.submit(self._run, fn, args))
            except RuntimeError:            # shutting down: no new threads
                self._wait(0)
                self._pool.shutdown()
                self._pool = None
            else:
                self._wait(2)
                return
        self.ok &= self._run(fn, args)

    def _wait(self, keep: int) -> None:
        while len(self._pending) > keep:
            self.ok &= self._pending.pop(0).result()

    def finish(self) -> bool:
        self._wait(0)
        if self._pool is not None:
            self._pool.shutdown()
        return self.ok


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


REF_WORDS = ffi.sizeof("struct darshan_name_record_ref") // 8
NEXT_WORD = ffi.offsetof("struct darshan_name_record_ref", "hlink") // 8 + 2   # hlink.next


def _name_records(ids: np.ndarray, names: List[bytes]):
    """Darshan's name table as two numpy buffers: the records {uint64 id;
    char name[];} back to back, and uthash refs chained through hlink.next
    (all put_namehash walks). The caller keeps both alive while writing."""
    blob, starts = pack_names(ids, names)
    refs = np.zeros((max(1, len(starts)), REF_WORDS), dtype=np.uint64)
    if len(starts):
        refs[:, 0] = blob.ctypes.data + starts.astype(np.uint64)
        nxt = refs.ctypes.data + np.arange(1, len(starts) + 1, dtype=np.uint64) * (REF_WORDS * 8)
        nxt[-1] = 0
        refs[:, NEXT_WORD] = nxt
    return blob, refs


def write_darshan_log(snap: Snapshot, path, *, exe: Optional[str] = None, jobid: Optional[int] = None,
                      mounts: Optional[Iterable[M.Mount]] = None, metadata: Optional[Dict[str, str]] = None,
                      heatmap: bool = True, rank: int = 0, nprocs: int = 1) -> pathlib.Path:
    """Write `snap` as a Darshan log (format 3.41, modules POSIX, STDIO,
    DXT_POSIX when traced, HEATMAP). The file appears complete or not at all.

    rank: the rank every record is tagged with (a frame's `rank` column,
    as a job log has, wins); nprocs: the job's process count.

    Times in the log are relative to the snapshot's start (the job start).
    An existing file is not overwritten."""
    path = pathlib.Path(path)
    if path.exists():
        raise DarshanLogError(f"{path}: already exists; not overwriting")
    if not path.parent.is_dir():
        raise DarshanLogError(f"{path}: directory {path.parent} does not exist")
    ranks = [int(rank)] + [int(f["rank"].max()) for f in (snap.posix, snap.stdio, snap.dxt) if "rank" in f and len(f)]
    if max(ranks) >= nprocs:
        # libdarshan-util's readers abort the process on such a log
        raise DarshanLogError(f"{path}: a record of rank {max(ranks)} in a log of {nprocs} process(es)")
    lib = library()
    t0, t1 = snap.start, max(snap.end, snap.start)
    rec = job_record(snap.meta, t0, t1, exe=exe, jobid=jobid, mounts=mounts, metadata=metadata, nprocs=nprocs)
    job = ffi.new("struct darshan_job *")
    job.uid, job.nprocs, job.jobid = rec.uid, rec.nprocs, rec.jobid
    job.start_time_sec, job.start_time_nsec = rec.start
    job.end_time_sec, job.end_time_nsec = rec.end
    job.metadata = rec.metadata
    exe_buf = ffi.new("char[]", rec.exe)
    mnt = ffi.new("struct darshan_mnt_info[]", max(1, len(rec.mounts)))
    for i, (fstype, point) in enumerate(rec.mounts):
        mnt[i].mnt_type, mnt[i].mnt_path = fstype, point
    hostname = str(snap.meta.get("hostname", socket.gethostname()))

    modules = [(m, _module_chunks(m, snap.frame(m), t0, rank)) for m in ("POSIX", "STDIO") if len(snap.frame(m))]
    ids = [snap.frame(m)["record_id"].to_numpy(dtype=np.uint64) for m in ("POSIX", "STDIO")]
    names = fs_bytes(snap.frame("POSIX")["path"]) + fs_bytes(snap.frame("STDIO")["path"])
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

    name_blob, refs = _name_records(np.concatenate(ids), names)

    fd_tmp, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd_tmp)
    os.unlink(tmp_name)      # darshan_log_create insists on creating the file itself
    with _native.suppressed():
        fd = lib.darshan_log_create(os.fsencode(tmp_name), 0, 0)
    if fd == ffi.NULL:
        raise DarshanLogError(f"{path}: libdarshan-util could not create the log")
    calls = _Library()
    try:
        calls.call(lib.darshan_log_put_job, fd, job)
        calls.call(lib.darshan_log_put_exe, fd, exe_buf)
        calls.call(lib.darshan_log_put_mounts, fd, mnt, len(rec.mounts))
        if len(names):
            calls.call(lib.darshan_log_put_namehash, fd, ffi.cast("struct darshan_name_record_ref *",
                                                                   refs.ctypes.data))
        # modules by ascending id, as the format wants; each chunk is built
        # while the library compresses the one before
        for module, chunks in sorted(modules, key=lambda m: MOD[m[0]]):
            for chunk in chunks:
                calls.call(lib.darshan_log_put_mod, fd, MOD[module], ffi.from_buffer(chunk), len(chunk),
                           MOD_VER[module])
    except BaseException:
        calls.ok = False
        raise
    finally:
        ok = calls.finish()
        with _native.suppressed():
            lib.darshan_log_close(fd)
        if not ok:
            _unlink_quietly(tmp_name)
    del name_blob, refs                     # kept alive until the library was done with them
    if not ok:
        raise DarshanLogError(f"{path}: libdarshan-util failed while writing the log")
    os.replace(tmp_name, path)
    return path


def _unlink_quietly(p):
    try:
        os.chmod(p, 0o600)
        os.unlink(p)
    except OSError:
        pass
