"""Regression oracle, kept on purpose: an earlier implementation, not used by
tfdarshan, that tests and benchmarks/bench_log.py compare the current one with.

The tests' oracle for our log writer: the same log written by Darshan's
own library, libdarshan-util (in the `darshan` wheel), through cffi, as
tfdarshan wrote every process's log before it wrote them itself
(tfdarshan/logs/darshan_writer.py). Fed the same regions (log_parts) and
job record, so what the two files hold once inflated must be equal byte for
byte, and every reader must read them alike."""
from __future__ import annotations

import os
import pathlib
import tempfile

import numpy as np

from tfdarshan.capture import _native
from tfdarshan.errors import DarshanLogError
from tfdarshan.logs.darshan_format import MOD, MOD_VER, ffi, library, pack_names
from tfdarshan.logs.darshan_writer import check_destination, job_record, log_parts

REF_WORDS = ffi.sizeof("struct darshan_name_record_ref") // 8
NEXT_WORD = ffi.offsetof("struct darshan_name_record_ref", "hlink") // 8 + 2   # hlink.next


def _name_refs(ids: np.ndarray, names):
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


def write_with_libdarshan_util(snap, path, *, exe=None, jobid=None, mounts=None, metadata=None, heatmap=True,
                               rank=0, nprocs=1) -> pathlib.Path:
    """write_darshan_log's log, written by libdarshan-util's put_* calls."""
    path = pathlib.Path(path)
    check_destination(path, snap, rank, nprocs)
    lib = library()
    rec = job_record(snap.meta, snap.start, max(snap.end, snap.start), exe=exe, jobid=jobid, mounts=mounts,
                     metadata=metadata, nprocs=nprocs)
    job = ffi.new("struct darshan_job *")
    job.uid, job.nprocs, job.jobid = rec.uid, rec.nprocs, rec.jobid
    job.start_time_sec, job.start_time_nsec = rec.start
    job.end_time_sec, job.end_time_nsec = rec.end
    job.metadata = rec.metadata
    exe_buf = ffi.new("char[]", rec.exe)
    mnt = ffi.new("struct darshan_mnt_info[]", max(1, len(rec.mounts)))
    for i, (fstype, point) in enumerate(rec.mounts):
        mnt[i].mnt_type, mnt[i].mnt_path = fstype, point
    parts = log_parts(snap, heatmap=heatmap, rank=rank)
    blob, refs = _name_refs(parts.ids, parts.names)
    fd_tmp, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd_tmp)
    os.unlink(tmp)          # darshan_log_create insists on creating the file itself
    with _native.suppressed():
        fd = lib.darshan_log_create(os.fsencode(tmp), 0, 0)
        if fd == ffi.NULL:
            raise DarshanLogError(f"{path}: libdarshan-util could not create the log")
        ok = lib.darshan_log_put_job(fd, job) == 0
        ok = ok and lib.darshan_log_put_exe(fd, exe_buf) == 0
        ok = ok and lib.darshan_log_put_mounts(fd, mnt, len(rec.mounts)) == 0
        if ok and len(parts.names):
            ok = lib.darshan_log_put_namehash(fd, ffi.cast("struct darshan_name_record_ref *",
                                                           refs.ctypes.data)) == 0
        for module, builds in parts.modules:
            for build in builds:
                chunk = bytes(build())       # (records or a slice of a buffer, as raw bytes)
                ok = ok and lib.darshan_log_put_mod(fd, MOD[module], ffi.from_buffer(chunk), len(chunk),
                                                    MOD_VER[module]) == 0
        lib.darshan_log_close(fd)
    del blob, refs          # kept alive until the library was done with them
    if not ok:
        os.chmod(tmp, 0o600)
        os.unlink(tmp)
        raise DarshanLogError(f"{path}: libdarshan-util failed while writing the log")
    os.replace(tmp, path)
    return path
