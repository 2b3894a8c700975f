"""The one place where Python meets the C shim: raw pointers stay here."""
from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from typing import Iterator, Optional, Sequence

import numpy as np

from tfdarshan._native_shim import ffi, lib

MODULE_POSIX = lib.TFD_MODULE_POSIX
MODULE_STDIO = lib.TFD_MODULE_STDIO

ROW_FIELDS = tuple(ffi.string(lib.tfd_row_field(i)).decode() for i in range(lib.tfd_row_width()))
ROW_INDEX = {name: i for i, name in enumerate(ROW_FIELDS)}
VALUE_KINDS = ("access", "stride")


class NativeError(RuntimeError):
    """The shim refused an operation (the message says why)."""


@dataclasses.dataclass(frozen=True)
class Clock:
    origin_ticks: int
    ticks_per_second: float
    origin_unix_time: float
    uses_tsc: bool

    def seconds(self, ticks: np.ndarray) -> np.ndarray:
        """Ticks since the origin in seconds; 0 (Darshan's "never") stays 0."""
        ticks = np.asarray(ticks, dtype=np.int64)
        out = (ticks - self.origin_ticks) / self.ticks_per_second
        return np.where(ticks == 0, 0.0, out)

    def duration(self, ticks: np.ndarray) -> np.ndarray:
        return np.asarray(ticks, dtype=np.float64) / self.ticks_per_second


@dataclasses.dataclass(frozen=True)
class Collected:
    """What one collect returns: the records touched in the closed interval."""
    rows: np.ndarray          # (n, len(ROW_FIELDS)) int64
    values: np.ndarray        # (m, 4) int64: record index, kind, value, count
    segments: np.ndarray      # (k, 6) int64: record index, op, offset, length, start, end
    heat: np.ndarray          # (h, 3) int64: time bin, kind (module*2 + write), bytes
    heat_bin_ticks: int
    heat_unbinned: int
    epoch: int
    now_ticks: int
    n_records: int
    folded_files: int
    trace_dropped: int
    n_threads: int
    n_shards: int             # (thread, record) counters the collect folded: its cost
    busy_ticks: int = 0       # wall time with a read or metadata call in flight in the interval
    busy_joined: int = 0      # spans joined across a gap (then busy_ticks is an upper bound)


def _string_array(items: Sequence[str]):
    keep = [ffi.new("char[]", os_bytes(s)) for s in items]
    arr = ffi.new("const char *[]", keep) if keep else ffi.NULL
    return arr, keep


def os_bytes(s) -> bytes:
    import os
    return s if isinstance(s, bytes) else os.fsencode(s)


def attach(*, record_cap: int, include: Sequence[str], exclude: Sequence[str],
           exclude_suffixes: Sequence[str], trace: bool, trace_cap_bytes: int,
           chain_library: Optional[str], kernel_io: bool = True) -> bool:
    """Patch the loaded libraries; False if already attached."""
    cfg = ffi.new("tfd_config *")
    inc, keep_inc = _string_array(include)
    exc, keep_exc = _string_array(exclude)
    suf, keep_suf = _string_array(exclude_suffixes)
    chain = ffi.new("char[]", os_bytes(chain_library)) if chain_library else ffi.NULL
    cfg.record_cap = record_cap
    cfg.include_prefixes, cfg.n_include = inc, len(keep_inc)
    cfg.exclude_prefixes, cfg.n_exclude = exc, len(keep_exc)
    cfg.exclude_suffixes, cfg.n_exclude_suffixes = suf, len(keep_suf)
    cfg.trace = bool(trace)
    cfg.trace_cap_bytes = trace_cap_bytes
    cfg.chain_library = chain
    cfg.kernel_io = bool(kernel_io)
    err = ffi.new("char[512]")
    rc = lib.tfd_attach(cfg, err, 512)
    if rc < 0:
        raise NativeError(ffi.string(err).decode(errors="replace"))
    return rc == 0


def set_trace(on: bool, cap_bytes: int) -> None:
    lib.tfd_set_trace(1 if on else 0, cap_bytes)


def detach() -> bool:
    return lib.tfd_detach() == 0


def is_attached() -> bool:
    return bool(lib.tfd_is_attached())


def patched_slots() -> int:
    return lib.tfd_patched_slots()


def object_is_patched(name_fragment: str) -> bool:
    return bool(lib.tfd_object_is_patched(os_bytes(name_fragment)))



@contextmanager
def suppressed() -> Iterator[None]:
    """The calling thread's file I/O is not recorded inside this block."""
    before = lib.tfd_suppress(1)
    try:
        yield
    finally:
        if before >= 0:
            lib.tfd_suppress(before)


def _array(ptr, n: int, width: int) -> np.ndarray:
    if n == 0:
        return np.zeros((0, width), dtype=np.int64)
    buf = ffi.buffer(ptr, n * width * 8)
    return np.frombuffer(buf, dtype=np.int64).reshape(n, width).copy()


def collect() -> Collected:
    """Close the current interval and return the records touched in it."""
    out = ffi.new("tfd_collect_result *")
    if lib.tfd_collect(out) != 0:
        raise NativeError("collect failed: the shim has not been attached or ran out of memory")
    try:
        return Collected(
            rows=_array(out.rows, out.n_rows, len(ROW_FIELDS)),
            values=_array(out.values, out.n_values, 4),
            segments=_array(out.segments, out.n_segments, 6),
            heat=_array(out.heat, out.n_heat, 3), heat_bin_ticks=out.heat_bin_ticks,
            heat_unbinned=out.heat_unbinned,
            epoch=out.epoch, now_ticks=out.now_ticks, n_records=out.n_records,
            folded_files=out.folded_files, trace_dropped=out.trace_dropped,
            n_threads=out.n_threads, n_shards=out.n_shards, busy_ticks=out.busy_ticks,
            busy_joined=out.busy_joined)
    finally:
        lib.tfd_free_collect(out)


