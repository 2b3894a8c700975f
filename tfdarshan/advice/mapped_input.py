"""The advisor's finding on input read through memory maps: a staging
candidate like any other, with the bytes its mappings brought in (an
estimate, capture/kernel_io.py) and how its read time was priced, since no
call measured it (cost_model.py prices it)."""
from __future__ import annotations

from typing import Dict, List

import pandas as pd


def findings(costs: pd.DataFrame) -> List[Dict]:
    """The finding, as a dict of advisor.Finding's fields (the advisor
    builds it: it imports this module), or none when nothing was mapped."""
    m = costs[costs["mmap_bytes"] > 0] if len(costs) else costs
    if m.empty:
        return []
    m = m.sort_values("mmap_bytes", ascending=False)
    unpriced = m[m["mmap_priced"] == ""]
    names = ", ".join(f"{x.path} (~{x.mmap_bytes / 2**20:.1f} MiB)" for x in m.head(3).itertuples())
    more = f" and {len(m) - 3} more" if len(m) > 3 else ""
    how = (f"{len(unpriced)} of them could not be priced (no probed tier and no reads measured on their mount), "
           f"so no saving is claimed for them" if len(unpriced) else
           "their read time is priced from " + ", ".join(sorted(set(m["mmap_priced"]))))
    return [{
        "level": "INFO", "title": "Input read through memory maps",
        "detail": f"{len(m)} files were read through mmap: {names}{more}, {int(m['mmap_bytes'].sum()) / 2**20:.1f} "
                  f"MiB in all (an estimate from the pages mapped). Page faults are not calls, so no read time "
                  f"was measured; {how}.",
        "suggestion": "They are staging candidates like any input file (counted here with their mapped bytes): "
                      "stage them, and probe their tier (tfdarshan probe <mount>) to price the saving.",
        "evidence": {"files": int(len(m)), "mmap_bytes": int(m["mmap_bytes"].sum()), "unpriced": int(len(unpriced))}}]
