"""The advisor's findings on checkpoint writes: their share of training
time, synchronous fsyncs on a slow tier, and the fix (write to a fast tier,
drain to the slow one in the background).

Checkpoint files are known by name (TensorFlow's `<prefix>.index`,
`<prefix>.data-NNNNN-of-NNNNN`, the `checkpoint` state file and their
temporary names; Keras' `.keras`/`.weights.h5`; `.ckpt`), except the
bundles of a tf.data cache (tfdata_files.py). Their cost is the
write, metadata and fsync time of both interfaces (TensorFlow writes them
with fopen/fwrite, so mostly STDIO). Whether that time blocked training is
read from the step series when there is one: a write that holds up its step
lengthens it by about its own time, while a background drain writes during
ordinary steps."""
from __future__ import annotations

import os
import re
from typing import List, Optional

import numpy as np
import pandas as pd

from tfdarshan.advice import tfdata_files
from tfdarshan.advice import tiers as T
from tfdarshan.advice.findings import Finding
from tfdarshan.capture.arrow_text import arrow_paths
from tfdarshan.capture.snapshot import Snapshot
from tfdarshan.measures.human import count, human_time

_TEMP = r"(\.tempstate\d+|\.tmp\w*)?$"
CHECKPOINT_NAME = re.compile(
    r"(\.index|\.data-\d+-of-\d+|\.ckpt[^/]*|\.keras|\.weights\.h5)" + _TEMP +
    r"|(^|/)checkpoint" + _TEMP + r"|_temp/part-\d+-of-\d+")
SHARE_WARN = 0.05          # checkpoint time worth a finding, as a share of the window
BLOCKING = 0.5             # share of the write time that lengthened steps: synchronous
SPIKE = 2.0                # a step this many times the median step is a spike


def is_checkpoint(path: str) -> bool:
    return bool(CHECKPOINT_NAME.search(path))


# every checkpoint name holds one of these: Arrow finds the few candidates
# among a million paths, and CHECKPOINT_NAME decides on them alone
_LITERALS = (".index", ".data-", ".ckpt", ".keras", ".weights.h5", "checkpoint", "_temp/part-")


def _checkpoints(paths: pd.Series) -> np.ndarray:
    """Which paths name checkpoint files (is_checkpoint), as a mask."""
    import pyarrow as pa
    import pyarrow.compute as pc
    try:
        arr, _ = arrow_paths(paths.to_numpy(dtype=object))
    except (pa.ArrowInvalid, pa.ArrowTypeError):       # not all text: one by one
        return paths.map(lambda p: isinstance(p, str) and is_checkpoint(p)).to_numpy(bool)
    any_literal = pc.match_substring_regex(arr, "|".join(re.escape(x) for x in _LITERALS))
    maybe = np.asarray(pc.fill_null(any_literal, False).to_numpy(zero_copy_only=False), dtype=bool)
    out = np.zeros(len(arr), dtype=bool)
    values = paths.to_numpy(dtype=object)
    for i in np.flatnonzero(maybe):
        p = values[i]
        out[i] = isinstance(p, str) and is_checkpoint(p)
    return out


def checkpoint_io(snap: Snapshot, fast: Optional[T.Tier] = None) -> pd.DataFrame:
    """Per checkpoint file not on the fast tier: bytes, writes, fsyncs and
    seconds (write + metadata, fsyncs included) over POSIX and STDIO."""
    parts = []
    # a tf.data cache is a tensor bundle too, with a checkpoint's names: not a checkpoint
    frames = [f for f in (snap.posix, snap.stdio) if f is not None and len(f)]
    every = pd.concat([f["path"] for f in frames], ignore_index=True) if frames else pd.Series([], dtype=object)
    caches = set(every[tfdata_files.kinds(every) != ""]) if len(every) else set()
    for frame, m in ((snap.posix, "POSIX"), (snap.stdio, "STDIO")):
        if frame is None or frame.empty:
            continue
        f = frame[_checkpoints(frame["path"]) & ~frame["path"].isin(caches).to_numpy(bool)]
        if fast is not None and fast.path:
            root = fast.path.rstrip("/") + "/"
            f = f[~f["path"].str.startswith(root)]
        syncs = (f["POSIX_FSYNCS"] + f["POSIX_FDSYNCS"]) if m == "POSIX" else pd.Series(0, index=f.index)
        parts.append(pd.DataFrame({
            "path": f["path"], "module": m, "bytes": f[f"{m}_BYTES_WRITTEN"], "writes": f[f"{m}_WRITES"],
            "fsyncs": syncs, "write_time": f[f"{m}_F_WRITE_TIME"], "meta_time": f[f"{m}_F_META_TIME"]}))
    if not parts:
        return pd.DataFrame(columns=["path", "module", "bytes", "writes", "fsyncs", "write_time", "meta_time"])
    return pd.concat(parts, ignore_index=True)


