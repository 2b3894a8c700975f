"""Regression oracle, kept on purpose: an earlier implementation, not used by
tfdarshan, that tests compare the current one with.

The oracle for `recommend`'s vectorised steps: each as it was computed
before (per path in Python, grouped by "<mount>:<class>" strings, sorted
by copying the cost table), for tests/advice/test_recommend_vectorised.py."""
from __future__ import annotations

import os
import re

import numpy as np
import pandas as pd

from tfdarshan.advice import training_input as TI
from tfdarshan.advice.advisor import SMALL_FILE, _stageable
from tfdarshan.capture import mounts as M


def points_of(paths, mounts):
    mounts = list(mounts)
    exact = {m.point.rstrip("/") or "/": m.point for m in mounts}
    by_dir, out = {}, []
    for path in paths:
        if path in exact:
            out.append(exact[path])
            continue
        d = os.path.dirname(path)
        if d not in by_dir:
            m = M.mount_of(d, mounts)
            by_dir[d] = m.point if m else ""
        out.append(by_dir[d])
    return out


RUNTIME_PREFIXES = ("vader_segment", "sm_segment", "psm_shm", "psm2_shm", "mpich_shar_tmp", "shm-col-space-",
                    "Intel_MPI_", "ucx_shm")


def runtime(path: str) -> bool:
    """The MPI runtime's own file, judged a component at a time."""
    parts = path.split("/")
    dirs, base = parts[:-1], parts[-1]
    if any(re.fullmatch(r"(ompi|prte|prterun)\.[^/]+\.\d+", d) or d.startswith("pmix") for d in dirs):
        return True
    if "pmix" in base or base.startswith(RUNTIME_PREFIXES):
        return True
    return path.startswith("/dev/shm/") and len(parts) == 4 and base.startswith(("sem.", "nccl-"))


def tfdata(paths, in_steps=None):
    """tf.data's own files, per path: snapshot names, and bundles of a cache
    (a family with a lock file, or a bundle file read in steps)."""
    family = {}
    for i, path in enumerate(paths):
        base = path.rsplit("/", 1)[-1]
        stem = re.sub(r"\.tempstate\d+$", "", base)
        kind = None
        if stem.endswith(".lockfile"):
            stem, kind = stem[: -len(".lockfile")], "lock"
        elif stem.endswith(".index"):
            stem, kind = stem[: -len(".index")], "bundle"
        else:
            m = re.search(r"\.data-\d+-of-\d+$", stem)
            if m:
                stem, kind = stem[: m.start()], "bundle"
        if kind:        # a//b and a/b name one file: one family
            family[i] = (re.sub("/+", "/", path[: len(path) - len(base)] + re.sub(r"_\d+$", "", stem)), kind)
    caches = {f for f, kind in family.values() if kind == "lock"}
    if in_steps is not None:
        caches |= {f for i, (f, kind) in family.items() if in_steps[i]}
    out = []
    for i, path in enumerate(paths):
        parts = path.split("/")
        if re.fullmatch(r"snapshot\.metadata(-tmp-\d+)?", parts[-1]) or (
                len(parts) >= 3 and re.fullmatch(r"\d+\.shard", parts[-2])
                and re.fullmatch(r"\d+\.snapshot", parts[-1])):
            out.append(True)
        else:
            out.append(i in family and family[i][0] in caches)
    return np.array(out, dtype=bool)


def reasons(paths, in_steps=None):
    s = pd.Series(list(paths), dtype=object).astype(str)
    parts = s.str.split("/")
    config = parts.map(lambda p: any(x in TI.CONFIG_PARTS for x in p)).to_numpy(bool).copy()
    for d in TI._env_dirs(TI.CONFIG_ENV):
        config |= s.str.startswith(d).to_numpy(bool)
    own = np.zeros(len(s), dtype=bool)
    for d in TI.OWN_DIRS:
        own |= s.str.contains(d, regex=False).to_numpy(bool)
    own |= s.str.endswith(TI.OWN_SUFFIXES).to_numpy(bool)
    out = np.full(len(s), "", dtype=object)
    if in_steps is not None:
        out[~np.asarray(in_steps, dtype=bool)] = TI.OUTSIDE
    out[tfdata(list(s), in_steps)] = TI.TFDATA
    out[s.map(runtime).to_numpy(bool)] = TI.RUNTIME
    out[config] = TI.CONFIG
    out[own] = TI.OWN
    return out


