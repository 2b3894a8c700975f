"""A log's structure checked in Python (header, region bounds, that every
compressed region inflates, record sizes) before Darshan's C parser sees it."""
from __future__ import annotations

import bz2
import pathlib
import re
import struct
from typing import Dict

from zlib_ng import zlib_ng     # zlib's format, inflated about twice as fast: reading logs is mostly inflating

from tfdarshan.capture import counters as C
from tfdarshan.errors import DarshanLogError
from tfdarshan.logs.darshan_format import (BASE, DXT_HEADER, HEADER, HEATMAP_HEADER, JOB_SIZE, LOG_VERSION, MAGIC, MOD,
                                            MOD_VER, SEGMENT, name_records, parse_names)

# record sizes of the modules we read (base record + counters)
def _fixed_record_size(module: str) -> int:
    ints, floats = C.names(module)
    return BASE.size + 8 * (len(ints) + len(floats))


STREAM_LIMIT = 1 << 30      # the most one zlib stream of a region may inflate to


def inflate(raw: bytes, comp_type: int, what: str, path) -> bytes:
    """One compressed region of a log, inflated; DarshanLogError naming it if it is not.

    A zlib region may be several streams back to back, as Darshan's MPI
    runtime writes it (each rank compresses its own part) and as darshan-util
    reads it (darshan_log_libz_read resets at each stream's end)."""
    try:
        if comp_type == 0:
            parts, rest = [], raw
            while True:
                d = zlib_ng.decompressobj()
                parts.append(d.decompress(rest, STREAM_LIMIT))
                if not d.eof:
                    raise zlib_ng.error("stream ends early")
                rest = d.unused_data
                if not rest:
                    return parts[0] if len(parts) == 1 else b"".join(parts)
        if comp_type == 1:
            return bz2.decompress(raw)
        return raw
    except (zlib_ng.error, OSError, ValueError, EOFError) as e:
        raise DarshanLogError(f"{path}: {what} region is corrupted ({e})") from None


def check_log(path) -> Dict[str, object]:
    """Validate a Darshan log's structure without Darshan's C code.

    Returns the header facts; raises DarshanLogError naming the file."""
    info = inspect_log(path)
    return {k: info[k] for k in ("version", "checked", "partial")}


def inspect_log(path, modules: bool = True) -> Dict[str, object]:
    """check_log's work, keeping the inflated regions of current-format logs.

    modules=False leaves the module regions compressed (their bounds and
    versions are checked); "maps" says where each is, for check_module_region."""
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
    job = inflate(data[HEADER.size:job_end], comp_type, "job", path)
    if not (JOB_SIZE < len(job) <= 4096 + 65536):
        raise DarshanLogError(f"{path}: corrupted job record")
    names = inflate(data[name_map[0]:name_map[0] + name_map[1]], comp_type, "name", path) if name_map[1] else b""
    # with the modules left compressed, the names stay bytes: (ids, record starts) and the region
    named = parse_names(names) if modules else name_records(names)
    if named is None:
        raise DarshanLogError(f"{path}: corrupted name records")
    known = {v: k for k, v in MOD.items()}
    buffers: Dict[str, bytes] = {}
    maps: Dict[str, tuple] = {}
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
        maps[module] = (off, length)
        if modules:
            buffers[module] = check_module_region(module, data[off:off + length], comp_type, mod_ver[mod_id], path)
    if not modules:
        return {"version": version.decode(), "partial": bool(partial), "job": job, "name_bytes": named,
                "names_raw": names, "current": all(mod_ver[MOD[m]] == MOD_VER[m] for m in maps), "maps": maps,
                "mod_ver": {m: mod_ver[MOD[m]] for m in maps}, "comp_type": comp_type}
    return {"version": version.decode(), "checked": True, "partial": bool(partial), "job": job,
            "names": named, "modules": buffers, "current": all(mod_ver[MOD[m]] == MOD_VER[m] for m in buffers),
            "others": others}


def check_module_region(module: str, raw: bytes, comp_type: int, ver: int, path) -> bytes:
    """A module's region inflated and checked; DarshanLogError if it is damaged."""
    buf = inflate(raw, comp_type, module, path)
    _check_module(module, buf, ver, path)
    return buf


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
