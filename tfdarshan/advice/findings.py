"""A finding: one thing the advice tells a user about how a run did its I/O,
with its level, the evidence in figures, and what to do. Every producer
returns this type: the advisor's diagnosis (advisor.diagnose), checkpoint
writes (checkpoint_findings.py), input read through memory maps
(mapped_input.py), input read again every epoch (reread_finding.py), the
findings that need several ranks (distributed.py), and the two below on
which logs the advice covers. The report (render.py), advice.json and the
tab read a finding's fields as `to_dict()` gives them."""
from __future__ import annotations

import dataclasses
from typing import Dict, List, Sequence

LEVELS = ("HIGH", "WARN", "INFO")     # most pressing first


@dataclasses.dataclass
class Finding:
    level: str          # one of LEVELS
    title: str
    detail: str         # the evidence, with figures
    suggestion: str
    evidence: Dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.level not in LEVELS:
            raise ValueError(f"a finding's level is one of {LEVELS}, not {self.level!r}")

    def to_dict(self) -> Dict:
        """The finding as advice.json and the tab read it."""
        return dataclasses.asdict(self)


def as_dicts(findings: Sequence[Finding]) -> List[Dict]:
    return [f.to_dict() for f in findings]


def skipped_logs(skipped: Sequence[Dict[str, str]], read: int) -> Finding:
    """The logs left out of the advice as unreadable ({"log", "reason"}),
    as a finding every format shows; `read` logs were read."""
    from tfdarshan.logs import skipping
    n = len(skipped)
    return Finding("WARN", f"{n} unreadable log{'s' if n > 1 else ''} left out",
                   f"The advice covers the {read} readable log{'s' if read > 1 else ''} of the session; "
                   + skipping.warning_line(list(skipped))[len("warning: "):] + ".",
                   "Look at why the process did not finish its log (killed, disk full); rerun it to include it.",
                   {"skipped_logs": list(skipped)})


def partial_logs(partial: Sequence[Dict], processes: int) -> Finding:
    """The logs made from what a killed process had recorded
    (logdir.partial_logs), as a finding: they are counted, as far as they go."""
    n = len(partial)
    return Finding("WARN", f"{n} of {processes} log{'s' if processes > 1 else ''} partial: "
                           f"{'a process' if n == 1 else 'processes'} killed before writing "
                           f"{'its' if n == 1 else 'their'} log{'s' if n > 1 else ''}",
                   "; ".join(f"{p['label']} {p['reason']}"
                             + (f" (last collect {p['last_collect']})" if p["last_collect"] else "")
                             for p in partial[:8]) + ". Their files, bytes and steps are counted up to then; "
                   "what they did after is not.",
                   "Give the job time to end (Slurm's KillWait, mpirun's odls_base_sigkill_timeout) or find why it "
                   "was killed (OOM, time limit, a failed rank); rerun to see the whole job.",
                   {"partial_logs": list(partial)})
