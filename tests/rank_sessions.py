"""A many-rank session for tests: a few real ranks of a small pipeline under
`tfdarshan run` (as a Slurm job), scaled to more ranks with the project's own
log writer. Shared by the analysis and tab tests."""
import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys

import tfdarshan
from tfdarshan.logs.darshan_log import write_darshan_log

SCRIPT = """
import os, sys, tfdarshan
rank = int(os.environ["SLURM_PROCID"])
shared, own = sys.argv[1], sys.argv[2:]
for step in range(3):
    with tfdarshan.step(step):
        with open(shared, "rb") as f:
            f.read()
        with open(own[rank], "rb") as f:
            f.read(50_000 * (rank + 1))
"""
RANKS_PER_NODE = 16


def scaled_host(rank: int) -> str:
    """The made-up node of a scaled rank: 16 ranks a node."""
    return f"node{rank // RANKS_PER_NODE}"


def real_ranks(root: pathlib.Path, ranks: int) -> pathlib.Path:
    """`ranks` processes of SCRIPT under `tfdarshan run`; their session directory
    (the job log removed: scaled ranks added later are not in it)."""
    root.mkdir(parents=True, exist_ok=True)
    shared = root / "shared.bin"
    shared.write_bytes(os.urandom(200_000))
    own = []
    for r in range(ranks):
        own.append(root / f"shard-{r}.bin")
        own[-1].write_bytes(os.urandom(300_000))
    script = root / "train.py"
    script.write_text(SCRIPT)
    logdir = root / "logs"
    procs = [subprocess.Popen([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir), str(script),
                               str(shared), *map(str, own)],
                              env={**os.environ, "SLURM_PROCID": str(r), "SLURM_NTASKS": str(ranks),
                                   "SLURM_JOB_ID": "5150", "SLURM_STEP_ID": "0"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(ranks)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    (session_dir,) = {p.parent for p in logdir.glob("plugins/tfdarshan/*/*.rank*.darshan")}
    for job in session_dir.glob("*.job.darshan"):
        job.unlink()
    return session_dir


def scale(session_dir: pathlib.Path, real: int, ranks: int) -> None:
    """Add ranks real..ranks-1: rank r repeats real rank r % real with its bytes
    read and read time multiplied by (1 + r // real), on node scaled_host(r)."""
    for r in range(real, ranks):
        src = next(session_dir.glob(f"*.rank{r % real}.darshan"))
        snap = tfdarshan.read_darshan_log(src)
        k = 1 + r // real
        posix, stdio = snap.posix, snap.stdio
        for frame, module in ((posix, "POSIX"), (stdio, "STDIO")):
            for c in (f"{module}_BYTES_READ", f"{module}_F_READ_TIME"):
                frame[c] = frame[c] * k
        host = scaled_host(r)
        scaled = dataclasses.replace(snap, _posix=posix, _stdio=stdio, meta={**snap.meta, "hostname": host})
        write_darshan_log(scaled, session_dir / f"{host}.rank{r}.darshan", metadata={"rank": str(r)})
        steps = src.with_name(src.name.replace(".darshan", ".steps.parquet"))
        shutil.copyfile(steps, session_dir / f"{host}.rank{r}.steps.parquet")


def rank_session(root: pathlib.Path, real: int = 4, ranks: int = 64) -> pathlib.Path:
    """A session directory of `ranks` rank logs, `real` of them from real processes."""
    session_dir = real_ranks(root, real)
    scale(session_dir, real, ranks)
    return session_dir


def rank_of(log: pathlib.Path) -> int:
    return int(log.name.split(".rank")[1].split(".")[0])
