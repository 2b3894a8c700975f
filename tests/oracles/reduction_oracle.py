"""Regression oracle, kept on purpose: an earlier implementation, not used by
tfdarshan, that tests and benchmarks/bench_joblog.py compare the current one with.

The oracle for the job log's reduction (tfdarshan/logs/shared_fold.py):
Darshan's shared-file reduction written per file with pandas, as the job log
was reduced before it streamed. The records of a file that every rank
opened become one record with rank -1, combined by the rules of
darshan-runtime 3.5's MPI build (posix_record_reduction_op,
stdio_record_reduction_op, the *_shared_record_variance functions and
darshan_variance_reduce). Records of files that not every rank opened keep
their rank.

Darshan folds the ranks' records pairwise inside MPI_Reduce; we fold them
in rank order, the ranks so far being the first operand. Where Darshan's
comparisons are strict, ties therefore go to the later rank."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from tfdarshan.capture import counters as C


def _span(names, first: str, last: str) -> List[str]:
    """Counters from `first` to `last` inclusive, in Darshan's order."""
    names = list(names)
    return names[names.index(first):names.index(last) + 1]


def _rules(module: str) -> dict:
    ints, floats = C.names(module)
    p = module + "_"
    if module == "POSIX":
        return {
            "sum_clamped": _span(ints, "POSIX_OPENS", "POSIX_RENAME_TARGETS"),
            "sum": ["POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN",
                    *_span(ints, "POSIX_CONSEC_READS", "POSIX_MEM_NOT_ALIGNED"), "POSIX_FILE_NOT_ALIGNED",
                    *_span(ints, "POSIX_SIZE_READ_0_100", "POSIX_SIZE_WRITE_1G_PLUS")],
            "first": ["POSIX_RENAMED_FROM", "POSIX_MODE", "POSIX_MEM_ALIGNMENT", "POSIX_FILE_ALIGNMENT"],
            "max": ["POSIX_MAX_BYTE_READ", "POSIX_MAX_BYTE_WRITTEN"],
            "min_start": _span(floats, "POSIX_F_OPEN_START_TIMESTAMP", "POSIX_F_CLOSE_START_TIMESTAMP"),
            "max_end": _span(floats, "POSIX_F_OPEN_END_TIMESTAMP", "POSIX_F_CLOSE_END_TIMESTAMP"),
            "fsum": _span(floats, "POSIX_F_READ_TIME", "POSIX_F_META_TIME"),
            "maxtime": {"POSIX_F_MAX_READ_TIME": "POSIX_MAX_READ_TIME_SIZE",
                        "POSIX_F_MAX_WRITE_TIME": "POSIX_MAX_WRITE_TIME_SIZE"},
            "top4": [("POSIX_STRIDE", "_STRIDE"), ("POSIX_ACCESS", "_ACCESS")],
            "p": p,
        }
    return {
        "sum_clamped": [],
        "sum": _span(ints, "STDIO_OPENS", "STDIO_BYTES_READ"),
        "first": [],
        "max": ["STDIO_MAX_BYTE_READ", "STDIO_MAX_BYTE_WRITTEN"],
        "min_start": _span(floats, "STDIO_F_OPEN_START_TIMESTAMP", "STDIO_F_READ_START_TIMESTAMP"),
        "max_end": _span(floats, "STDIO_F_OPEN_END_TIMESTAMP", "STDIO_F_READ_END_TIMESTAMP"),
        "fsum": _span(floats, "STDIO_F_META_TIME", "STDIO_F_READ_TIME"),
        "maxtime": {},
        "top4": [],
        "p": p,
    }


def _last_of(values: np.ndarray, best: float) -> int:
    """Index of the last occurrence of `best` (ties go to the later rank)."""
    return int(np.flatnonzero(values == best)[-1])


def _update_common(vals: list, cnts: list, value: int, count: int) -> None:
    """DARSHAN_UPDATE_COMMON_VAL_COUNTERS with one value, adding counts:
    keeps the four commonest values, by count then by value, descending."""
    if value == 0:
        return
    total = count
    for i in range(4):
        if vals[i] == value:
            total += cnts[i]
            break
    new_v, new_c = [], []
    i = 0
    while i < 4 and (cnts[i] > total or (cnts[i] == total and vals[i] > value)):
        new_v.append(vals[i])
        new_c.append(cnts[i])
        i += 1
    if len(new_v) == 4:
        return
    new_v.append(value)
    new_c.append(total)
    while len(new_v) < 4:
        if vals[i] != value:
            new_v.append(vals[i])
            new_c.append(cnts[i])
        i += 1
    vals[:], cnts[:] = new_v, new_c


def _merge_top4(acc_v: list, acc_c: list, new_v: list, new_c: list):
    """posix_record_reduction_op's STRIDE/ACCESS step for two records."""
    acc_c, new_v, new_c = list(acc_c), list(new_v), list(new_c)
    for j in range(4):                  # first collapse any duplicates
        for k in range(4):
            if acc_v[j] == new_v[k]:
                acc_c[j] += new_c[k]
                new_v[k] = new_c[k] = 0
    vals, cnts = [0] * 4, [0] * 4
    for v, c in zip(acc_v, acc_c):
        _update_common(vals, cnts, v, c)
    for v, c in zip(new_v, new_c):
        _update_common(vals, cnts, v, c)
    return vals, cnts


