"""Genuine Darshan logs: written with Darshan's own log library (the
libdarshan-util inside the `darshan` wheel), read back with PyDarshan.

Reading checks a log's structure in Python first (header, region bounds,
that every compressed region inflates, that module records have their
sizes), so Darshan's C parser is only handed logs it can parse."""
from __future__ import annotations

import bz2
import getpass  # noqa: F401  (kept for users' scripts that import it from here)
import glob
import os
import pathlib
import re
import socket
import struct
import sys
import tempfile
import zlib
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import cffi
import numpy as np
import pandas as pd

from tfdarshan import counters as C
from tfdarshan import heatmap as H
from tfdarshan import mounts as M
from tfdarshan.errors import DarshanLogError
from tfdarshan.snapshot import Snapshot, empty_dxt, empty_extra, empty_values

# ---------------------------------------------------------------- format
LOG_VERSION = b"3.41"
MAGIC = 6567223
HEADER = struct.Struct("<8sqB7xQ" + "QQ" + "QQ" * 64 + "I" * 64)   # struct darshan_header (3.41)
JOB_SIZE = 7 * 8 + 1024          # struct darshan_job
EXE_LEN = 4096 - JOB_SIZE - 1    # DARSHAN_EXE_LEN
PATH_MAX = 4096                  # the writer copies names into a buffer of this size
MOD = {"POSIX": 1, "STDIO": 9, "DXT_POSIX": 10, "HEATMAP": 15}
MOD_VER = {"POSIX": 4, "STDIO": 2, "DXT_POSIX": 1, "HEATMAP": 1}
BASE = struct.Struct("<Qq")                       # darshan_base_record
DXT_HEADER = struct.Struct("<Qqq64sqq")           # dxt_file_record
SEGMENT = np.dtype([("offset", "<i8"), ("length", "<i8"), ("start", "<f8"), ("end", "<f8")])
HEATMAP_HEADER = struct.Struct("<QqdqQQ")         # darshan_heatmap_record incl. its two pointers
HEATMAP_NAMES = {"POSIX": "heatmap:POSIX", "STDIO": "heatmap:STDIO"}
# pseudo file systems that are never storage tiers
PSEUDO_FS = {"proc", "sysfs", "devpts", "cgroup", "cgroup2", "securityfs", "debugfs", "tracefs", "bpf",
             "pstore", "mqueue", "fusectl", "configfs", "binfmt_misc", "autofs", "hugetlbfs",
             "rpc_pipefs", "nsfs", "efivarfs", "devtmpfs"}

_CDEF = f"""
typedef void *darshan_fd;
struct darshan_job {{
    int64_t uid; int64_t start_time_sec; int64_t start_time_nsec; int64_t end_time_sec;
    int64_t end_time_nsec; int64_t nprocs; int64_t jobid; char metadata[1024];
}};
struct darshan_mnt_info {{ char mnt_type[{EXE_LEN}]; char mnt_path[{EXE_LEN}]; }};
typedef struct UT_hash_handle {{
    void *tbl; void *prev; void *next; void *hh_prev; void *hh_next; void *key;
    unsigned keylen; unsigned hashv;
}} UT_hash_handle;
/* the name record is {{uint64 id; char name[];}} with the name inline */
struct darshan_name_record_ref {{ void *name_record; UT_hash_handle hlink; }};
darshan_fd darshan_log_create(const char *name, int comp_type, int partial_flag);
int darshan_log_put_job(darshan_fd fd, struct darshan_job *job);
int darshan_log_put_exe(darshan_fd fd, char *buf);
int darshan_log_put_mounts(darshan_fd fd, struct darshan_mnt_info *mnt_data_array, int count);
int darshan_log_put_namehash(darshan_fd fd, struct darshan_name_record_ref *hash);
int darshan_log_put_mod(darshan_fd fd, int mod_id, void *mod_buf, int mod_buf_sz, int ver);
void darshan_log_close(darshan_fd file);
char *darshan_log_get_lib_version(void);
"""

_ffi = cffi.FFI()
_ffi.cdef(_CDEF)
_lib = None