def fill_in_order(order, sizes, capacity):
    order = np.asarray(order, dtype=np.int64)
    csum = np.cumsum(sizes[order])
    k = int(np.searchsorted(csum, capacity, side="right"))
    chosen, room = list(order[:k]), capacity - (int(csum[k - 1]) if k else 0)
    rest = order[k:]
    rest = rest[sizes[rest] <= room]
    for i in rest:
        if sizes[i] <= room:
            chosen.append(i)
            room -= int(sizes[i])
            if room <= 0:
                break
    return np.array(sorted(chosen), dtype=np.int64)


def greedy(sizes, values, capacity):
    order = np.argsort(-(values / np.maximum(sizes, 1)), kind="stable")
    csum = np.cumsum(sizes[order])
    k = int(np.searchsorted(csum, capacity, side="right"))
    room = capacity - (int(csum[k - 1]) if k else 0)
    chosen = list(order[:k]) + list(fill_in_order(order[k:], sizes, room))
    best_single = int(np.argmax(np.where(sizes <= capacity, values, -1)))
    if values[best_single] > values[chosen].sum():
        chosen = [best_single]
    return np.array(sorted(chosen), dtype=np.int64)


def under_2mb(costs, capacity):
    cand = costs[(costs["size"] < SMALL_FILE) & _stageable(costs)].sort_values("size", kind="stable")
    return fill_in_order(cand.index.to_numpy(), costs["size"].to_numpy(), capacity)


def largest_time_first(costs, capacity):
    cand = costs[_stageable(costs)].sort_values("current_time", ascending=False, kind="stable")
    return fill_in_order(cand.index.to_numpy(), costs["size"].to_numpy(), capacity)


def group_means(unit, group):
    g = unit.groupby(group)
    q1, q3 = g.transform(lambda x: x.quantile(0.25)), g.transform(lambda x: x.quantile(0.75))
    clipped = unit.clip(q1 - 3 * (q3 - q1), q3 + 3 * (q3 - q1))
    by = clipped.groupby(group)
    mean, std, n = by.transform("mean"), by.transform("std").fillna(0.0), by.transform("size")
    half = np.where(n > 1, 1.96 * std / np.sqrt(n), mean)
    return (np.maximum(mean - half, 0.0).to_numpy(), mean.to_numpy(), (mean + half).to_numpy())


def expected_now(p, meta_calls, reads, mounts):
    mean_request = p["POSIX_BYTES_READ"].to_numpy(np.float64) / reads
    size_class = np.floor(np.log(np.maximum(mean_request, 1.0)) / np.log(4.0)).astype(np.int64)
    group = (pd.Series(points_of(p["path"], mounts), index=p.index).astype(str) + ":"
             + pd.Series(size_class, index=p.index).astype(str)).to_numpy()
    calls = np.maximum(meta_calls, 1.0)
    out = {k: np.zeros(len(p)) for k in ("low", "mid", "high")}
    units = []
    for unit, count in ((p["POSIX_F_META_TIME"].to_numpy() / calls, calls),
                        (p["POSIX_F_READ_TIME"].to_numpy() / reads, reads)):
        low, mid, high = group_means(pd.Series(unit), group)
        out["low"] += count * low
        out["mid"] += count * mid
        out["high"] += count * high
        units.append(mid)
    peers = pd.Series(group).map(pd.Series(group).value_counts()).to_numpy()
    return out, peers, units
