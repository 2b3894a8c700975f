"""Where a process's logs go, made safe at both ends of a job.

Before the job: `check_writable` creates the log directory and writes (and
removes) a probe file in it, so a directory that cannot take the logs is
refused before hours of training, not discovered after them.

After the job: when writing into the session directory fails anyway (the
disk filled up, the directory went read-only or was replaced), the logs go
to a fallback directory instead, named in one line on stderr:

    $TFDARSHAN_FALLBACK_DIR, else $XDG_CACHE_HOME/tfdarshan/unsaved (by
    default ~/.cache/tfdarshan/unsaved: it outlives the job, and a shared home
    gathers every node's ranks), else $TMPDIR (or /tmp)/tfdarshan-unsaved

each holding <session name>-<job id or pid>/, so the ranks of one job meet
in one directory (their file names tell them apart) and separate runs never
mix."""
from __future__ import annotations

import os
import pathlib
import tempfile
from typing import Iterator, Optional

FALLBACK_ENV = "TFDARSHAN_FALLBACK_DIR"


def check_writable(directory) -> None:
    """Create `directory` (and its parents) and write a probe file in it;
    OSError naming the directory when either fails."""
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fd, probe = tempfile.mkstemp(prefix=".tfdarshan-probe-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            # a page of data: a directory on a full disk takes an empty file
            f.write(b"\0" * 4096)
            f.flush()
            os.fsync(f.fileno())
    finally:
        try:
            os.unlink(probe)
        except OSError:
            pass


def fallback_bases() -> Iterator[pathlib.Path]:
    """The fallback roots, most lasting first."""
    own = os.environ.get(FALLBACK_ENV)
    if own:
        yield pathlib.Path(own)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    yield pathlib.Path(cache, "tfdarshan", "unsaved")
    yield pathlib.Path(tempfile.gettempdir(), "tfdarshan-unsaved")


def fallback_directory(session_name: str, job: Optional[str] = None) -> Optional[pathlib.Path]:
    """The first fallback directory for this session that takes a probe
    file, created; None when none does."""
    leaf = f"{session_name}-{job or os.getpid()}"
    for base in fallback_bases():
        d = base / leaf
        try:
            check_writable(d)
            return d
        except OSError:
            continue
    return None
