"""How much of the process's I/O the shim saw.

The kernel counts every byte the process's read and write system calls
move (/proc/self/io rchar/wchar). The shim counts what passed through the
functions it wraps: per file for the files it records, and as one sum for
the paths it leaves out by design (imports, libraries, system files; see
config.py), whose descriptors it still knows. So a window's bytes fall in
three buckets: recorded (the data), excluded by design, and unseen (what
no wrapper saw: the blind spots below). Data coverage is the recorded
bytes over all but the excluded ones: what a user asks ("did it see my
input?") without the imports counting as missing."""
from __future__ import annotations

from typing import Dict, Optional

BLIND_SPOTS = [
    "direct system calls (syscall(2), io_uring) and statically linked code, which bypass the GOT",
    "function pointers taken before attach or with dlsym (ctypes), such as SQLite's table in libtensorflow_cc",
    "data reached through mmap (page faults are not calls)",
    "sockets, pipes and terminals, which are not files and are left out by design",
]
EXCLUDED = ("excluded paths, counted but not recorded per file: system directories, the Python installation, "
            ".so/.py/.pyc files (attach(include=...) brings them back)")


def proc_io() -> Optional[Dict[str, int]]:
    """The kernel's counts for this process, with the shim's count of bytes
    on excluded paths (None where either is missing)."""
    try:
        with open("/proc/self/io") as f:
            out = {k: int(v) for k, v in (line.split(":") for line in f)}
    except (OSError, ValueError):
        return None
    from tfdarshan.capture import _native      # (here: the tab reads coverage without the shim)
    live = _native.live_totals()
    if "excluded_read" in live:
        out["excluded"] = int(live["excluded_read"] + live["excluded_written"])
    return out


def share(snap, start: Optional[Dict[str, int]], end: Optional[Dict[str, int]]) -> Optional[Dict]:
    """The window's bytes in their three buckets, against the kernel's count."""
    if not start or not end:
        return None
    total = (end["rchar"] - start["rchar"]) + (end["wchar"] - start["wchar"])
    p, s = snap.posix, snap.stdio
    counted = int(p["POSIX_BYTES_READ"].sum() + p["POSIX_BYTES_WRITTEN"].sum()
                  + s["STDIO_BYTES_READ"].sum() + s["STDIO_BYTES_WRITTEN"].sum())
    excluded = end["excluded"] - start["excluded"] if "excluded" in start and "excluded" in end else None
    return summarize(counted, int(total), excluded)


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
