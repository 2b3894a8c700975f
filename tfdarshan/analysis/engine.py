"""Where an analysis graph runs: the user's Dask cluster when named
(`--scheduler tcp://host:8786` or TFDARSHAN_DASK_SCHEDULER), else an
embedded local cluster sized to the machine, or no cluster at all when the
session is small enough that starting one would cost more than it saves.
The same tasks run on each; Engine.run reports every task done (Dask's
callbacks on the threaded scheduler, as_completed on a cluster)."""
from __future__ import annotations

import contextlib
import os
from typing import Callable, Iterator, List, Optional, Sequence

SCHEDULER_ENV = "TFDARSHAN_DASK_SCHEDULER"
SMALL_SESSION = 16          # logs: below this, Dask's threaded scheduler in this process


class Engine:
    """A place to run Dask tasks: `client` (a distributed Client) or, when
    None, Dask's threaded scheduler in this process. `where` says which."""

    def __init__(self, where: str, client=None):
        self.where, self.client = where, client

    def run(self, tasks: Sequence, done: Optional[Callable[[int], None]] = None, keep: bool = False) -> List:
        """The results of dask.delayed `tasks`, in order; done(i) as task i
        finishes. keep=True leaves a cluster's results on its workers
        (futures, for the next tasks to take as arguments)."""
        tasks = list(tasks)
        if not tasks:
            return []
        if self.client is None:
            import dask
            from dask.callbacks import Callback
            # the threaded scheduler itself, not its name: given a name,
            # dask imports distributed to look for a client first (~0.5 s
            # of a small session's analyze)
            from dask.threaded import get as threaded
            index = {t.key: i for i, t in enumerate(tasks)}

            class _Done(Callback):
                def _posttask(self, key, result, dsk, state, worker_id):
                    if done is not None and key in index:
                        done(index[key])

            with _Done():
                return list(dask.compute(*tasks, scheduler=threaded))
        from distributed import as_completed
        futures = self.client.compute(tasks)
        index = {f.key: i for i, f in enumerate(futures)}
        for f in as_completed(futures, loop=self.client.loop):
            if f.status == "error":
                f.result()          # raises the task's error here
            if done is not None:
                done(index[f.key])
        return futures if keep else self.client.gather(futures)


@contextlib.contextmanager
def engine(scheduler: Optional[str] = None, logs: int = 0) -> Iterator[Engine]:
    """An Engine for the `with` block: its `where` is a short description
    ("cluster tcp://...", "local cluster of 2 workers", "this process")."""
    scheduler = scheduler or os.environ.get(SCHEDULER_ENV) or None
    if scheduler:
        from distributed import Client
        with Client(scheduler, timeout="30s", set_as_default=False) as client:
            yield Engine(f"cluster {client.scheduler.address}", client)
        return
    if logs < SMALL_SESSION:
        yield Engine("this process")
        return
    from distributed import Client, LocalCluster
    workers = max(1, os.cpu_count() or 1)
    # processes, not threads: decoding names and grouping hold the GIL
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1") as cluster, Client(cluster, set_as_default=False) as client:
        yield Engine(f"local cluster of {workers} workers", client)
