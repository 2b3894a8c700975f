"""Long per-step series are cut to the chart's width on the server, each
bucket keeping its minimum and maximum: the cut against a plain loop, and
in Chromium, a real session of many steps where one step reads a large
file: the drawn series still reaches that step's bytes, and the chart says
it is downsampled. Answers are kept per session until a log or the stored
advice changes."""
import dataclasses
import json
import os
import re
import shutil
import urllib.parse

import numpy as np
import pytest

import tfdarshan
from tfdarshan.logs.logdir import find_sessions
from tfdarshan.steps.series import read_parquet
from tfdarshan_tb import downsample
from tb_helpers import ARTIFACTS, browser, fetch, open_tab, tensorboard

pytestmark = pytest.mark.cost(35)

STEPS = 4000
SPIKE = 2718                    # the one step that reads the large file
SMALL, LARGE = 512, 3 << 20
WAIT = 120


# ------------------------------------------------------------ the cut itself
def oracle(y, width):
    """Each bucket's (min, max) in the order they occur, by a plain loop over
    the same bucket edges (the first index of bucket b is b * n // width)."""
    n = len(y)
    edges = sorted({b * n // width for b in range(width)}) + [n]
    out = []
    for lo, hi in zip(edges, edges[1:]):
        part = [(v, i) for i, v in enumerate(y[lo:hi]) if v is not None]
        if not part:
            out += [None, None]
            continue
        low = min(part)                 # the smallest value, its first index on ties
        high = min(part, key=lambda p: (-p[0], p[1]))
        out += [low[0], high[0]] if low[1] <= high[1] else [high[0], low[0]]
    return out


@pytest.mark.parametrize("n, width", [(1000, 7), (4001, 300), (10_000, 999), (50, 20)])
def test_min_and_max_of_each_bucket_in_order(n, width):
    rng = np.random.default_rng(n)
    y = [None if rng.random() < 0.05 else float(v) for v in rng.integers(0, 50, n)]
    y[:5] = [None] * 5                  # a bucket can be all missing
    steps = list(range(100, 100 + n))
    cut = downsample.series(steps, {"y": y}, {"f": [i % 97 == 0 for i in range(n)]}, width)
    if n <= 2 * width:
        assert cut is None              # it fits: every step is sent
        return
    assert cut["y"] == oracle(y, width)
    assert len(cut["steps"]) == len(cut["y"]) <= 2 * width
    edges = sorted({b * n // width for b in range(width)}) + [n]
    assert cut["steps"][0::2] == [steps[a] for a in edges[:-1]]
    assert cut["steps"][1::2] == [steps[b - 1] for b in edges[1:]]
    assert cut["f"][0::2] == [any(i % 97 == 0 for i in range(a, b)) for a, b in zip(edges, edges[1:])]
    assert cut["downsampled"]["text"] == f"downsampled: {n} steps in {len(edges) - 1} buckets, min and max kept"


def test_an_isolated_spike_survives_any_width():
    for n in (1000, 4000, 10_000):
        for width in (60, 333, 450):
            y = [1.0] * n
            y[n // 3 + 1] = 1e9
            cut = downsample.series(list(range(n)), {"y": y}, {}, width)
            assert max(cut["y"]) == 1e9 and min(cut["y"]) == 1.0 and cut["y"].count(1e9) == 1


# ---------------------------------------------------------------- in Chromium
@pytest.fixture(scope="module")
def spike_logdir(tmp_path_factory):
    """A real session of STEPS steps, each reading a small file, but step
    SPIKE, which reads a large one."""
    root = tmp_path_factory.mktemp("spike")
    small, large = root / "small.bin", root / "large.bin"
    small.write_bytes(b"s" * SMALL)
    large.write_bytes(b"L" * LARGE)
    scratch = root / "scratch"
    with tfdarshan.profile(logdir=str(scratch)):
        for step in range(STEPS):
            with tfdarshan.step(step):
                (large if step == SPIKE else small).read_bytes()
    [s] = find_sessions(scratch)
    run = root / "logs" / "train" / "plugins" / "profile"
    run.mkdir(parents=True)
    shutil.move(str(s.directory), run / "2025_01_01_00_00_00")
    return root / "logs"


def per_step_bytes(logdir):
    """Bytes read per training step, straight from the step series on disk."""
    [s] = find_sessions(logdir)
    [host] = s.hosts
    st = read_parquet(s.directory / f"{host}.steps.parquet")
    st = st[st["step"] >= 0]
    return st.groupby("step")["bytes_read"].sum()


PLOTTED_JS = """
const out = {};
for (const id of ['tfd-step-chart', 'tfd-verdict-chart']) {
  const gd = document.getElementById(id);
  if (!gd || !gd.data) return null;
  out[id] = {title: gd.parentElement.querySelector('h2').textContent, width: gd.getBoundingClientRect().width,
             traces: gd.data.map((t) => ({name: t.name, type: t.type, x: Array.from(t.x), y: Array.from(t.y)}))};
}
return out;
"""


def test_a_downsampled_chart_still_shows_the_spike(spike_logdir):
    raw = per_step_bytes(spike_logdir)
    assert len(raw) == STEPS and int(raw.idxmax()) == SPIKE and raw.max() >= LARGE, raw.describe()
    with tensorboard(spike_logdir) as url:
        [s] = find_sessions(spike_logdir)
        q = urllib.parse.urlencode({"run": s.run, "session": s.name})
        # without a width, every step is sent (the oracle the chart is checked against)
        status, _, body = fetch(url, f"/data/plugin/tfdarshan/steps?{q}")
        whole = json.loads(body)
        assert status == 200 and whole["downsampled"] is None and len(whole["steps"]) == STEPS
        assert whole["bytes_read"] == [int(raw[k]) for k in whole["steps"]]
        status, _, body = fetch(url, f"/data/plugin/tfdarshan/verdict?{q}")
        lead = json.loads(body)
        assert status == 200 and len(lead["steps"]) == STEPS
        d = browser()
        try:
            d.set_window_size(1600, 1200)
            open_tab(d, url, timeout=WAIT)
            from selenium.webdriver.support.ui import WebDriverWait
            charts = WebDriverWait(d, WAIT).until(lambda drv: drv.execute_script(PLOTTED_JS))
            d.switch_to.default_content()
            ARTIFACTS.mkdir(exist_ok=True)
            d.save_screenshot(str(ARTIFACTS / "io_tab_downsampled.png"))
        finally:
            d.quit()
    step_chart = charts["tfd-step-chart"]
    [read] = [t for t in step_chart["traces"] if t["name"] == "bytes read"]
    # fewer points than steps, at most two a pixel of the page the tab measured
    assert len(read["x"]) < STEPS and len(read["x"]) <= 2 * 1600, len(read["x"])
    # the spike is drawn at full height, once, and in the bucket that holds its step
    assert max(read["y"]) == raw.max() and read["y"].count(raw.max()) == 1
    assert min(read["y"]) == raw.min()
    at = read["y"].index(raw.max())
    first, last = read["x"][at - at % 2], read["x"][at - at % 2 + 1]
    assert first <= SPIKE <= last and last - first < STEPS // 10, (first, last)
    m = re.search(r"downsampled: (\d+) steps in (\d+) buckets, min and max kept", step_chart["title"])
    assert m and int(m.group(1)) == STEPS and 2 * int(m.group(2)) == len(read["x"]), step_chart["title"]
    # the verdict's chart of the same steps says so too, and keeps its longest step
    verdict = charts["tfd-verdict-chart"]
    assert "downsampled: 4000 steps in" in verdict["title"], verdict["title"]
    assert all(len(t["x"]) < STEPS for t in verdict["traces"])
    [duration] = [t for t in verdict["traces"] if t["name"] == "step duration"]
    [file_io] = [t for t in verdict["traces"] if t["name"] == "file I/O (ours)"]
    assert max(duration["y"]) == max(lead["duration"]) and min(duration["y"]) == min(lead["duration"])
    assert max(file_io["y"]) == max(lead["file_io"])


def test_answers_are_kept_until_a_log_or_the_advice_changes(spike_logdir, tmp_path):
    logdir = tmp_path / "logs"
    shutil.copytree(spike_logdir, logdir)
    [s] = find_sessions(logdir)
    [host] = s.hosts
    log = s.directory / f"{host}.darshan"
    q = urllib.parse.urlencode({"run": s.run, "session": s.name})

    def get(route):
        status, _, body = fetch(url, f"/data/plugin/tfdarshan/{route}?{q}")
        assert status == 200, body
        return json.loads(body)
    snap = tfdarshan.read_darshan_log(log)
    with tensorboard(logdir) as url:
        before = get("summary")
        assert before["files"] == len(snap.posix) + len(snap.stdio)
        assert get("summary") == before and get("advice")["available"] is False
        # stored advice appears: the session's answers are built again
        (s.directory / "advice.json").write_text(json.dumps({"summary": "stage large.bin", "selection": []}))
        assert get("advice")["advice"]["summary"] == "stage large.bin"
        # the log is rewritten with one POSIX record fewer: so is its summary
        fewer = dataclasses.replace(snap, _posix=snap.posix.iloc[1:].reset_index(drop=True))
        tmp = log.with_name(".fewer." + log.name)
        tfdarshan.write_darshan_log(fewer, tmp)
        os.replace(tmp, log)
        after = get("summary")
        assert after["files"] == before["files"] - 1, (before["files"], after["files"])
