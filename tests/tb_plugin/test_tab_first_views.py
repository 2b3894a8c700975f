"""What the page's first views need is worked out once per loaded session
(session_data.Memo), by the read-ahead before the page asks: the plugin
itself (no server: its read-ahead thread joined) on a session like
benchmarks/bench_tab.py's. Decided from what was computed and how often,
never from how long anything took; the answers are checked against the
session's own tables, cut and sorted here."""
import sys
import threading

import numpy as np
import pytest
from tensorboard.plugins import base_plugin

from places import ROOT
from tfdarshan_tb import downsample, plugin, session_data, views

pytestmark = pytest.mark.cost(8)

FILES, STEPS = 2000, 3000


@pytest.fixture(scope="module")
def logdir(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_tab import build_logdir
    return build_logdir(tmp_path_factory.mktemp("first_views"), FILES, STEPS)


@pytest.fixture(scope="module")
def read_ahead(logdir):
    """The plugin as TensorBoard makes it, its read-ahead ended: (plugin, the data it loaded)."""
    p = plugin.IOPlugin(base_plugin.TBContext(logdir=str(logdir)))
    p.reading_ahead.join(120)
    assert not p.reading_ahead.is_alive(), "the read-ahead did not end in 120 s"
    [data] = list(p._data.values())
    return p, data


def test_the_read_ahead_works_out_the_first_views(read_ahead, monkeypatch):
    _, d = read_ahead
    assert isinstance(d, session_data.SessionData) and d.hosts == list(d.session.hosts)
    # what the page's first requests need is there: none of it is worked out again
    for name in ("_summary", "_steps", "_verdict", "_mount_rows", "ordered"):
        monkeypatch.setattr(views, name, lambda *a, **k: pytest.fail("worked out again after the read-ahead"))
    width = 510
    assert views.summary(d)["files"] == FILES
    steps, verdict = views.steps(d, width=width), views.verdict(d, width=width)
    assert steps["downsampled"]["buckets"] == verdict["downsampled"]["buckets"] == width
    assert len(views.mounts(d, limit=50)["mounts"]) >= 1
    assert views.files(d, limit=50)["total"] == FILES


def test_a_cut_from_the_kept_series_is_the_cut_of_every_step(read_ahead):
    """Each width's cut comes from the one kept series: the same as cutting
    the whole series here (the downsampling module's own cut of the steps
    the step series holds), whatever widths were asked for before."""
    _, d = read_ahead
    st = d.steps[d.steps["step"] >= 0].sort_values("step")
    whole = views.steps(d)
    assert whole["downsampled"] is None and whole["steps"] == st["step"].tolist()
    assert whole["bytes_read"] == st["bytes_read"].tolist()
    for width in (200, 777, 200, 1400):
        cut = views.steps(d, width=width)
        first = downsample.starts(len(st), width)
        assert cut["steps"] == downsample.step_pairs(st["step"].to_numpy(), first).tolist()
        assert cut["bytes_read"] == downsample.minmax(st["bytes_read"].tolist(), first).tolist()


def test_pages_of_the_kept_order_are_the_sorted_table(read_ahead):
    """Every page of an order, from the one sort kept, is that slice of the
    file table sorted here (numpy's stable argsort, missing values last)."""
    _, d = read_ahead
    t = d.files
    col = "bandwidth"
    v = t[col].to_numpy(dtype=np.float64)
    order = np.argsort(np.where(np.isnan(v), np.inf, v), kind="stable")
    expected = t["path"].to_numpy()[order]
    seen = []
    for offset in range(0, 400, 50):
        page = views.files(d, sort=col, order="asc", offset=offset, limit=50)
        assert page["total"] == len(t) and page["offset"] == offset
        seen += [row[page["columns"].index("path")] for row in page["rows"]]
    assert seen == list(expected[:400])
    # a filtered order is its own: only matching paths, as many as match
    q = t["path"].iloc[0][-3:]
    page = views.files(d, sort=col, order="asc", query=q, limit=1000)
    assert page["total"] == int(t["path"].str.contains(q, regex=False).sum())
    assert all(q in row[page["columns"].index("path")] for row in page["rows"])


def test_a_memo_works_a_value_out_once_however_many_ask_at_once():
    memo = session_data.Memo()
    calls, gate = [], threading.Barrier(8)

    def make():
        calls.append(1)
        return object()

    got = []

    def ask():
        gate.wait()
        got.append(memo.get("k", make))
    threads = [threading.Thread(target=ask) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(calls) == 1 and len(got) == 8 and all(g is got[0] for g in got)
    # a memo keeps its newest values only: an old one is worked out again when asked
    small = session_data.Memo(size=2)
    made = []
    for k in ("a", "b", "c", "a"):
        small.get(k, lambda k=k: made.append(k) or k)
    assert made == ["a", "b", "c", "a"]


def test_a_memo_drops_the_least_recently_asked_and_keeps_no_failure():
    memo = session_data.Memo(size=2)
    made = []
    for k in ("a", "b", "a", "c", "a", "b"):
        memo.get(k, lambda k=k: made.append(k) or k)
    # "a", asked again before "c" came, outlives "b"
    assert made == ["a", "b", "c", "b"]

    tries = []

    def fails_once():
        tries.append(1)
        if len(tries) == 1:
            raise ValueError("unreadable")
        return "read"
    try:
        memo.get("x", fails_once)
        raise AssertionError("the first making raised")
    except ValueError:
        pass
    assert memo.get("x", fails_once) == "read" and len(tries) == 2
