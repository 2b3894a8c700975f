"""The slow-rank scenario of issue 29: four ranks (or any number: the
last is the slow one) under `mpirun`, each training a small Keras model for
a few epochs on its own files through a tf.data map that reads and decodes
each file; rank 3's files sit on the slow FUSE tier (case_studies/slowfs.c: 4 ms per metadata call, 3 ms per
read), the others' on the local disk. Every rank runs under `tfdarshan
run` into one session. The pipeline reads its files through
tfdarshan.staged_paths(), so a re-run after `tfdarshan stage` reads the
copies. Shared by tests/advice/test_slow_rank_advice.py and
benchmarks/bench_advice.py; needs root, /dev/fuse, Open MPI and mpi4py."""
from __future__ import annotations

import contextlib
import os
import pathlib
import subprocess
import sys
from typing import Dict, List, Optional

RANKS = 4
SLOW_RANK = 3                               # of RANKS; with other counts, the last rank (slow_rank_of)
META_LATENCY, READ_LATENCY = 0.004, 0.003     # the slow tier, as in the issue
FILE_BYTES = 32 * 32 * 3                     # one small image a file, decoded as raw bytes
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}

SCRIPT = '''
import os, sys
from mpi4py import MPI                      # MPI_Init: the launcher's rank
rank = MPI.COMM_WORLD.Get_rank()
import tensorflow as tf
import tfdarshan
data, epochs, parallel = sys.argv[1 + rank], int(sys.argv[-2]), sys.argv[-1] == "parallel"
files = tfdarshan.staged_paths(sorted(os.path.join(data, f) for f in os.listdir(data)))


def load(path):
    x = tf.io.decode_raw(tf.io.read_file(path), tf.uint8)
    return tf.cast(tf.reshape(x[:3072], (32, 32, 3)), tf.float32) / 255.0, tf.constant(1)


ds = tf.data.Dataset.from_tensor_slices(files).map(
    load, num_parallel_calls=tf.data.AUTOTUNE if parallel else None).batch(8)
model = tf.keras.Sequential([tf.keras.Input((32, 32, 3)), tf.keras.layers.Flatten(),
                             tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(10)])
model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(ds, epochs=epochs, verbose=0, shuffle=False)
'''


def unavailable() -> Optional[str]:
    """Why the scenario cannot run here, or None."""
    import importlib.util
    import shutil
    if not shutil.which("mpirun") or importlib.util.find_spec("mpi4py") is None:
        return "needs Open MPI's mpirun and mpi4py"
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        return "mounting the slow FUSE tier needs root and /dev/fuse"
    try:
        from case_studies.slowfs import build
        build()
    except RuntimeError as e:
        return str(e)
    return None


def slow_rank_of(ranks: int) -> int:
    """Which rank reads from the slow tier: the last."""
    return ranks - 1


def make_data(root: pathlib.Path, files: int, ranks: int = RANKS) -> List[pathlib.Path]:
    """Each rank's directory of `files` files of FILE_BYTES random bytes."""
    dirs = []
    for r in range(ranks):
        d = root / f"rank{r}"
        d.mkdir(parents=True, exist_ok=True)
        for i in range(files):
            (d / f"r{r}_{i:03d}.bin").write_bytes(os.urandom(FILE_BYTES))
        dirs.append(d)
    return dirs


@contextlib.contextmanager
def slow_tier(backing: pathlib.Path, mountpoint: pathlib.Path):
    """The slow rank's files served through the slow FUSE tier."""
    from case_studies.slowfs import mounted
    with mounted(str(backing), str(mountpoint), meta_latency=META_LATENCY, read_latency=READ_LATENCY,
                 bandwidth="0") as mnt:
        yield mnt


def run_job(script: pathlib.Path, logdir: pathlib.Path, dirs: List[str], *, epochs: int = 3, parallel: bool = False,
            staging_map: Optional[pathlib.Path] = None, timeout: float = 900) -> pathlib.Path:
    """One run of the job under `mpirun -np N tfdarshan run`, a rank for each
    of `dirs` (rank r reads dirs[r]); its session directory."""
    if not script.exists():
        script.write_text(SCRIPT)
    env = {**os.environ, **MPI_ENV, "PYTHONWARNINGS": "ignore"}
    if staging_map is not None:
        env["TFDARSHAN_STAGING_MAP"] = str(staging_map)
    before = set(logdir.glob("plugins/tfdarshan/*/"))
    p = subprocess.run(["mpirun", "-np", str(len(dirs)), sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir),
                        str(script), *map(str, dirs), str(epochs), "parallel" if parallel else "plain"],
                       env=env, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"the job failed ({p.returncode}): {p.stderr[-3000:]}")
    [session] = set(logdir.glob("plugins/tfdarshan/*/")) - before
    return session


def tfdarshan(*args, env: Optional[Dict[str, str]] = None, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfdarshan", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})