def _reduce_one(rows: pd.DataFrame, module: str, rules: dict) -> dict:
    """One shared file's records (one row a rank, in rank order) -> one record."""
    ints, floats = C.names(module)
    p = rules["p"]
    out = {c: 0 for c in ints}
    out.update({c: 0.0 for c in floats})
    out["record_id"], out["path"], out["rank"] = rows["record_id"].iat[0], rows["path"].iat[0], -1
    for c in rules["sum_clamped"]:
        total = None
        for v in rows[c].to_numpy().tolist():   # pairwise, as a negative sum becomes -1 at each step
            total = v if total is None else total + v
            total = -1 if total < 0 else total
        out[c] = int(total)
    for c in rules["sum"]:
        out[c] = int(rows[c].sum())
    for c in rules["first"]:
        out[c] = int(rows[c].iat[0])
    for c in rules["max"]:
        out[c] = int(rows[c].max())
    for c in rules["min_start"]:        # earliest non-zero (0 = never)
        v = rows[c].to_numpy()
        out[c] = float(v[v > 0].min()) if (v > 0).any() else 0.0
    for c in rules["max_end"]:
        out[c] = float(rows[c].max())
    for c in rules["fsum"]:
        out[c] = float(rows[c].sum())
    for t, size in rules["maxtime"].items():   # the slowest call, with its size
        v = rows[t].to_numpy()
        i = _last_of(v, v.max())
        out[t], out[size] = float(v[i]), int(rows[size].iat[i])
    for prefix, kind in rules["top4"]:
        vcols = [f"{prefix}{i}{kind}" for i in range(1, 5)]
        ccols = [f"{prefix}{i}_COUNT" for i in range(1, 5)]
        vals, cnts = [int(x) for x in rows[vcols].iloc[0]], [int(x) for x in rows[ccols].iloc[0]]
        for r in range(1, len(rows)):
            vals, cnts = _merge_top4(vals, cnts, [int(x) for x in rows[vcols].iloc[r]],
                                     [int(x) for x in rows[ccols].iloc[r]])
        out.update(zip(vcols, vals))
        out.update(zip(ccols, cnts))
    # each rank's time (read + write + meta) and bytes: fastest, slowest, variances
    time = sum(rows[f"{p}F_{k}_TIME"].to_numpy(dtype=np.float64) for k in ("READ", "WRITE", "META"))
    nbytes = (rows[f"{p}BYTES_READ"] + rows[f"{p}BYTES_WRITTEN"]).to_numpy(dtype=np.int64)
    ranks = rows["rank"].to_numpy()
    for which, best in (("FASTEST", time.min()), ("SLOWEST", time.max())):
        i = _last_of(time, best)
        out[f"{p}{which}_RANK"], out[f"{p}{which}_RANK_BYTES"] = int(ranks[i]), int(nbytes[i])
        out[f"{p}F_{which}_RANK_TIME"] = float(time[i])
    # darshan_variance_reduce accumulates the sum of squared deviations S
    # and stores S / n: the population variance
    out[f"{p}F_VARIANCE_RANK_TIME"] = float(np.var(time))
    out[f"{p}F_VARIANCE_RANK_BYTES"] = float(np.var(nbytes.astype(np.float64)))
    return out


def reduce_job(frames_by_rank: Dict[int, pd.DataFrame], module: str, nprocs: Optional[int] = None) -> pd.DataFrame:
    """Every rank's records of one module as one job's: a `rank` column,
    rank -1 for files all `nprocs` ranks opened (reduced), the rank
    otherwise. nprocs defaults to the ranks given; with ranks missing (one
    died), no file counts as opened by all."""
    columns = [*C.columns(module), "rank"]
    ranks = sorted(frames_by_rank)
    parts = [frames_by_rank[r].assign(rank=r) for r in ranks if len(frames_by_rank[r])]
    if not parts:
        return C.empty_frame(module).assign(rank=pd.Series(dtype=np.int64))[columns]
    allf = pd.concat(parts, ignore_index=True)
    holders = allf.groupby("record_id")["rank"].nunique()
    nprocs = nprocs or len(ranks)
    shared_ids = holders.index[holders == nprocs] if nprocs > 1 else holders.index[:0]
    is_shared = allf["record_id"].isin(shared_ids)
    private = allf[~is_shared]
    rules = _rules(module)
    reduced = [_reduce_one(g, module, rules)
               for _, g in allf[is_shared].sort_values(["record_id", "rank"]).groupby("record_id", sort=True)]
    shared = pd.DataFrame(reduced, columns=columns) if reduced else private.iloc[:0]
    out = pd.concat([private, shared], ignore_index=True)[columns]
    ints, floats = C.names(module)
    out = out.astype({c: np.int64 for c in ints} | {c: np.float64 for c in floats} | {"rank": np.int64,
                                                                                      "record_id": np.uint64})
    return out.sort_values(["rank", "record_id"], ignore_index=True)
