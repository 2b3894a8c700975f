"""Reading Darshan logs into a Snapshot: ours and current-format logs with
a fast decoder, others through PyDarshan."""
from __future__ import annotations

import pathlib
import struct
from typing import Dict

import numpy as np
import pandas as pd

from tfdarshan.capture import counters as C
from tfdarshan.capture import heatmap as H
from tfdarshan.capture.snapshot import Snapshot, empty_dxt, empty_extra, empty_values, extra_frame, merge_records
from tfdarshan.errors import DarshanLogError
from tfdarshan.logs.darshan_checker import inflate, inspect_log
from tfdarshan.logs.darshan_format import (DXT_HEADER, HEADER, HEATMAP_HEADER, LOG_VERSION, MAGIC, SEGMENT,
                                            record_dtype)

def read_darshan_log(path) -> Snapshot:
    """A Snapshot of a Darshan log: ours, or one a site-wide Darshan wrote.

    Times become seconds since the job start, which is the snapshot's origin.
    Access-size and stride frequencies are known only as Darshan's top four.
    Logs in the current format (3.41 with the module versions Darshan 3.5
    writes) are decoded from the regions the check already inflated; older
    ones are read by PyDarshan."""
    info = inspect_log(path)
    if info.get("current"):
        return _snapshot_from_regions(path, info)
    import darshan
    try:
        with darshan.DarshanReport(str(path), read_all=False) as report:
            mods = report.modules
            frames = {}
            for module in ("POSIX", "STDIO"):
                frames[module] = _report_frame(report, module) if module in mods else C.empty_frame(module)
            dxt = _report_dxt(report) if "DXT_POSIX" in mods else empty_dxt()
            heat = _report_heat(report) if "HEATMAP" in mods else H.empty()
            job = report.metadata["job"]
            mounts = [[m[0], m[1]] for m in report.mounts] if report.mounts else []
            exe = report.metadata.get("exe", "")
    except DarshanLogError:
        raise
    except Exception as e:   # PyDarshan raises assorted types for unreadable logs
        raise DarshanLogError(f"{path}: PyDarshan could not read the log ({type(e).__name__}: {e})") from None
    start = float(job.get("start_time_sec", 0)) + float(job.get("start_time_nsec", 0)) * 1e-9
    end = float(job.get("end_time_sec", 0)) + float(job.get("end_time_nsec", 0)) * 1e-9
    return _assemble(path, info, frames, dxt, heat, start, end, job, job.get("metadata") or {}, exe, mounts)


def _meta_int(job_meta: Dict[str, str], key: str) -> int:
    try:
        return max(int(job_meta.get(key, 0)), 0)
    except (TypeError, ValueError):
        return 0


def _meta(path, info, start, end, job, job_meta, exe, mounts, traced: bool) -> dict:
    """A snapshot's meta from its log's job record (times: seconds since the job start)."""
    return {"format": "darshan", "log": str(path), "log_version": info["version"], "start": 0.0,
            "end": max(end - start, 0.0), "origin_unix_time": start, "jobid": job.get("jobid"),
            "uid": job.get("uid"), "nprocs": job.get("nprocs"), "exe": exe, "mounts": mounts,
            "hostname": job_meta.get("hostname", ""), "job_metadata": dict(job_meta),
            "partial": info.get("partial", False), "zero_reads_known": traced,
            "folded_files": _meta_int(job_meta, "folded_files"),
            "trace_dropped": _meta_int(job_meta, "trace_dropped")}


