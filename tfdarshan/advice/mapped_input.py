"""The advisor's finding on input read through memory maps: a staging
candidate like any other when its pages were brought in inside training
steps, with the bytes its mappings brought in (an estimate,
capture/kernel_io.py), and what its reads cost: measured to be nothing
from storage when the steps that mapped it read nothing from storage (no
major page fault, no block-device read) on a file system where that shows,
priced by a probed tier (an estimate), or unknown (cost_model.py prices it;
never from other files' reads)."""
from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from tfdarshan.advice.cost_model import IN_MEMORY
from tfdarshan.advice.findings import Finding
from tfdarshan.measures.human import count, human_bytes
from tfdarshan.steps.series import STORAGE_COLUMNS


def storage_of_mapped(steps: Optional[pd.DataFrame], step_files: Optional[pd.DataFrame]) -> Dict[str, Optional[int]]:
    """Per path read through mmap in the step series, what its process read
    from storage (any file's: major page faults plus bytes read from block
    devices, added) in the entries of the series that mapped its pages; 0
    means nothing. None when an entry did not count them (an older series,
    the flight recorder's)."""
    if step_files is None or step_files.empty or "mmap_bytes" not in step_files or "path" not in step_files \
            or steps is None or steps.empty:
        return {}
    m = step_files[step_files["mmap_bytes"] > 0]
    if m.empty:
        return {}
    keys = ["host", "step"] if "host" in m and "host" in steps else ["step"]
    per_entry = steps.drop_duplicates(keys).set_index(keys)
    counted = (per_entry[list(STORAGE_COLUMNS)].sum(axis=1, min_count=len(STORAGE_COLUMNS))
               if all(c in per_entry for c in STORAGE_COLUMNS) else pd.Series(np.nan, index=per_entry.index))
    entries = m[keys + ["path"]].drop_duplicates()
    faults = counted.reindex(pd.MultiIndex.from_frame(entries[keys]) if len(keys) > 1 else entries["step"])
    entries = entries.assign(faults=faults.to_numpy(np.float64))
    out: Dict[str, Optional[int]] = {}
    for path, f in entries.groupby("path")["faults"]:
        out[path] = None if f.isna().any() else int(f.sum())
    return out


def findings(costs: pd.DataFrame) -> List[Finding]:
    """The finding, or none when no input was mapped.
    Files that are not training input (the MPI runtime's segments) are not
    input read through mmap."""
    m = costs[costs["mmap_bytes"] > 0] if len(costs) else costs
    if "training_input" in m:
        m = m[m["training_input"]]
    if m.empty:
        return []
    m = m.sort_values("mmap_bytes", ascending=False)
    unpriced = m[m["mmap_priced"] == ""]
    in_memory = m[m["mmap_priced"] == IN_MEMORY]
    priced = m[(m["mmap_priced"] != "") & (m["mmap_priced"] != IN_MEMORY)]
    names = ", ".join(f"{x.path} (~{human_bytes(x.mmap_bytes)})" for x in m.head(3).itertuples())
    more = f" and {len(m) - 3} more" if len(m) > 3 else ""
    how = []
    if len(in_memory):
        how.append(f"{len(in_memory)} came from memory: the steps that mapped them read nothing from storage "
                   f"(no major page fault, no block-device read: measured), so staging them saves nothing")
    if len(priced):
        how.append(f"{len(priced)} are priced from " + ", ".join(sorted(set(priced["mmap_priced"]))))
    if len(unpriced):
        how.append(f"what {len(unpriced)} cost is unknown (the steps that mapped them read from storage, or "
                   f"it could not be told, and no probe of their tier prices it), so no saving is claimed for them")
    return [Finding(
        "INFO", "Input read through memory maps",
        f"{count(len(m), 'file')} {'was' if len(m) == 1 else 'were'} read through mmap: {names}{more}, {human_bytes(int(m['mmap_bytes'].sum()))} "
        f"in all (an estimate from the pages mapped). Page faults are not calls, so no call measured "
        f"their time; " + "; ".join(how) + ".",
        "They are staging candidates like any input file (counted here with their mapped bytes)"
        + (": probe their tier (tfdarshan probe <mount>) to price the saving." if len(unpriced) else "."),
        {"files": int(len(m)), "mmap_bytes": int(m["mmap_bytes"].sum()), "unpriced": int(len(unpriced)),
         "in_memory": int(len(in_memory))})]