def live_totals() -> dict:
    out = ffi.new("tfd_live_totals *")
    if lib.tfd_live(out) != 0:
        return {}
    return {k: getattr(out, k) for k in
            ("bytes_read", "bytes_written", "reads", "writes", "opens", "io_ticks", "files", "excluded_read",
             "excluded_written")}


def followed_mappings() -> int:
    """Mapped files the shim follows now (kernel_io.py)."""
    return int(lib.tfd_followed_mappings())


def own_read_bytes() -> int:
    """Bytes the shim itself has read from /proc (its page samples): the
    kernel's rchar counts them, coverage takes them out."""
    return int(lib.tfd_own_read_bytes())


def record_info(index: int) -> tuple[int, int, bytes]:
    """(record id, module, path bytes) of a record index."""
    rid = ffi.new("uint64_t *")
    mod = ffi.new("int *")
    path = ffi.new("const char **")
    if lib.tfd_record_info(index, rid, mod, path) != 0:
        raise NativeError(f"no record with index {index}")
    return int(rid[0]), int(mod[0]), ffi.string(path[0])


def clock() -> Clock:
    c = ffi.new("tfd_clock_info *")
    lib.tfd_clock(c)
    return Clock(int(c.origin_ticks), float(c.ticks_per_second), float(c.origin_unix_time), bool(c.uses_tsc))


def now_ticks() -> int:
    return int(lib.tfd_now_ticks())


def darshan_hash(path) -> int:
    b = os_bytes(path)
    return int(lib.tfd_darshan_hash(b, len(b)))


def clean_path(path) -> bytes:
    b = os_bytes(path)
    out = ffi.new("char[]", 2 * 4096 + len(b))
    if lib.tfd_clean_path(b, out, len(out)) != 0:
        raise NativeError(f"cannot clean path {path!r}")
    return ffi.string(out)


def attach_generation() -> int:
    """Odd while attached; changes once patching is complete and before
    unpatching starts, so equal odd values around a call prove it was made
    while attached."""
    return int(lib.tfd_attach_generation())


def attach_generation_address() -> int:
    """Address of the C function, for native test code to call."""
    return int(ffi.cast("uintptr_t", ffi.addressof(lib, "tfd_attach_generation")))


# ------------------------------------------------------------ staged copies
STAGED_ROW = lib.TFD_STAGED_ROW
# a used entry's row: index, state, then these counts (native/staged.h's order)
STAGED_COUNTS = ("served_opens", "served_fopens", "served_stats", "fallback_opens", "fallback_stats",
                 "source_opens", "source_stats")
STAGED_STATES = {lib.TFD_STAGED_UNCHECKED: "unchecked", lib.TFD_STAGED_SERVING: "serving",
                 lib.TFD_STAGED_SOURCE_CHANGED: "source changed", lib.TFD_STAGED_SOURCE_UNREADABLE: "source unreadable",
                 lib.TFD_STAGED_NOT_A_FILE: "source not a file", lib.TFD_STAGED_COPY_MISSING: "copy missing",
                 lib.TFD_STAGED_COPY_DIFFERS: "copy differs", lib.TFD_STAGED_COPY_FAILED: "copy failed",
                 lib.TFD_STAGED_WRITTEN: "source written"}


def load_staged(sources: Sequence[str], copies: Sequence[str], sizes: Sequence[int],
                source_mtimes_ns: Sequence[int], copy_mtimes_ns: Sequence[int]) -> None:
    """Serve these staged copies in place of their sources from now on
    (none: stop serving)."""
    spec = ffi.new("tfd_staged_spec *")
    src, keep_src = _string_array(sources)
    cps, keep_cps = _string_array(copies)
    n = len(keep_src)
    arrays = [np.ascontiguousarray(a, dtype=np.int64) for a in (sizes, source_mtimes_ns, copy_mtimes_ns)]
    spec.n = n
    spec.sources, spec.copies = src, cps
    spec.sizes, spec.source_mtimes_ns, spec.copy_mtimes_ns = (ffi.cast("int64_t *", ffi.from_buffer(a))
                                                             for a in arrays)
    err = ffi.new("char[512]")
    if lib.tfd_staged_load(spec, err, 512) != 0:
        raise NativeError(ffi.string(err).decode(errors="replace"))


def staged_loaded() -> int:
    """Entries of the loaded table of staged copies (0: none)."""
    return int(lib.tfd_staged_loaded())


def check_staged(index: int) -> str:
    """Check entry `index` now, ahead of its first use; its state."""
    return STAGED_STATES.get(lib.tfd_staged_check(index), "unknown")


def staged_used() -> np.ndarray:
    """Rows (index, state, counts...) of the entries this process has used."""
    out = ffi.new("tfd_staged_rows *")
    if lib.tfd_staged_used(out) != 0:
        raise NativeError("out of memory reading the staged copies' counts")
    try:
        return _array(out.rows, out.n, STAGED_ROW)
    finally:
        lib.tfd_staged_free(out)