def _assemble(path, info, frames, dxt, heat, start, end, job, job_meta, exe, mounts) -> Snapshot:
    """The Snapshot both read paths end in."""
    values = _values_from_top4(frames["POSIX"])
    extra = empty_extra()
    if len(dxt):
        # the trace shows the zero-length reads the counters cannot
        z = dxt[(dxt["op"] == "read") & (dxt["length"] == 0)].groupby("record_id").size()
        ids = frames["POSIX"]["record_id"]
        extra = extra_frame(pd.DataFrame({
            "record_id": ids.to_numpy(dtype=np.uint64), "module": "POSIX", "path": pd.Series(frames["POSIX"]["path"].to_numpy(), dtype=object),
            "ZERO_READS": z.reindex(ids.to_numpy()).fillna(0).astype(np.int64).to_numpy()}))
    meta = _meta(path, info, start, end, job, job_meta, exe, mounts, bool(len(dxt)))
    return Snapshot(frames["POSIX"], frames["STDIO"], values, extra, dxt, meta, None, heat)


def _report_frame(report, module: str) -> pd.DataFrame:
    report.mod_read_all_records(module, warnings=False)
    recs = report.records[module].to_df()
    c, f = recs["counters"], recs["fcounters"]
    ints, floats = C.names(module)
    names = report.name_records
    df = pd.DataFrame({"record_id": c["id"].to_numpy(dtype=np.uint64),
                       "path": pd.Series([names.get(int(i), "") for i in c["id"]], dtype=object)})
    for col in ints:
        df[col] = c[col].to_numpy(dtype=np.int64) if col in c else 0
    for col in floats:
        df[col] = f[col].to_numpy(dtype=np.float64) if col in f else 0.0
    # an MPI job's log: a file some ranks (not all) opened has one record a rank
    if df["record_id"].duplicated().any():
        df = merge_records(df, module)
    return df[C.columns(module)].reset_index(drop=True)


def _report_dxt(report) -> pd.DataFrame:
    report.mod_read_all_dxt_records("DXT_POSIX", warnings=False)
    parts = []
    for rec in report.records["DXT_POSIX"].to_df():
        for op in ("read", "write"):
            seg = rec[f"{op}_segments"]
            if len(seg):
                parts.append(pd.DataFrame({"record_id": np.uint64(rec["id"]), "op": op,
                                           "offset": seg["offset"].to_numpy(np.int64),
                                           "length": seg["length"].to_numpy(np.int64),
                                           "start": seg["start_time"].to_numpy(np.float64),
                                           "end": seg["end_time"].to_numpy(np.float64)}))
    if not parts:
        return empty_dxt()
    out = pd.concat(parts, ignore_index=True)
    out["record_id"] = out["record_id"].astype(np.uint64)
    return out.sort_values("start", kind="stable").reset_index(drop=True)


def _report_heat(report) -> pd.DataFrame:
    report.read_all_heatmap_records()
    rows = []
    for module, hm in report.heatmaps.items():
        if module not in ("POSIX", "STDIO"):
            continue
        width = float(hm._bin_width_seconds)
        for direction in ("read", "write"):
            kind = {("POSIX", "read"): 0, ("POSIX", "write"): 1, ("STDIO", "read"): 2,
                    ("STDIO", "write"): 3}[(module, direction)]
            total = sum(np.asarray(v, dtype=np.int64) for v in hm._data[direction].values())
            for i, b in enumerate(np.atleast_1d(total)):
                if b:
                    rows.append((i * width, width, kind, int(b)))
    if not rows:
        return H.empty()
    df = pd.DataFrame(rows, columns=H.COLUMNS)
    return df.astype({"start": np.float64, "width": np.float64, "kind": np.int8, "bytes": np.int64})


def _values_from_top4(posix: pd.DataFrame) -> pd.DataFrame:
    parts = []
    for kind, name in ((0, "ACCESS"), (1, "STRIDE")):
        for i in range(1, 5):
            v = posix[f"POSIX_{name}{i}_{name}"].to_numpy()
            n = posix[f"POSIX_{name}{i}_COUNT"].to_numpy()
            keep = n > 0
            parts.append(pd.DataFrame({"record_id": posix["record_id"].to_numpy()[keep], "kind": np.int8(kind),
                                       "value": v[keep], "count": n[keep]}))
    if not parts:
        return empty_values()
    out = pd.concat(parts, ignore_index=True)
    return out.astype({"record_id": np.uint64, "kind": np.int8, "value": np.int64, "count": np.int64})


