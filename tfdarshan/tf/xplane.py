"""Put the window's file operations into XProf's trace viewer.

New lines go inside the `/host:CPU` plane (XProf's converter keeps those and
shows each as a thread; a plane of our own would be dropped): one line per
busiest file, the rest on one shared line. Every event carries the file,
offset, bytes and duration as stats. Times are aligned through the
`profile_start_time` the profiler records in its Task Environment plane."""
from __future__ import annotations

import os
import pathlib

import numpy as np

from tfdarshan.capture.snapshot import Snapshot

BUSIEST_LINES = 8
LINE_ID_BASE = 0x7FD00000  # well away from the thread ids TensorFlow uses


def _xplane_pb2():
    from tensorflow.tsl.profiler.protobuf import xplane_pb2
    return xplane_pb2


def _stat_value(plane, name: str) -> int:
    for k, m in plane.stat_metadata.items():
        if m.name == name:
            for s in plane.stats:
                if s.metadata_id == k:
                    return s.uint64_value or s.int64_value
    return 0


def merge_io(path: pathlib.Path, snap: Snapshot) -> int:
    """Add the snapshot's traced operations to an .xplane.pb; returns the
    number of events added. The file is replaced atomically."""
    import fcntl
    # workers on one host share the file name: one read-modify-write at a time
    with open(path, "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return _merge_locked(pathlib.Path(path), snap)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _merge_locked(path: pathlib.Path, snap: Snapshot) -> int:
    pb2 = _xplane_pb2()
    space = pb2.XSpace()
    space.ParseFromString(path.read_bytes())
    env = next((p for p in space.planes if p.name == "Task Environment"), None)
    profile_start = _stat_value(env, "profile_start_time") if env is not None else 0
    cpu = next((p for p in space.planes if p.name == "/host:CPU"), None)
    if cpu is None:
        cpu = space.planes.add()
        cpu.name = "/host:CPU"
    dxt = snap.dxt
    if dxt.empty:
        return 0
    origin_ns = int(round(snap.meta["origin_unix_time"] * 1e9))
    names = dict(zip(snap.posix["record_id"], snap.posix["path"]))

    next_meta = max(list(cpu.event_metadata.keys()) + list(cpu.stat_metadata.keys()) + [0]) + 1
    ev_ids = {}
    for op in ("read", "write"):
        m = cpu.event_metadata[next_meta]
        m.id, m.name, m.display_name = next_meta, f"POSIX {op}", f"POSIX {op}"
        ev_ids[op] = next_meta
        next_meta += 1
    st_ids = {}
    for stat in ("file", "offset", "bytes", "duration_us"):
        m = cpu.stat_metadata[next_meta]
        m.id, m.name = next_meta, stat
        st_ids[stat] = next_meta
        next_meta += 1

    busiest = dxt.groupby("record_id")["length"].agg(["sum", "size"]).sort_values(
        ["sum", "size"], ascending=False).index[:BUSIEST_LINES]
    groups = [(rid, dxt[dxt["record_id"] == rid]) for rid in busiest]
    rest = dxt[~dxt["record_id"].isin(busiest)]
    if len(rest):
        groups.append((None, rest))

    start_ns = origin_ns + int(round(snap.start * 1e9))
    line_ts = start_ns - profile_start if profile_start else start_ns
    added = 0
    for i, (rid, seg) in enumerate(groups):
        line = cpu.lines.add()
        line.id = line.display_id = LINE_ID_BASE + i
        label = os.path.basename(names.get(rid, "")) if rid is not None else "other files"
        line.name = line.display_name = f"I/O: {label}"
        line.timestamp_ns = line_ts
        begin = np.round((seg["start"].to_numpy() + snap.meta["origin_unix_time"]) * 1e9).astype(np.int64)
        dur_ps = np.maximum(np.round((seg["end"].to_numpy() - seg["start"].to_numpy()) * 1e12), 0).astype(np.int64)
        offsets_ps = (begin - start_ns) * 1000
        for op, off_ps, d_ps, rec, offset, length in zip(
                seg["op"], offsets_ps, dur_ps, seg["record_id"], seg["offset"], seg["length"]):
            ev = line.events.add()
            ev.metadata_id = ev_ids[op]
            ev.offset_ps = int(max(off_ps, 0))
            ev.duration_ps = int(d_ps)
            s = ev.stats.add()
            s.metadata_id, s.str_value = st_ids["file"], names.get(rec, str(rec))
            s = ev.stats.add()
            s.metadata_id, s.int64_value = st_ids["offset"], int(offset)
            s = ev.stats.add()
            s.metadata_id, s.int64_value = st_ids["bytes"], int(length)
            s = ev.stats.add()
            s.metadata_id, s.double_value = st_ids["duration_us"], d_ps / 1e6
            added += 1
        line.duration_ps = int(max(offsets_ps.max() + dur_ps.max(), 0)) if len(seg) else 0
    tmp = pathlib.Path(path).with_name(f".{pathlib.Path(path).name}.tmp")
    tmp.write_bytes(space.SerializeToString())
    os.replace(tmp, path)
    return added
