"""Darshan's log format 3.41 written by our own code, for every log we
write (a process's, joblog_stream's job log): each region a run of zlib
streams, compressed on worker threads, the way Darshan's MPI runtime writes
a job log (each rank deflates its own part and the parts are concatenated;
darshan-util's darshan_log_libz_read resets at every stream's end and reads
on).

Why not libdarshan-util's writer: it deflates on one thread at zlib level 6
(about 100-150 MB/s here). A job log of 1,024 ranks x 10,000 files holds
7.2 GB of records, so the library alone would take 50-75 s of the 60 s
budget (docs/guide/mpi-slurm.md, "How the job log is written"); a process's log of 100,000
files spent 0.5 s of its 0.74 s there. tests/oracles/libdarshan_util_writer.py keeps
the library's writer as the tests' oracle."""
from __future__ import annotations

import concurrent.futures
import dataclasses
import os
import pathlib
import struct
import tempfile
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Tuple

from zlib_ng import zlib_ng     # releases the GIL while it deflates: streams compress in parallel

from tfdarshan.capture import _native
from tfdarshan.errors import DarshanLogError
from tfdarshan.logs.darshan_format import EXE_LEN, HEADER, LOG_VERSION, MAGIC, MOD, MOD_VER

# zlib level of the job log's streams. Level 1 deflates these records at
# ~680 MB/s on one core here, level 6 (libdarshan-util's and Darshan's
# runtime's) at ~205 MB/s, for a log ~20 % smaller: level 6 alone would cost
# 35 s of CPU at 1,024 x 10,000. Readers inflate any level alike.
LEVEL = 1
STREAM_BYTES = 8 << 20          # the most raw bytes one stream holds (names, reduced records)
_JOB = struct.Struct("<7q1024s")


def deflate(raw: bytes, level: int = LEVEL) -> bytes:
    """One complete zlib stream of `raw`."""
    return zlib_ng.compress(raw, level)


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


def job_region(rec: JobRecord) -> bytes:
    """The bytes darshan_log_put_job, put_exe and put_mounts write into the
    job region, exactly: the job struct (put_job ends the metadata with a
    newline), the command line, then the mount table from its last entry
    to its first, as far as it fits, and a NUL."""
    meta = rec.metadata.split(b"\0")[0]
    if 0 < len(meta) < 1024 and not meta.endswith(b"\n"):
        meta += b"\n"
    job = _JOB.pack(rec.uid, *rec.start, *rec.end, rec.nprocs, rec.jobid, meta)
    table, left = b"", EXE_LEN
    for fstype, point in reversed(rec.mounts):
        if len(fstype) + len(point) + 2 >= left:
            break
        line = b"\n" + fstype + b"\t" + point
        table += line
        left -= len(line)
    return job + rec.exe + table + b"\0"


class StreamWriter:
    """One log being written: the job region, then the name region, then
    the module regions by ascending id, each given as whole zlib streams.
    The file is created beside `path` (mode 0400, as darshan_log_create
    makes it) and renamed into place by close(); a log never appears half
    written."""

    def __init__(self, path: pathlib.Path):
        self.path = pathlib.Path(path)
        with _native.suppressed():          # the shim must not count its own log
            # a name of its own (a stale one left by a killed writer of the same pid is no obstacle)
            self.fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
            os.fchmod(self.fd, 0o400)
        self.tmp = pathlib.Path(tmp)
        self.end = HEADER.size
        self.maps: Dict[int, Tuple[int, int]] = {}      # region (-1 names, else module id) -> (offset, length)
        self.region: Optional[int] = None
        self._write_at(bytes(HEADER.size), 0)

    def _write_at(self, data, offset: int) -> None:
        view = memoryview(data)
        with _native.suppressed():
            while len(view):
                done = os.pwrite(self.fd, view, offset)
                view, offset = view[done:], offset + done

    def start(self, region: int) -> None:
        """Begin a region: -2 the job's, -1 the names', else a module's id;
        each after the one before, as darshan-util expects them."""
        if self.region is not None and region <= self.region:
            raise ValueError(f"region {region} after region {self.region}")
        self.region = region

    def write(self, stream: bytes) -> None:
        """Append one zlib stream to the current region."""
        if not stream:
            return
        off, length = self.maps.get(self.region, (self.end, 0))
        self._write_at(stream, self.end)
        self.end += len(stream)
        self.maps[self.region] = (off, length + len(stream))

    def close(self, partial: bool = False) -> pathlib.Path:
        """Write the header and move the log into place."""
        modules = [self.maps.get(i, (0, 0)) for i in range(64)]
        versions = [0] * 64
        for name, i in MOD.items():
            if i in self.maps:
                versions[i] = MOD_VER[name]
        header = HEADER.pack(LOG_VERSION, MAGIC, 0, int(partial), *self.maps.get(-1, (0, 0)),
                             *[x for m in modules for x in m], *versions)
        self._write_at(header, 0)
        os.close(self.fd)
        self.fd = -1
        if self.path.exists():
            self.abandon()
            raise DarshanLogError(f"{self.path}: already exists; not overwriting")
        os.replace(self.tmp, self.path)
        return self.path

    def abandon(self) -> None:
        """Remove the unfinished file."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        try:
            os.unlink(self.tmp)
        except OSError:
            pass


def chunks(raw: bytes, size: int = STREAM_BYTES) -> Iterator[bytes]:
    """`raw` in pieces of at most `size` bytes (one stream each)."""
    for lo in range(0, len(raw), size):
        yield raw[lo:lo + size]


class _InCaller(concurrent.futures.Executor):
    """An executor that runs each call in the caller's thread, at once."""

    def submit(self, fn, /, *args, **kwargs):
        done = concurrent.futures.Future()
        try:
            done.set_result(fn(*args, **kwargs))
        except BaseException as e:      # handed to whoever takes the result, as a pool would
            done.set_exception(e)
        return done


def workers(n: int) -> concurrent.futures.Executor:
    """n worker threads; at interpreter shutdown (a job log written from
    atexit, as `tfdarshan run`'s last rank may) no thread can start, and
    the work is done in the caller's thread instead."""
    pool = concurrent.futures.ThreadPoolExecutor(n, thread_name_prefix="tfdarshan-joblog")
    try:
        pool.submit(int).result()
    except RuntimeError:
        pool.shutdown()
        return _InCaller()
    return pool


def in_order(pool: concurrent.futures.Executor, fn: Callable, items: Iterable, ahead: int) -> Iterator:
    """fn(item) for each item, run on `pool` with at most `ahead` running or
    done but not yet taken, yielded in the items' order. An exception is
    raised where its item's result would be, after the rest are cancelled."""
    pending = []
    try:
        for item in items:
            pending.append(pool.submit(fn, item))
            if len(pending) >= ahead:
                yield pending.pop(0).result()
        while pending:
            yield pending.pop(0).result()
    finally:
        for f in pending:
            f.cancel()