# ------------------------------------------------- current-format decoding
JOB = struct.Struct("<7q1024s")


def read_job_record(path) -> Dict[str, object]:
    """A log's job record alone: {"metadata": {key: value}, "mounts": [[point,
    fstype], ...], "start": the job's start, Unix seconds}. Reads only the
    header and the job region of a current-format log (listing sessions
    must not read every record)."""
    path = pathlib.Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER.size)
            if len(head) == HEADER.size and head[:8].split(b"\0")[0] == LOG_VERSION:
                h = HEADER.unpack_from(head, 0)
                comp_type, name_off, mod_offs = h[2], h[4], [h[6 + 2 * i] for i in range(64)]
                # the job region ends where the names begin, or else the first module
                end = name_off or min((o for o in mod_offs if o), default=0)
                if h[1] == MAGIC and comp_type in (0, 1, 2) and HEADER.size < end <= HEADER.size + (1 << 20):
                    job = inflate(f.read(end - HEADER.size), comp_type, "job", path)
                    if len(job) > JOB.size:
                        _, metadata, mounts = _parse_job(job)
                        _, s_sec, s_nsec = JOB.unpack_from(job, 0)[:3]
                        return {"metadata": metadata, "mounts": mounts, "start": s_sec + s_nsec * 1e-9}
    except OSError as e:
        raise DarshanLogError(f"{path}: cannot read ({e.strerror})") from None
    meta = read_darshan_log(path).meta          # older formats, or a header to be checked in full
    return {"metadata": dict(meta["job_metadata"]), "mounts": meta["mounts"],
            "start": float(meta.get("origin_unix_time", 0.0)) + float(meta.get("start", 0.0))}


def _parse_job(job: bytes):
    """(exe, metadata, mounts) of an inflated job region."""
    meta_raw = JOB.unpack_from(job, 0)[7]
    trailing = job[JOB.size:].split(b"\0")[0].decode(errors="surrogateescape")
    exe, _, mount_text = trailing.partition("\n")
    mounts = []
    for line in mount_text.split("\n"):
        fstype, _, point = line.partition("\t")
        if fstype and point:
            mounts.append([point, fstype])
    job_meta = {}
    for line in meta_raw.split(b"\0")[0].decode(errors="replace").splitlines():
        k, eq, v = line.partition("=")
        if eq:
            job_meta[k] = v
    return exe, job_meta, mounts


def meta_from_regions(path, info) -> dict:
    """The meta read_darshan_log would give a current-format log, from
    inspect_log's job region alone (its modules need not be inflated)."""
    uid, s_sec, s_nsec, e_sec, e_nsec, nprocs, jobid, _ = JOB.unpack_from(info["job"], 0)
    exe, job_meta, mounts = _parse_job(info["job"])
    start, end = s_sec + s_nsec * 1e-9, e_sec + e_nsec * 1e-9
    return _meta(path, info, start, end, {"uid": uid, "nprocs": nprocs, "jobid": jobid}, job_meta, exe, mounts,
                 "DXT_POSIX" in info.get("maps", info.get("modules", {})))


def decode_records(module: str, buf: bytes) -> np.ndarray:
    """A POSIX or STDIO region's records as one structured array (read-only)."""
    return np.frombuffer(buf, dtype=record_dtype(module))


