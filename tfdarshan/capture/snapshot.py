"""Snapshot: an immutable value holding Darshan counters, one row per file.

A snapshot from `tfdarshan.snapshot()` holds counters since attach;
`later - earlier` holds those of the window between them. Snapshots save
and load as plain dicts (JSON-friendly) and are what every report,
log writer and the TensorBoard tab are computed from."""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable, Dict, Optional

import numpy as np
import pandas as pd

from tfdarshan.capture import counters as C
from tfdarshan.capture import heatmap as H
from tfdarshan.capture import kernel_io as K
from tfdarshan.capture import served as SV

FORMAT = "tfdarshan.snapshot/1"
VALUE_COLUMNS = ["record_id", "kind", "value", "count"]
# per file, what Darshan has no slot for: 0-byte reads, and kernel-side I/O
# (kernel_io.py). A file whose only I/O in a window was kernel-side has a
# row here and none in posix, hence the path.
EXTRA_COLUMNS = ["record_id", "module", "path", "ZERO_READS", *K.FIELDS]
EXTRA_COUNTS = ["ZERO_READS", *K.FIELDS]
DXT_COLUMNS = ["record_id", "op", "offset", "length", "start", "end"]


def empty_values() -> pd.DataFrame:
    return pd.DataFrame({"record_id": pd.Series(dtype=np.uint64), "kind": pd.Series(dtype=np.int8),
                         "value": pd.Series(dtype=np.int64), "count": pd.Series(dtype=np.int64)})


def empty_extra() -> pd.DataFrame:
    return pd.DataFrame({"record_id": pd.Series(dtype=np.uint64), "module": pd.Series(dtype=object),
                         "path": pd.Series(dtype=object), "ZERO_READS": pd.Series(dtype=np.int64),
                         **{c: pd.Series(dtype=t) for c, t in K.dtypes().items()}})


def extra_frame(df: pd.DataFrame) -> pd.DataFrame:
    """An extra table in EXTRA_COLUMNS' order and types; columns it lacks
    (older snapshots, logs with only 0-byte reads known) are zero, or an
    empty path."""
    if df.empty and not len(df.columns.difference(EXTRA_COLUMNS)):
        return empty_extra()
    df = df.copy()
    for c, t in {"ZERO_READS": np.int64, **K.dtypes()}.items():
        df[c] = df[c].fillna(0).astype(t) if c in df else np.zeros(len(df), dtype=t)
    df["path"] = df["path"].astype(object) if "path" in df else pd.Series([""] * len(df), dtype=object,
                                                                         index=df.index)
    df["record_id"] = df["record_id"].astype(np.uint64)
    return df[EXTRA_COLUMNS].reset_index(drop=True)


def empty_dxt() -> pd.DataFrame:
    return pd.DataFrame({"record_id": pd.Series(dtype=np.uint64), "op": pd.Series(dtype=object),
                         "offset": pd.Series(dtype=np.int64), "length": pd.Series(dtype=np.int64),
                         "start": pd.Series(dtype=np.float64), "end": pd.Series(dtype=np.float64)})


# given two snapshots, the exact window extremes by module, or None
ExtremesSource = Callable[["Snapshot", "Snapshot"], Optional[Dict[str, pd.DataFrame]]]


