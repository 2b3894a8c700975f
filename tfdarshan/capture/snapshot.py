"""Snapshot: an immutable value holding Darshan counters, one row per file.

A snapshot from `tfdarshan.snapshot()` holds counters since attach;
`later - earlier` holds those of the window between them. Snapshots save
and load as plain dicts (JSON-friendly) and are what every report,
log writer and the TensorBoard tab are computed from."""
from __future__ import annotations

import collections
import dataclasses
import functools
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
    if list(df.columns) == EXTRA_COLUMNS and _EXTRA_TYPES == {c: df[c].dtype for c in EXTRA_COLUMNS} \
            and not df[EXTRA_COUNTS].isna().any().any():
        return df.reset_index(drop=True)         # already what it must be (a recorder's own)
    df = df.copy()
    for c, t in {"ZERO_READS": np.int64, **K.dtypes()}.items():
        df[c] = df[c].fillna(0).astype(t) if c in df else np.zeros(len(df), dtype=t)
    df["path"] = df["path"].astype(object) if "path" in df else pd.Series([""] * len(df), dtype=object,
                                                                         index=df.index)
    df["record_id"] = df["record_id"].astype(np.uint64)
    return df[EXTRA_COLUMNS].reset_index(drop=True)


_EXTRA_TYPES = {"record_id": np.dtype(np.uint64), "module": np.dtype(object), "path": np.dtype(object),
                "ZERO_READS": np.dtype(np.int64), **{c: np.dtype(t) for c, t in K.dtypes().items()}}


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
        if earlier.counted_nothing():
            # nothing was counted before the window (a whole run's): the
            # later snapshot's counters, extremes and top-4 are the window's
            exact = None
            frames = {m: _active(m, self.frame(m)) for m in C.MODULES}
            values, posix = self._values.reset_index(drop=True), frames["POSIX"]
        else:
            exact = self._extremes(self, earlier) if self._extremes else None
            frames = {m: _window(m, self.frame(m), earlier.frame(m), (exact or {}).get(m))
                      for m in C.MODULES}
            values = _values_delta(self._values, earlier._values)
            posix = _with_top4(frames["POSIX"], values)
        extra = _extra_delta(self._extra, earlier._extra)
        dxt = self._dxt[self._dxt["start"] >= earlier.end] if len(self._dxt) else self._dxt
        meta = dict(self.meta)
        meta.update(start=earlier.end, end=self.end,
                    seq_start=earlier.meta.get("seq"),
                    exact_extremes=exact is not None or earlier.counted_nothing(),
                    folded_files=self.meta.get("folded_files", 0) - earlier.meta.get("folded_files", 0),
                    trace_dropped=self.meta.get("trace_dropped", 0) - earlier.meta.get("trace_dropped", 0))
        if "served" in self.meta:
            meta["served"] = SV.window(self.meta["served"], earlier.meta.get("served"), posix, frames["STDIO"])
        keep = set(posix["record_id"]) | set(frames["STDIO"]["record_id"])
        extra = extra[extra["record_id"].isin(keep) | K.active(extra)].reset_index(drop=True)
        return Snapshot(posix, frames["STDIO"], values, extra, dxt.reset_index(drop=True), meta, self._extremes,
                        H.subtract(self._heat, earlier._heat))

    def counted_nothing(self) -> bool:
        """No record, no frequency, nothing beyond Darshan's counters."""
        return not (len(self._posix) or len(self._stdio) or len(self._values) or len(self._extra))

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
    """One module's counters over (earlier, later], column group by column
    group (counters.kind): sums subtract, statics stay, rank statistics and
    top-4 are zero (top-4 is refilled from the values), extremes come from
    `exact` (the recorder's interval extremes) when given, else are bounded as below."""
    ints, floats = C.names(module)
    plan = _window_plan(module)
    n = len(later)
    ids = later["record_id"].to_numpy()
    e_ids = earlier["record_id"].to_numpy()
    if len(e_ids) and n:
        order = np.argsort(e_ids, kind="stable")
        at = np.minimum(np.searchsorted(e_ids, ids, sorter=order), len(e_ids) - 1)
        pos = order[at]
        present = e_ids[pos] == ids
    else:
        pos, present = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool)
    out = {"record_id": ids, "path": pd.Series(later["path"].to_numpy(), dtype=object)}
    ex = exact.reindex(ids) if exact is not None else None
    for names_, dtype in ((ints, np.int64), (floats, np.float64)):
        lv = later[list(names_)].to_numpy(dtype=dtype, copy=True) if n else np.zeros((0, len(names_)), dtype)
        ev = np.zeros_like(lv)
        if present.any():
            ev[present] = earlier[list(names_)].to_numpy(dtype=dtype)[pos[present]]
        col = {c: j for j, c in enumerate(names_)}
        res = lv.copy()
        kinds = plan["ints" if dtype is np.int64 else "floats"]
        sums = kinds[C.SUM]
        res[:, sums] = lv[:, sums] - ev[:, sums]
        res[:, kinds[C.ZERO] + kinds[C.TOP4]] = 0
        exact_cols = [c for c in names_ if ex is not None and c in ex.columns and plan["kind"][c] not in
                      (C.SUM, C.STATIC, C.ZERO, C.TOP4)]
        for c in exact_cols:
            res[:, col[c]] = ex[c].fillna(0).to_numpy().astype(dtype)
        done = set(exact_cols)
        last = [col[c] for c in names_ if plan["kind"][c] == C.LAST and c not in done]
        res[:, last] = np.where(lv[:, last] != ev[:, last], lv[:, last], 0)
        first = [c for c in names_ if plan["kind"][c] == C.FIRST and c not in done]
        if first:
            # without the interval extremes, the window's first event is known
            # only if nothing happened before it; otherwise bound it by
            # the earlier snapshot's last event of that kind
            f, e_ = [col[c] for c in first], [col[c.replace("START", "END")] for c in first]
            res[:, f] = np.where(ev[:, f] == 0, lv[:, f], np.where(lv[:, e_] != ev[:, e_], ev[:, e_], 0))
        # maxima (and statics): the run's maximum bounds the window's
        for j, c in enumerate(names_):
            out[c] = res[:, j]
    df = pd.DataFrame(out, columns=C.columns(module))
    sums = plan["sum_names"]
    active = (df[sums].to_numpy() != 0).any(axis=1) if len(df) else np.zeros(0, dtype=bool)
    df = df[active].reset_index(drop=True)
    df["record_id"] = df["record_id"].astype(np.uint64)
    return df


