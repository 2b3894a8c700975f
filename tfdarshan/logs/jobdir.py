"""One session directory for each run of a job, shared by all its ranks and
agreed through the file system alone (the log directory every rank writes
to): no MPI call, no message between ranks, nothing a launcher does not give.

The launcher names the job (capture/ranks.py). Open MPI, Slurm and PMIx
name every run afresh; TF_CONFIG and torchrun's default rendezvous give a
re-run the same name as the run before. So the log directory keeps, for each
job name, numbered generations, one per run, beside the sessions' root
(plugins/tfdarshan/<session>/), out of the way of whatever lists sessions:

    plugins/.tfdarshan-jobs/<job>/<g>            the name of generation g's session directory
    plugins/.tfdarshan-jobs/<job>/<g>.ranks/<r>  rank r's place in generation g

Rank r joins the newest generation if that generation is open to it, and
otherwise starts the next one. Both steps create a name that must not exist
yet (link(), and O_EXCL), which local and network file systems do
atomically: exactly one process starts a generation, exactly one takes a
place. The newest generation is open to rank r when

  - no process has taken place r in it yet: a re-run's rank r finds its
    place taken by the earlier run's rank r, and starts the next generation,
    which its other ranks then join;
  - and, for a name that re-runs share (`Rank.per_run` False), it was started
    less than JOIN_WINDOW ago and none of its ranks has finished (left its
    log or its done marker): a run some of whose ranks never started is not
    joined by the next run's.

Under TF_CONFIG or torchrun's default rendezvous, a rank that starts more
than JOIN_WINDOW after its run's first, or after one of its run's ranks
has finished, gets a session of its own."""
from __future__ import annotations

import os
import pathlib
import re
import socket
import time
import uuid
from typing import Callable, Optional

from tfdarshan.capture.ranks import Rank

JOBS = ".tfdarshan-jobs"
JOIN_WINDOW = 600.0         # seconds: the ranks of one run start within this
# a rank of the session has finished: its done marker, or its log (not a
# `--children` child's <host>_<pid>.darshan, which may end before its rank's peers start)
FINISHED = (".tfdarshan-done.rank*", "*.rank*.darshan")


def job_directory(profile_root: pathlib.Path, rank: Rank, new_name: Callable[[], str]) -> pathlib.Path:
    """This run's session directory under profile_root (plugins/tfdarshan),
    named by new_name() (made unique) in whichever of its ranks comes first."""
    jobs = jobs_directory(profile_root) / rank.job
    jobs.mkdir(parents=True, exist_ok=True)
    for _ in range(100):
        g = _newest(jobs)
        if g is not None:
            name = _read(jobs / str(g))     # None: damaged, or gone; not joined
            if name and _open_to(rank, jobs / str(g), profile_root / name) and _take(jobs, g, rank):
                return profile_root / name
        nxt = 0 if g is None else g + 1
        directory = new_session_directory(profile_root, new_name)
        if _publish(jobs / str(nxt), directory.name):
            if _take(jobs, nxt, rank):
                return directory
            continue                # (another run's rank r got there first: the next one)
        directory.rmdir()           # another rank started it first: join theirs
    raise OSError(f"could not agree on a session directory for job {rank.job} in {profile_root}")


def jobs_directory(profile_root: pathlib.Path) -> pathlib.Path:
    """Where the ranks of the jobs whose sessions go under profile_root agree."""
    return profile_root.parent / JOBS


def new_session_directory(profile_root: pathlib.Path, new_name: Callable[[], str]) -> pathlib.Path:
    """A session directory no other run has: new_name() (a start time, to
    the second), else with _1, _2, ... after it."""
    profile_root.mkdir(parents=True, exist_ok=True)
    base = new_name()
    for i in range(10_000):
        d = profile_root / (base if i == 0 else f"{base}_{i}")
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
    raise OSError(f"no free session directory name for {base} in {profile_root}")


def _newest(jobs: pathlib.Path) -> Optional[int]:
    gens = [int(n) for n in os.listdir(jobs) if re.fullmatch(r"\d{1,9}", n)]
    return max(gens) if gens else None


def _read(marker: pathlib.Path) -> Optional[str]:
    """The session name a generation's marker holds; None when there is no
    such marker or it names no directory of ours. An empty marker is being
    written (a file system without link()): waited for, half a second."""
    for _ in range(50):
        try:
            name = marker.read_text(errors="replace").strip()
        except (FileNotFoundError, IsADirectoryError):
            return None
        if name:
            return name if re.fullmatch(r"[A-Za-z0-9._-]+", name) and name not in (".", "..") else None
        time.sleep(0.01)
    return None


def _open_to(rank: Rank, marker: pathlib.Path, session: pathlib.Path) -> bool:
    """Whether this generation may still take this run's ranks (its place
    for this rank is checked when taken)."""
    if rank.per_run:
        return True
    try:
        if time.time() - marker.stat().st_mtime >= JOIN_WINDOW:
            return False
    except FileNotFoundError:
        return False
    return not any(next(session.glob(p), None) for p in FINISHED)


def _take(jobs: pathlib.Path, g: int, rank: Rank) -> bool:
    """Take place rank.rank in generation g; False when it is taken."""
    places = jobs / f"{g}.ranks"
    places.mkdir(exist_ok=True)
    try:
        fd = os.open(places / str(rank.rank), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(f"{socket.gethostname()} {os.getpid()} {time.time():.3f}\n")
    return True


def _publish(marker: pathlib.Path, text: str) -> bool:
    """Create `marker` holding `text`, all at once; False when it exists.
    link() refuses an existing name, and readers never see a half-written
    file; where the file system has no link(), O_EXCL (readers wait out an
    empty file)."""
    tmp = marker.parent / f".{marker.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    tmp.write_text(text)
    try:
        os.link(tmp, marker)
        return True
    except FileExistsError:
        return False
    except OSError:
        pass
    finally:
        tmp.unlink()
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return True
