"""tfdarshan: Darshan-compatible I/O profiling for TensorFlow training.

    import tfdarshan
    tfdarshan.attach()
    ...                                  # run the input pipeline
    snap = tfdarshan.snapshot()          # counters since attach
    snap.posix                           # one row per file, Darshan's columns

    with tfdarshan.profile() as p:       # counters of one window
        ...
    p.snapshot.posix
"""
import os as _os

from tfdarshan.api import (attach, detach, disable, enable, flight_recorder, is_attached, profile, serve_staged,
                           served_summary, snapshot, stats, step, suppressed)
from tfdarshan.logs.darshan_log import read_darshan_log, write_darshan_log
from tfdarshan.capture.snapshot import Snapshot
from tfdarshan.advice.stager import staged_paths
from tfdarshan._version import __version__

__all__ = ["attach", "detach", "enable", "disable", "flight_recorder", "is_attached", "profile", "snapshot", "stats", "step",
           "suppressed", "Snapshot", "read_darshan_log", "write_darshan_log", "staged_paths", "serve_staged",
           "served_summary"]

# profiler sessions record I/O once tfdarshan is imported
if not _os.environ.get("TFDARSHAN_NO_HOOKS"):
    enable()
