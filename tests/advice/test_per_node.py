"""Per-node staging plans: `recommend --per-node` gives each host of a
multi-rank session a plan made only of files its ranks read, within the
capacity, compares it with one replicated set, and writes a manifest with a
part per node; `stage --node` copies only that node's part (ext4 ->
/dev/shm). Real ranks run under host names of their own (UTS namespaces).

Whether staging a file saves time is decided from times: the ranks' are
retimed from their counts (a fixed cost of the disk), and /dev/shm is
declared with a fixed cost, so no plan depends on the machine's load."""
import dataclasses
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import pytest

import tfdarshan
from rank_session import Cost, can_name_hosts, scaled_session
from tfdarshan.advice import tiers as T
from tfdarshan.analysis.analyze import rank_logs
from tfdarshan.capture import mounts as M

HOSTS = ["node-a", "node-a", "node-b", "node-b"]
CAPACITY = 1_500_000
DISK = Cost(open=20e-6, request=50e-6, bandwidth=500e6)      # the ranks' reads, as uncached ones
SHM = T.Tier("", fstype="tmpfs", open_latency=2e-6, stat_latency=1e-6, read_latency=5e-6, bandwidth=10e9)
SCRIPT = """
import json, os, sys, tfdarshan
files = json.load(open(sys.argv[1]))[int(os.environ["SLURM_PROCID"])]
for step in range(2):
    with tfdarshan.step(step):
        for path in files:
            fd = os.open(path, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)    # from the disk, as from shared storage
            while os.read(fd, 1 << 16):
                pass
            os.close(fd)
"""

pytestmark = [pytest.mark.cost(35), pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="needs /dev/shm (tmpfs)"),
              pytest.mark.skipif(not can_name_hosts(), reason="needs unshare --uts (root) to name hosts")]


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """Each rank reads a shared 1 MB file and three shards of its own; ranks
    4-7 repeat ranks 0-3 on the same hosts."""
    root = tmp_path_factory.mktemp("per_node")
    data = root / "data"
    data.mkdir()
    shared = data / "shared.bin"
    shared.write_bytes(os.urandom(1_000_000))
    plans = []
    for r in range(len(HOSTS)):
        own = []
        for k in range(3):
            own.append(data / f"shard-{r}-{k}.bin")
            own[-1].write_bytes(os.urandom(150_000 + 50_000 * k))
        plans.append([str(shared), *map(str, own)])
    (root / "plans.json").write_text(json.dumps(plans))
    cost = {M.mount_of(str(root), M.current()).point: DISK}
    return scaled_session(root, SCRIPT, [root / "plans.json"], len(HOSTS), 8, factor=lambda r: 1, hosts=HOSTS,
                          cost=cost, compute=0.02)


@pytest.fixture
def fast():
    d = tempfile.mkdtemp(prefix="tfd-per-node-", dir="/dev/shm")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def env(tmp_path, fast):
    store = tmp_path / "tiers.json"          # the fast tier declared, never probed under the test's load
    store.write_text(json.dumps([dataclasses.replace(SHM, path=fast).to_dict()]))
    return {**os.environ, "TFDARSHAN_TIERS": str(store), "TFDARSHAN_STAGING_MAP": str(tmp_path / "map.json")}


def read_by_host(session_dir):
    """Per host, the files its ranks read, straight from the logs."""
    out = {}
    for log in rank_logs(session_dir):
        snap = tfdarshan.read_darshan_log(log)
        p = snap.posix
        out.setdefault(snap.meta["hostname"], set()).update(p.loc[p["POSIX_BYTES_READ"] > 0, "path"])
    return out


