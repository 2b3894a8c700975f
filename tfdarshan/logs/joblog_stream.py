"""The job log written by streaming over the rank logs, never holding every
rank's records: one rank's at a time (a few on worker threads), one running
record per shared file, the names.

1. Names: each rank log's header, job record and name region (its modules
   stay compressed). A file is a candidate for sharing when every one of
   the job's ranks names it; the name region keeps each id's first name.
2. Modules, POSIX then STDIO, rank by rank: a worker inflates the rank's
   records, tags them with the rank, moves their times onto the job's
   timeline and deflates those of files not shared into one zlib stream;
   the main thread appends it and folds the shared files' records
   (shared_fold.py). The reduced records follow the ranks' streams. A
   candidate some rank named but did not hold in this module (opened
   through the other module) is written per rank after all.
3. DXT_POSIX, each rank's trace re-based and tagged, as before.

The log is written by log_stream.py (format 3.41, regions of concatenated
zlib streams). A rank log found damaged only in pass 2 (a module region
that does not inflate) is skipped and the job log started again without it."""
from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
from typing import Callable, Dict, List, Optional

import numpy as np

from tfdarshan.capture import _native
from tfdarshan.capture.cores import ranges
from tfdarshan.errors import DarshanLogError, TfdarshanError
from tfdarshan.logs import live_log, log_stream, skipping
from tfdarshan.logs.darshan_checker import check_module_region, inspect_log
from tfdarshan.logs.darshan_format import HEATMAP_NAMES, MOD, fs_bytes, name_records, pack_names
from tfdarshan.logs.darshan_reader import decode_dxt, decode_records, meta_from_regions, read_darshan_log
from tfdarshan.logs.darshan_writer import dxt_buffer, frame_records, job_record, rebase_times, timestamp_columns
from tfdarshan.logs.shared_fold import SharedFold

Progress = Callable[[str, int, int], None]      # (stage, done, total)
STAGES = ("names", "POSIX", "STDIO", "DXT_POSIX")


@dataclasses.dataclass
class RankLog:
    """What pass 1 learnt of one rank's log."""
    rank: int
    path: pathlib.Path
    meta: dict                  # as read_darshan_log would give it
    maps: Dict[str, tuple]      # module -> (offset, length); empty when read through PyDarshan
    comp_type: int
    mod_ver: Dict[str, int]
    current: bool               # decoded here; else (an older format) read through PyDarshan
    shift: float = 0.0          # its times onto the job's timeline


@dataclasses.dataclass
class _Scan:
    log: RankLog
    ids: np.ndarray             # the ids its name region names, in its order
    lengths: np.ndarray         # each name record's bytes
    raw: bytes                  # the name region


class _Unreadable(Exception):
    def __init__(self, rank: int, path, error: Exception):
        super().__init__(str(error))
        self.rank, self.entry = rank, {"log": pathlib.Path(path).name, "reason": skipping.reason_of(path, error)}


def _scan(item) -> _Scan:
    rank, path = item
    info = inspect_log(path, modules=False)
    if info.get("current"):
        log = RankLog(rank, pathlib.Path(path), meta_from_regions(path, info), info["maps"], info["comp_type"],
                      info["mod_ver"], True)
        raw = info["names_raw"]
        ids, starts = info["name_bytes"]
    else:                               # an older format: PyDarshan reads it
        snap = read_darshan_log(path)
        log = RankLog(rank, pathlib.Path(path), snap.meta, {}, 0, {}, False)
        frames = [snap.frame(m) for m in ("POSIX", "STDIO")]
        blob, _ = pack_names(np.concatenate([f["record_id"].to_numpy(np.uint64) for f in frames]),
                             fs_bytes(frames[0]["path"]) + fs_bytes(frames[1]["path"]))
        raw = blob.tobytes() if len(frames[0]) + len(frames[1]) else b""
        ids, starts = name_records(raw)
    return _Scan(log, ids, np.diff(starts, append=len(raw)), raw)


class _SeenIds:
    """The record ids met so far, as sorted runs merged as they grow (a
    Python set of ten million ids would take a gigabyte)."""

    def __init__(self):
        self.runs: List[np.ndarray] = []

    def take_new(self, ids: np.ndarray) -> np.ndarray:
        """Which of `ids` were not met before; they are met from now on."""
        new = np.ones(len(ids), dtype=bool)
        for run in self.runs:
            at = np.minimum(np.searchsorted(run, ids), len(run) - 1)
            new &= run[at] != ids
        fresh = np.unique(ids[new])
        if len(fresh):
            self.runs.append(fresh)
        while len(self.runs) > 1 and len(self.runs[-2]) <= 2 * len(self.runs[-1]):
            last = self.runs.pop()
            self.runs[-1] = np.sort(np.concatenate([self.runs[-1], last]))
        return new


