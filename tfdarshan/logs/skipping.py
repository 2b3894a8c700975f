"""Several logs read as one (a session's processes, a job's ranks) when some
may be damaged: an unreadable one (truncated, corrupted, gone) is skipped,
the rest are read, and the skipped ones are named in one warning line and
counted where the result is shown."""
from __future__ import annotations

import os
import pathlib
from typing import Dict, List, Tuple

from tfdarshan.errors import TfdarshanError
from tfdarshan.logs.darshan_log import read_darshan_log

# how many names a warning line or a log's metadata lists before "..."
LISTED = 10


def reason_of(path, error: Exception) -> str:
    """An error's message without the path it starts with."""
    text = str(error)
    prefix = f"{path}: "
    return text[len(prefix):] if text.startswith(prefix) else text


def read_logs(paths: Dict[object, pathlib.Path]) -> Tuple[Dict[object, object], List[Dict[str, str]]]:
    """({key: Snapshot} of the readable logs, [{"log": file name, "reason"}]
    of the others), in the order given."""
    snaps, skipped = {}, []
    for key, path in paths.items():
        try:
            snaps[key] = read_darshan_log(path)
        except (TfdarshanError, OSError) as e:
            skipped.append({"log": pathlib.Path(path).name, "reason": reason_of(path, e)})
    return snaps, skipped


def warning_line(skipped: List[Dict[str, str]], what: str = "log") -> str:
    """One line naming the skipped logs and why; "" when none was."""
    if not skipped:
        return ""
    n = len(skipped)
    listed = ", ".join(f"{s['log']} ({s['reason']})" for s in skipped[:LISTED])
    more = f" and {n - LISTED} more" if n > LISTED else ""
    return f"warning: skipped {n} unreadable {what}{'s' if n > 1 else ''}: {listed}{more}".replace(os.linesep, " ")


def names(skipped: List[Dict[str, str]]) -> str:
    """The skipped logs' names for a log's metadata (short: it has 1 KiB)."""
    listed = ",".join(s["log"] for s in skipped[:LISTED])
    return listed + (",..." if len(skipped) > LISTED else "")
