"""Multi-rank sessions for tests: a few real ranks of a script under
`tfdarshan run` (Slurm's environment tells each its rank), scaled to more
ranks with the project's own log writer. Rank r >= real copies the log and
step series of real rank copy_of(r), its bytes and read time multiplied by
factor(r), under host host_of(r) (default: its source's). hosts[r], when
given, runs real rank r in a UTS namespace with that host name (root only),
as if on a node of its own. Shared by the analysis, findings and tab tests."""
import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np

import tfdarshan
from tfdarshan.analysis.analyze import rank_logs
from tfdarshan.logs.darshan_log import write_darshan_log
from tfdarshan.logs.series import read_parquet, write_parquet

# a small pipeline: every rank reads one shared file and its own shard each step
PIPELINE = """
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


def pipeline_inputs(root: pathlib.Path, real: int) -> list:
    """PIPELINE's arguments: a shared file and one shard per real rank."""
    root.mkdir(parents=True, exist_ok=True)
    shared = root / "shared.bin"
    shared.write_bytes(os.urandom(200_000))
    own = []
    for r in range(real):
        own.append(root / f"shard-{r}.bin")
        own[-1].write_bytes(os.urandom(300_000))
    return [shared, *own]


def scaled_host(rank: int) -> str:
    """A made-up node for a scaled rank: RANKS_PER_NODE ranks a node."""
    return f"node{rank // RANKS_PER_NODE}"


def rank_of(log: pathlib.Path) -> int:
    return int(log.name.split(".rank")[1].split(".")[0])


def real_session(root, script: str, argv, real: int, *, hosts=None, job="5150") -> pathlib.Path:
    """`real` ranks of `script` under `tfdarshan run`; their session directory
    (the job log removed: ranks scaled later are not in it)."""
    root = pathlib.Path(root)
    path = root / "train.py"
    path.write_text(script)
    logdir = root / "logs"
    procs = []
    for r in range(real):
        cmd = [sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir), str(path), *map(str, argv)]
        if hosts:
            cmd = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hosts[r], *cmd]
        procs.append(subprocess.Popen(cmd, env={**os.environ, "SLURM_PROCID": str(r), "SLURM_NTASKS": str(real),
                                                "SLURM_JOB_ID": job, "SLURM_STEP_ID": "0"},
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
    (session_dir,) = {p.parent for p in logdir.glob("plugins/tfdarshan/*/*.rank*.darshan")}
    for log in session_dir.glob("*.job.darshan"):
        log.unlink()
    return session_dir


def scale(session_dir: pathlib.Path, real: int, ranks: int, *, copy_of=None, factor=None, host_of=None) -> None:
    """Add ranks real..ranks-1 to a session of `real` real ranks."""
    copy_of = copy_of or (lambda r: r % real)
    factor = factor or (lambda r: 1 + r // real)
    for r in range(real, ranks):
        src = next(session_dir.glob(f"*.rank{copy_of(r)}.darshan"))
        host = host_of(r) if host_of else src.name.split(".rank")[0]
        snap = tfdarshan.read_darshan_log(src)
        k = factor(r)
        posix, stdio = snap.posix, snap.stdio
        for frame, module in ((posix, "POSIX"), (stdio, "STDIO")):
            for c in (f"{module}_BYTES_READ", f"{module}_F_READ_TIME"):
                frame[c] = frame[c] * k
        scaled = dataclasses.replace(snap, _posix=posix, _stdio=stdio, meta={**snap.meta, "hostname": host})
        write_darshan_log(scaled, session_dir / f"{host}.rank{r}.darshan", metadata={"rank": str(r)})
        for series in ("steps", "step_files"):
            s = src.with_name(src.name.replace(".darshan", f".{series}.parquet"))
            if s.exists():
                shutil.copyfile(s, session_dir / f"{host}.rank{r}.{series}.parquet")


def scaled_session(root, script: str, argv, real: int, ranks: int, *, copy_of=None, factor=None, hosts=None,
                   host_of=None, job="5150") -> pathlib.Path:
    """The session directory of `ranks` rank logs, `real` of them from real processes."""
    session_dir = real_session(root, script, argv, real, hosts=hosts, job=job)
    scale(session_dir, real, ranks, copy_of=copy_of, factor=factor, host_of=host_of)
    assert len(rank_logs(session_dir)) == ranks
    return session_dir


def can_name_hosts() -> bool:
    """Whether this process may run ranks under host names of their own."""
    r = subprocess.run(["unshare", "--uts", "hostname", "tfd-probe"], capture_output=True)
    return r.returncode == 0


def set_waits(session_dir: pathlib.Path, factors: dict, length: float, meta: float) -> None:
    """Give each rank's training steps times built from counts: each step
    `length` s long, one after the other, its read time factors[rank][step]
    times its length (above 1: parallel reads, more I/O time than wall
    time) and its metadata time `meta` times its length."""
    for path in session_dir.glob("*.rank*.steps.parquet"):
        r = int(path.name.split(".rank")[1].split(".")[0])
        s = read_parquet(path)
        real = s["step"] >= 0
        k = s.loc[real, "step"].to_numpy()
        first = float(s.loc[real, "start"].min())
        s.loc[real, "start"] = first + k * length
        s.loc[real, "end"] = first + (k + 1) * length
        factor = np.zeros(len(s))
        factor[real.to_numpy()] = [factors[r][int(i)] for i in k]
        s["read_time"] = (s["end"] - s["start"]) * factor
        s["meta_time"] = np.where(real, (s["end"] - s["start"]) * meta, 0.0)
        write_parquet(s, path)
