"""Findings for jobs of many ranks, from the analysis tables (`tfdarshan
analyze`): stragglers, a shared-file hot spot, shard imbalance and metadata
storms. Each is a Finding (findings.py) like the single-process ones:
a level, the evidence with its figures, and a suggested fix. Pure functions
of the tables (and the known tiers): nothing here reads a log."""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from tfdarshan.advice import tiers as T
from tfdarshan.advice.findings import Finding
from tfdarshan.measures.human import count, human_bytes, percent
from tfdarshan.capture import mounts as M
from tfdarshan.measures import input_wait as W
from tfdarshan.measures.time_in_calls import FILE_TIME, file_time

MIN_RANKS = 4               # fewer ranks: no median worth comparing against
STRAGGLER_RATIO = 1.5       # input wait above 1.5x the median rank's ...
STRAGGLER_POINTS = 0.10     # ... and at least 10 points of step time above it
EXPLAINS = 1.5              # a straggler reading 1.5x the median's bytes or opens: its files explain it
HOT_SHARE_OF_RANKS = 0.75   # a file read by at least 3 ranks in 4 ...
HOT_SHARE_OF_TIME = 0.05    # ... that costs at least 5 % of all ranks' time in file calls (file_time)
IMBALANCE = 1.5             # the heaviest rank reads 1.5x the median rank's bytes
STORM = 0.5                 # opens/s demanded at half the tier's measured rate: WARN; at it: HIGH
UNJUDGED_RATE = 1000        # opens/s that deserve a probe when the tier's rate is unknown
# file systems every node shares: their open rate is the job's; others are per node
SHARED_FS = ("nfs", "nfs4", "lustre", "gpfs", "beegfs", "cifs", "smb3", "ceph", "glusterfs", "panfs", "wekafs",
             "orangefs", "pvfs2", "cvfs", "dvs", "fuse")


PER_NODE = "tfdarshan recommend --per-node"


def rank_findings(tables: Dict[str, pd.DataFrame], tiers: Sequence[T.Tier] = (), *,
                  per_node: bool = False) -> List[Finding]:
    """The four findings that need several ranks (empty for fewer than
    MIN_RANKS). per_node: they go with the per-node plans, which they then
    point at rather than at the command that made them."""
    ranks = tables["ranks"]
    if len(ranks) < MIN_RANKS:
        return []
    out = [stragglers(ranks, tables["rank_mounts"]), hot_spot(tables["files"], len(ranks)), imbalance(ranks)]
    out += storms(ranks, tables["rank_mounts"], tiers)
    out = [f for f in out if f is not None]
    if per_node:
        for f in out:
            f.suggestion = f.suggestion.replace(f"({PER_NODE} puts it in every node's plan)", "(see the per-node "
                                                "plans above)").replace(PER_NODE, "the per-node plans above")
    return out


def main_mounts(rank_mounts: pd.DataFrame) -> pd.DataFrame:
    """Per rank, the mount where it spent the most time in file calls
    (file_time), with that mount's bytes and time for the rank."""
    rank_mounts = rank_mounts.assign(**{FILE_TIME: file_time(rank_mounts)})
    rm = rank_mounts[(rank_mounts[FILE_TIME] > 0) & (rank_mounts["mount"] != M.STREAMS)]
    return rm.loc[rm.groupby("rank")[FILE_TIME].idxmax()].set_index("rank")


