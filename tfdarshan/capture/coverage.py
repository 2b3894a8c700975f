"""How much of the process's I/O the shim saw.

The kernel counts every byte the process's read and write system calls
move (/proc/self/io rchar/wchar). The shim counts what passed through the
functions it wraps, for the files it records. The share is shown in reports
and the TensorBoard tab, with what it cannot see named."""
from __future__ import annotations

from typing import Dict, Optional

BLIND_SPOTS = [
    "direct system calls (syscall(2), io_uring) and statically linked code, which bypass the GOT",
    "function pointers taken before attach or with dlsym (ctypes), such as SQLite's table in libtensorflow_cc",
    "data reached through mmap (page faults are not calls)",
    "sockets, pipes and terminals, which are not files and are left out by design",
    "excluded paths: system directories, the Python installation, .so/.py/.pyc files (attach(include=...) "
    "brings them back)",
]


def proc_io() -> Optional[Dict[str, int]]:
    try:
        with open("/proc/self/io") as f:
            return {k: int(v) for k, v in (line.split(":") for line in f)}
    except (OSError, ValueError):
        return None


def share(snap, start: Optional[Dict[str, int]], end: Optional[Dict[str, int]]) -> Optional[Dict]:
    """Bytes the snapshot counted against the kernel's count over the window."""
    if not start or not end:
        return None
    total = (end["rchar"] - start["rchar"]) + (end["wchar"] - start["wchar"])
    p, s = snap.posix, snap.stdio
    counted = int(p["POSIX_BYTES_READ"].sum() + p["POSIX_BYTES_WRITTEN"].sum()
                  + s["STDIO_BYTES_READ"].sum() + s["STDIO_BYTES_WRITTEN"].sum())
    return {"counted_bytes": counted, "kernel_bytes": int(total),
            "share": (min(counted / total, 1.0) if total > 0 else None),
            "blind_spots": BLIND_SPOTS}