@dataclasses.dataclass(frozen=True, eq=False)
class Snapshot:
    """Counters of one process over a span of time.

    posix, stdio: Darshan's columns (names and order from PyDarshan), plus
      `record_id` (Darshan's id of the path) and `path`. Times are seconds
      since `meta["origin_unix_time"]`, as Darshan's are since job start.
    values: how often each access size (kind 0) and stride (kind 1) occurred
      per POSIX file; ACCESS1..4 and STRIDE1..4 are computed from it.
    extra: per file, what Darshan has no slot for: reads that returned 0
      bytes, and the kernel-side I/O of kernel_io.py (copies, mapped reads),
      with the path, since a file may have no Darshan row in a window.
    dxt: per-operation segments, when tracing was on during the window.
    heat: bytes per time bin and direction (Darshan's heatmap, finer).
    meta: origin, start/end of the span, host, pid, records folded past the
      record cap, trace segments dropped for lack of memory.
    """
    _posix: pd.DataFrame
    _stdio: pd.DataFrame
    _values: pd.DataFrame
    _extra: pd.DataFrame
    _dxt: pd.DataFrame
    meta: Dict[str, Any]
    _extremes: Optional[ExtremesSource] = dataclasses.field(default=None, repr=False)
    _heat: pd.DataFrame = dataclasses.field(default_factory=H.empty, repr=False)

    def __post_init__(self):
        # an extra table from before the kernel-side columns (or built by hand) gets them, as zeros
        if list(self._extra.columns) != EXTRA_COLUMNS:
            object.__setattr__(self, "_extra", extra_frame(self._extra))

    # DataFrames are handed out as shallow copies: with copy-on-write a
    # caller's edits never reach the snapshot.
    @property
    def posix(self) -> pd.DataFrame:
        return self._posix.copy(deep=False)

    @property
    def stdio(self) -> pd.DataFrame:
        return self._stdio.copy(deep=False)

    @property
    def values(self) -> pd.DataFrame:
        return self._values.copy(deep=False)

    @property
    def extra(self) -> pd.DataFrame:
        return self._extra.copy(deep=False)

    @property
    def dxt(self) -> pd.DataFrame:
        return self._dxt.copy(deep=False)

    @property
    def heat(self) -> pd.DataFrame:
        return self._heat.copy(deep=False)

    def frame(self, module: str) -> pd.DataFrame:
        return {"POSIX": self.posix, "STDIO": self.stdio}[module]

    @property
    def start(self) -> float:
        return float(self.meta.get("start", 0.0))

    @property
    def end(self) -> float:
        return float(self.meta.get("end", 0.0))

    def __repr__(self) -> str:
        return (f"Snapshot({len(self._posix)} POSIX files, {len(self._stdio)} STDIO files, "
                f"{self.start:.3f}s..{self.end:.3f}s)")

    # ------------------------------------------------------------ windows
    def __sub__(self, earlier: "Snapshot") -> "Snapshot":
        if not isinstance(earlier, Snapshot):
            return NotImplemented
        if earlier.end > self.end:
            raise ValueError("subtract the earlier snapshot from the later one (later - earlier)")
        exact = self._extremes(self, earlier) if self._extremes else None
        frames = {m: _window(m, self.frame(m), earlier.frame(m), (exact or {}).get(m))
                  for m in C.MODULES}
        values = _values_delta(self._values, earlier._values)
        posix = _with_top4(frames["POSIX"], values)
        extra = _extra_delta(self._extra, earlier._extra)
        dxt = self._dxt[self._dxt["start"] >= earlier.end] if len(self._dxt) else self._dxt
        meta = dict(self.meta)
        meta.update(start=earlier.end, end=self.end,
                    seq_start=earlier.meta.get("seq"), exact_extremes=exact is not None,
                    folded_files=self.meta.get("folded_files", 0) - earlier.meta.get("folded_files", 0),
                    trace_dropped=self.meta.get("trace_dropped", 0) - earlier.meta.get("trace_dropped", 0))
        if "served" in self.meta:
            meta["served"] = SV.window(self.meta["served"], earlier.meta.get("served"), posix, frames["STDIO"])
        keep = set(posix["record_id"]) | set(frames["STDIO"]["record_id"])
        extra = extra[extra["record_id"].isin(keep) | K.active(extra)].reset_index(drop=True)
        return Snapshot(posix, frames["STDIO"], values, extra, dxt.reset_index(drop=True), meta, self._extremes,
                        H.subtract(self._heat, earlier._heat))

    # -------------------------------------------------------------- dicts
    def to_dict(self) -> Dict[str, Any]:
        """Plain lists and numbers; paths that are not UTF-8 survive a JSON
        round trip as surrogate escapes."""
        def table(df):
            d = df.to_dict(orient="split", index=False)
            d["data"] = [[_plain(x) for x in row] for row in d["data"]]
            return d
        return {"format": FORMAT, "meta": {k: _plain(v) for k, v in self.meta.items()},
                "posix": table(self._posix), "stdio": table(self._stdio),
                "values": table(self._values), "extra": table(self._extra), "dxt": table(self._dxt),
                "heat": table(self._heat)}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "Snapshot":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ValueError(f"not a tfdarshan snapshot (expected format {FORMAT!r})")

        def table(key, template):
            t = d.get(key) or {"columns": list(template.columns), "data": []}
            df = pd.DataFrame(t["data"], columns=t["columns"], dtype=object)
            if key == "extra" and set(df.columns) <= set(EXTRA_COLUMNS) and {"record_id", "module"} <= set(df):
                df = extra_frame(df).astype(object)       # saved before the kernel-side columns existed
            if list(df.columns) != list(template.columns):
                raise ValueError(f"snapshot table {key!r} has unexpected columns")
            return df.astype(template.dtypes.to_dict()) if len(df) else template
        return cls(table("posix", C.empty_frame("POSIX")), table("stdio", C.empty_frame("STDIO")),
                   table("values", empty_values()), table("extra", empty_extra()),
                   table("dxt", empty_dxt()), dict(d.get("meta") or {}), None, table("heat", H.empty()))


