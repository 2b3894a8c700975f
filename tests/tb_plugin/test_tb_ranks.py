"""The tab's rank dimension on a real TensorBoard: a 64-rank session (4 real
ranks under `tfdarshan run`, scaled with our writer) is read from its
analysis tables, which the tab builds on first use; the rank heatmap, the
ranks sorted by wait, the per-file "ranks" column and the host / rank
filter agree with pandas over the logs. In Chromium: the rank charts draw
every rank and step, step axes cover every step, no axis repeats a tick
label, the access-size labels do not overlap at 1600 px; flight-recorder
dumps and profiler-server captures are named for what they are."""
import json
import os
import shutil
import socket
import urllib.parse

import numpy as np
import pandas as pd
import pytest

import tfdarshan
from tfdarshan.analysis.analyze import analyze, rank_logs
from tfdarshan.logs.darshan_log import write_darshan_log
from tfdarshan.logs.logdir import find_sessions
from tfdarshan.steps.series import read_parquet, write_parquet
from rank_session import RANKS_PER_NODE, rank_of, scale, scaled_host
from tb_helpers import ARTIFACTS, browser, chart_libraries, fetch, open_tab, show_run, tensorboard

pytestmark = pytest.mark.cost(110)

REAL, RANKS, FEW = 4, 64, 8
DAMAGED = 2                             # the rank whose log the "damaged" run has cut short
ONE_STEPS = list(range(2, 12))          # the demo's profiled steps
REASON = "step 812 took 4.1 s, 5.3× the median"
PORT = 6009
WAIT = 120


def _copy_session(src, logdir, run):
    dst = logdir / run / "plugins" / "tfdarshan" / src.name
    shutil.copytree(src, dst)
    return dst


