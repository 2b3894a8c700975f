"""A multi-rank session for tests: a few real ranks of a script under
`tfdarshan run` (Slurm's environment tells each its rank), scaled to more
ranks with the project's own log writer. Rank r >= real copies the log and
step series of real rank copy_of(r), its bytes and read time multiplied by
factor(r). hosts[r], when given, runs real rank r in a UTS namespace with that
host name (root only), as if on a node of its own."""
import dataclasses
import os
import shutil
import subprocess
import sys

import tfdarshan
from tfdarshan.analysis.analyze import rank_logs
from tfdarshan.logs.darshan_log import write_darshan_log


def scaled_session(root, script: str, argv, real: int, ranks: int, *, copy_of=None, factor=None, hosts=None,
                   job="5150"):
    """The session directory of `ranks` rank logs (the job log removed: the scaled ranks are not in it)."""
    copy_of = copy_of or (lambda r: r % real)
    factor = factor or (lambda r: 1 + r // real)
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
    for r in range(real, ranks):
        src = next(session_dir.glob(f"*.rank{copy_of(r)}.darshan"))
        host = src.name.split(".rank")[0]
        snap = tfdarshan.read_darshan_log(src)
        k = factor(r)
        posix, stdio = snap.posix, snap.stdio
        for frame, module in ((posix, "POSIX"), (stdio, "STDIO")):
            for c in (f"{module}_BYTES_READ", f"{module}_F_READ_TIME"):
                frame[c] = frame[c] * k
        scaled = dataclasses.replace(snap, _posix=posix, _stdio=stdio)
        write_darshan_log(scaled, session_dir / f"{host}.rank{r}.darshan", metadata={"rank": str(r)})
        for series in ("steps", "step_files"):
            s = src.with_name(src.name.replace(".darshan", f".{series}.parquet"))
            if s.exists():
                shutil.copyfile(s, session_dir / f"{host}.rank{r}.{series}.parquet")
    assert len(rank_logs(session_dir)) == ranks
    return session_dir


def can_name_hosts() -> bool:
    """Whether this process may run ranks under host names of their own."""
    r = subprocess.run(["unshare", "--uts", "hostname", "tfd-probe"], capture_output=True)
    return r.returncode == 0
