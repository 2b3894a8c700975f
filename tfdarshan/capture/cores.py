"""Which CPUs a process may run on, as its log records them ("cpus": its
affinity as ranges, "node_cpus": the node's count), and read back: the job
model (advice/job_time.py) takes each rank to keep its own pace, which holds
only while a node's ranks have a core each."""
from __future__ import annotations

import os
from typing import Dict, FrozenSet, Iterable, Optional


def ranges(cpus: Iterable[int]) -> str:
    """{0, 1, 2, 5} as "0-2,5"."""
    out, run = [], []
    for c in sorted(set(cpus)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def parse(text: Optional[str]) -> Optional[FrozenSet[int]]:
    """"0-2,5" as {0, 1, 2, 5}; None for text that is absent or not ranges."""
    if not text:
        return None
    cpus = set()
    try:
        for part in str(text).split(","):
            lo, dash, hi = part.strip().partition("-")
            a, b = int(lo), int(hi if dash else lo)
            if a < 0 or b < a or b - a > 1 << 16:
                return None
            cpus.update(range(a, b + 1))
    except ValueError:
        return None
    return frozenset(cpus)


def metadata() -> Dict[str, str]:
    """This process's CPUs, for its log's metadata."""
    out = {}
    try:
        out["cpus"] = ranges(os.sched_getaffinity(0))
    except (AttributeError, OSError):        # no affinity on this platform
        pass
    if os.cpu_count():
        out["node_cpus"] = str(os.cpu_count())
    return out