def _single(src_log, logdir, run, stem, metadata, steps=None):
    """A one-process session from a rank's log, written again with our writer."""
    d = logdir / run / "plugins" / "tfdarshan" / "2026_01_01_00_00_00"
    d.mkdir(parents=True)
    write_darshan_log(tfdarshan.read_darshan_log(src_log), d / f"{stem}.darshan", metadata=metadata)
    if steps is not None:
        write_parquet(steps, d / f"{stem}.steps.parquet")
    return d


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, pipeline_ranks):
    root = tmp_path_factory.mktemp("ranks_tab")
    real = pipeline_ranks               # (read only: every run below is a copy)
    logdir = root / "tb"
    many = _copy_session(real, logdir, "ranks64")
    scale(many, REAL, RANKS, host_of=scaled_host)
    analyze(many)                       # (the tab's own first-use build is tested on `few`)
    few = _copy_session(real, logdir, "ranks8")
    scale(few, REAL, FEW, host_of=scaled_host)
    # one rank's log cut short (a rank killed while writing it, a full disk)
    damaged = _copy_session(real, logdir, "damaged")
    bad = next(damaged.glob(f"*.rank{DAMAGED}.darshan"))
    bad.chmod(0o600)
    os.truncate(bad, bad.stat().st_size // 2)
    rank0 = next(real.glob("*.rank0.darshan"))
    # ten steps numbered as the demo's (2-11), from rank 0's three, shifted in time
    s = read_parquet(rank0.with_name(rank0.name.replace(".darshan", ".steps.parquet")))
    s = s[s["step"] >= 0].reset_index(drop=True)
    span = float(s["end"].max() - s["start"].min())
    rows = [s.iloc[[i % len(s)]].assign(step=step, start=s["start"].iat[i % len(s)] + span * (i // len(s)),
                                        end=s["end"].iat[i % len(s)] + span * (i // len(s)))
            for i, step in enumerate(ONE_STEPS)]
    one = _single(rank0, logdir, "one", "vm", {}, pd.concat(rows, ignore_index=True))
    _single(rank0, logdir, "recorder", "vm", {"source": "flight recorder", "trigger": "slow step", "reason": REASON})
    _single(rank0, logdir, "capture", f"vm_{PORT}", {"source": "profiler server capture"})
    _single(rank0, logdir, "process", "vm_4242", {"source": "tf.profiler"})
    return logdir, many, few, one


@pytest.fixture(scope="module")
def server(logdir):
    with tensorboard(logdir[0]) as url:
        yield url


def _get(url, route, params):
    status, _, body = fetch(url, f"/data/plugin/tfdarshan/{route}?{urllib.parse.urlencode(params)}")
    return status, json.loads(body)


def _query(logdir, run):
    [s] = [s for s in find_sessions(logdir) if s.run == run]
    return {"run": s.run, "session": s.name}


def expected(session_dir):
    """Per rank and step, per rank and per file, straight from the logs and series with pandas."""
    steps, files, hosts = [], [], {}
    for log in rank_logs(session_dir):
        r = rank_of(log)
        hosts[r] = log.name.split(".rank")[0]
        st = pd.read_parquet(log.with_name(log.name.replace(".darshan", ".steps.parquet")))
        st = st[st["step"] >= 0]
        # a step's wait: the wall time a read or metadata call was in flight, at most the step
        summed = st["read_time"] + st["meta_time"]
        wall = np.minimum(st["io_wall"], summed) if "io_wall" in st else summed
        steps.append(pd.DataFrame({"rank": r, "step": st["step"], "wait": np.minimum(wall, st["end"] - st["start"]),
                                   "duration": st["end"] - st["start"]}))
        snap = tfdarshan.read_darshan_log(log)
        for module, f in (("POSIX", snap.posix), ("STDIO", snap.stdio)):
            files.append(pd.DataFrame({"path": f["path"], "rank": r, "bytes_read": f[f"{module}_BYTES_READ"],
                                       "file_time": f[f"{module}_F_READ_TIME"] + f[f"{module}_F_WRITE_TIME"]
                                       + f[f"{module}_F_META_TIME"]}))
    steps, files = pd.concat(steps, ignore_index=True), pd.concat(files, ignore_index=True)
    per_rank = steps.groupby("rank").agg(wait=("wait", "sum"), duration=("duration", "sum"))
    share = per_rank["wait"] / per_rank["duration"]
    return steps, files, share, hosts


def test_rank_views_agree_with_pandas_over_the_logs(server, logdir):
    _, many, _, _ = logdir
    q = _query(logdir[0], "ranks64")
    steps, files, share, hosts = expected(many)
    status, heat = _get(server, "rank_heatmap", q)
    assert status == 200, heat
    grid = steps.pivot_table(index="rank", columns="step", values="wait", aggfunc="sum")
    assert heat["ranks"] == list(range(RANKS)) and heat["steps"] == sorted(steps["step"].unique())
    assert heat["hosts"] == [hosts[r] for r in range(RANKS)]
    assert np.allclose(np.array(heat["wait"], dtype=float), grid.to_numpy(), rtol=1e-9, atol=1e-12)
    status, wait = _get(server, "rank_wait", q)
    assert status == 200, wait
    assert sorted(wait["ranks"]) == list(range(RANKS))
    assert np.allclose(wait["input_wait_share"], share.loc[wait["ranks"]].to_numpy(), rtol=1e-9)
    assert all(a >= b for a, b in zip(wait["input_wait_share"], wait["input_wait_share"][1:])), "sorted by wait"
    # the per-file table's ranks column: the ranks with a record of the file
    status, page = _get(server, "files", {**q, "limit": 1000})
    assert status == 200, page
    rows = {r[0]: dict(zip(page["columns"], r)) for r in page["rows"]}
    touched = files.groupby("path")["rank"].nunique()
    assert set(rows) == set(touched.index)
    assert {p: rows[p]["ranks"] for p in rows} == touched.to_dict()
    # slowest first (the time summed over ranks), files that are not input after the others
    assert (page["sort"], page["order"]) == ("file_time", "desc")
    spent = files.groupby("path")["file_time"].sum()
    inputs = [p for p in rows if rows[p]["kind"] == ""]
    assert page["rows"][0][0] == spent[inputs].idxmax()
    status, summary = _get(server, "summary", q)
    assert summary["ranks"] == RANKS and summary["bytes_read"] == int(files["bytes_read"].sum())
    assert summary["hosts"] == len(set(hosts.values()))


def test_host_and_rank_filter(server, logdir):
    q = _query(logdir[0], "ranks64")
    node1 = list(range(RANKS_PER_NODE, 2 * RANKS_PER_NODE))
    status, wait = _get(server, "rank_wait", {**q, "node": "node1"})
    assert status == 200 and sorted(wait["ranks"]) == node1 and set(wait["hosts"]) == {"node1"}
    status, heat = _get(server, "rank_heatmap", {**q, "ranks": "0-3,60"})
    assert status == 200 and heat["ranks"] == [0, 1, 2, 3, 60]
    status, both = _get(server, "rank_heatmap", {**q, "node": "node1", "ranks": "0-20"})
    assert status == 200 and both["ranks"] == list(range(RANKS_PER_NODE, 21))
    for bad in ({"ranks": "x"}, {"ranks": "5-2"}, {"ranks": "999"}, {"ranks": "1,,2"}, {"ranks": "9" * 20},
                {"node": "nowhere"}, {"ranks": "0\x01"}):
        for route in ("rank_wait", "rank_heatmap"):
            status, body = _get(server, route, {**q, **bad})
            assert status == 400, (bad, body)
            assert body["error"] and "\n" not in body["error"], body
    # a one-process session has no rank views
    status, none = _get(server, "rank_heatmap", _query(logdir[0], "one"))
    assert status == 200 and none["ranks"] == []


def test_rank_and_mount_tables_are_paged_on_the_server(server, logdir):
    q = _query(logdir[0], "ranks64")
    _, whole = _get(server, "rank_wait", q)
    assert whole["total"] == RANKS and len(whole["ranks"]) == RANKS
    status, page = _get(server, "rank_wait", {**q, "offset": 5, "limit": 10})
    assert status == 200 and page["total"] == RANKS and page["offset"] == 5
    assert page["ranks"] == whole["ranks"][5:15] and page["input_wait_share"] == whole["input_wait_share"][5:15]
    status, last = _get(server, "rank_wait", {**q, "node": "node1", "offset": RANKS_PER_NODE - 3, "limit": 10})
    assert status == 200 and last["total"] == RANKS_PER_NODE and len(last["ranks"]) == 3
    _, every = _get(server, "mounts", q)
    status, first = _get(server, "mounts", {**q, "limit": 1})
    assert status == 200 and first["total"] == len(every["mounts"]) and first["mounts"] == every["mounts"][:1]
    for bad in ({"limit": 0}, {"offset": -1}, {"limit": 10**6}):
        for route in ("rank_wait", "mounts"):
            status, body = _get(server, route, {**q, **bad})
            assert status == 400 and body["error"], (route, bad, body)
    status, body = _get(server, "steps", {**q, "width": 3})       # narrower than any chart
    assert status == 400 and "width" in body["error"]


def test_tables_are_built_on_first_use(server, logdir):
    _, _, few, _ = logdir
    assert not (few / "analysis").exists()
    status, before = _get(server, "progress", _query(logdir[0], "ranks8"))
    assert status == 200 and before == {"stages": [], "loading": False}
    status, wait = _get(server, "rank_wait", _query(logdir[0], "ranks8"))
    assert status == 200, wait
    assert (few / "analysis" / "ranks").exists()
    # the first opening said what it was doing, a line a stage, ending ready
    status, progress = _get(server, "progress", _query(logdir[0], "ranks8"))
    stages = [line.split(": ", 1)[1] for line in progress["stages"]]
    assert status == 200 and stages[-1] == "ready" and progress["loading"] is False, progress
    assert any(s.startswith(f"building the analysis tables from {FEW} rank logs") for s in stages), stages
    assert any(s == "reading the analysis tables" for s in stages), stages
    _, _, share, _ = expected(few)
    assert sorted(wait["ranks"]) == list(range(FEW))
    assert np.allclose(wait["input_wait_share"], share.loc[wait["ranks"]].to_numpy(), rtol=1e-9)


def test_runs_name_flight_recorder_dumps_and_captures(server, logdir):
    status, _, body = fetch(server, "/data/plugin/tfdarshan/runs")
    runs = {r["run"]: r["sessions"] for r in json.loads(body)["runs"]}
    assert runs["recorder"][0]["origin"] == {"source": "flight recorder", "trigger": "slow step", "reason": REASON}
    assert runs["one"][0]["origin"] is None and runs["ranks64"][0]["origin"] is None
    assert runs["capture"][0]["labels"] == [f"vm port {PORT}"]
    assert runs["process"][0]["labels"] == ["vm pid 4242"]
    status, summary = _get(server, "summary", _query(logdir[0], "recorder"))
    assert status == 200 and summary["origin"]["reason"] == REASON


# ------------------------------------------------------------------ browser
CHARTS_JS = """
const out = {};
for (const gd of document.querySelectorAll('#tfd-body .js-plotly-plot')) {
  const fl = gd._fullLayout;
  const axes = [...(fl._subplots.xaxis || []), ...(fl._subplots.yaxis || [])].map((id) => {
    const ax = fl[id[0] + 'axis' + id.slice(1)];
    const ticks = [...gd.querySelectorAll(`g.${id}tick text`)];
    return {id, type: ax.type, range: ax.range, labels: ticks.map((t) => t.textContent),
            boxes: ticks.map((t) => { const b = t.getBoundingClientRect(); return [b.left, b.right, b.top, b.bottom]; })};
  });
  out[gd.id] = {axes, data: gd.data.map((t) => ({type: t.type, x: Array.from(t.x || []), y: Array.from(t.y || []),
                                                 z: t.z ? t.z.map((row) => Array.from(row)) : null}))};
}
return out;
"""


@pytest.fixture(scope="module")
def tab(server):
    d = browser()
    try:
        d.set_window_size(1600, 1200)
        open_tab(d, server, timeout=WAIT)

        def show(run, chart):
            show_run(d, run, chart, timeout=WAIT)
            return d.execute_script(CHARTS_JS)
        yield d, show
        severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
    finally:
        d.quit()


def _distinct_ticks(charts):
    return [(cid, a["id"], a["labels"]) for cid, c in charts.items() for a in c["axes"]
            if len(set(a["labels"])) != len(a["labels"])]


def test_rank_charts_draw_every_rank_and_step(tab, logdir):
    d, show = tab
    steps, _, share, _ = expected(logdir[1])
    charts = show("ranks64", "tfd-rank-wait")
    heat = charts["tfd-rank-heatmap"]["data"][0]
    assert heat["type"] == "heatmap" and heat["y"] == list(range(RANKS))
    assert heat["x"] == sorted(steps["step"].unique()) and len(heat["z"]) == RANKS
    assert all(len(row) == steps["step"].nunique() for row in heat["z"])
    bars = charts["tfd-rank-wait"]["data"][0]
    assert sorted(int(x) for x in bars["x"]) == list(range(RANKS))
    assert np.allclose(bars["y"], 100 * share.loc[[int(x) for x in bars["x"]]].to_numpy(), rtol=1e-9)
    assert not _distinct_ticks(charts), _distinct_ticks(charts)
    d.switch_to.default_content()
    ARTIFACTS.mkdir(exist_ok=True)
    d.save_screenshot(str(ARTIFACTS / "io_tab_ranks.png"))


def test_a_session_draws_with_plotlys_basic_bundle_and_rank_views_bring_the_heatmaps(server):
    """The tab opens at a one-process session (the last run's) and asks for
    Plotly's basic bundle alone, which a browser evaluates in half the time;
    the rank views' heatmap needs the cartesian one, asked for when a
    many-rank session is chosen, and it then draws every chart."""
    from selenium.webdriver.common.by import By
    d = browser()
    try:
        d.set_window_size(1600, 1200)
        open_tab(d, server, timeout=WAIT)
        assert d.execute_script("return document.getElementById('tfd-run').value") == "recorder"
        assert d.find_elements(By.CSS_SELECTOR, "#tfd-hist .main-svg")
        assert chart_libraries(d) == ["plotly-basic.js"]
        show_run(d, "ranks64", "tfd-rank-heatmap")
        assert chart_libraries(d) == ["plotly-basic.js", "plotly-cartesian.js"]
        heat = d.execute_script(CHARTS_JS)["tfd-rank-heatmap"]
        assert heat["data"][0]["type"] == "heatmap" and len(heat["data"][0]["z"]) == RANKS
        # (a heatmap the library does not know is drawn as an empty plot: the image must be there)
        assert d.find_elements(By.CSS_SELECTOR, "#tfd-rank-heatmap .hm image")
        # and back: the one-process session drawn by the bundle already in, none loaded again
        show_run(d, "one", "tfd-step-chart")
        assert chart_libraries(d) == ["plotly-basic.js", "plotly-cartesian.js"]
        # each bundle drawn with is kept compiled, once per address (util.js)
        addresses = d.execute_script("return [...document.querySelectorAll('script[src]')].map((s) => s.src)"
                                     ".filter((a) => a.includes('/plotly-'));")
        primed = d.execute_script("return Object.fromEntries(Object.keys(localStorage).map((k) => "
                                  "[k, localStorage.getItem(k)]));")
        assert {k.split(":", 1)[1]: v for k, v in primed.items() if k.startswith("tfdarshan-chart-library-compiled:")} \
            == {a.rsplit("/", 1)[1]: a for a in addresses}, primed
        severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
        # opened again, the page asks for the bundle its first session needed last time
        # before the session list says so, and for no other
        d.get("about:blank")
        open_tab(d, server, timeout=WAIT)
        assert chart_libraries(d) == ["plotly-basic.js"]
        started = d.execute_script("return Object.fromEntries(performance.getEntriesByType('resource')"
                                   ".map((e) => [new URL(e.name).pathname.split('/').pop(), e.startTime]));")
        assert started["plotly-basic.js"] <= started["runs"], started
    finally:
        d.quit()


def test_the_rank_filter_redraws_the_rank_charts(tab):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
    d, show = tab
    show("ranks64", "tfd-rank-wait")
    Select(d.find_element(By.ID, "tfd-rank-host")).select_by_value("node2")
    node2 = list(range(2 * RANKS_PER_NODE, 3 * RANKS_PER_NODE))
    y = "return Array.from(document.getElementById('tfd-rank-heatmap').data[0].y)"
    WebDriverWait(d, WAIT).until(lambda drv: drv.execute_script(y) == node2)
    box = d.find_element(By.ID, "tfd-rank-list")
    box.clear()
    box.send_keys("x-")
    d.find_element(By.ID, "tfd-rank-apply").click()
    WebDriverWait(d, WAIT).until(lambda drv: "ranks must be" in drv.find_element(By.ID, "tfd-rank-status").text)
    # the browser logs the refused requests; nothing else may be there
    severe = [e["message"] for e in d.get_log("browser") if e["level"] == "SEVERE"]
    assert severe and all("/rank_" in m and "400" in m for m in severe), severe


@pytest.mark.parametrize("run, chart", [("one", "tfd-hist"), ("ranks64", "tfd-rank-wait")])
def test_step_axes_cover_every_step_and_ticks_are_distinct(tab, logdir, run, chart):
    _, show = tab
    charts = show(run, chart)
    if run == "one":
        want = ONE_STEPS
    else:
        want = sorted(expected(logdir[1])[0]["step"].unique())
    for cid in ("tfd-verdict-chart", "tfd-step-chart"):
        x = charts[cid]["axes"][0]
        assert x["id"] == "x" and x["type"] == "category", (cid, x)
        # category i sits at i: every bar and point is inside the range
        assert x["range"][0] <= -0.5 + 1e-9 and x["range"][1] >= len(want) - 0.5 - 1e-9, (cid, x["range"])
        assert [int(v) for v in x["labels"]] == want, (cid, x["labels"])
        assert all([int(v) for v in t["x"]] == want for t in charts[cid]["data"]), cid
    assert "tfd-mounts" in charts
    assert not _distinct_ticks(charts), _distinct_ticks(charts)


def test_access_size_labels_do_not_overlap_at_1600px(tab):
    _, show = tab
    charts = show("one", "tfd-hist")
    x = charts["tfd-hist"]["axes"][0]
    assert len(x["labels"]) == 10, x["labels"]
    boxes = sorted(x["boxes"])
    overlaps = [(x["labels"][i], a, b) for i, (a, b) in enumerate(zip(boxes, boxes[1:]))
                if a[1] > b[0] and a[3] > b[2] and b[3] > a[2]]
    assert not overlaps, overlaps


def test_flight_recorder_session_says_why_it_exists(tab):
    from selenium.webdriver.common.by import By
    d, show = tab
    show("recorder", "tfd-hist")
    option = d.find_element(By.CSS_SELECTOR, "#tfd-session option")
    assert option.text.endswith("(flight recorder: slow step)") and option.get_attribute("data-trigger") == "slow step"
    note = d.find_element(By.ID, "tfd-origin").text
    assert "Why this session exists" in note and "slow step" in note and REASON in note
    show("capture", "tfd-hist")
    labels = [o.text for o in d.find_elements(By.CSS_SELECTOR, "#tfd-host option")]
    assert f"vm port {PORT}" in labels, labels


def test_a_session_with_an_unreadable_rank_log_shows_the_others_and_says_so(tab, server, logdir):
    from selenium.webdriver.common.by import By
    d, show = tab
    bad = f"{socket.gethostname()}.rank{DAMAGED}.darshan"
    status, summary = _get(server, "summary", _query(logdir[0], "damaged"))
    assert status == 200, summary
    assert summary["ranks"] == REAL - 1 and [s["log"] for s in summary["skipped_logs"]] == [bad]
    status, wait = _get(server, "rank_wait", _query(logdir[0], "damaged"))
    assert status == 200 and sorted(wait["ranks"]) == sorted(set(range(REAL)) - {DAMAGED})
    show("damaged", "tfd-rank-wait")
    note = d.find_element(By.ID, "tfd-skipped").text
    assert "1 log was skipped" in note and bad in note