def _snapshot_from_regions(path, info) -> Snapshot:
    uid, s_sec, s_nsec, e_sec, e_nsec, nprocs, jobid, _ = JOB.unpack_from(info["job"], 0)
    exe, job_meta, mounts = _parse_job(info["job"])
    ids, paths = info["names"]
    # a damaged log may name an id twice: the last name wins
    names = pd.Series(paths, index=ids, dtype=object)
    names = names[~names.index.duplicated(keep="last")]
    frames = {}
    for module in ("POSIX", "STDIO"):
        buf = info["modules"].get(module, b"")
        ints, floats = C.names(module)
        rec = decode_records(module, buf)
        df = pd.DataFrame(np.asarray(rec["c"]), columns=list(ints))
        path = names.reindex(rec["id"].astype(np.uint64)).fillna("").to_numpy(dtype=object)
        df = pd.concat([pd.DataFrame({"record_id": rec["id"].astype(np.uint64),
                                      "path": pd.Series(path, dtype=object)}),
                        df, pd.DataFrame(np.asarray(rec["f"]), columns=list(floats))], axis=1)
        if df["record_id"].duplicated().any():      # per-rank records of an MPI job's log
            df = merge_records(df, module)
        frames[module] = df[C.columns(module)]
    dxt = decode_dxt(info["modules"].get("DXT_POSIX", b""))
    heat = _decode_heat(info["modules"].get("HEATMAP", b""), names)
    start = s_sec + s_nsec * 1e-9
    end = e_sec + e_nsec * 1e-9
    return _assemble(path, info, frames, dxt, heat, start, end,
                     {"uid": uid, "nprocs": nprocs, "jobid": jobid}, job_meta, exe, mounts)


def decode_dxt(buf: bytes) -> pd.DataFrame:
    """Every DXT record's segments in one frame; the headers are walked in
    Python, the segments copied as arrays (a trace can hold millions)."""
    ids, writes, reads, offsets, pos = [], [], [], [], 0
    while pos < len(buf):
        rid, _, _, _, w, r = DXT_HEADER.unpack_from(buf, pos)
        pos += DXT_HEADER.size
        if w + r:
            ids.append(rid)
            writes.append(w)
            reads.append(r)
            offsets.append(pos)
        pos += (w + r) * SEGMENT.itemsize
    if not ids:
        return empty_dxt()
    counts = np.add(writes, reads)
    seg = np.concatenate([np.frombuffer(buf, dtype=SEGMENT, count=int(n), offset=o)
                          for n, o in zip(counts, offsets)])
    # within a record, writes come first, then reads
    first_of_record = np.repeat(np.cumsum(counts) - counts, counts)
    is_read = np.arange(len(seg)) - first_of_record >= np.repeat(writes, counts)
    out = pd.DataFrame({"record_id": np.repeat(np.asarray(ids, dtype=np.uint64), counts),
                        "op": np.where(is_read, "read", "write").astype(object),
                        "offset": seg["offset"], "length": seg["length"],
                        "start": seg["start"], "end": seg["end"]})
    return out.sort_values("start", kind="stable").reset_index(drop=True)


def _decode_heat(buf: bytes, names: pd.Series) -> pd.DataFrame:
    rows, pos = [], 0
    kinds = {("POSIX", "read"): 0, ("POSIX", "write"): 1, ("STDIO", "read"): 2, ("STDIO", "write"): 3}
    while pos < len(buf):
        rid, _, width, nbins, _, _ = HEATMAP_HEADER.unpack_from(buf, pos)
        pos += HEATMAP_HEADER.size
        bins = np.frombuffer(buf, dtype="<i8", count=2 * nbins, offset=pos)
        pos += 16 * nbins
        module = names.get(rid, "").partition(":")[2]
        for direction, arr in (("write", bins[:nbins]), ("read", bins[nbins:])):
            kind = kinds.get((module, direction))
            if kind is None:
                continue
            for i in np.nonzero(arr)[0]:
                rows.append((i * width, width, kind, int(arr[i])))
    if not rows:
        return H.empty()
    return pd.DataFrame(rows, columns=H.COLUMNS).astype(
        {"start": np.float64, "width": np.float64, "kind": np.int8, "bytes": np.int64})
