"""Darshan's log format 3.41 as we write it, and libdarshan-util (shipped in
the `darshan` wheel) through cffi."""
from __future__ import annotations

import operator
import struct
from typing import List, Optional, Tuple

import cffi
import numpy as np

from tfdarshan.capture import counters as C
from tfdarshan.errors import DarshanLogError

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
# pseudo file systems: mounts that never hold stored data
PSEUDO_FS = {"proc", "sysfs", "devpts", "cgroup", "cgroup2", "securityfs", "debugfs", "tracefs", "bpf",
             "pstore", "mqueue", "fusectl", "configfs", "binfmt_misc", "autofs", "hugetlbfs",
             "rpc_pipefs", "nsfs", "efivarfs", "devtmpfs"}

# the name region: records {uint64 id; char name[];} back to back, each name
# ending in a NUL (an id may hold NUL bytes; a name never does)
ID_BYTES = np.arange(8)


def name_records(raw: bytes) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """(ids, where each record starts) of an inflated name region, or None
    when it is not a run of whole records with names under PATH_MAX.

    A record ends at the first NUL at least 8 bytes past its start, as
    darshan-util reads it. A NUL 9 or more bytes after the NUL before it
    therefore ends a record whatever came before; the few others (NULs inside
    ids, and the records just after those) are settled in order. Vectorised:
    a job log can name millions of files."""
    arr = np.frombuffer(raw, dtype=np.uint8)
    if not len(arr):
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    nul = np.flatnonzero(arr == 0)
    ends_record = np.diff(nul, prepend=-1) >= 9
    for i in np.flatnonzero(~ends_record).tolist():
        j = i - 1
        while j >= 0 and not ends_record[j]:
            j -= 1
        ends_record[i] = nul[i] - (nul[j] if j >= 0 else -1) >= 9
    ends = nul[ends_record]
    if not len(ends) or ends[-1] != len(arr) - 1:
        return None
    starts = np.zeros(len(ends), dtype=np.int64)
    starts[1:] = ends[:-1] + 1
    if int((ends - starts).max()) - 8 >= PATH_MAX:
        return None
    ids = np.ascontiguousarray(arr[starts[:, None] + ID_BYTES]).view("<u8").ravel().astype(np.uint64)
    return ids, starts


def parse_names(raw: bytes) -> Optional[Tuple[np.ndarray, List[str]]]:
    """(ids, paths) of an inflated name region, or None (see name_records)."""
    found = name_records(raw)
    return None if found is None else names_at(raw, *found)


def names_at(raw: bytes, ids: np.ndarray, starts: np.ndarray) -> Tuple[np.ndarray, List[str]]:
    """(ids, paths) of an inflated name region whose records name_records found."""
    if not len(ids):
        return ids, []
    text = np.ones(len(raw), dtype=bool)
    text[starts[:, None] + ID_BYTES] = False
    names = np.frombuffer(raw, dtype=np.uint8)[text].tobytes()     # each name and its NUL
    return ids, names[:-1].decode("utf-8", "surrogateescape").split("\x00")


def record_dtype(module: str) -> np.dtype:
    """A POSIX or STDIO record as Darshan stores it: the base record (id,
    rank), then the integer and the floating-point counters."""
    ints, floats = C.names(module)
    return np.dtype([("id", "<u8"), ("rank", "<i8"), ("c", "<i8", (len(ints),)), ("f", "<f8", (len(floats),))])


def pack_names(ids: np.ndarray, names: List[bytes]) -> Tuple[np.ndarray, np.ndarray]:
    """The name region's records for `ids` (one each, by ascending id; the
    last name given for an id wins), as one byte buffer, and where each
    record starts in it. Names are cut to PATH_MAX - 1 bytes, as the
    writer's own buffer would cut them."""
    ids = np.asarray(ids, dtype=np.uint64)
    order = np.argsort(ids, kind="stable")
    last = np.ones(len(order), dtype=bool)
    last[:-1] = ids[order][1:] != ids[order][:-1]
    order = order[last]
    lengths = np.fromiter(map(len, names), dtype=np.int64, count=len(names))
    names = list(operator.itemgetter(*order.tolist())(names)) if len(order) > 1 else [names[i] for i in order]
    for k in np.flatnonzero(lengths[order] >= PATH_MAX).tolist():
        names[k] = names[k][:PATH_MAX - 1]
    sizes = np.minimum(lengths[order], PATH_MAX - 1)
    starts = np.zeros(len(names), dtype=np.int64)
    np.cumsum(sizes[:-1] + 9, out=starts[1:])
    blob = np.zeros(max(int(sizes.sum()) + 9 * len(names), 1), dtype=np.uint8)
    if len(names):
        id_bytes = starts[:, None] + np.arange(8)
        blob[id_bytes] = ids[order].astype("<u8").view(np.uint8).reshape(-1, 8)
        # the names fill every byte that is neither an id nor a name's NUL, in order
        text = np.ones(len(blob), dtype=bool)
        text[id_bytes] = False
        text[starts + 8 + sizes] = False
        blob[text] = np.frombuffer(b"".join(names), dtype=np.uint8)
    return blob, starts


def fs_bytes(paths) -> List[bytes]:
    """Paths as the bytes the file system knows them by (surrogate escapes
    undone, as os.fsencode does), in one pass: a log can name millions."""
    paths = list(paths)
    if not paths:
        return []
    return "\x00".join(paths).encode("utf-8", "surrogateescape").split(b"\x00")


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

ffi = cffi.FFI()
ffi.cdef(_CDEF)
_lib = None


def library_path() -> str:
    """libdarshan-util as shipped in the installed `darshan` package (found
    without importing it: a log written beside a training must not move the
    process's working directory, as PyDarshan's import does)."""
    found = C.darshan_util_path()
    if found:
        return found
    from darshan.discover_darshan import find_utils  # a darshan-util installed elsewhere
    lib = find_utils(ffi, None)
    raise DarshanLogError(f"libdarshan-util not found next to the darshan package ({lib!r})")


def library():
    global _lib
    if _lib is None:
        _lib = ffi.dlopen(library_path())
    return _lib


def darshan_util_version() -> str:
    return ffi.string(library().darshan_log_get_lib_version()).decode()
