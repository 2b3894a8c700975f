"""`analyze` reduced by record id (analysis/file_tree.py) against the tables
as they were built before (per-file rows shuffled by path string:
analyze_oracle.py), table by table, on a generated session and on a real
multi-rank one; the threaded engine against the local cluster; the tree's
shape (groups, buckets) changing nothing; progress lines off a terminal."""
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from analyze_oracle import old_tables
from rank_session import scaled_copy
from tfdarshan.analysis import analyze as A
from tfdarshan.analysis import engine as E
from tfdarshan.analysis import file_tree, tables
from tfdarshan.analysis.tables import KERNEL_SUMS
from tfdarshan.capture import counters as C
from tfdarshan.capture._native import darshan_hash
from tfdarshan.capture.snapshot import Snapshot, empty_dxt, empty_extra, empty_values
from tfdarshan.logs.darshan_log import write_darshan_log

pytestmark = pytest.mark.cost(40)

RANKS = 20                  # readable logs; one more is truncated
SHARED, PARTS, OWN = 12, 9, 5
MOUNTS = [["/", "ext4"], ["/data", "lustre"], ["/scratch", "xfs"]]
KEYS = {"files": ["path"], "ranks": ["rank"], "steps": ["rank", "step"], "mounts": ["mount"],
        "rank_mounts": ["rank", "mount"]}


def readers(part: int) -> range:
    """The ranks reading /data/part-<part>: 1 to 7 of them, odd and even counts."""
    return range(part % 7 + 1)


def row(rng, module, path, tie=False):
    """A record with random bytes, opens and times (`tie`: the same on every rank)."""
    r = {"record_id": darshan_hash(path), "path": path}
    r[f"{module}_OPENS"] = 2 if tie else int(rng.integers(1, 5))
    r[f"{module}_BYTES_READ"] = 4096 if tie else int(rng.integers(0, 10**8))
    r[f"{module}_BYTES_WRITTEN"] = 0 if tie or rng.random() < 0.7 else int(rng.integers(0, 10**6))
    for t in ("READ", "WRITE", "META"):
        r[f"{module}_F_{t}_TIME"] = 0.125 if tie else float(rng.random())
    return r


def frame(module, rows):
    f = C.empty_frame(module)
    return pd.DataFrame([{c: 0 for c in f.columns} | r for r in rows], columns=f.columns).astype(f.dtypes.to_dict())


def write_session(root, rng):
    """RANKS rank logs: SHARED files every rank read (two of them in equal
    amounts), PARTS files read by readers(i), OWN files a rank on /scratch,
    /data/both read through POSIX by ranks 0-2 and through STDIO by ranks 0,
    3 and 4, <STDERR> on every rank. Rank 0's mount table has no /data
    (its /data files are on /, and it is the lowest rank of each), rank 5
    has none at all (the machine's own is taken). A truncated log besides."""
    for r in range(RANKS):
        posix = [row(rng, "POSIX", f"/data/shared-{i}", tie=i < 2) for i in range(SHARED)]
        posix += [row(rng, "POSIX", f"/data/part-{i}") for i in range(PARTS) if r in readers(i)]
        posix += [row(rng, "POSIX", f"/scratch/rank{r}-{i}") for i in range(OWN)]
        stdio = [row(rng, "STDIO", "<STDERR>")]
        if r < 3:
            posix.append(row(rng, "POSIX", "/data/both"))
        if r in (0, 3, 4):
            stdio.append(row(rng, "STDIO", "/data/both"))
        posix = [posix[i] for i in rng.permutation(len(posix))]
        mounts = [m for m in MOUNTS if r != 0 or m[0] != "/data"] if r != 5 else []
        meta = {"origin_unix_time": 1.7e9 + r, "start": 0.0, "end": 30.0 + r, "hostname": f"node{r // 4}",
                "mounts": mounts}
        snap = Snapshot(frame("POSIX", posix), frame("STDIO", stdio), empty_values(), empty_extra(), empty_dxt(), meta)
        write_darshan_log(snap, root / f"node{r // 4}.rank{r}.darshan", metadata={"rank": str(r)}, heatmap=False)
    good = (root / "node0.rank1.darshan").read_bytes()
    (root / f"node9.rank{RANKS}.darshan").write_bytes(good[:3000])
    return root


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    return write_session(tmp_path_factory.mktemp("tree"), np.random.default_rng(21))


def new_tables(session_dir):
    return {n: A.read_table(session_dir, n).sort_values(KEYS[n]).reset_index(drop=True) for n in KEYS}


