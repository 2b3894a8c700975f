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
from tfdarshan.api import attach, detach, is_attached, profile, snapshot, suppressed
from tfdarshan.snapshot import Snapshot

__all__ = ["attach", "detach", "is_attached", "profile", "snapshot", "suppressed", "Snapshot"]
__version__ = "0.1.0"
