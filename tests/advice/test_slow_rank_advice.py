"""Issue 29's slow-rank scenario, as a user runs it (case_studies/slow_rank.py):
four ranks under `mpirun`, each under `tfdarshan run`, each training on its
own files through a tf.data map; rank 3's files on the slow FUSE tier.
`recommend` with room for exactly rank 3's bytes must stage all of rank
3's files, with the fast tier on /dev/shm and on a node-local disk
directory (once it staged 42 of 48 beside fast ranks' files, and a local
disk got "Nothing worth staging"), and its job-time prediction must lie
within rank 3's measured input wait, and so its step time (once it
claimed 3.05 s of a 2.29 s training). What the plan achieves on a re-run is
measured in benchmarks/bench_advice.py: timing does not belong in a test."""
import json
import os
import pathlib

import numpy as np
import pandas as pd
import pytest

import slow_tier
from case_studies import slow_rank as SR

pytestmark = [pytest.mark.cost(40), pytest.mark.timeout(900)]
FILES = 16          # per rank: two steps an epoch
EPOCHS = 2


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    slow_tier.skip_unless_available(SR.unavailable)
    root = tmp_path_factory.mktemp("slowrank")
    dirs = SR.make_data(root / "data", FILES)
    env = {"TFDARSHAN_TIERS": str(root / "tiers.json"), "TFDARSHAN_STAGING_MAP": str(root / "staged.json")}
    with SR.slow_tier(dirs[SR.SLOW_RANK], root / "slow") as mnt:
        where = [str(d) for d in dirs[:SR.SLOW_RANK]] + [str(mnt)]
        session = SR.run_job(root / "train.py", root / "logs", where, epochs=EPOCHS, staging_map=root / "staged.json")
        files = [sorted(str(p) for p in d.iterdir()) for d in dirs[:SR.SLOW_RANK]]
        files.append(sorted(os.path.join(mnt, f) for f in os.listdir(dirs[SR.SLOW_RANK])))
        yield {"root": root, "session": session, "slow": pathlib.Path(mnt), "env": env,
               "files": files, "slow_files": files[SR.SLOW_RANK]}


def rank_figures(session: pathlib.Path, rank: int):
    """A rank's training steps, from its series with pandas: (step time, input wait) in seconds; a step's
    wait is the wall time a read or metadata call was in flight, never more than the step."""
    [series] = session.glob(f"*.rank{rank}.steps.parquet")
    s = pd.read_parquet(series)
    s = s[(s["step"] >= 0) & ~s["cut_by_window_end"]]
    length = (s["end"] - s["start"]).to_numpy()
    wait = np.minimum(np.minimum(s["io_wall"], s["read_time"] + s["meta_time"]).to_numpy(), length)
    return float(length.sum()), float(wait.sum())


def recommend(job, fast: pathlib.Path):
    capacity = sum(os.path.getsize(p) for p in job["slow_files"])      # exactly rank 3's bytes
    r = SR.tfdarshan("recommend", job["session"], "--fast-tier", fast, "--capacity", f"{capacity}B", "--format",
                     "json", "--no-store", env=job["env"])
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout)


def check(job, advice):
    """Rank 3's files are staged: the straggler on input, whichever rank the
    machine's load made the slowest. Only if the load made a fast rank wait
    longer still (its reads preempted for over 0.2 s in all, against rank
    3's floor of slowfs' sleeps) may its files be staged instead."""
    staged = {f["path"] for f in advice["files"]}
    figures = [rank_figures(job["session"], r) for r in range(SR.RANKS)]
    longest = max(range(SR.RANKS), key=lambda r: figures[r][1])
    chosen = SR.SLOW_RANK if set(job["slow_files"]) <= staged or longest == SR.SLOW_RANK else longest
    assert set(job["files"][chosen]) <= staged, sorted(set(job["files"][chosen]) - staged)
    assert len(staged) == len(job["slow_files"])          # the room holds rank 3's bytes and no more
    # what staging one rank's files takes off the job: at most that rank's wait, and so its step time
    time, wait = figures[chosen]
    predicted = advice["predicted_job_saving"]
    assert predicted is not None and 0 <= predicted <= wait + 1e-9 <= time + 1e-9, (predicted, wait, time)
    assert advice["plans"]["ranks"] == SR.RANKS and advice["job"]["model"]["slowest_wait"] <= max(t for t, _ in figures)


def test_all_of_the_slow_ranks_files_are_staged_on_dev_shm(job, tmp_path):
    fast = pathlib.Path("/dev/shm") / f"tfd-test-{os.getpid()}-{tmp_path.name}"
    fast.mkdir()
    try:
        check(job, recommend(job, fast))
    finally:
        fast.rmdir()


@pytest.fixture(scope="module")
def local_disk(job):
    """A fast tier in a directory beside the job, and recommend's advice for
    it (asked once: two tests read it)."""
    fast = job["root"] / "local-disk"
    fast.mkdir(exist_ok=True)
    return fast, recommend(job, fast)


def test_all_of_the_slow_ranks_files_are_staged_on_a_local_disk(job, local_disk):
    fast, advice = local_disk
    from tfdarshan.capture import mounts as M
    mount = M.mount_of(str(fast.resolve()), M.current())
    if mount is None or mount.fstype in ("tmpfs", "fuse") or mount.fstype.startswith("fuse."):
        pytest.skip(f"{fast} is not on a local disk here ({mount.fstype if mount else 'no mount'})")
    check(job, advice)


def test_recommend_says_its_prediction_assumes_a_core_per_rank(job, local_disk):
    """Four ranks on a node of fewer cores: once the slow rank stops waiting
    it competes with the others for the cores, which the prediction does not
    model; recommend names the node and says so. Each rank's log records the
    CPUs it could run on (its affinity) and the node's count."""
    from tfdarshan import read_darshan_log
    from tfdarshan.capture import cores
    logs = sorted(job["session"].glob("*.rank*.darshan"))
    assert len(logs) == SR.RANKS
    for log in logs:
        meta = read_darshan_log(log).meta["job_metadata"]
        assert int(meta["node_cpus"]) == os.cpu_count()
        assert cores.parse(meta["cpus"]) <= set(range(os.cpu_count()))
    if SR.RANKS <= os.cpu_count():
        pytest.skip(f"this node has {os.cpu_count()} cores: {SR.RANKS} ranks have one each")
    _, advice = local_disk
    [crowded] = advice["job"]["model"]["shared_cores"]
    assert crowded["ranks"] == SR.RANKS and crowded["cores"] <= os.cpu_count()
    assert "more ranks than cores" in advice["plans"]["report"]
    assert f"{SR.RANKS} ranks on {crowded['cores']} core" in advice["plans"]["report"]