def library_path() -> str:
    """libdarshan-util as shipped in the installed `darshan` package."""
    import darshan
    pkg = pathlib.Path(darshan.__file__).resolve().parent
    found = sorted(glob.glob(str(pkg.parent / "darshan.libs" / "libdarshan-util*.so*")))
    if found:
        return found[0]
    from darshan.discover_darshan import find_utils  # a darshan-util installed elsewhere
    lib = find_utils(_ffi, None)
    raise DarshanLogError(f"libdarshan-util not found next to the darshan package ({lib!r})")


def _library():
    global _lib
    if _lib is None:
        _lib = _ffi.dlopen(library_path())
    return _lib


def darshan_util_version() -> str:
    return _ffi.string(_library().darshan_log_get_lib_version()).decode()


# ---------------------------------------------------------------- writing
def job_id_from_environment(environ=os.environ) -> Optional[int]:
    """The batch scheduler's job id (its numeric part), if there is one."""
    for var in ("SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "COBALT_JOBID", "FLUX_JOB_ID", "JOB_ID"):
        v = environ.get(var)
        if v:
            digits = re.match(r"\d+", v)
            if digits:
                return int(digits.group())
    return None


def _mounts_for_log(snap: Snapshot, mounts: Optional[Iterable[M.Mount]]) -> List[Tuple[str, str]]:
    if mounts is None:
        stored = snap.meta.get("mounts")
        mounts = [M.Mount(p, t) for p, t in stored] if stored else M.current()
    pairs = {(m.point, m.fstype) for m in mounts if m.fstype not in PSEUDO_FS}
    # longest mount point first, as Darshan stores them, so a prefix match finds the most specific
    return sorted(pairs, key=lambda pt: (-len(pt[0]), pt[0]))


def _shift(values: np.ndarray, by: float) -> np.ndarray:
    """Re-base timestamps; 0 stays "never"."""
    return np.where(values != 0, np.maximum(values - by, 1e-9), 0.0)


def _module_buffer(module: str, frame: pd.DataFrame, t0: float) -> bytes:
    ints, floats = C.names(module)
    rec = np.zeros(len(frame), dtype=[("id", "<u8"), ("rank", "<i8"), ("c", "<i8", (len(ints),)),
                                      ("f", "<f8", (len(floats),))])
    rec["id"] = frame["record_id"].to_numpy(dtype=np.uint64)
    rec["c"] = frame[list(ints)].to_numpy(dtype=np.int64)
    f = frame[list(floats)].to_numpy(dtype=np.float64, copy=True)
    for j, name in enumerate(floats):
        if C.kind(module, name) in (C.FIRST, C.LAST):
            f[:, j] = _shift(f[:, j], t0)
    rec["f"] = f
    return rec.tobytes()


def _dxt_buffer(dxt: pd.DataFrame, t0: float, hostname: str) -> bytes:
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
        parts.append(DXT_HEADER.pack(int(f), 0, 0, host, count - nread, nread))
        parts.append(body[start * size:(start + count) * size])
    return b"".join(parts)


def _heatmap_buffer(snap: Snapshot, t0: float, t1: float) -> Tuple[bytes, List[Tuple[int, str]]]:
    width, bins = H.darshan_bins(snap._heat, t0, t1)
    parts, names = [], []
    from tfdarshan._native import darshan_hash
    for module, name in HEATMAP_NAMES.items():
        if not (bins[module]["read"].any() or bins[module]["write"].any()):
            continue    # Darshan drops empty heatmaps (and its summary cannot plot them)
        rid = darshan_hash(name)
        nbins = len(bins[module]["read"])
        parts.append(HEATMAP_HEADER.pack(rid, 0, width, nbins, 0, 0))
        parts.append(bins[module]["write"].astype("<i8").tobytes())
        parts.append(bins[module]["read"].astype("<i8").tobytes())
        names.append((rid, name))
    return b"".join(parts), names


REF_WORDS = _ffi.sizeof("struct darshan_name_record_ref") // 8
NEXT_WORD = _ffi.offsetof("struct darshan_name_record_ref", "hlink") // 8 + 2   # hlink.next


def _name_records(names: Dict[int, bytes]):
    """Darshan's name table as two numpy buffers: the records {uint64 id;
    char name[];} back to back, and uthash refs chained through hlink.next
    (all put_namehash walks). The caller keeps both alive while writing."""
    items = sorted(names.items())
    chunks, offsets, pos = [], [], 0
    for rid, name in items:
        rec = struct.pack("<Q", rid) + name[:PATH_MAX - 1] + b"\0"
        chunks.append(rec)
        offsets.append(pos)
        pos += len(rec)
    blob = np.frombuffer(b"".join(chunks) or b"\0", dtype=np.uint8).copy()
    refs = np.zeros((max(1, len(items)), REF_WORDS), dtype=np.uint64)
    if items:
        refs[:, 0] = blob.ctypes.data + np.asarray(offsets, dtype=np.uint64)
        nxt = refs.ctypes.data + np.arange(1, len(items) + 1, dtype=np.uint64) * (REF_WORDS * 8)
        nxt[-1] = 0
        refs[:, NEXT_WORD] = nxt
    return blob, refs


def write_darshan_log(snap: Snapshot, path, *, exe: Optional[str] = None, jobid: Optional[int] = None,
                      mounts: Optional[Iterable[M.Mount]] = None, metadata: Optional[Dict[str, str]] = None,
                      heatmap: bool = True) -> pathlib.Path:
    """Write `snap` as a Darshan log (format 3.41, modules POSIX, STDIO,
    DXT_POSIX when traced, HEATMAP). The file appears complete or not at all.

    Times in the log are relative to the snapshot's start (the job start).
    An existing file is not overwritten."""
    from tfdarshan import _native
    path = pathlib.Path(path)
    if path.exists():
        raise DarshanLogError(f"{path}: already exists; not overwriting")
    if not path.parent.is_dir():
        raise DarshanLogError(f"{path}: directory {path.parent} does not exist")
    lib = _library()
    origin = float(snap.meta.get("origin_unix_time", 0.0))
    t0, t1 = snap.start, max(snap.end, snap.start)
    start_abs, end_abs = origin + t0, origin + t1

    job = _ffi.new("struct darshan_job *")
    job.uid = os.getuid()
    job.start_time_sec, job.start_time_nsec = int(start_abs), int((start_abs % 1) * 1e9)
    job.end_time_sec, job.end_time_nsec = int(end_abs), int((end_abs % 1) * 1e9)
    job.nprocs = 1
    job.jobid = jobid if jobid is not None else (job_id_from_environment() or int(snap.meta.get("pid", os.getpid())))
    meta = {"lib_ver": darshan_util_version(), "tfdarshan": _version(),
            "hostname": str(snap.meta.get("hostname", socket.gethostname()))}
    # what the counters alone cannot say: files past the record cap, trace drops
    for key in ("folded_files", "trace_dropped"):
        if snap.meta.get(key):
            meta[key] = str(int(snap.meta[key]))
    meta.update({k: str(v) for k, v in (metadata or {}).items()})
    text = "".join(f"{k}={str(v).replace(chr(10), ' ')}\n" for k, v in meta.items()).encode()[:1023]
    job.metadata = text
    exe_text = (exe if exe is not None else " ".join(sys.argv) or sys.executable).encode(errors="surrogateescape")
    exe_buf = _ffi.new("char[]", exe_text[:EXE_LEN])
    mnt_pairs = _mounts_for_log(snap, mounts)
    mnt = _ffi.new("struct darshan_mnt_info[]", max(1, len(mnt_pairs)))
    for i, (point, fstype) in enumerate(mnt_pairs):
        mnt[i].mnt_type = fstype.encode()[:EXE_LEN - 1]
        mnt[i].mnt_path = os.fsencode(point)[:EXE_LEN - 1]

    modules = []
    for module in ("POSIX", "STDIO"):
        frame = snap.frame(module)
        if len(frame):
            modules.append((module, _module_buffer(module, frame, t0)))
    names = {}
    for module in ("POSIX", "STDIO"):
        for rid, p in zip(snap.frame(module)["record_id"], snap.frame(module)["path"]):
            names[int(rid)] = os.fsencode(p)
    dxt = snap._dxt
    if len(dxt):
        modules.append(("DXT_POSIX", _dxt_buffer(dxt, t0, meta["hostname"])))
    if heatmap:
        buf, heat_names = _heatmap_buffer(snap, t0, t1)
        if buf:
            modules.append(("HEATMAP", buf))
        names.update({rid: n.encode() for rid, n in heat_names})

    name_blob, refs = _name_records(names)

    tmp_dir = path.parent
    fd_tmp, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", dir=tmp_dir)
    os.close(fd_tmp)
    os.unlink(tmp_name)      # darshan_log_create insists on creating the file itself
    with _native.suppressed():
        fd = lib.darshan_log_create(os.fsencode(tmp_name), 0, 0)
        if fd == _ffi.NULL:
            raise DarshanLogError(f"{path}: libdarshan-util could not create the log")
        ok = True
        try:
            ok &= lib.darshan_log_put_job(fd, job) == 0
            ok &= ok and lib.darshan_log_put_exe(fd, exe_buf) == 0
            ok &= ok and lib.darshan_log_put_mounts(fd, mnt, len(mnt_pairs)) == 0
            ok &= ok and (not names or lib.darshan_log_put_namehash(
                fd, _ffi.cast("struct darshan_name_record_ref *", refs.ctypes.data)) == 0)
            for module, buf in sorted(modules, key=lambda m: MOD[m[0]]):
                if not ok:
                    break
                if len(buf) > 2**31 - 1:
                    raise DarshanLogError(f"{path}: {module} data too large for one Darshan log")
                data = _ffi.from_buffer(buf)
                ok &= lib.darshan_log_put_mod(fd, MOD[module], data, len(buf), MOD_VER[module]) == 0
        finally:
            lib.darshan_log_close(fd)
        if not ok:
            _unlink_quietly(tmp_name)
            raise DarshanLogError(f"{path}: libdarshan-util failed while writing the log")
        os.replace(tmp_name, path)
    return path


def _unlink_quietly(p):
    try:
        os.chmod(p, 0o600)
        os.unlink(p)
    except OSError:
        pass


def _version() -> str:
    from tfdarshan import __version__
    return __version__


# ---------------------------------------------------------------- checking
# record sizes of the modules we read (base record + counters)
def _fixed_record_size(module: str) -> int:
    ints, floats = C.names(module)
    return BASE.size + 8 * (len(ints) + len(floats))


def _inflate(raw: bytes, comp_type: int, what: str, path) -> bytes:
    try:
        if comp_type == 0:
            d = zlib.decompressobj()
            out = d.decompress(raw, 1 << 30)
            if not d.eof:
                raise zlib.error("stream ends early")
            return out
        if comp_type == 1:
            return bz2.decompress(raw)
        return raw
    except (zlib.error, OSError, ValueError, EOFError) as e:
        raise DarshanLogError(f"{path}: {what} region is corrupted ({e})") from None


def check_log(path) -> Dict[str, object]:
    """Validate a Darshan log's structure without Darshan's C code.

    Returns the header facts; raises DarshanLogError naming the file."""
    info = _inspect(path)
    return {k: info[k] for k in ("version", "checked", "partial")}


def _inspect(path) -> Dict[str, object]:
    """check_log's work, keeping the inflated regions of current-format logs."""
    path = pathlib.Path(path)
    if not path.exists():
        raise DarshanLogError(f"{path}: no such file")
    if path.is_dir():
        raise DarshanLogError(f"{path}: is a directory, not a Darshan log")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DarshanLogError(f"{path}: cannot read ({e.strerror})") from None
    if len(data) == 0:
        raise DarshanLogError(f"{path}: empty file, not a Darshan log")
    if len(data) < 8 or not re.match(rb"3\.\d\d?\x00", data[:8] + b"\x00"):
        raise DarshanLogError(f"{path}: not a Darshan log (no Darshan version string)")
    version = data[:8].split(b"\x00")[0]
    if version != LOG_VERSION:
        # older formats are read by PyDarshan directly after the basic checks below
        if version not in (b"3.00", b"3.10", b"3.20", b"3.21"):
            raise DarshanLogError(f"{path}: unsupported Darshan log format {version.decode(errors='replace')}")
        if len(data) < 8 + 8:
            raise DarshanLogError(f"{path}: truncated Darshan header")
        magic = struct.unpack_from("<q", data, 8)[0]
        if magic != MAGIC:
            raise DarshanLogError(f"{path}: corrupted Darshan header (bad magic number)")
        return {"version": version.decode(), "checked": False, "partial": False}
    if len(data) < HEADER.size:
        raise DarshanLogError(f"{path}: truncated Darshan header ({len(data)} bytes)")
    h = HEADER.unpack_from(data, 0)
    magic, comp_type, partial = h[1], h[2], h[3]
    if magic != MAGIC:
        raise DarshanLogError(f"{path}: corrupted Darshan header (bad magic number)")
    if comp_type not in (0, 1, 2):
        raise DarshanLogError(f"{path}: corrupted Darshan header (unknown compression {comp_type})")
    name_map = (h[4], h[5])
    mod_maps = [(h[6 + 2 * i], h[7 + 2 * i]) for i in range(64)]
    mod_ver = list(h[6 + 128:6 + 128 + 64])
    size = len(data)
    # darshan_log_get_header: the job region ends where the names begin, or
    # (no names) where the first module begins, or at the end of the file
    if name_map[0]:
        job_end = name_map[0]
    else:
        job_end = next((off for off, _ in mod_maps if off), size)
    regions = [("job", (HEADER.size, job_end - HEADER.size)), ("name", name_map)] + \
        [(f"module {i}", m) for i, m in enumerate(mod_maps) if m[1]]
    for what, (off, length) in regions:
        if (off < HEADER.size and length) or length < 0 or off + length > size:
            raise DarshanLogError(f"{path}: truncated or corrupted ({what} region out of bounds)")
    job = _inflate(data[HEADER.size:job_end], comp_type, "job", path)
    if not (JOB_SIZE < len(job) <= 4096 + 65536):
        raise DarshanLogError(f"{path}: corrupted job record")
    names = _inflate(data[name_map[0]:name_map[0] + name_map[1]], comp_type, "name", path) if name_map[1] else b""
    pos = 0
    while pos < len(names):
        end = names.find(b"\x00", pos + 8)
        if pos + 8 > len(names) or end < 0 or end - pos - 8 >= PATH_MAX:
            raise DarshanLogError(f"{path}: corrupted name records")
        pos = end + 1
    known = {v: k for k, v in MOD.items()}
    buffers: Dict[str, bytes] = {}
    others = False
    for mod_id, (off, length) in enumerate(mod_maps):
        if not length:
            continue
        module = known.get(mod_id)
        if module and mod_ver[mod_id] > MOD_VER[module] or mod_ver[mod_id] == 0:
            raise DarshanLogError(f"{path}: module {module or mod_id} has unsupported version {mod_ver[mod_id]}")
        if module is None:
            others = True       # a module tfdarshan does not read
            continue
        buf = _inflate(data[off:off + length], comp_type, module, path)
        _check_module(module, buf, mod_ver[mod_id], path)
        buffers[module] = buf
    current = all(mod_ver[MOD[m]] == MOD_VER[m] for m in buffers)
    return {"version": version.decode(), "checked": True, "partial": bool(partial), "job": job,
            "names": names, "modules": buffers, "current": current, "others": others}


def _check_module(module: str, buf: bytes, ver: int, path) -> None:
    if module in ("POSIX", "STDIO"):
        if ver == MOD_VER[module] and len(buf) % _fixed_record_size(module):
            raise DarshanLogError(f"{path}: corrupted {module} records")
        return
    pos = 0
    while pos < len(buf):
        if module == "DXT_POSIX":
            if pos + DXT_HEADER.size > len(buf):
                raise DarshanLogError(f"{path}: corrupted DXT_POSIX records")
            _, _, _, _, w, r = DXT_HEADER.unpack_from(buf, pos)
            if w < 0 or r < 0 or pos + DXT_HEADER.size + (w + r) * SEGMENT.itemsize > len(buf):
                raise DarshanLogError(f"{path}: corrupted DXT_POSIX records")
            pos += DXT_HEADER.size + (w + r) * SEGMENT.itemsize
        else:  # HEATMAP
            if pos + HEATMAP_HEADER.size > len(buf):
                raise DarshanLogError(f"{path}: corrupted HEATMAP records")
            _, _, width, nbins, _, _ = HEATMAP_HEADER.unpack_from(buf, pos)
            size = HEATMAP_HEADER.size + 16 * nbins
            if nbins < 0 or not (width > 0) or size > 81920 or pos + size > len(buf):
                raise DarshanLogError(f"{path}: corrupted HEATMAP records")
            pos += size


# ---------------------------------------------------------------- reading
def read_darshan_log(path) -> Snapshot:
    """A Snapshot of a Darshan log: ours, or one a site-wide Darshan wrote.

    Times become seconds since the job start, which is the snapshot's origin.
    Access-size and stride frequencies are known only as Darshan's top four.
    Logs in the current format (3.41 with the module versions Darshan 3.5
    writes) are decoded from the regions the check already inflated; older
    ones are read by PyDarshan."""
    info = _inspect(path)
    if info.get("current"):
        return _snapshot_from_regions(path, info)
    import darshan
    try:
        with darshan.DarshanReport(str(path), read_all=False) as report:
            mods = report.modules
            frames = {}
            for module in ("POSIX", "STDIO"):
                frames[module] = _report_frame(report, module) if module in mods else C.empty_frame(module)
            dxt = _report_dxt(report) if "DXT_POSIX" in mods else empty_dxt()
            heat = _report_heat(report) if "HEATMAP" in mods else H.empty()
            job = report.metadata["job"]
            mounts = [[m[0], m[1]] for m in report.mounts] if report.mounts else []
            exe = report.metadata.get("exe", "")
    except DarshanLogError:
        raise
    except Exception as e:   # PyDarshan raises assorted types for unreadable logs
        raise DarshanLogError(f"{path}: PyDarshan could not read the log ({type(e).__name__}: {e})") from None
    start = float(job.get("start_time_sec", 0)) + float(job.get("start_time_nsec", 0)) * 1e-9
    end = float(job.get("end_time_sec", 0)) + float(job.get("end_time_nsec", 0)) * 1e-9
    return _assemble(path, info, frames, dxt, heat, start, end, job, job.get("metadata") or {}, exe, mounts)


def _meta_int(job_meta: Dict[str, str], key: str) -> int:
    try:
        return max(int(job_meta.get(key, 0)), 0)
    except (TypeError, ValueError):
        return 0


def _assemble(path, info, frames, dxt, heat, start, end, job, job_meta, exe, mounts) -> Snapshot:
    """The Snapshot both read paths end in."""
    values = _values_from_top4(frames["POSIX"])
    extra = empty_extra()
    if len(dxt):
        # the trace shows the zero-length reads the counters cannot
        z = dxt[(dxt["op"] == "read") & (dxt["length"] == 0)].groupby("record_id").size()
        ids = frames["POSIX"]["record_id"]
        extra = pd.DataFrame({"record_id": ids.to_numpy(dtype=np.uint64), "module": "POSIX",
                              "ZERO_READS": z.reindex(ids.to_numpy()).fillna(0).astype(np.int64).to_numpy()})
    meta = {"format": "darshan", "log": str(path), "log_version": info["version"], "start": 0.0,
            "end": max(end - start, 0.0), "origin_unix_time": start, "jobid": job.get("jobid"),
            "uid": job.get("uid"), "nprocs": job.get("nprocs"), "exe": exe, "mounts": mounts,
            "hostname": job_meta.get("hostname", ""), "job_metadata": dict(job_meta),
            "partial": info.get("partial", False), "zero_reads_known": bool(len(dxt)),
            "folded_files": _meta_int(job_meta, "folded_files"),
            "trace_dropped": _meta_int(job_meta, "trace_dropped")}
    return Snapshot(frames["POSIX"], frames["STDIO"], values, extra, dxt, meta, None, heat)


def _report_frame(report, module: str) -> pd.DataFrame:
    report.mod_read_all_records(module, warnings=False)
    recs = report.records[module].to_df()
    c, f = recs["counters"], recs["fcounters"]
    ints, floats = C.names(module)
    names = report.name_records
    df = pd.DataFrame({"record_id": c["id"].to_numpy(dtype=np.uint64),
                       "path": pd.Series([names.get(int(i), "") for i in c["id"]], dtype=object)})
    for col in ints:
        df[col] = c[col].to_numpy(dtype=np.int64) if col in c else 0
    for col in floats:
        df[col] = f[col].to_numpy(dtype=np.float64) if col in f else 0.0
    # several ranks' records of a shared file: keep one row per file
    if df["record_id"].duplicated().any():
        df = df.drop_duplicates("record_id", keep="first")
    return df[C.columns(module)].reset_index(drop=True)


def _report_dxt(report) -> pd.DataFrame:
    report.mod_read_all_dxt_records("DXT_POSIX", warnings=False)
    parts = []
    for rec in report.records["DXT_POSIX"].to_df():
        for op in ("read", "write"):
            seg = rec[f"{op}_segments"]
            if len(seg):
                parts.append(pd.DataFrame({"record_id": np.uint64(rec["id"]), "op": op,
                                           "offset": seg["offset"].to_numpy(np.int64),
                                           "length": seg["length"].to_numpy(np.int64),
                                           "start": seg["start_time"].to_numpy(np.float64),
                                           "end": seg["end_time"].to_numpy(np.float64)}))
    if not parts:
        return empty_dxt()
    out = pd.concat(parts, ignore_index=True)
    out["record_id"] = out["record_id"].astype(np.uint64)
    return out.sort_values("start", kind="stable").reset_index(drop=True)


def _report_heat(report) -> pd.DataFrame:
    report.read_all_heatmap_records()
    rows = []
    for module, hm in report.heatmaps.items():
        if module not in ("POSIX", "STDIO"):
            continue
        width = float(hm._bin_width_seconds)
        for direction in ("read", "write"):
            kind = {("POSIX", "read"): 0, ("POSIX", "write"): 1, ("STDIO", "read"): 2,
                    ("STDIO", "write"): 3}[(module, direction)]
            total = sum(np.asarray(v, dtype=np.int64) for v in hm._data[direction].values())
            for i, b in enumerate(np.atleast_1d(total)):
                if b:
                    rows.append((i * width, width, kind, int(b)))
    if not rows:
        return H.empty()
    df = pd.DataFrame(rows, columns=H.COLUMNS)
    return df.astype({"start": np.float64, "width": np.float64, "kind": np.int8, "bytes": np.int64})


def _values_from_top4(posix: pd.DataFrame) -> pd.DataFrame:
    parts = []
    for kind, name in ((0, "ACCESS"), (1, "STRIDE")):
        for i in range(1, 5):
            v = posix[f"POSIX_{name}{i}_{name}"].to_numpy()
            n = posix[f"POSIX_{name}{i}_COUNT"].to_numpy()
            keep = n > 0
            parts.append(pd.DataFrame({"record_id": posix["record_id"].to_numpy()[keep], "kind": np.int8(kind),
                                       "value": v[keep], "count": n[keep]}))
    if not parts:
        return empty_values()
    out = pd.concat(parts, ignore_index=True)
    return out.astype({"record_id": np.uint64, "kind": np.int8, "value": np.int64, "count": np.int64})


# ------------------------------------------------- current-format decoding
JOB = struct.Struct("<7q1024s")


def _snapshot_from_regions(path, info) -> Snapshot:
    uid, s_sec, s_nsec, e_sec, e_nsec, nprocs, jobid, meta_raw = JOB.unpack_from(info["job"], 0)
    trailing = info["job"][JOB.size:].split(b"\0")[0].decode(errors="surrogateescape")
    exe, _, mount_text = trailing.partition("\n")
    mounts = []
    for line in mount_text.split("\n"):
        fstype, _, point = line.partition("\t")
        if fstype and point:
            mounts.append([point, fstype])
    job_meta = {}
    for line in meta_raw.split(b"\0")[0].decode(errors="replace").splitlines():
        k, eq, v = line.partition("=")
        if eq:
            job_meta[k] = v
    names: Dict[int, str] = {}
    raw, pos = info["names"], 0
    while pos < len(raw):
        end = raw.find(b"\0", pos + 8)
        names[struct.unpack_from("<Q", raw, pos)[0]] = os.fsdecode(raw[pos + 8:end])
        pos = end + 1
    frames = {}
    for module in ("POSIX", "STDIO"):
        buf = info["modules"].get(module, b"")
        ints, floats = C.names(module)
        rec = np.frombuffer(buf, dtype=[("id", "<u8"), ("rank", "<i8"), ("c", "<i8", (len(ints),)),
                                        ("f", "<f8", (len(floats),))])
        # one row per file, as several ranks may share one
        _, first = np.unique(rec["id"], return_index=True)
        rec = rec[np.sort(first)]
        df = pd.DataFrame(np.asarray(rec["c"]), columns=list(ints))
        df = pd.concat([pd.DataFrame({"record_id": rec["id"].astype(np.uint64),
                                      "path": pd.Series([names.get(int(i), "") for i in rec["id"]], dtype=object)}),
                        df, pd.DataFrame(np.asarray(rec["f"]), columns=list(floats))], axis=1)
        frames[module] = df[C.columns(module)]
    dxt = _decode_dxt(info["modules"].get("DXT_POSIX", b""))
    heat = _decode_heat(info["modules"].get("HEATMAP", b""), names)
    start = s_sec + s_nsec * 1e-9
    end = e_sec + e_nsec * 1e-9
    return _assemble(path, info, frames, dxt, heat, start, end,
                     {"uid": uid, "nprocs": nprocs, "jobid": jobid}, job_meta, exe, mounts)


def _decode_dxt(buf: bytes) -> pd.DataFrame:
    """Every DXT record's segments in one frame; the headers are walked in
    Python, the segments copied as arrays (a trace can hold millions)."""
    ids, writes, reads, offsets, pos = [], [], [], [], 0
    while pos < len(buf):
        rid, _, _, _, w, r = DXT_HEADER.unpack_from(buf, pos)
        pos += DXT_HEADER.size
        if w + r:
            ids.append(rid)
            writes.append(w)
            reads.append(r)
            offsets.append(pos)
        pos += (w + r) * SEGMENT.itemsize
    if not ids:
        return empty_dxt()
    counts = np.add(writes, reads)
    seg = np.concatenate([np.frombuffer(buf, dtype=SEGMENT, count=int(n), offset=o)
                          for n, o in zip(counts, offsets)])
    # within a record, writes come first, then reads
    first_of_record = np.repeat(np.cumsum(counts) - counts, counts)
    is_read = np.arange(len(seg)) - first_of_record >= np.repeat(writes, counts)
    out = pd.DataFrame({"record_id": np.repeat(np.asarray(ids, dtype=np.uint64), counts),
                        "op": np.where(is_read, "read", "write").astype(object),
                        "offset": seg["offset"], "length": seg["length"],
                        "start": seg["start"], "end": seg["end"]})
    return out.sort_values("start", kind="stable").reset_index(drop=True)


def _decode_heat(buf: bytes, names: Dict[int, str]) -> pd.DataFrame:
    rows, pos = [], 0
    kinds = {("POSIX", "read"): 0, ("POSIX", "write"): 1, ("STDIO", "read"): 2, ("STDIO", "write"): 3}
    while pos < len(buf):
        rid, _, width, nbins, _, _ = HEATMAP_HEADER.unpack_from(buf, pos)
        pos += HEATMAP_HEADER.size
        bins = np.frombuffer(buf, dtype="<i8", count=2 * nbins, offset=pos)
        pos += 16 * nbins
        module = names.get(rid, "").partition(":")[2]
        for direction, arr in (("write", bins[:nbins]), ("read", bins[nbins:])):
            kind = kinds.get((module, direction))
            if kind is None:
                continue
            for i in np.nonzero(arr)[0]:
                rows.append((i * width, width, kind, int(arr[i])))
    if not rows:
        return H.empty()
    return pd.DataFrame(rows, columns=H.COLUMNS).astype(
        {"start": np.float64, "width": np.float64, "kind": np.int8, "bytes": np.int64})
