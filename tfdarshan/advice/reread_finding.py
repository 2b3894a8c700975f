"""The advisor's finding on input read again every epoch while it would
fit in memory: add a cache, or, when the pipeline has one (tf.data's own
cache or snapshot files in the session, tfdata_files.py), why the cache
does not serve these reads. Counted in files read in full so many times
(bytes read over size), with the input's size in units a person reads."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from tfdarshan.advice import tfdata_files as TD
from tfdarshan.advice.findings import Finding
from tfdarshan.capture.snapshot import Snapshot
from tfdarshan.measures.human import count, human_bytes


def findings(snap: Snapshot, costs: pd.DataFrame) -> List[Finding]:
    """The finding, or none. costs:
    the advisor's, with its training_input and tfdata columns."""
    own = costs[costs["tfdata"] != ""] if "tfdata" in costs else costs.iloc[:0]
    if "training_input" in costs:
        costs = costs[costs["training_input"]]
    if not len(costs):
        return []
    # whole times each file was read (bytes read over its size): counts of files, not an average
    times = np.floor(costs["rereads"].to_numpy(np.float64) + 1e-9).astype(np.int64)
    reread = times >= 2
    total = int(costs["size"].sum())
    avail = mem_available()
    if not (reread.sum() >= max(1, len(costs) // 2) and avail and total < avail / 2):
        return []
    counts = pd.Series(times[reread]).value_counts().sort_index()
    said = "; ".join(f"{n} {'was' if n == 1 else 'were'} read {k} times in full" for k, n in counts.head(3).items())
    more = f"; {int(counts.iloc[3:].sum())} more, more often" if len(counts) > 3 else ""
    facts = (f"of {count(len(costs), 'file')}, {said}{more}; all input is {human_bytes(total)} and "
             f"{human_bytes(avail)} of memory is free")
    evidence = {"dataset_bytes": total, "memory_available": avail}
    if not len(own):
        return [_finding("The same data is read again every epoch, and it fits in memory", facts + ".",
                         "Add .cache() to the tf.data pipeline after the read and decode steps, so epochs after "
                         "the first come from memory.", evidence)]
    # the pipeline has a cache (or snapshot) already: it is not what serves these reads
    # (a cache the pipeline never finished is only its lock file and temporary files)
    caches = TD.cache_names([*own["path"], *TD.lock_files(snap, costs["path"])], np.ones(len(own), dtype=bool))
    what = (", ".join(f"cache({c!r})" for c in caches[:3]) + (f" and {len(caches) - 3} more" if len(caches) > 3
                                                              else "")) if caches else "snapshot()"
    return [_finding(
        "The data is read again every epoch, though the pipeline caches",
        f"{facts}. The pipeline already caches ({what}: {count(len(own), 'file')} of tf.data's own read), yet the "
        f"input is read again every epoch: the cache does not serve these reads.",
        "Place the cache after the read and decode steps and before shuffle, take() and batch(), and read it "
        "to its end each epoch: tf.data throws away a cache that an iterator left unfinished (steps_per_epoch "
        "shorter than the data, or take() after cache()).",
        {**evidence, "tfdata_files": int(len(own)), "caches": caches})]


def _finding(title: str, detail: str, suggestion: str, evidence: Dict) -> Finding:
    return Finding("HIGH", title, detail, suggestion, evidence)


def mem_available() -> Optional[int]:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None