def _plain(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, bytes):
        return os.fsdecode(x)
    return x


def _window(module: str, later: pd.DataFrame, earlier: pd.DataFrame,
            exact: Optional[pd.DataFrame]) -> pd.DataFrame:
    ints, floats = C.names(module)
    e = earlier.set_index("record_id").reindex(later["record_id"].values)
    present = e["path"].notna().values
    out = {"record_id": later["record_id"].values, "path": pd.Series(later["path"].values, dtype=object)}
    ex = exact.reindex(later["record_id"].values) if exact is not None else None
    for c in (*ints, *floats):
        k = C.kind(module, c)
        lv = later[c].values
        ev = np.where(present, e[c].fillna(0).values, 0).astype(lv.dtype)
        if k == C.SUM:
            out[c] = lv - ev
        elif k == C.STATIC:
            out[c] = lv
        elif k in (C.ZERO, C.TOP4):
            out[c] = np.zeros_like(lv)
        elif ex is not None and c in ex.columns:
            out[c] = ex[c].fillna(0).values.astype(lv.dtype)
        elif k == C.LAST:
            out[c] = np.where(lv != ev, lv, 0)
        elif k == C.FIRST:
            # without the interval log, the window's first event is known
            # only if nothing happened before it; otherwise bound it by
            # the earlier snapshot's last event of that kind
            last = later[c.replace("START", "END")].values
            elast = np.where(present, e[c.replace("START", "END")].fillna(0).values, 0)
            out[c] = np.where(ev == 0, lv, np.where(last != elast, elast, 0))
        else:
            out[c] = lv  # maxima: the run's maximum bounds the window's
    df = pd.DataFrame(out, columns=C.columns(module))
    sums = [c for c in (*ints, *floats) if C.kind(module, c) == C.SUM]
    active = (df[sums].to_numpy() != 0).any(axis=1) if len(df) else np.zeros(0, dtype=bool)
    df = df[active].reset_index(drop=True)
    df["record_id"] = df["record_id"].astype(np.uint64)
    return df


def _values_delta(later: pd.DataFrame, earlier: pd.DataFrame) -> pd.DataFrame:
    if earlier.empty:
        return later.reset_index(drop=True)
    m = later.merge(earlier, on=["record_id", "kind", "value"], how="left", suffixes=("", "_e"))
    m["count"] = m["count"] - m["count_e"].fillna(0).astype(np.int64)
    return m[m["count"] > 0][VALUE_COLUMNS].reset_index(drop=True)


def _extra_delta(later: pd.DataFrame, earlier: pd.DataFrame) -> pd.DataFrame:
    if earlier.empty:
        return later.reset_index(drop=True)
    m = later.merge(earlier.drop(columns="path"), on=["record_id", "module"], how="left", suffixes=("", "_e"))
    for c in EXTRA_COUNTS:
        m[c] = m[c] - m[c + "_e"].fillna(0).astype(m[c].dtype)
    return m[EXTRA_COLUMNS].reset_index(drop=True)