def stragglers(ranks: pd.DataFrame, rank_mounts: pd.DataFrame) -> Optional[Finding]:
    """Ranks whose input wait is well above the median rank's, each with
    what explains it: its files (more bytes or opens), its mount (another
    than most ranks read from), or neither (then its node)."""
    r = ranks.dropna(subset=[W.RANK_SHARE]).set_index("rank")
    if len(r) < MIN_RANKS:
        return None
    median = float(r[W.RANK_SHARE].median())
    slow = r[(r[W.RANK_SHARE] >= STRAGGLER_RATIO * median) & (r[W.RANK_SHARE] >= median + STRAGGLER_POINTS)]
    if slow.empty:
        return None
    main = main_mounts(rank_mounts)
    usual = main["mount"].mode().iat[0] if len(main) else ""
    typical = main[main["mount"] == usual]
    per_byte = float((typical[FILE_TIME] / typical["bytes_read"].clip(lower=1)).median()) if len(typical) else 0.0
    med_bytes, med_opens = float(r["bytes_read"].median()), float(r["opens"].median())
    why, causes = {}, set()
    for rank, x in slow.sort_values(W.RANK_SHARE, ascending=False).iterrows():
        reasons = []
        if x["bytes_read"] >= EXPLAINS * max(med_bytes, 1):
            reasons.append(("files", f"reads {x['bytes_read'] / max(med_bytes, 1):.1f}x the median rank's bytes"))
        if x["opens"] >= EXPLAINS * max(med_opens, 1):
            reasons.append(("files", f"opens {x['opens'] / max(med_opens, 1):.1f}x as many files"))
        m = main.loc[rank] if rank in main.index else None
        if m is not None and m["mount"] != usual:
            reasons.append(("mount", f"reads mostly from {m['mount']} ({m['fstype'] or '?'}), most ranks from "
                                    f"{usual}"))
        elif m is not None and per_byte > 0 and m[FILE_TIME] / max(m["bytes_read"], 1) >= 2 * per_byte:
            reasons.append(("node", f"its reads on {usual} take {m[FILE_TIME] / max(m['bytes_read'], 1) / per_byte:.1f}x "
                                    f"the usual time per byte"))
        if not reasons:
            reasons.append(("node", "neither its files nor its mount differ from the median rank's"))
        causes.update(c for c, _ in reasons)
        why[int(rank)] = {W.RANK_SHARE: float(x[W.RANK_SHARE]), "host": str(x["host"]),
                          "explained_by": sorted({c for c, _ in reasons}), "why": "; ".join(t for _, t in reasons)}
    named = list(why.items())[:5]
    fixes = {"files": "give every rank an equal share of the data (see shard imbalance)",
             "mount": "read every rank's input from the same mount, or stage the slow mount's files "
                      "(tfdarshan recommend --per-node)",
             "node": "look at the named nodes (other jobs, CPU or memory pressure, a slower disk)"}
    worst = max(w[W.RANK_SHARE] for w in why.values())
    return Finding(
        "HIGH" if worst - median >= 0.25 else "WARN", f"{len(why)} straggling rank{'s' if len(why) > 1 else ''}",
        f"median rank waits {percent(median)} of its step time on file I/O; "
        + "; ".join(f"rank {k} (host {w['host']}) {percent(w[W.RANK_SHARE])}: {w['why']}" for k, w in named)
        + (f"; and {len(why) - len(named)} more" if len(why) > len(named) else "") + ".",
        "In synchronous training every step waits for the slowest rank: " + "; ".join(
            fixes[c] for c in ("files", "mount", "node") if c in causes) + ".",
        {f"median_{W.RANK_SHARE}": median, "stragglers": why, "usual_mount": usual})


def hot_spot(files: pd.DataFrame, n_ranks: int) -> Optional[Finding]:
    """The file read by the most ranks, when most ranks read it and it costs
    a noticeable share of the job's time in file calls."""
    files = files.assign(**{FILE_TIME: file_time(files)})
    read = files[files["bytes_read"] > 0]
    total = float(files[FILE_TIME].sum())
    hot = read[(read["ranks"] >= HOT_SHARE_OF_RANKS * n_ranks) & (read[FILE_TIME] >= HOT_SHARE_OF_TIME * total)]
    if hot.empty or total <= 0:
        return None
    top = hot.sort_values(["ranks", FILE_TIME], ascending=False).iloc[0]
    share = float(top[FILE_TIME]) / total
    return Finding(
        "HIGH" if share >= 0.25 else "WARN", "A file most ranks read (shared-file hot spot)",
        f"{top['path']} is read by {int(top['ranks'])} of {count(n_ranks, 'rank')}: {human_bytes(top['bytes_read'])} in "
        f"all, {percent(share, 0)} of the job's time in file calls"
        + (f"; {count(len(hot) - 1, 'more file')} {'is' if len(hot) == 2 else 'are'} read this widely" if len(hot) > 1 else "") + ".",
        "Every rank pulls it from the same storage at once: copy it once to each node's local tier "
        "(tfdarshan recommend --per-node puts it in every node's plan), or read it once per node and share it.",
        {"path": str(top["path"]), "ranks": int(top["ranks"]), "of_ranks": n_ranks,
         "bytes_read": int(top["bytes_read"]), f"share_of_{FILE_TIME}": share, "files_this_shared": int(len(hot))})


