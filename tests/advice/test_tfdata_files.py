"""tf.data's own files in their place. A real training script under
`tfdarshan run` fits three tf.data pipelines: one with cache(filename), one
with snapshot(path), and one whose cache is cut short by take() (tf.data
throws such a cache away, so its input is read again every epoch). The
cache and snapshot files are never planned as training input and are shown
as tf.data's own; the re-read finding knows the pipeline caches; a data
file deleted after the run is named, not a failure, when the manifest is
written. Expected file lists come from the directories on disk."""
import importlib.util
import json
import os
import subprocess
import sys
import urllib.parse

import pytest

from tb_helpers import fetch, tensorboard
from tfdarshan.logs.logdir import find_sessions

KIB = 1024
pytestmark = pytest.mark.cost(35)

SCRIPT = """
import os, sys
import numpy as np
import tensorflow as tf
root = sys.argv[1]


def files(name, n):
    d = os.path.join(root, name)
    os.makedirs(d, exist_ok=True)
    out = []
    for i in range(n):
        out.append(os.path.join(d, f"x_{i:03d}.bin"))
        np.random.default_rng(i).random(8192, dtype=np.float32).tofile(out[-1])     # 32 KiB each
    return out


def load(path):
    x = tf.io.decode_raw(tf.io.read_file(path), tf.float32)
    return x[:32], tf.reduce_mean(x)


def fit(ds):
    m = tf.keras.Sequential([tf.keras.Input((32,)), tf.keras.layers.Dense(1)])
    m.compile("sgd", "mse")
    m.fit(ds.batch(2), epochs=2, verbose=0, shuffle=False)


slices = tf.data.Dataset.from_tensor_slices
fit(slices(files("cached", 2)).map(load).cache(os.path.join(root, "cached", "c")))
fit(slices(files("snapped", 2)).map(load).snapshot(os.path.join(root, "snapped", "snap")))
fit(slices(files("cut", 10)).map(load).cache(os.path.join(root, "cut", "c")).take(8))
"""


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed (make test installs tensorflow-cpu)")
    root = tmp_path_factory.mktemp("tfdata-files")
    (root / "pipelines.py").write_text(SCRIPT)
    data, logdir = root / "data", root / "logs"
    p = subprocess.run([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir), str(root / "pipelines.py"),
                        str(data)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    own = {}
    for name in ("cached", "snapped"):
        for d, _, names in os.walk(data / name):
            own.update({os.path.join(d, n): name for n in names if not n.startswith("x_")})
    inputs = sorted(str(x) for x in data.glob("*/x_*.bin"))
    (s,) = find_sessions(logdir)
    return {"root": root, "data": data, "logdir": logdir, "session": s, "own": own, "inputs": inputs}


def recommend(session, *extra):
    r = session["root"]
    (r / "fast").mkdir(exist_ok=True)
    toml = r / "fast.toml"
    toml.write_text(f'[[tier]]\npath = "{r / "fast"}"\nbandwidth = 10e9\nread_latency = 1e-6\nopen_latency = 1e-6\n')
    p = subprocess.run([sys.executable, "-m", "tfdarshan", "recommend", str(session["logdir"]), "--fast-tier",
                        str(r / "fast"), "--tiers", str(toml), "--capacity", "64MiB", "--no-store", *extra],
                       capture_output=True, text=True, timeout=300)
    return p


def test_cache_and_snapshot_files_are_tf_datas_own_and_never_staged(session):
    # what the pipelines wrote: cache(filename)'s bundle, snapshot(path)'s metadata and shards
    own = session["own"]
    assert any(p.endswith("c.index") for p in own) and any(".data-00000-of-00001" in p for p in own)
    assert any(p.endswith("snapshot.metadata") for p in own) and any(p.endswith(".snapshot") for p in own)
    p = recommend(session, "--format", "json")
    assert p.returncode == 0, p.stderr[-3000:]
    advice = json.loads(p.stdout)
    planned = {f["path"] for f in advice["files"]}
    assert planned == set(session["inputs"])            # every data file, and nothing of tf.data's own
    (group,) = [g for g in advice["left_out"] if g["reason"].startswith("tf.data's own cache or snapshot")]
    assert set(group["examples"]) <= set(own) | {p.replace("c.index", "c_0.index") for p in own}
    # everything of tf.data's that was read is in that group: the cache bundle, its temporary index, the snapshot
    read_back = [p for p in own if not p.endswith(".lockfile")]
    assert group["files"] >= len(read_back)
    assert not any(x in g["examples"] for g in advice["left_out"] if g is not group for x in own)


def test_the_reread_finding_knows_the_pipeline_caches(session):
    p = recommend(session, "--format", "json")
    advice = json.loads(p.stdout)
    titles = [f["title"] for f in advice["findings"]]
    assert "The same data is read again every epoch, and it fits in memory" not in titles, titles
    (f,) = [f for f in advice["findings"] if f["title"] == "The data is read again every epoch, though the pipeline caches"]
    caches = {str(session["data"] / "cached" / "c"), str(session["data"] / "cut" / "c")}
    assert set(f["evidence"]["caches"]) == caches
    # the input's size in a unit a person reads: 14 files of 32 KiB
    assert f["evidence"]["dataset_bytes"] == 14 * 32 * KIB
    assert "all input is 448.0 KiB" in f["detail"]


def test_a_file_gone_since_the_run_is_named_in_the_manifest_step(session, tmp_path):
    gone = session["inputs"][0]
    kept = os.path.join(session["root"], "kept.bin")
    os.rename(gone, kept)
    try:
        manifest = tmp_path / "m.json"
        p = recommend(session, "--manifest", str(manifest))
    finally:
        os.rename(kept, gone)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "Traceback" not in p.stderr
    assert f"1 recommended file no longer exists (gone since the run), left out of the manifest: {gone}" in p.stderr
    m = json.loads(manifest.read_text())
    assert m["vanished"] == [gone]
    assert {e["source"] for e in m["entries"]} == set(session["inputs"]) - {gone}
    assert all(e["size"] == os.stat(e["source"]).st_size for e in m["entries"])


def test_the_tab_names_them_and_lists_the_input_first(session):
    s = session["session"]
    q = urllib.parse.urlencode({"run": s.run, "session": s.name, "limit": 1000})
    with tensorboard(session["logdir"]) as url:
        status, _, body = fetch(url, "/data/plugin/tfdarshan/files?" + q)
        assert status == 200, body[:300]
        page = json.loads(body)
        # the pages the tab asks for next (it sends the order it was given) keep that order
        paged = []
        for offset in range(0, page["total"], 5):
            more = urllib.parse.urlencode({"run": s.run, "session": s.name, "limit": 5, "offset": offset,
                                           "sort": page["sort"], "order": page["order"]})
            paged += json.loads(fetch(url, "/data/plugin/tfdarshan/files?" + more)[2])["rows"]
    assert paged == page["rows"]
    rows = [dict(zip(page["columns"], r)) for r in page["rows"]]
    kind = {r["path"]: r["kind"] for r in rows}
    for path, made_by in session["own"].items():
        if path in kind:
            assert kind[path] == {"cached": "tf.data cache", "snapped": "tf.data snapshot"}[made_by], path
    assert all(kind[p] == "" for p in session["inputs"])
    assert [k for k in kind if "/.keras/" in k] and all(kind[k] == "configuration" for k in kind if "/.keras/" in k)
    # slowest first, and no file that is not input before one that is
    others = [r["kind"] != "" for r in rows]
    assert others == sorted(others) and not others[0]