def _with_top4(posix: pd.DataFrame, values: pd.DataFrame) -> pd.DataFrame:
    """Fill ACCESS1..4/STRIDE1..4 from value frequencies."""
    t = C.top4(values[values["record_id"].isin(posix["record_id"])])
    if t.empty or posix.empty:
        return posix
    cols = [c for c in t.columns if c != "record_id"]
    t = t.set_index("record_id").reindex(posix["record_id"].values).fillna(0).astype(np.int64)
    posix = posix.copy()
    for c in cols:
        posix[c] = t[c].values
    return posix


def merge_records(frame: pd.DataFrame, module: str) -> pd.DataFrame:
    """One row per file from several processes' rows of it: counts add,
    maxima and first/last times combine (one file = one record_id)."""
    ints, floats = C.names(module)
    agg = {"path": "first"}
    for c in (*ints, *floats):
        agg[c] = {C.SUM: "sum", C.MAX: "max", C.LAST: "max", C.STATIC: "first", C.ZERO: "first",
                  C.TOP4: "first", C.MAXTIME: "max", C.MAXTIME_SIZE: "first",
                  C.FIRST: lambda x: x[x > 0].min() if (x > 0).any() else 0.0}[C.kind(module, c)]
    g = frame.groupby("record_id", sort=False).agg(agg).reset_index()
    return g[C.columns(module)]


def combine(snaps) -> Snapshot:
    """One snapshot for several processes (workers, children) of a run.

    Records of the same file are merged by Darshan's rules: counts add,
    maxima and first/last times combine. Times are re-based to the earliest
    process's origin."""
    snaps = [s for s in snaps if s is not None]
    if not snaps:
        raise ValueError("nothing to combine")
    if len(snaps) == 1:
        return snaps[0]
    origin = min(float(s.meta.get("origin_unix_time", 0.0)) for s in snaps)
    shifts = [float(s.meta.get("origin_unix_time", 0.0)) - origin for s in snaps]
    frames = {}
    for module in C.MODULES:
        ints, floats = C.names(module)
        parts = []
        for s, shift in zip(snaps, shifts):
            f = s.frame(module)
            for c in floats:
                if C.kind(module, c) in (C.FIRST, C.LAST):
                    f[c] = np.where(f[c] != 0, f[c] + shift, 0.0)
            parts.append(f)
        frames[module] = merge_records(pd.concat(parts, ignore_index=True), module)
    values = pd.concat([s._values for s in snaps], ignore_index=True)
    if len(values):
        values = values.groupby(["record_id", "kind", "value"], as_index=False)["count"].sum()[VALUE_COLUMNS]
    extra = pd.concat([s._extra for s in snaps], ignore_index=True)
    if len(extra):
        # (a process's row may lack the path: "first" takes the first that has it)
        extra = extra.assign(path=extra["path"].replace("", np.nan)).groupby(
            ["record_id", "module"], as_index=False, sort=False).agg(
            {"path": "first", **{c: "sum" for c in EXTRA_COUNTS}})[EXTRA_COLUMNS]
        extra["path"] = extra["path"].fillna("").astype(object)
    dxt = pd.concat([s._dxt.assign(start=s._dxt["start"] + sh, end=s._dxt["end"] + sh)
                     for s, sh in zip(snaps, shifts)], ignore_index=True)
    heat = H.compact(pd.concat([s._heat.assign(start=s._heat["start"] + sh) for s, sh in zip(snaps, shifts)],
                               ignore_index=True))
    meta = dict(snaps[0].meta)
    meta.update(origin_unix_time=origin,
                start=min(s.start + sh for s, sh in zip(snaps, shifts)),
                end=max(s.end + sh for s, sh in zip(snaps, shifts)),
                processes=len(snaps), hostnames=sorted({str(s.meta.get("hostname", "")) for s in snaps}),
                zero_reads_known=all(s.meta.get("zero_reads_known", True) for s in snaps),
                served=SV.combine([s.meta.get("served") for s in snaps]))
    if meta["served"] is None:
        del meta["served"]
    posix = _with_top4(frames["POSIX"], values) if len(values) else frames["POSIX"]
    return Snapshot(posix, frames["STDIO"], values, extra, dxt, meta, None, heat)