def _records(log: RankLog, module: str) -> np.ndarray:
    """A rank's records of one module, writable, each file once."""
    if log.current:
        if module not in log.maps:
            return np.zeros(0, dtype=decode_records(module, b"").dtype)
        off, length = log.maps[module]
        with open(log.path, "rb") as f:
            raw = os.pread(f.fileno(), length, off)
        if len(raw) < length:
            raise DarshanLogError(f"{log.path}: truncated or corrupted ({module} region out of bounds)")
        rec = decode_records(module, check_module_region(module, raw, log.comp_type, log.mod_ver[module], log.path))
        if len(np.unique(rec["id"])) == len(rec):
            return rec.copy()
    # an older format, or a file recorded twice: the reader merges its records
    return frame_records(module, read_darshan_log(log.path).frame(module), log.rank)


def _on_timeline(rec: np.ndarray, log: RankLog, stamps: List[int]) -> np.ndarray:
    """Tag the rank's records with its rank and move their times by its shift (0 stays never)."""
    rec["rank"] = log.rank
    if log.shift:
        t = rec["f"][:, stamps]
        rec["f"][:, stamps] = np.where(t == 0, t, t + log.shift)
    return rec


def _for_output(rec: np.ndarray, stamps: List[int]) -> np.ndarray:
    """Times as the log holds them: relative to the job's start, 0 = never."""
    rec["f"][:, stamps] = rebase_times(rec["f"][:, stamps], 0.0)
    return rec


def _module_part(log: RankLog, module: str, candidates: np.ndarray):
    """(rank, its records of files not shared as one zlib stream, its records of candidates)."""
    try:
        stamps = timestamp_columns(module)
        rec = _on_timeline(_records(log, module), log, stamps)
        shared = np.isin(rec["id"], candidates, assume_unique=True) if len(candidates) else None
        private = rec if shared is None else rec[~shared]
        stream = log_stream.deflate(_for_output(private, stamps)) if len(private) else b""
        return log.rank, stream, rec[:0] if shared is None else rec[shared]
    except (TfdarshanError, OSError) as e:
        raise _Unreadable(log.rank, log.path, e) from None


def _not_shared_part(log: RankLog, module: str, ids: np.ndarray) -> bytes:
    """A rank's records of candidates that turned out not shared in this module, as one stream."""
    stamps = timestamp_columns(module)
    rec = _on_timeline(_records(log, module), log, stamps)
    rec = rec[np.isin(rec["id"], ids)]
    return log_stream.deflate(_for_output(rec, stamps)) if len(rec) else b""


def _dxt_part(log: RankLog) -> bytes:
    """A rank's trace, re-based onto the job's timeline and tagged with its rank."""
    try:
        if log.current:
            off, length = log.maps["DXT_POSIX"]
            with open(log.path, "rb") as f:
                raw = os.pread(f.fileno(), length, off)
            trace = decode_dxt(check_module_region("DXT_POSIX", raw, log.comp_type, log.mod_ver["DXT_POSIX"],
                                                   log.path))
        else:
            trace = read_darshan_log(log.path).dxt
        trace = trace.assign(start=trace["start"] + log.shift, end=trace["end"] + log.shift)
        raw = dxt_buffer(trace, 0.0, str(log.meta.get("hostname", "")), log.rank) if len(trace) else b""
        return b"".join(log_stream.deflate(piece) for piece in log_stream.chunks(raw))
    except (TfdarshanError, OSError) as e:
        raise _Unreadable(log.rank, log.path, e) from None


def write(run_dir: pathlib.Path, out: pathlib.Path, logs: Dict[int, pathlib.Path], job: str,
          nprocs: Optional[int], jobid: Optional[int], progress: Optional[Progress] = None):
    """Write the job log `out` from `logs` ({rank: log}); (its path, the
    skipped logs [{"log", "reason"}] in rank order)."""
    progress = progress or (lambda stage, done, total: None)
    workers = os.cpu_count() or 1
    failed: Dict[int, dict] = {}        # ranks whose module regions turned out damaged
    with log_stream.workers(workers) as pool:
        while True:
            try:
                return _attempt(pool, 2 * workers, run_dir, out, {r: p for r, p in logs.items() if r not in failed},
                                job, nprocs, jobid, failed, progress)
            except _Unreadable as e:        # damage past the regions pass 1 reads: again without it
                failed[e.rank] = e.entry