def imbalance(ranks: pd.DataFrame) -> Optional[Finding]:
    """Bytes read per rank uneven: the heaviest rank against the median."""
    b = ranks.set_index("rank")["bytes_read"].astype(np.float64)
    median = float(b.median())
    if median <= 0 or b.max() < IMBALANCE * median:
        return None
    heavy = b[b >= IMBALANCE * median].sort_values(ascending=False)
    cv = float(b.std(ddof=0) / b.mean())
    return Finding(
        "HIGH" if b.max() >= 3 * median else "WARN", "Uneven shards: some ranks read much more than others",
        f"bytes read per rank: min {human_bytes(b.min())}, median {human_bytes(median)}, max {human_bytes(b.max())} "
        f"(coefficient of variation {cv:.2f}); {len(heavy)} rank{'s read' if len(heavy) > 1 else ' reads'} at "
        f"least {IMBALANCE}x the median: " + ", ".join(f"rank {int(k)}" for k in heavy.index[:8])
        + (", ..." if len(heavy) > 8 else "") + ".",
        "Give each rank the same bytes: more shards than ranks (a multiple of the rank count) of equal size, "
        "or tf.data's AutoShardPolicy.DATA; the heaviest rank sets every synchronous step's pace.",
        {"min": int(b.min()), "median": median, "max": int(b.max()), "cv": cv,
         "heavy_ranks": [int(k) for k in heavy.index]})


def storms(ranks: pd.DataFrame, rank_mounts: pd.DataFrame, tiers: Sequence[T.Tier]) -> List[Finding]:
    """Per mount, the opens per second the ranks ask of it (all ranks for a
    shared file system, the busiest node's for a node-local one) against
    the open rate measured on that tier."""
    duration = ranks.set_index("rank")["duration"]
    host = ranks.set_index("rank")["host"]
    rm = rank_mounts[rank_mounts["opens"] > 0].copy()
    rm["rate"] = rm["opens"] / rm["rank"].map(duration).clip(lower=1e-3)
    rm["host"] = rm["rank"].map(host)
    out = []
    for (mount, fstype), g in rm.groupby(["mount", "fstype"]):
        shared = any(str(fstype).startswith(s) for s in SHARED_FS)
        by_host = g.groupby("host")["rate"].sum()
        demand = float(g["rate"].sum()) if shared else float(by_host.max())
        where = f"all {g['rank'].nunique()} ranks together" if shared else \
            f"the {count(int((g['host'] == by_host.idxmax()).sum()), 'rank')} of node {by_host.idxmax()}"
        tier = tier_of_mount(mount, tiers)
        rate = (tier.open_rate or (1 / tier.open_latency if tier.open_latency > 0 else 0.0)) if tier else 0.0
        evidence = {"mount": str(mount), "fstype": str(fstype), "shared": shared, "opens_per_second": demand,
                    "opens": int(g["opens"].sum())}
        if rate <= 0:
            if demand >= UNJUDGED_RATE:
                out.append(Finding(
                    "INFO", f"Many opens on {mount}, whose open rate is unknown",
                    f"{where} open {demand:,.0f} files per second on {mount} ({fstype or '?'}).",
                    f"Measure the tier (tfdarshan probe <a directory on {mount}>) to judge whether that is a "
                    f"metadata storm.", evidence))
            continue
        how = (f"{tier.open_rate:,.0f} opens/s measured with {T.OPENERS} openers" if tier.open_rate
               else f"{rate:,.0f} opens/s from its measured open latency, one opener")
        ratio = demand / rate
        if ratio >= STORM:
            out.append(Finding(
                "HIGH" if ratio >= 1 else "WARN", f"Metadata storm on {mount}",
                f"{where} open {demand:,.0f} files per second on {mount} ({fstype or '?'}), {ratio:.1f}x what "
                f"the tier sustains ({how}); opens queue behind each other there.",
                "Open fewer files: pack small files into TFRecord shards, keep files open across epochs "
                "(interleave over a few large files instead of reopening), or stage them to a node-local tier "
                "(tfdarshan recommend --per-node).", {**evidence, "tier_open_rate": rate, "ratio": ratio}))
    return out


def tier_of_mount(mount: str, tiers: Sequence[T.Tier]) -> Optional[T.Tier]:
    """The known tier on exactly this mount: the tier probed at it, or one
    declared for a directory inside it (not a tier of an enclosing mount)."""
    point = mount.rstrip("/") or "/"
    # under "/", a declared directory may well be another mount: only the exact match counts there
    inside = [t for t in tiers if (t.path.rstrip("/") or "/") == point
              or point != "/" and t.path.startswith(point + "/")]
    return min(inside, key=lambda t: len(t.path)) if inside else None
