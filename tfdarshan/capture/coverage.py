"""How much of the process's I/O the shim saw.

The kernel counts every byte the process's read and write system calls
move (/proc/self/io rchar/wchar), copy_file_range and sendfile included.
The shim counts what passed through the functions it wraps: per file for
the files it records (Darshan's counters, plus the kernel-side copies it
counts beside them, kernel_io.py), and as one sum for the paths it leaves
out by design (imports, libraries, system files; see config.py), whose
descriptors it still knows. So a window's bytes fall in three buckets:
recorded (the data), excluded by design, and unseen (what no wrapper saw:
the blind spots below). Data coverage is the recorded bytes over all but
the excluded ones: what a user asks ("did it see my input?") without the
imports counting as missing. The report also names the files whose data
moved in ways Darshan's counters miss, and by which mechanism."""
from __future__ import annotations

from typing import Dict, Optional

from tfdarshan.capture import _native
from tfdarshan.capture import kernel_io as K

BLIND_SPOTS = [
    "direct system calls (syscall(2), io_uring) and statically linked code, which bypass the GOT",
    "function pointers taken before attach or with dlsym (ctypes), such as SQLite's table in libtensorflow_cc",
    "data reached through mmap is estimated from the pages mapped (not in the kernel's count either); "
    "mappings moved with mremap are not followed",
    "sockets, pipes and terminals, which are not files and are left out by design",
]
EXCLUDED = ("excluded paths, counted but not recorded per file: system directories, the Python installation, "
            ".so/.py/.pyc files (attach(include=...) brings them back)")
LISTED_FILES = 20


def proc_io() -> Optional[Dict[str, int]]:
    """/proc/self/io, less what the shim itself read there (its page
    samples), with the shim's count of bytes on excluded paths."""
    try:
        with open("/proc/self/io") as f:
            io = {k: int(v) for k, v in (line.split(":") for line in f)}
    except (OSError, ValueError):
        return None
    io["rchar"] -= _native.own_read_bytes()
    live = _native.live_totals()
    if "excluded_read" in live:
        io["excluded"] = int(live["excluded_read"] + live["excluded_written"])
    return io


def share(snap, start: Optional[Dict[str, int]], end: Optional[Dict[str, int]]) -> Optional[Dict]:
    """The window's bytes in their three buckets, against the kernel's count."""
    if not start or not end:
        return None
    total = (end["rchar"] - start["rchar"]) + (end["wchar"] - start["wchar"])
    p, s = snap.posix, snap.stdio
    darshan = int(p["POSIX_BYTES_READ"].sum() + p["POSIX_BYTES_WRITTEN"].sum()
                  + s["STDIO_BYTES_READ"].sum() + s["STDIO_BYTES_WRITTEN"].sum())
    counted = darshan + K.kernel_counted_bytes(snap.extra)
    excluded = end["excluded"] - start["excluded"] if "excluded" in start and "excluded" in end else None
    beyond = K.per_file(snap.extra)
    return {**summarize(counted, int(total), excluded),
            # what a Darshan log alone holds of it, and the files the difference is in
            "darshan_bytes": darshan, "darshan_share": (min(darshan / total, 1.0) if total > 0 else None),
            "beyond_darshan_files": int(len(beyond)),
            "beyond_darshan": [{"path": r.path, "how": r.how, "bytes_read": int(r.bytes_read),
                                "bytes_written": int(r.bytes_written), "mmap_bytes": int(r.mmap_bytes)}
                               for r in beyond.head(LISTED_FILES).itertuples()],
            "mapped_bytes": int(beyond["mmap_bytes"].sum()) if len(beyond) else 0}


def summarize(counted: int, kernel: int, excluded: Optional[int]) -> Dict:
    """The coverage record of a window (or of several ranks' windows added up):
    data coverage leaves the excluded bytes out of the whole."""
    rest = kernel - (excluded or 0)
    unseen = max(kernel - counted - (excluded or 0), 0) if kernel > 0 else None
    return {"counted_bytes": int(counted), "kernel_bytes": int(kernel),
            "excluded_bytes": None if excluded is None else int(excluded), "unseen_bytes": unseen,
            "share": min(counted / max(rest, counted), 1.0) if rest > 0 or counted > 0 else None,
            "share_of_all": min(counted / kernel, 1.0) if kernel > 0 else None,
            "blind_spots": BLIND_SPOTS, "excluded": EXCLUDED}
