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
import pandas as pd

import tfdarshan
from tfdarshan.analysis.analyze import rank_logs
from tfdarshan.capture import mounts as M
from tfdarshan.logs.darshan_log import write_darshan_log
from tfdarshan.steps.series import read_parquet, write_parquet

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


def copy_session(session_dir: pathlib.Path, root) -> pathlib.Path:
    """A copy of a session made by real_session (its whole log directory,
    under root/logs), for a test to change without touching the original."""
    session_dir = pathlib.Path(session_dir)
    logdir = pathlib.Path(root) / "logs"
    shutil.copytree(session_dir.parents[2], logdir)
    return logdir / session_dir.relative_to(session_dir.parents[2])


def made_once(name: str, tmp_path_factory, make):
    """make(directory) run once for the whole test run, whichever xdist
    worker asks first (the others wait on a lock and reuse it); returns what
    make returned, a path or anything else JSON holds. The pattern
    pytest-xdist documents for session fixtures shared across workers."""
    import json

    from filelock import FileLock
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent          # the run's directory, above each worker's own
    where, done = shared / name, shared / f"{name}.json"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            if where.exists():           # a maker that failed part way: start again
                shutil.rmtree(where)
            where.mkdir()
            made = make(where)
            done.write_text(json.dumps(str(made) if isinstance(made, pathlib.Path) else made))
        return json.loads(done.read_text())


@dataclasses.dataclass(frozen=True)
class Cost:
    """What a tier charges in the retimed model: seconds per open, per
    read or write request, and bytes per second."""
    open: float
    request: float
    bandwidth: float


def _priced(counts: pd.DataFrame, points, cost, prefix: str = "") -> dict:
    """Read, write and metadata seconds of each row of `counts` (columns
    reads, writes, opens, bytes_read, bytes_written under `prefix`) on the
    mount named in `points`; a mount missing from `cost` costs nothing."""
    def each(field):
        return np.array([getattr(cost[p], field) if p in cost else 0.0 for p in points])
    per_open, per_request, bw = each("open"), each("request"), np.maximum(each("bandwidth"), 1e-300)
    io = {}
    for kind, moved in (("READ", "BYTES_READ"), ("WRITE", "BYTES_WRITTEN")):
        moved = counts[prefix + moved].to_numpy(np.float64)
        io[kind] = (counts[f"{prefix}{kind}S"].to_numpy(np.float64) * per_request
                    + np.where(moved > 0, moved / bw, 0.0))
    io["META"] = counts[f"{prefix}OPENS"].to_numpy(np.float64) * per_open
    return io


def retime(session_dir: pathlib.Path, cost: dict, compute: float) -> None:
    """Replace every time in the session's rank logs and step series by one
    computed from their counts: cost[mount point] is a Cost, and each step
    does `compute` seconds of work beside its I/O. The counts stay the real
    ranks'; the times no longer depend on the machine's load, so a test of
    logic built on times (stragglers, hot spots, storms) holds under any
    interleaving and latency."""
    for log in rank_logs(session_dir):
        snap = tfdarshan.read_darshan_log(log)
        mounts = [M.Mount(p, t) for p, t in snap.meta.get("mounts") or []]
        frames = {}
        for module in ("POSIX", "STDIO"):
            f = snap.frame(module)
            io = _priced(f, M.points_of(f["path"], mounts), cost, f"{module}_")
            for kind, t in io.items():
                f[f"{module}_F_{kind}_TIME"] = t
            frames[module] = f
        per_file = log.with_name(log.name.replace(".darshan", ".step_files.parquet"))
        per_step = log.with_name(log.name.replace(".darshan", ".steps.parquet"))
        files, steps = read_parquet(per_file), read_parquet(per_step)
        counts = files.rename(columns={c: c.upper() for c in ("reads", "writes", "opens", "bytes_read",
                                                               "bytes_written")})
        io = _priced(counts, files["mount"], cost)
        files["read_time"], files["write_time"], files["meta_time"] = io["READ"], io["WRITE"], io["META"]
        sums = files.groupby("step")[["read_time", "write_time", "meta_time"]].sum()
        steps = steps.sort_values("step").reset_index(drop=True)
        for c in sums:
            steps[c] = steps["step"].map(sums[c]).fillna(0.0).to_numpy()
        # steps follow each other from time 0, each its compute plus its I/O
        length = compute * (steps["step"] >= 0) + steps[["read_time", "write_time", "meta_time"]].sum(axis=1)
        steps["end"] = length.cumsum()
        steps["start"] = steps["end"] - length
        # the measured wall time in calls belongs to the real run, not to these times
        steps = steps.drop(columns=["io_wall"], errors="ignore")
        write_parquet(files, per_file)
        write_parquet(steps, per_step)
        meta = {**snap.meta, "start": 0.0, "end": float(steps["end"].max() if len(steps) else 0.0)}
        timed = dataclasses.replace(snap, _posix=frames["POSIX"], _stdio=frames["STDIO"], meta=meta)
        tmp = log.with_name(".retimed." + log.name)
        write_darshan_log(timed, tmp, metadata=snap.meta.get("job_metadata"),
                          nprocs=int(snap.meta.get("nprocs", 1)), jobid=snap.meta.get("jobid"))
        os.replace(tmp, log)


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


def scaled_copy(session_dir: pathlib.Path, root, real: int, ranks: int, **scaling) -> pathlib.Path:
    """A copy of a session of `real` real ranks (copy_session), scaled to
    `ranks` ranks (scale's copy_of, factor and host_of as keywords)."""
    copied = copy_session(session_dir, root)
    scale(copied, real, ranks, **scaling)
    assert len(rank_logs(copied)) == ranks
    return copied


def scaled_session(root, script: str, argv, real: int, ranks: int, *, copy_of=None, factor=None, hosts=None,
                   host_of=None, job="5150", cost=None, compute=0.0) -> pathlib.Path:
    """The session directory of `ranks` rank logs, `real` of them from real
    processes (retimed from their counts when `cost` is given)."""
    session_dir = real_session(root, script, argv, real, hosts=hosts, job=job)
    if cost is not None:
        retime(session_dir, cost, compute)
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
        # (waits from these times alone: the real run's wall time in calls no longer fits them)
        write_parquet(s.drop(columns=["io_wall"], errors="ignore"), path)