def blocking_share(steps: Optional[pd.DataFrame]) -> Optional[float]:
    """How much of the steps' write time lengthened the steps it fell in,
    or None without a step series: each spike's (a step over SPIKE times the
    median) excess over the median, capped at its write time. A background
    writer also slows ordinary steps somewhat, by taking CPU, which is why
    only spikes count."""
    if steps is None or len(steps) < 3 or "write_time" not in steps:
        return None
    s = steps[steps["step"] >= 0]
    written = float(s["write_time"].sum())
    if written <= 0:
        return None
    dur = (s["end"] - s["start"]).to_numpy()
    med = np.median(dur)
    excess = np.where(dur > SPIKE * med, dur - med, 0.0)
    return float(np.minimum(excess, s["write_time"].to_numpy()).sum() / written)


def findings(snap: Snapshot, fast: Optional[T.Tier] = None, steps: Optional[pd.DataFrame] = None) -> List[Finding]:
    """The checkpoint findings."""
    io = checkpoint_io(snap, fast)
    if io.empty or io["bytes"].sum() == 0:
        return []
    window = max(snap.end - snap.start, 1e-9)
    seconds = float(io["write_time"].sum() + io["meta_time"].sum())
    nbytes, nwrites, nsync = int(io["bytes"].sum()), int(io["writes"].sum()), int(io["fsyncs"].sum())
    bw = nbytes / float(io["write_time"].sum()) if io["write_time"].sum() > 0 else float("inf")
    share = seconds / window
    blocking = blocking_share(steps)
    synchronous = blocking is None or blocking >= BLOCKING
    how = "unknown (no step series)" if blocking is None else \
        f"{100 * blocking:.0f} % of the write time lengthened the steps it fell in"
    slow = fast is None or not fast.bandwidth or bw < fast.bandwidth / 4
    modules = ", ".join(f"{m} {count(int(g['writes'].sum()), 'write')} of {g['bytes'].sum() / max(g['writes'].sum(), 1) / 2**20:.1f} MiB"
                        for m, g in io.groupby("module") if g["writes"].sum() > 0)
    evidence = {"seconds": seconds, "share": share, "bytes": nbytes, "writes": nwrites, "fsyncs": nsync,
                "write_bandwidth": bw, "files": int(io["path"].nunique()), "blocking_share": blocking}
    out = []
    if synchronous and share >= SHARE_WARN:
        out.append(Finding(
            "HIGH" if share >= 0.2 else "WARN", f"Checkpoint writes take {100 * share:.0f} % of training time",
            f"{human_time(seconds)} of {human_time(window)} went to writing {nbytes / 2**20:.0f} MiB of "
            f"checkpoints to {count(io['path'].nunique(), 'file')} ({modules}) at {bw / 2**20:.0f} MiB/s; {how}.",
            "Checkpoint less often, or write to a fast tier and drain asynchronously (next finding).", evidence))
    if nsync and slow and synchronous:
        out.append(Finding(
            "WARN", "Synchronous fsync on a slow tier",
            f"{count(nsync, 'fsync/fdatasync call')} on checkpoint files written at {bw / 2**20:.0f} MiB/s; "
            f"training waits until every byte is on the slow tier ({how}).",
            "Make the checkpoint durable on the slow tier from a background thread, after training has "
            "moved on (next finding).", evidence))
    if synchronous and share >= SHARE_WARN and slow:
        target = fast.path if fast is not None and fast.path else "/dev/shm"
        out.append(Finding(
            "HIGH" if share >= 0.2 else "WARN", "Write checkpoints to a fast tier and drain them asynchronously",
            f"checkpoints go straight to {os.path.dirname(io['path'].iat[0])} at {bw / 2**20:.0f} MiB/s, "
            f"holding up training for {human_time(seconds)}.",
            f"Save with tf.train.CheckpointManager under {target}, then copy each new checkpoint to the slow "
            "tier in a background thread (fsync there, rename into place); keep max_to_keep small so the "
            "fast tier does not fill.", evidence))
    return out
