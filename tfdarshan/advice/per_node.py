"""Staging plans per node: what each node should copy to its own fast tier,
from what that node's ranks read, against one plan replicated on every node.

    sharded    each node stages, within its own capacity, the files that save
               its own ranks the most (advisor.recommend on that node's logs);
               a file read on several nodes is copied to each of them
    replicated one set for the whole job (the files whose saving summed over
               all nodes is largest, within one node's capacity), staged on
               every node; a node gains only from the files its ranks read

The sharded plans are each node's optimum, so they save at least as much
(up to the knapsack's approximation beyond the exact size)."""
from __future__ import annotations

import dataclasses
import os
from typing import Collection, Dict, List

import numpy as np
import pandas as pd

from tfdarshan.advice import advisor
from tfdarshan.advice import tiers as T
from tfdarshan.measures.human import count, human_bytes, human_time
from tfdarshan.capture.snapshot import Snapshot


@dataclasses.dataclass
class NodePlans:
    fast_tier: T.Tier
    capacity: Dict[str, int]                  # host -> bytes it may stage
    nodes: Dict[str, advisor.Advice]          # host -> its own (sharded) plan
    ranks: Dict[str, int]                     # host -> how many ranks it ran
    replicated: List[str]                     # the one set of the replicated plan
    replicated_saving: Dict[str, float]       # host -> what that set saves its ranks

    def paths(self, host: str) -> List[str]:
        a = self.nodes[host]
        return [a.costs["path"].iat[i] for i in a.chosen]

    def saving(self, host: str, without: Collection[str] = ()) -> float:
        """What host's plan saves its ranks; without: absolute paths left out
        (files gone since the run, which no node can stage)."""
        a = self.nodes[host]
        if not without:
            return a.saving(a.chosen)
        kept = [i for i in a.chosen if os.path.abspath(a.costs["path"].iat[i]) not in without]
        return a.saving(np.array(kept, dtype=np.int64))

    @property
    def sharded_total(self) -> float:
        return sum(self.saving(h) for h in self.nodes)

    @property
    def replicated_total(self) -> float:
        return sum(self.replicated_saving.values())

    def copied(self) -> Dict[str, int]:
        """Bytes copied to all nodes together under each plan."""
        size = pd.concat([a.costs[["path", "size"]] for a in self.nodes.values()]).groupby("path")["size"].max()
        return {"sharded": sum(a.bytes(a.chosen) for a in self.nodes.values()),
                "replicated": len(self.nodes) * int(size.reindex(self.replicated).sum())}

    def summary(self) -> str:
        c = self.copied()
        s, r = self.sharded_total, self.replicated_total
        return (f"Sharded plans (each node stages what saves its own ranks most): save {human_time(s)} of input "
                f"I/O time over {count(len(self.nodes), 'node')}, copying {human_bytes(c['sharded'])}. Replicated plan "
                f"(one set of {count(len(self.replicated), 'file')} chosen for the whole job, staged on every node): saves "
                f"{human_time(r)}, copying {human_bytes(c['replicated'])}. " + _which_saves_more(s, r))

    def to_dict(self) -> Dict:
        return {"fast_tier": self.fast_tier.to_dict(), "summary": self.summary(),
                "sharded_saving": self.sharded_total, "replicated_saving": self.replicated_total,
                "copied": self.copied(), "replicated_files": list(self.replicated),
                "nodes": {h: {"ranks": self.ranks.get(h, 0), "capacity": self.capacity[h],
                              "files": self.paths(h), "bytes": a.bytes(a.chosen), "saving": self.saving(h),
                              "current_time": a.current_time, "replicated_saving": self.replicated_saving[h]}
                          for h, a in self.nodes.items()}}


def _which_saves_more(sharded: float, replicated: float) -> str:
    """"Sharded saves 1.2 ms more (15 %).", the other way round, or a tie;
    never a negative "more"."""
    if sharded == replicated:
        return "Both save the same."
    more, less = max(sharded, replicated), min(sharded, replicated)
    name = "Sharded" if sharded > replicated else "Replicated"
    share = 100 * (more - less) / less if less > 0 else None
    said = "" if share is None else f" ({share:.0f} %)" if share >= 1 else " (under 1 %)"
    return f"{name} saves {human_time(more - less)} more{said}."


def plan(host_snaps: Dict[str, Snapshot], fast: T.Tier, capacity: Dict[str, int],
         ranks: Dict[str, int]) -> NodePlans:
    """Each node's own plan from its snapshot (its ranks' logs merged), and
    the replicated plan chosen from the same per-node costs."""
    nodes = {h: advisor.recommend(s, fast, capacity[h]) for h, s in sorted(host_snaps.items())}
    per_file = pd.concat([a.costs[["path", "size", "saving"]] for a in nodes.values()], ignore_index=True)
    job = per_file.groupby("path").agg(size=("size", "max"), saving=("saving", "sum"))
    room = min(capacity.values())            # the one set must fit on every node
    replicated = sorted(job.index[advisor.knapsack(job["size"].to_numpy(), job["saving"].to_numpy(), room)])
    gains = {h: float(a.costs.loc[a.costs["path"].isin(replicated), "saving"].sum()) for h, a in nodes.items()}
    return NodePlans(fast, dict(capacity), nodes, dict(ranks), replicated, gains)

