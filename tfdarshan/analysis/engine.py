"""Where an analysis graph runs: the user's Dask cluster when named
(`--scheduler tcp://host:8786` or TFDARSHAN_DASK_SCHEDULER), else an
embedded local cluster sized to the machine, or no cluster at all when the
session is small enough that starting one would cost more than it saves."""
from __future__ import annotations

import contextlib
import os
from typing import Iterator, Optional

SCHEDULER_ENV = "TFDARSHAN_DASK_SCHEDULER"
SMALL_SESSION = 16          # logs: below this, Dask's threaded scheduler in this process


@contextlib.contextmanager
def engine(scheduler: Optional[str] = None, logs: int = 0) -> Iterator[str]:
    """Run the `with` block's Dask computations somewhere; yields a short
    description of where ("cluster tcp://...", "local cluster of 2
    workers", "this process")."""
    import dask
    scheduler = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if scheduler:
        from distributed import Client
        with Client(scheduler, timeout="30s") as client:
            yield f"cluster {client.scheduler.address}"
        return
    if logs < SMALL_SESSION:
        with dask.config.set(scheduler="threads"):
            yield "this process"
        return
    from distributed import Client, LocalCluster
    workers = max(1, os.cpu_count() or 1)
    # processes, not threads: reading a log holds the GIL in pandas
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1") as cluster, Client(cluster):
        yield f"local cluster of {workers} workers"
