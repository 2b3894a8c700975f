"""A job log's records three ways, for comparing them counter by counter:
as the job log was written before it streamed (each rank log read whole,
times moved onto the job's timeline, reduced by reduction_oracle.py), as
our reader decodes a job log, and as PyDarshan reads it. Each is a frame a
module: id, rank, Darshan's counters, and the path; sorted by (rank, id).
Shared by the job log's tests and benchmarks/bench_joblog.py."""
from __future__ import annotations

from typing import Dict

import numpy as np
import pandas as pd

from reduction_oracle import reduce_job
from tfdarshan.capture import counters as C
from tfdarshan.logs import skipping
from tfdarshan.logs.darshan_checker import inspect_log
from tfdarshan.logs.darshan_reader import decode_records
from tfdarshan.logs.darshan_writer import rebase_times, timestamp_columns

# floating-point counters Darshan sums (or turns into variances) over ranks: the
# order of the additions differs (ours rank by rank, the oracle's pandas pairwise,
# Darshan's MPI_Reduce's tree), so they agree to rounding only
ROUNDED = {"F_READ_TIME", "F_WRITE_TIME", "F_META_TIME", "F_VARIANCE_RANK_TIME", "F_VARIANCE_RANK_BYTES"}


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["rank", "id"], kind="stable", ignore_index=True)


def old_job_records(logs: Dict[int, object], nprocs=None) -> Dict[str, pd.DataFrame]:
    """What the job log of `logs` ({rank: log}) held when the whole job was
    read into pandas and reduced file by file (before it streamed)."""
    snaps, _ = skipping.read_logs({r: logs[r] for r in sorted(logs)})
    origin = min(float(s.meta.get("origin_unix_time", 0.0)) for s in snaps.values())
    out = {}
    for module in C.MODULES:
        ints, floats = C.names(module)
        by_rank = {}
        for r, s in snaps.items():
            f = s.frame(module)
            shift = float(s.meta.get("origin_unix_time", 0.0)) - origin
            for c in floats:
                if C.kind(module, c) in (C.FIRST, C.LAST):
                    f[c] = f[c].where(f[c] == 0, f[c] + shift)
            by_rank[r] = f
        job = reduce_job(by_rank, module, nprocs or len(snaps))
        stamps = [floats[j] for j in timestamp_columns(module)]
        job[stamps] = rebase_times(job[stamps].to_numpy(), 0.0)
        out[module] = _sorted(job.rename(columns={"record_id": "id"})[["id", "rank", *ints, *floats, "path"]])
    return out


def job_log_records(path) -> Dict[str, pd.DataFrame]:
    """A log's records as our reader decodes them (every record, per rank)."""
    info = inspect_log(path)
    ids, paths = info["names"]
    names = pd.Series(paths, index=ids, dtype=object)
    names = names[~names.index.duplicated(keep="first")]
    out = {}
    for module in C.MODULES:
        ints, floats = C.names(module)
        rec = decode_records(module, info["modules"].get(module, b""))
        df = pd.concat([pd.DataFrame({"id": rec["id"].astype(np.uint64), "rank": rec["rank"].astype(np.int64)}),
                        pd.DataFrame(np.asarray(rec["c"]), columns=list(ints)),
                        pd.DataFrame(np.asarray(rec["f"]), columns=list(floats))], axis=1)
        df["path"] = names.reindex(df["id"].to_numpy()).to_numpy(dtype=object)
        out[module] = _sorted(df)
    return out


def pydarshan_records(path) -> Dict[str, pd.DataFrame]:
    """A log's records as PyDarshan (darshan-util's C reader) reads them."""
    import darshan
    out = {}
    with darshan.DarshanReport(str(path), read_all=False) as rep:
        for module in C.MODULES:
            ints, floats = C.names(module)
            if module not in rep.modules:
                out[module] = pd.DataFrame(columns=["id", "rank", *ints, *floats, "path"])
                continue
            rep.mod_read_all_records(module, warnings=False)
            recs = rep.records[module].to_df()
            c, f = recs["counters"], recs["fcounters"]
            df = pd.concat([c[["id", "rank", *ints]], f[list(floats)]], axis=1)
            df["id"] = df["id"].astype(np.uint64)
            names = rep.name_records
            df["path"] = [names.get(int(i)) for i in df["id"]]
            out[module] = _sorted(df)
    return out


def assert_same_counters(got: pd.DataFrame, want: pd.DataFrame, module: str) -> None:
    """The same records (id, rank, path), the integer counters equal and the
    floating-point ones equal, sums and variances to rounding."""
    assert len(got) == len(want), (module, len(got), len(want))
    assert (got["id"].to_numpy(np.uint64) == want["id"].to_numpy(np.uint64)).all(), module
    assert (got["rank"].to_numpy() == want["rank"].to_numpy()).all(), module
    assert list(got["path"]) == list(want["path"]), module
    ints, floats = C.names(module)
    for c in ints:
        differ = np.flatnonzero(got[c].to_numpy(np.int64) != want[c].to_numpy(np.int64))
        assert not len(differ), (c, got.iloc[differ[:3]][["id", "rank", c]], want.iloc[differ[:3]][c])
    for c in floats:
        a, b = got[c].to_numpy(np.float64), want[c].to_numpy(np.float64)
        same = np.isclose(a, b, rtol=1e-9, atol=1e-9) if C.base(c) in ROUNDED else a == b
        differ = np.flatnonzero(~same)
        assert not len(differ), (c, a[differ[:3]], b[differ[:3]])


def fold_job(frames_by_rank: Dict[int, pd.DataFrame], module: str, nprocs=None) -> pd.DataFrame:
    """reduce_job's answer from the product's fold (logs/shared_fold.py), in
    memory: the files all nprocs ranks hold folded rank by rank, the others
    kept per rank. The same frame reduce_job returns."""
    from tfdarshan.logs.darshan_writer import frame_records
    from tfdarshan.logs.shared_fold import SharedFold
    ranks = sorted(frames_by_rank)
    nprocs = nprocs or len(ranks)
    recs = {r: frame_records(module, frames_by_rank[r], r) for r in ranks}
    ids = [np.unique(recs[r]["id"]) for r in ranks]
    shared = ids[0]
    for more in ids[1:]:
        shared = np.intersect1d(shared, more)
    if nprocs <= 1 or len(ranks) < nprocs:
        shared = shared[:0]
    fold, parts = SharedFold(module, shared), []
    for r in ranks:
        mine = np.isin(recs[r]["id"], shared)
        fold.add(r, recs[r][mine])
        parts.append(recs[r][~mine])
    reduced, not_shared = fold.records(nprocs)
    assert not len(not_shared)
    rec = np.concatenate(parts + [reduced])
    ints, floats = C.names(module)
    paths = pd.concat([f[["record_id", "path"]] for f in frames_by_rank.values()]).drop_duplicates("record_id")
    df = pd.concat([pd.DataFrame({"record_id": rec["id"].astype(np.uint64), "rank": rec["rank"]}),
                    pd.DataFrame(np.asarray(rec["c"]), columns=list(ints)),
                    pd.DataFrame(np.asarray(rec["f"]), columns=list(floats))], axis=1)
    df["path"] = df["record_id"].map(paths.set_index("record_id")["path"])
    return df[[*C.columns(module), "rank"]].sort_values(["rank", "record_id"], ignore_index=True)
