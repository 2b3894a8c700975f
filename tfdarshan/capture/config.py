"""What gets recorded by default, and the environment variables that change it."""
from __future__ import annotations

import dataclasses
import os
import site
import sys
from typing import Optional, Sequence, Tuple

# Darshan 3.5's default exclusions (darshan-core), plus /lib64/.
DARSHAN_EXCLUDES = ("/etc/", "/dev/", "/usr/", "/bin/", "/boot/", "/lib/", "/lib64/",
                    "/opt/", "/sbin/", "/sys/", "/proc/", "/var/")
# /dev/shm is a fast tier people stage data to: Darshan's /dev/ hides it.
DEFAULT_INCLUDES = ("/dev/shm/",)
# Shared objects and Python's own imports are not training data; Darshan
# lets them fill its record table before training starts.
DEFAULT_EXCLUDE_SUFFIXES = (".so", ".pyc", ".py", ".pth")

DEFAULT_RECORD_CAP = 65536
DEFAULT_TRACE_MEMORY = 64 << 20


def python_prefixes() -> Tuple[str, ...]:
    """Where the interpreter and its packages live."""
    dirs = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    try:
        dirs.update(site.getsitepackages())
        dirs.add(site.getusersitepackages())
    except AttributeError:  # some virtualenvs lack these
        pass
    out = []
    for d in dirs:
        if d:
            out.append(os.path.join(os.path.realpath(d), ""))
            out.append(os.path.join(os.path.abspath(d), ""))
    return tuple(sorted(set(out)))


def _env_list(name: str) -> Tuple[str, ...]:
    v = os.environ.get(name, "")
    return tuple(p for p in v.split(os.pathsep) if p)


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name)
    if not v:
        return default
    try:
        n = int(v)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {v!r}") from None
    if n <= 0:
        raise ValueError(f"{name} must be positive, got {n}")
    return n


@dataclasses.dataclass(frozen=True)
class Settings:
    include: Tuple[str, ...]
    exclude: Tuple[str, ...]
    exclude_suffixes: Tuple[str, ...]
    record_cap: int
    trace: bool
    trace_memory: int
    chain_library: Optional[str]
    kernel_io: bool = True
    staged: Optional[str] = None        # serve staged copies: "all" this node holds, or a manifest's
    staged_check_ahead: bool = False    # check their sources when attaching, not at first use


def settings(include: Optional[Sequence[str]] = None, exclude: Optional[Sequence[str]] = None,
             *, trace: Optional[bool] = None, record_cap: Optional[int] = None,
             trace_memory: Optional[int] = None, kernel_io: Optional[bool] = None,
             staged: Optional[str] = None) -> Settings:
    """Defaults, then TFDARSHAN_* variables, then the caller's arguments.

    `include` prefixes win over every exclusion. A user's `exclude` entry
    starting with '*' is a suffix (e.g. '*.tmp'). `kernel_io`
    (TFDARSHAN_KERNEL_IO=0 turns it off): count kernel-side copies and
    follow mapped files, in columns of our own (kernel_io.py). `staged`
    (TFDARSHAN_STAGED): serve staged copies in place of their sources,
    "all" that this node holds or those of a manifest (served.py);
    TFDARSHAN_STAGED_CHECK=ahead checks their sources at attach."""
    inc = list(DEFAULT_INCLUDES) + list(_env_list("TFDARSHAN_INCLUDE")) + list(include or ())
    exc = list(DARSHAN_EXCLUDES) + list(python_prefixes())
    suf = list(DEFAULT_EXCLUDE_SUFFIXES)
    for e in list(_env_list("TFDARSHAN_EXCLUDE")) + list(exclude or ()):
        (suf if e.startswith("*") else exc).append(e.lstrip("*"))
    if trace is None:
        trace = os.environ.get("TFDARSHAN_TRACE", "") not in ("", "0")
    if kernel_io is None:
        kernel_io = os.environ.get("TFDARSHAN_KERNEL_IO", "1") not in ("", "0")
    for p in inc + exc:
        if not isinstance(p, str) or not p:
            raise ValueError(f"include/exclude entries must be non-empty strings, got {p!r}")
    return Settings(
        include=tuple(inc), exclude=tuple(exc), exclude_suffixes=tuple(suf),
        record_cap=record_cap or _env_int("TFDARSHAN_RECORD_CAP", DEFAULT_RECORD_CAP),
        trace=bool(trace),
        trace_memory=trace_memory or _env_int("TFDARSHAN_TRACE_MEMORY", DEFAULT_TRACE_MEMORY),
        chain_library=os.environ.get("TFDARSHAN_LIBDARSHAN") or loaded_site_darshan(),
        kernel_io=bool(kernel_io),
        staged=staged or os.environ.get("TFDARSHAN_STAGED") or None,
        staged_check_ahead=os.environ.get("TFDARSHAN_STAGED_CHECK", "") == "ahead")


def loaded_site_darshan() -> Optional[str]:
    """The site's Darshan runtime when it is already in the process (usually
    LD_PRELOADed by the site), so that our wrappers call through it and its
    log is still written. Darshan's log library from the wheel
    (libdarshan-util-*.so) is not a runtime and does not match."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(None, 5)[-1]
                if os.path.basename(path).startswith("libdarshan.so"):
                    return path
    except OSError:
        pass
    return None