def _active(module: str, frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with a sum that is not zero (what a window keeps)."""
    sums = _window_plan(module)["sum_names"]
    if not len(frame):
        return frame.reset_index(drop=True)
    return frame[(frame[sums].to_numpy() != 0).any(axis=1)].reset_index(drop=True)


@functools.lru_cache(maxsize=None)
def _window_plan(module: str) -> Dict[str, Any]:
    """A module's columns grouped by kind, as positions in its int and float blocks."""
    ints, floats = C.names(module)
    kind = {c: C.kind(module, c) for c in (*ints, *floats)}
    group = lambda names_: collections.defaultdict(list, {k: [j for j, c in enumerate(names_) if kind[c] == k]  # noqa: E731
                                                          for k in set(kind.values())})
    return {"kind": kind, "ints": group(ints), "floats": group(floats),
            "sum_names": [c for c in (*ints, *floats) if kind[c] == C.SUM]}


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
    t = C.top4(values)
    if t.empty or posix.empty:
        return posix
    at = pd.Index(t["record_id"].to_numpy(np.uint64)).get_indexer(posix["record_id"].to_numpy(np.uint64))
    top = np.zeros((len(posix), len(C.TOP4_COLUMNS)), dtype=np.int64)
    top[at >= 0] = t[C.TOP4_COLUMNS].to_numpy(dtype=np.int64)[at[at >= 0]]
    rest = posix.drop(columns=C.TOP4_COLUMNS)
    filled = pd.concat([rest, pd.DataFrame(top, columns=C.TOP4_COLUMNS, index=posix.index)], axis=1)
    return filled[list(posix.columns)]


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