def tfd(*args, env, timeout=600):
    return subprocess.run([sys.executable, "-m", "tfdarshan", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_each_node_plans_from_its_own_ranks_and_stages_its_part(session, env, fast, tmp_path):
    logdir = session.parents[2]
    manifest = tmp_path / "stage.json"
    r = tfd("recommend", logdir, "--per-node", "--fast-tier", fast, "--capacity", f"{CAPACITY}B", "--format",
            "json", "--manifest", manifest, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    plans = json.loads(r.stdout)
    read = read_by_host(session)
    assert set(plans["nodes"]) == set(read) == {"node-a", "node-b"}
    sizes = {p: os.path.getsize(p) for files in read.values() for p in files}
    for host, node in plans["nodes"].items():
        assert node["ranks"] == 4 and node["files"]
        assert set(node["files"]) <= read[host], host           # only what its own ranks read
        assert sum(sizes[p] for p in node["files"]) == node["bytes"] <= CAPACITY
    # the replicated set fits one node and can only save less than each node's own choice
    assert sum(sizes[p] for p in plans["replicated_files"]) <= CAPACITY
    assert plans["sharded_saving"] >= plans["replicated_saving"] - 1e-12
    assert plans["copied"]["replicated"] == 2 * sum(sizes[p] for p in plans["replicated_files"])
    # the manifest: each node's part is its plan
    m = json.loads(manifest.read_text())
    assert {h: set(v) for h, v in m["nodes"].items()} == {h: set(n["files"]) for h, n in plans["nodes"].items()}
    # node-a stages its part, and nothing of node-b's alone
    r = tfd("stage", manifest, "--node", "node-a", "--quiet", env=env)
    assert r.returncode == 0, r.stderr
    root = pathlib.Path(m["root"])
    copied = {"/" + str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    assert copied == set(plans["nodes"]["node-a"]["files"])
    for p in copied:
        assert (root / p.lstrip("/")).read_bytes() == pathlib.Path(p).read_bytes()
    assert not copied & (set(plans["nodes"]["node-b"]["files"]) - set(plans["nodes"]["node-a"]["files"]))


def test_stage_needs_a_node_of_the_manifest(session, env, fast, tmp_path):
    manifest = tmp_path / "stage.json"
    r = tfd("recommend", session.parents[2], "--per-node", "--fast-tier", fast, "--capacity", "1MB", "--manifest",
            manifest, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Sharded plans" in r.stdout and "Replicated plan" in r.stdout and "node-b (4 ranks)" in r.stdout
    for args in (["--node", "node-z"], []):          # [] : this machine's own name, not in the manifest
        bad = tfd("stage", manifest, *args, env=env)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
        assert "no part for node" in bad.stderr
    plain = tmp_path / "plain.json"
    r = tfd("recommend", session.parents[2], "--fast-tier", fast, "--capacity", "1MB", "--manifest", plain,
            "--no-store", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    bad = tfd("stage", plain, "--node", "node-a", env=env)
    assert bad.returncode == 2 and "no per-node part" in bad.stderr, bad.stderr
    assert not list(pathlib.Path(fast).rglob("*.bin"))


def test_node_savings_leave_out_files_gone_since_the_run(session, env, fast, tmp_path):
    """A file renamed away since the run cannot be staged: the manifest names
    it as vanished, and no node's predicted saving counts it. Every file of
    node-a's plan is moved away, so node-a's saving is nothing at all."""
    logdir = session.parents[2]
    plan = tfd("recommend", logdir, "--per-node", "--fast-tier", fast, "--capacity", f"{CAPACITY}B", "--format",
               "json", env=env)
    assert plan.returncode == 0, plan.stderr[-2000:]
    nodes = json.loads(plan.stdout)["nodes"]
    gone = sorted(nodes["node-a"]["files"])
    assert gone and nodes["node-a"]["saving"] > 0
    away = tmp_path / "away"
    away.mkdir()
    try:
        for p in gone:
            shutil.move(p, away / pathlib.Path(p).name)
        manifest = tmp_path / "stage.json"
        r = tfd("recommend", logdir, "--per-node", "--fast-tier", fast, "--capacity", f"{CAPACITY}B", "--manifest",
                manifest, "--format", "json", env=env)
        assert r.returncode == 0, r.stderr[-2000:]
    finally:
        for p in gone:
            shutil.move(away / pathlib.Path(p).name, p)
    m = json.loads(manifest.read_text())
    assert sorted(m["vanished"]) == gone
    savings = m["advice"]["node_savings"]
    assert savings["node-a"] == 0
    # node-b keeps what its plan saves, less what the files gone (some may be its too) saved it
    assert 0 <= savings["node-b"] <= nodes["node-b"]["saving"] + 1e-12
    if not set(gone) & set(nodes["node-b"]["files"]):
        assert savings["node-b"] == pytest.approx(nodes["node-b"]["saving"])
    assert m["advice"]["predicted_saving"] == pytest.approx(sum(savings.values()))
