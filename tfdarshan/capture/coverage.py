"""How much of the process's I/O the shim saw.

The kernel counts every byte the process's read and write system calls
move (/proc/self/io rchar/wchar), copy_file_range and sendfile included.
The shim counts what passed through the functions it wraps, for the files
it records: Darshan's counters, plus the kernel-side copies it counts
beside them (kernel_io.py). The share is shown in reports and the
TensorBoard tab, with what it cannot see named, and with the files whose
data moved in ways Darshan's counters miss (and by which mechanism)."""
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
    "excluded paths: system directories, the Python installation, .so/.py/.pyc files (attach(include=...) "
    "brings them back)",
]
LISTED_FILES = 20


def proc_io() -> Optional[Dict[str, int]]:
    """/proc/self/io, less what the shim itself read there (its page samples)."""
    try:
        with open("/proc/self/io") as f:
            io = {k: int(v) for k, v in (line.split(":") for line in f)}
    except (OSError, ValueError):
        return None
    io["rchar"] -= _native.own_read_bytes()
    return io


def share(snap, start: Optional[Dict[str, int]], end: Optional[Dict[str, int]]) -> Optional[Dict]:
    """Bytes the snapshot counted against the kernel's count over the window."""
    if not start or not end:
        return None
    total = (end["rchar"] - start["rchar"]) + (end["wchar"] - start["wchar"])
    p, s = snap.posix, snap.stdio
    darshan = int(p["POSIX_BYTES_READ"].sum() + p["POSIX_BYTES_WRITTEN"].sum()
                  + s["STDIO_BYTES_READ"].sum() + s["STDIO_BYTES_WRITTEN"].sum())
    counted = darshan + K.kernel_counted_bytes(snap.extra)
    beyond = K.per_file(snap.extra)
    return {"counted_bytes": counted, "kernel_bytes": int(total),
            "share": (min(counted / total, 1.0) if total > 0 else None),
            # what a Darshan log alone holds of it, and the files the difference is in
            "darshan_bytes": darshan, "darshan_share": (min(darshan / total, 1.0) if total > 0 else None),
            "beyond_darshan_files": int(len(beyond)),
            "beyond_darshan": [{"path": r.path, "how": r.how, "bytes_read": int(r.bytes_read),
                                "bytes_written": int(r.bytes_written), "mmap_bytes": int(r.mmap_bytes)}
                               for r in beyond.head(LISTED_FILES).itertuples()],
            "mapped_bytes": int(beyond["mmap_bytes"].sum()) if len(beyond) else 0,
            "blind_spots": BLIND_SPOTS}
