"""The advisor's checkpoint findings on real training runs: they fire when
a model checkpoints synchronously to the slow tier (case_studies/slowfs.c,
with a slow write pipe and fsync), and not when it does not checkpoint."""
import json
import subprocess
import sys

import pytest

import slow_tier

pytestmark = [pytest.mark.cost(25), pytest.mark.timeout(600)]

CHECKPOINT_TITLES = ("Checkpoint writes take", "Synchronous fsync on a slow tier",
                     "Write checkpoints to a fast tier and drain them asynchronously")

SCRIPT = r"""
import json, os, sys, tempfile
from case_studies import checkpointing as K
from case_studies.slowfs import mounted
root, mnt, fast = sys.argv[1:4]
cfg = K.CheckpointConfig(steps=9, every=3, width=1024, write_bandwidth="10M", fsync_latency=0.05)
out = {}
with mounted(root, mnt, meta_latency=0.002, read_latency=0.0005, bandwidth="100M", write_latency=0.0005,
             write_bandwidth=cfg.write_bandwidth, fsync_latency=cfg.fsync_latency):
    for mode in ("slow, synchronous", "none"):
        d = os.path.join(mnt, mode[:4]); os.makedirs(d)
        f = os.path.join(fast, mode[:4]); os.makedirs(f)
        r = K.train(cfg, mode, d, f)
        out[mode] = {k: r[k] for k in ("findings", "bytes", "fsyncs", "pattern", "checkpoint_steps")}
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    slow_tier.skip_unless_available()
    d = tmp_path_factory.mktemp("ckpt")
    for sub in ("root", "mnt"):
        (d / sub).mkdir()
    import tempfile
    with tempfile.TemporaryDirectory(dir="/dev/shm") as fast:
        r = subprocess.run([sys.executable, "-c", SCRIPT, str(d / "root"), str(d / "mnt"), fast],
                           capture_output=True, text=True, timeout=550)
    assert r.returncode == 0, r.stderr[-3000:]
    line = next(x for x in r.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def test_synchronous_checkpoints_to_the_slow_tier_get_all_three_findings(runs):
    sync = runs["slow, synchronous"]
    # three checkpoints of about 2.1 M weights (8.4 MB), written by TensorFlow
    # through STDIO, and made durable by the study's fsyncs (POSIX)
    assert sync["checkpoint_steps"] == 3
    assert sync["bytes"] > 3 * 8e6 and sync["pattern"]["STDIO"]["writes"] > 0 and sync["fsyncs"] > 0
    for title in CHECKPOINT_TITLES:
        assert any(f.startswith(title) for f in sync["findings"]), (title, sync["findings"])


def test_no_checkpoint_findings_without_checkpoints(runs):
    none = runs["none"]
    assert none["bytes"] == 0
    assert not [f for f in none["findings"] if f.startswith(CHECKPOINT_TITLES)], none["findings"]
