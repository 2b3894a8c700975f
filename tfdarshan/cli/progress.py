"""Progress of long work done in stages: a bar per stage on a terminal
(tqdm), a line per stage otherwise (a batch job's log, a pipe)."""
from __future__ import annotations

import sys
import time
from typing import Dict, Optional, Union


class StageProgress:
    """A progress(stage, done, total) callback. `labels` names the stages;
    `unit` is what `total` counts (one for all stages, or one a stage)."""

    def __init__(self, prog: str, labels: Dict[str, str], unit: Union[str, Dict[str, str]], stream=None,
                 bar: Optional[bool] = None):
        self.prog, self.labels, self.unit = prog, labels, unit
        self.stream = stream or sys.stderr
        self.bar_wanted = self.stream.isatty() if bar is None else bar
        self.stage: Optional[str] = None
        self.bar = None
        self.started = time.monotonic()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage != self.stage or done == 0:
            self._begin(stage, total)
        if self.bar is not None:
            self.bar.update(done - self.bar.n)

    def _begin(self, stage: str, total: int) -> None:
        self.close()
        self.stage = stage
        label = self.labels.get(stage, stage)
        unit = self.unit.get(stage, "item") if isinstance(self.unit, dict) else self.unit
        if self.bar_wanted:
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=label, unit=unit, file=self.stream)
        else:
            print(f"{self.prog}: {label}: {total:,} {unit}{'s' if total != 1 else ''} "
                  f"({time.monotonic() - self.started:.1f} s)", file=self.stream, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
