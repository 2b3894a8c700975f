"""One job of four TensorFlow ranks under a real `mpirun`, each rank under
`tfdarshan run` (workers/mpi_tf_rank.py), made once for the whole test run
and read by every test that checks such a job: each rank imports
TensorFlow (7-9 s of CPU), so a job of its own per test cost about 30 s on
2 cores. Each rank reads, in its set-up, a config file and its two shards
and the shared file (tests/logs/test_mpi.py checks the logs and the job
log), then fits on its batch files (tests/tf/test_steps_setup.py checks its
steps are fit's batches). Read it, never change it."""
import os
import pathlib
import subprocess
import sys

from mpi_env import MPI_ENV
from places import WORKERS

NRANKS = 4
PAUSE = 1.5                  # seconds each rank sleeps in its set-up (and half that after fit)
SHARED_SIZE = 70_000         # the file every rank reads
FIT_FILES = 3                # each rank's batch files, one a batch


def make_shards(root: pathlib.Path, nranks: int) -> dict:
    """Two shards a rank, of sizes unique to the rank, and one shared file;
    {shard's path: (its rank, its size)}."""
    root.mkdir()
    sizes = {}
    for r in range(nranks):
        for i in range(2):
            p = root / f"shard{r}_{i}.bin"
            p.write_bytes(os.urandom(1000 * (r + 1) + 10 * i))
            sizes[str(p)] = (r, p.stat().st_size)
    (root / "shared.bin").write_bytes(os.urandom(SHARED_SIZE))
    return sizes


def batch_size(rank: int) -> int:
    """The size of each of a rank's batch files."""
    return 20_000 * (rank + 1)


def run_job(root: pathlib.Path) -> dict:
    """The job's data and its run under root: what the tests read, as
    strings (rank_session.made_once keeps it as JSON)."""
    sizes = make_shards(root / "shards", NRANKS)
    batches = root / "batches"
    batches.mkdir()
    for r in range(NRANKS):
        for i in range(FIT_FILES):
            (batches / f"r{r}_{i}.bin").write_bytes(os.urandom(batch_size(r)))
    config = root / "config.json"
    config.write_bytes(b"{}" * 2000)
    out, logdir = root / "out", root / "logs"
    out.mkdir()
    p = subprocess.run(["mpirun", "-np", str(NRANKS), sys.executable, "-m", "tfdarshan", "run", "--logdir",
                        str(logdir), str(WORKERS / "mpi_tf_rank.py"), str(root / "shards"), str(batches), str(config),
                        str(out), str(PAUSE)], env={**os.environ, **MPI_ENV}, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return {"logdir": str(logdir), "sizes": sizes, "batches": str(batches), "config": str(config), "out": str(out)}