def _attempt(pool, ahead, run_dir, out, logs, job, nprocs, jobid, failed, progress):
    ranks = sorted(logs)
    # pass 1: headers, job records and names
    progress("names", 0, len(ranks))
    scans: List[RankLog] = []
    skipped = dict(failed)
    seen, candidates, names, buffer = _SeenIds(), None, [], bytearray()
    not_names = np.array([_native.darshan_hash(n) for n in HEATMAP_NAMES.values()], dtype=np.uint64)
    found = log_stream.in_order(pool, _scan_or_skip, [(r, logs[r]) for r in ranks], ahead)
    for i, (rank, scan) in enumerate(found):
        progress("names", i + 1, len(ranks))
        if isinstance(scan, dict):
            skipped[rank] = scan
            continue
        scans.append(scan.log)
        new = seen.take_new(scan.ids) & ~np.isin(scan.ids, not_names)
        if new.any():
            buffer += np.frombuffer(scan.raw, dtype=np.uint8)[np.repeat(new, scan.lengths)].tobytes()
        if len(buffer) >= log_stream.STREAM_BYTES:
            names.append(pool.submit(log_stream.deflate, bytes(buffer)))
            buffer = bytearray()
        if candidates is None or len(candidates):
            ids = np.unique(scan.ids)
            candidates = ids if candidates is None else np.intersect1d(candidates, ids, assume_unique=True)
    if buffer:
        names.append(pool.submit(log_stream.deflate, bytes(buffer)))
    skipped = [skipped[r] for r in sorted(skipped)]
    if not scans:
        raise DarshanLogError(f"{run_dir}: no readable rank log; " + skipping.warning_line(skipped))
    nprocs = nprocs or len(scans)
    if scans[-1].rank >= nprocs:
        # libdarshan-util's readers abort the process on such a log
        raise DarshanLogError(f"{out}: a record of rank {scans[-1].rank} in a log of {nprocs} process(es)")
    if nprocs <= 1 or len(scans) < nprocs or candidates is None:
        candidates = np.zeros(0, dtype=np.uint64)       # shared means opened by every rank of the job
    origin = min(float(s.meta.get("origin_unix_time", 0.0)) for s in scans)
    for s in scans:
        s.shift = float(s.meta.get("origin_unix_time", 0.0)) - origin

    writer = log_stream.StreamWriter(out)
    try:
        writer.start(-2)
        writer.write(log_stream.deflate(log_stream.job_region(_job_record(scans, origin, job, nprocs, jobid,
                                                                         skipped))))
        writer.start(-1)
        for f in names:
            writer.write(f.result())
        for module in ("POSIX", "STDIO"):
            _write_module(pool, ahead, writer, module, scans, candidates, nprocs, progress)
        traced = [s for s in scans if "DXT_POSIX" in s.maps or not s.current]
        if traced:
            writer.start(MOD["DXT_POSIX"])
            progress("DXT_POSIX", 0, len(traced))
            for i, stream in enumerate(log_stream.in_order(pool, _dxt_part, traced, ahead)):
                writer.write(stream)
                progress("DXT_POSIX", i + 1, len(traced))
        return writer.close(), skipped
    except BaseException:
        writer.abandon()
        raise


def _scan_or_skip(item):
    """(rank, _Scan), or (rank, {"log", "reason"}) for a log pass 1 cannot read."""
    rank, path = item
    try:
        return rank, _scan(item)
    except (TfdarshanError, OSError) as e:
        return rank, {"log": pathlib.Path(path).name, "reason": skipping.reason_of(path, e)}


def _write_module(pool, ahead, writer, module, scans, candidates, nprocs, progress) -> None:
    fold = SharedFold(module, candidates)
    writer.start(MOD[module])
    progress(module, 0, len(scans))
    part = functools.partial(_module_part, module=module, candidates=candidates)
    for i, (rank, stream, shared) in enumerate(log_stream.in_order(pool, part, scans, ahead)):
        writer.write(stream)
        fold.add(rank, shared)
        progress(module, i + 1, len(scans))
    reduced, not_shared = fold.records(nprocs)
    if len(not_shared):             # named by every rank, but some held it in the other module only
        part = functools.partial(_not_shared_part, module=module, ids=not_shared)
        for stream in log_stream.in_order(pool, part, scans, ahead):
            writer.write(stream)
    if len(reduced):
        raw = _for_output(reduced, timestamp_columns(module)).tobytes()
        for stream in log_stream.in_order(pool, log_stream.deflate, log_stream.chunks(raw), ahead):
            writer.write(stream)


def _job_record(scans: List[RankLog], origin: float, job: str, nprocs: int, jobid, skipped: List[dict]):
    """The job region the job log gets: the first rank's command line, host
    and mounts, the job's span, and what it was made of."""
    first = scans[0].meta
    end = max(float(s.meta.get("end", 0.0)) + s.shift for s in scans)
    meta = dict(first, origin_unix_time=origin, start=0.0, end=end)
    metadata = {"job": job, "ranks": str(len(scans)), "source": "job"}
    # what a reader acts on before the hosts' list, which a job of many nodes
    # may not fit in the record's room (darshan_writer.metadata_lines); the
    # partial ranks as ranges ("0-1023"), which fit where a list would not
    partial = [int(s.rank) for s in scans if live_log.is_partial(s.meta)]
    if partial:
        metadata["partial_ranks"] = ranges(partial)
    if skipped:
        metadata.update(skipped=str(len(skipped)), skipped_logs=skipping.names(skipped))
    metadata["hosts"] = ",".join(sorted({str(s.meta.get("hostname", "")) for s in scans}))
    if jobid is None:
        jobid = first.get("jobid")
    return job_record(meta, 0.0, max(end, 0.0), exe=first.get("exe"),
                      jobid=int(jobid) if jobid is not None else None, metadata=metadata, nprocs=nprocs)
