"""The MPI runtime's own files are runtime I/O, not data. Under Open MPI's
mpirun, two ranks of a script under `tfdarshan run` call MPI_Init and an
Allreduce (mpi4py) and read their data inside steps; Open MPI maps its
shared-memory transport (/dev/shm/vader_segment.*) and PMIx its dstor
segments. `recommend` leaves them out as the runtime's, the memory-map
finding does not call them input, and the tab's file table says what they
are. Which runtime files exist is read from the logs' own paths; what is
data is the test's."""
import json
import os
import subprocess
import sys
import urllib.parse

import pytest

from tb_helpers import fetch, tensorboard
from mpi_env import MPI_ENV, needs_mpi
from tfdarshan.logs.logdir import find_sessions, load_snapshot, load_steps

SCRIPT = """
import sys
import numpy as np
import tfdarshan
from mpi4py import MPI
comm = MPI.COMM_WORLD
for step in range(3):
    with tfdarshan.step(step):
        with open(sys.argv[1 + comm.rank], "rb") as f:
            f.read()
        out = np.empty(4096)
        comm.Allreduce(np.full(4096, float(comm.rank)), out)
"""


pytestmark = [pytest.mark.cost(30), needs_mpi]


def is_runtime(path: str) -> bool:
    """The test's own list of the runtime's files: Open MPI's shared-memory
    segments and PMIx's."""
    return "vader_segment" in path or "pmix" in path


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("runtime")
    data = [root / f"shard{r}.bin" for r in range(2)]
    for r, p in enumerate(data):
        p.write_bytes(os.urandom(50_000 * (r + 1)))
    (root / "train.py").write_text(SCRIPT)
    logdir = root / "logs"
    p = subprocess.run(["mpirun", "-np", "2", sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir),
                        str(root / "train.py"), *map(str, data)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, **MPI_ENV})
    assert p.returncode == 0, p.stderr[-3000:]
    (s,) = find_sessions(logdir)
    paths = set(load_snapshot(s).posix["path"])
    runtime = {x for x in paths if is_runtime(x)}
    if not any("vader_segment" in x for x in runtime):
        pytest.skip("this Open MPI mapped no vader segment (another shared-memory transport)")
    return {"root": root, "logdir": logdir, "session": s, "data": [str(x) for x in data], "runtime": runtime}


@pytest.fixture(scope="module")
def server(job):
    """One TensorBoard on the job's log directory for the tab's tests (each
    start imports TensorFlow)."""
    with tensorboard(job["logdir"]) as url:
        yield url


def test_recommend_leaves_the_runtimes_segments_out(job):
    (job["root"] / "fast").mkdir(exist_ok=True)
    p = subprocess.run([sys.executable, "-m", "tfdarshan", "recommend", str(job["logdir"]), "--fast-tier",
                        str(job["root"] / "fast"), "--capacity", "1MiB", "--objective", "total", "--format", "json",
                        "--no-store"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "TFDARSHAN_TIERS": str(job["root"] / "tiers.json")})
    assert p.returncode == 0, p.stderr[-3000:]
    advice = json.loads(p.stdout)
    assert {f["path"] for f in advice["files"]} <= set(job["data"])
    (group,) = [g for g in advice["left_out"] if g["reason"].startswith("the MPI runtime's own")]
    assert set(group["examples"]) <= job["runtime"]
    mapped = [f for f in advice["findings"] if f["title"] == "Input read through memory maps"]
    assert not any(x in f["detail"] for f in mapped for x in job["runtime"]), mapped


def test_the_tab_names_them_and_lists_them_after_the_data(job, server):
    s = job["session"]
    q = urllib.parse.urlencode({"run": s.run, "session": s.name, "limit": 1000})
    status, _, body = fetch(server, "/data/plugin/tfdarshan/files?" + q)
    assert status == 200, body[:300]
    page = json.loads(body)
    rows = [dict(zip(page["columns"], r)) for r in page["rows"]]
    kinds = {r["path"]: r["kind"] for r in rows}
    assert all(kinds[x] == "MPI runtime" for x in job["runtime"] if x in kinds)
    assert all(kinds[x] == "" for x in job["data"])
    first_runtime = min(i for i, r in enumerate(rows) if r["path"] in job["runtime"])
    assert all(rows.index(r) < first_runtime for r in rows if r["path"] in job["data"])


def test_analyze_says_them_apart_from_data_read_through_mmap(job):
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "analyze", str(job["logdir"])], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.splitlines()
    mapped = [x for x in job["runtime"] if "vader_segment" in x]
    (said,) = [x for x in lines if x.startswith("the MPI runtime's own shared memory")]
    assert "mapped, not data" in said
    listed = lines[lines.index(next(x for x in lines if x.startswith("beyond Darshan"))):] \
        if any(x.startswith("beyond Darshan") for x in lines) else []
    assert not any(m in x for x in listed for m in mapped), listed
    # both ranks map the runtime's segments, and each reads its own shard: no data file is shared
    assert "shared files: none (no data file was read or written by more than one of the 2 ranks)" in lines


def test_the_tabs_mmap_card_counts_data_only_and_says_the_runtimes_apart(job, server):
    """The card 'read through mmap' adds up the data's mapped bytes only; the
    runtime's mapped segments are a card of their own. Expected sums from
    the logs' own rows, split by the test's own list of runtime paths."""
    s = job["session"]
    extra = load_snapshot(s).extra
    runtime = extra["path"].map(is_runtime)
    assert extra.loc[runtime, "MMAP_BYTES"].sum() > 0          # Open MPI mapped its segments
    q = urllib.parse.urlencode({"run": s.run, "session": s.name})
    status, _, body = fetch(server, "/data/plugin/tfdarshan/summary?" + q)
    assert status == 200, body[:300]
    card = json.loads(body)
    # one rank's view has the per-step mmap series (the ranks' chart sums no mapped bytes)
    host = sorted(s.hosts)[0]
    status, _, body = fetch(server, "/data/plugin/tfdarshan/steps?" + urllib.parse.urlencode(
        {"run": s.run, "session": s.name, "host": host}))
    assert card["mmap_bytes"] == int(extra.loc[~runtime, "MMAP_BYTES"].sum())
    assert card["runtime_mmap_bytes"] == int(extra.loc[runtime, "MMAP_BYTES"].sum())
    # the per-step chart's mmap series, the same way: per training step, the data's mapped bytes only
    assert status == 200, body[:300]
    chart = json.loads(body)
    _, files = load_steps(s, host)
    data = files[(files["step"] >= 0) & ~files["path"].map(is_runtime)]
    expected = data.groupby("step")["mmap_bytes"].sum()
    assert chart["mmap_bytes"] == [int(expected.get(step, 0)) for step in chart["steps"]]