def assert_same_tables(got, want):
    """Equal table by table: text and integers exactly, floats to 1e-12 (a
    sum over ranks is added in another order than pandas added it)."""
    for name in KEYS:
        g, w = got[name], want[name]
        if name == "files":     # the old graph had no kernel-side columns (compared in test_job_kernel_io)
            assert [c for c in g.columns if c not in w.columns] == list(KERNEL_SUMS)
            g = g[list(w.columns)]
        assert list(g.columns) == list(w.columns), name
        assert len(g) == len(w), name
        for c in g.columns:
            if pd.api.types.is_float_dtype(w[c]):
                assert np.allclose(g[c].to_numpy(np.float64), w[c].to_numpy(np.float64), rtol=1e-12, atol=0,
                                   equal_nan=True), (name, c)
            else:
                assert g[c].astype(object).tolist() == w[c].astype(object).tolist(), (name, c)


def test_generated_session_equals_the_old_tables(generated):
    r = A.analyze(generated)
    assert "local cluster" in r["where"] and r["ranks"] == RANKS
    assert [s["log"] for s in r["skipped"]] == [f"node9.rank{RANKS}.darshan"]
    got, want = new_tables(generated), old_tables(generated)
    assert_same_tables(got, want)
    files = got["files"].set_index("path")
    # what the session holds, counted from its design
    assert len(files) == SHARED + PARTS + RANKS * OWN + 2
    assert [int(files.loc[f"/data/part-{i}", "ranks"]) for i in range(PARTS)] == [len(readers(i)) for i in range(PARTS)]
    assert int(files.loc["/data/both", "ranks"]) == 5 and int(files.loc["<STDERR>", "ranks"]) == RANKS
    # rank 0 (no /data mount) is the lowest rank of every shared file: its mount names them
    assert files.loc["/data/shared-3", "mount"] == "/" and files.loc["/data/part-0", "mount"] == "/"
    assert files.loc["/scratch/rank3-0", "mount"] == "/scratch"
    tied = files.loc["/data/shared-0"]
    assert tied["bytes_min"] == tied["bytes_max"] == 4096 and tied["bytes_median"] == 4096.0


def test_the_threaded_engine_gives_the_same_tables(generated, tmp_path, monkeypatch):
    A.ensure_tables(generated)
    cluster = new_tables(generated)
    monkeypatch.setattr(E, "SMALL_SESSION", 10**6)
    r = A.analyze(generated, out=tmp_path / "analysis")
    assert r["where"] == "this process"
    threaded = {n: pd.read_parquet(tmp_path / "analysis" / n).sort_values(KEYS[n]).reset_index(drop=True)
                for n in KEYS}
    for name in KEYS:
        pd.testing.assert_frame_equal(threaded[name], cluster[name], check_exact=True)


def test_the_shape_of_the_tree_changes_nothing(generated):
    logs = A.rank_logs(generated)[:RANKS]
    ranks = [tables.rank_of(p.name[: -len(".darshan")], 0) for p in logs]
    files = [tables.reduce_log(str(p), r)[0] for p, r in zip(logs, ranks)]

    def table(groups, buckets):
        parts = [file_tree.combine(files[i::groups], buckets) for i in range(groups)]
        merged = pd.concat([file_tree.merge([p[b] for p in parts]) for b in range(buckets)])
        return merged.sort_values("path").reset_index(drop=True)

    one = table(1, 1)
    assert len(one) == SHARED + PARTS + RANKS * OWN + 2
    for groups, buckets in ((RANKS, 1), (3, 4), (7, 16)):
        pd.testing.assert_frame_equal(table(groups, buckets), one, check_exact=False, rtol=1e-12)


def test_analyze_shows_a_line_per_stage_off_a_terminal(generated):
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "analyze", str(generated)], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [x for x in r.stderr.splitlines() if x.startswith("tfdarshan analyze: ")]
    stages = [x.split(": ")[1] for x in lines]
    assert stages == [A.STAGES["read"], A.STAGES["files"], "warning"], r.stderr
    assert f"{RANKS + 1} logs" in lines[0] and "1 id bucket" in lines[1]
    assert f"analyzed {RANKS} logs, 1 unreadable skipped" in r.stdout


@pytest.fixture(scope="module")
def real(tmp_path_factory, pipeline_ranks):
    root = tmp_path_factory.mktemp("real")
    # 4 real ranks of a pipeline under `tfdarshan run`, scaled to 24 by the project's writer
    return scaled_copy(pipeline_ranks, root, 4, 24)


def test_real_session_equals_the_old_tables(real):
    r = A.analyze(real)
    assert r["ranks"] == 24 and not r["skipped"]
    got, want = new_tables(real), old_tables(real)
    assert_same_tables(got, want)
    assert len(got["steps"]) == 24 * 5
    shared = got["files"][got["files"]["path"].str.endswith("shared.bin")]
    assert len(shared) == 1 and int(shared["ranks"].iat[0]) == 24
