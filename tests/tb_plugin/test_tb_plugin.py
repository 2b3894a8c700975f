"""The TensorBoard I/O tab: its routes on a real server, and the page in a
real browser."""
import json
import os
import pathlib
import re
import shutil
import socket
import urllib.parse

import numpy as np
import pandas as pd
import pytest

import tfdarshan
from tfdarshan.logs.logdir import Session, find_sessions, load_snapshot
from tfdarshan.steps.series import read_parquet
from tb_helpers import ARTIFACTS, browser, fetch, open_tab, static_address, tensorboard
from tf_training import dataset, model, profiled_custom_loop, write_tfrecords
from tfdarshan_tb import views

pytestmark = pytest.mark.cost(60)

HOST = socket.gethostname()
ROUTES = ["summary", "files", "steps", "histograms", "mounts", "timeline", "advice"]
WAIT = 60          # seconds a browser test waits for the page to show what it asserts


@pytest.fixture(scope="module")
def tab_root(tmp_path_factory):
    """The log directory of the module's one TensorBoard (each start imports
    TensorFlow): the Keras run under logs/ (last in run order, so the page
    opens it), the lead's runs under lead/, the hostile names' run."""
    return tmp_path_factory.mktemp("tab")


@pytest.fixture(scope="module")
def trained_logdir(tf, tab_root, tmp_path_factory):
    """A log directory from a real (small) training run, profiled by Keras."""
    files = write_tfrecords(tf, tmp_path_factory.mktemp("tb") / "data", files=4)
    m = model(tf)
    m.fit(dataset(tf, files), epochs=1, verbose=0,
          callbacks=[tf.keras.callbacks.TensorBoard(str(tab_root / "logs"), profile_batch=(2, 6))])
    return tab_root / "logs"


@pytest.fixture(scope="module")
def server(tab_root, trained_logdir, lead_logdir, hostile_logdir):
    with tensorboard(tab_root) as url:
        yield url


def _session_query(logdir):
    """logdir's first session, its run named as the server (serving logdir's parent) names it."""
    s = find_sessions(logdir)[0]
    return s, {"run": f"{logdir.name}/{s.run}", "session": s.name}


def _get_json(url, route, params):
    status, headers, body = fetch(url, f"/data/plugin/tfdarshan/{route}?{urllib.parse.urlencode(params)}")
    return status, headers, json.loads(body)


def test_plugin_listed_next_to_profile(server):
    status, _, body = fetch(server, "/data/plugins_listing")
    listing = json.loads(body)
    assert status == 200
    assert listing["tfdarshan"]["enabled"] and listing["tfdarshan"]["tab_name"] == "I/O"
    assert "profile" in listing


def test_every_route_answers_with_figures_from_the_log(server, trained_logdir):
    s, q = _session_query(trained_logdir)
    snap = load_snapshot(s)
    for route in ROUTES:
        status, headers, body = _get_json(server, route, q)
        assert status == 200, (route, body)
        assert headers["Content-Type"].startswith("application/json")
        assert headers["X-Content-Type-Options"] == "nosniff"
    _, _, summary = _get_json(server, "summary", q)
    assert summary["bytes_read"] == int(snap.posix["POSIX_BYTES_READ"].sum() + snap.stdio["STDIO_BYTES_READ"].sum())
    assert summary["files"] == len(snap.posix) + len(snap.stdio)
    _, _, steps = _get_json(server, "steps", q)
    assert steps["steps"] == [2, 3, 4, 5, 6]
    assert sum(steps["bytes_read"]) == summary["bytes_read"]
    _, _, hist = _get_json(server, "histograms", q)
    assert sum(hist["read"]) == int(snap.posix["POSIX_READS"].sum())
    _, _, files = _get_json(server, "files", {**q, "sort": "bytes_read", "limit": 1000})
    assert files["total"] == len(snap.posix)
    by_path = dict(zip(snap.posix["path"], snap.posix["POSIX_BYTES_READ"]))
    for row in files["rows"]:
        rec = dict(zip(files["columns"], row))
        assert rec["bytes_read"] == by_path[rec["path"]]
    sizes = [dict(zip(files["columns"], r))["bytes_read"] for r in files["rows"]]
    assert sizes == sorted(sizes, reverse=True)
    _, _, timeline = _get_json(server, "timeline", q)
    assert timeline["available"] and timeline["files"]
    # what the chart shows of the trace, and how much of it the trace holds for those files
    assert timeline["shown"] == sum(len(f["op"]) for f in timeline["files"]) <= timeline["held"] <= len(snap.dxt)
    # search for a file the profiled steps read
    name = os.path.basename(dict(zip(files["columns"], files["rows"][0]))["path"])
    found = _get_json(server, "files", {**q, "q": name})[2]
    assert found["rows"] and all(name in dict(zip(found["columns"], r))["path"] for r in found["rows"])
    status, _, body = _get_json(server, "files", {**q, "sort": "path", "order": "asc"})
    paths = [dict(zip(body["columns"], r))["path"] for r in body["rows"]]
    assert status == 200 and paths == sorted(paths)


@pytest.mark.parametrize("params, code", [
    ({"run": "../../etc", "session": "x"}, 404),
    ({"run": "%2e%2e%2f%2e%2e", "session": "passwd"}, 404),          # double-encoded
    ({"run": "/etc", "session": "passwd"}, 404),                      # absolute
    ({"run": "train", "session": "../../../../etc"}, 404),
    ({"run": "x" * 5000, "session": "y"}, 400),                       # oversized
    ({"session": "y"}, 400),                                          # missing
])
def test_path_traversal_and_bad_names_are_refused(server, params, code):
    status, headers, body = _get_json(server, "summary", params)
    assert status == code, body
    assert "error" in body and headers["X-Content-Type-Options"] == "nosniff"


def test_encoded_traversal_in_raw_urls(server):
    for raw in ("/data/plugin/tfdarshan/summary?run=..%2F..%2F..&session=etc",
                "/data/plugin/tfdarshan/summary?run=%252e%252e&session=%252e%252e",
                "/data/plugin/tfdarshan/summary?run=%ff%fe&session=%c0%ae",      # not UTF-8
                "/data/plugin/tfdarshan/summary?run=a%00b&session=c",
                "/data/plugin/tfdarshan/..%2F..%2F..%2Fetc%2Fpasswd",
                "/data/plugin/tfdarshan/%2e%2e/%2e%2e/etc/passwd",
                "/data/plugin/tfdarshan/m/0/..%2F..%2F..%2F..%2Fetc%2Fpasswd",
                "/data/plugin/tfdarshan/m/0/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
                "/data/plugin/tfdarshan/m/0/plugin.py"):
        status, _, body = fetch(server, raw)
        assert status in (400, 404), raw
        assert b"root:" not in body


def test_symlink_out_of_the_logdir_is_not_served(tmp_path, trained_logdir):
    outside = tmp_path / "outside" / "plugins" / "profile" / "evil"
    outside.mkdir(parents=True)
    src = find_sessions(trained_logdir)[0]
    (outside / f"{HOST}.darshan").write_bytes((src.directory / f"{HOST}.darshan").read_bytes())
    logdir = tmp_path / "logdir"
    run = logdir / "linked"
    run.mkdir(parents=True)
    (run / "plugins").symlink_to(outside.parent.parent, target_is_directory=True)
    from tfdarshan_tb.plugin import IOPlugin

    class Ctx:
        pass
    ctx = Ctx()
    ctx.logdir = str(logdir)
    plugin = IOPlugin(ctx)
    assert find_sessions(logdir), "the symlinked session is visible to a plain glob"
    assert plugin._find() == [] and not plugin.is_active()


# ------------------------------------------------------------------ browser
def _shown_paths(driver, attribute="text"):
    """The path cells of the file table as drawn now ([] while it redraws)."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    try:
        cells = driver.find_elements(By.CSS_SELECTOR, "#tfd-files tbody td.path")
        return [c.text if attribute == "text" else c.get_attribute(attribute) for c in cells]
    except StaleElementReferenceException:
        return []


def _plotly_wheel_bundle() -> bytes:
    import importlib.resources
    return (importlib.resources.files("plotly") / "package_data" / "plotly.min.js").read_bytes()


def test_chart_libraries_are_the_bundles_the_build_fetched(server):
    from tfdarshan_tb import plugin
    missing = [str(p) for p in plugin.CHART_BUNDLES.values() if not p.exists()]
    if missing:
        pytest.skip(f"the build did not fetch Plotly's bundles {missing} (make charts; needs npm)")
    wheel = _plotly_wheel_bundle()
    version = re.compile(rb"plotly\.js [^\n]*?v(\d+\.\d+\.\d+)")
    served = {}
    for name, path in plugin.CHART_BUNDLES.items():
        # beside the page's entry module, at the address TensorBoard is given for it
        status, headers, body = fetch(server, static_address(server).rsplit("/", 1)[0] + "/" + name)
        assert status == 200 and headers["Content-Type"].startswith("text/javascript"), name
        assert "Expires" in headers or "max-age" in headers.get("Cache-Control", ""), name
        # V8's compile hint, on a line of its own before the bundle as the build fetched it
        assert body == b"//# allFunctionsCalledOnLoad\n" + path.read_bytes(), name
        # the bundles the tab was made fast with: a fraction of the whole library, same Plotly release
        assert len(body) < len(wheel) / 2, name
        assert version.search(body).group(1) == version.search(wheel).group(1), name
        served[name] = body
    # the one a session is drawn with is the lighter (test_tb_ranks: the other draws the heatmap)
    assert len(served["plotly-basic.js"]) < len(served["plotly-cartesian.js"])


def test_without_the_bundles_the_tab_uses_the_plotly_packages(tmp_path, monkeypatch):
    from tfdarshan_tb import plugin
    missing = {n: tmp_path / "vendor" / p.name for n, p in plugin.CHART_BUNDLES.items()}
    monkeypatch.setattr(plugin, "CHART_BUNDLES", missing)
    for name in plugin.CHART_BUNDLES:
        assert plugin.chart_library(name) == _plotly_wheel_bundle()
    # a checkout built before the basic bundle was fetched: the cartesian one draws its charts
    missing["plotly-cartesian.js"].parent.mkdir()
    missing["plotly-cartesian.js"].write_bytes(b"cartesian")
    assert plugin.chart_library("plotly-basic.js") == plugin.chart_library("plotly-cartesian.js") == b"cartesian"


def test_tab_renders_in_chromium(server, trained_logdir):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    s, _ = _session_query(trained_logdir)
    snap = load_snapshot(s)
    d = browser()
    try:
        open_tab(d, server)
        summary = d.find_element(By.ID, "tfd-summary")
        cards = {c.get_attribute("data-key"): c.text for c in summary.find_elements(By.CLASS_NAME, "card")}
        assert {"bytes_read", "bandwidth", "data_time", "meta_time", "files", "steps"} <= set(cards)
        assert cards["files"].split("\n")[0] == str(len(snap.posix) + len(snap.stdio))
        assert cards["steps"].split("\n")[0] == "5"
        for chart in ("tfd-step-chart", "tfd-hist", "tfd-mounts", "tfd-timeline"):
            node = d.find_element(By.ID, chart)
            assert node.find_elements(By.CSS_SELECTOR, ".main-svg"), f"{chart} has no plot"
        rows = d.find_elements(By.CSS_SELECTOR, "#tfd-files tbody tr")
        assert len(rows) == min(50, len(snap.posix))
        first_path = rows[0].find_element(By.CSS_SELECTOR, "td.path").text
        # first: the file that cost the most time, of those that are not configuration (Keras', matplotlib's)
        spent = pd.concat([pd.Series((f[f"{m}_F_READ_TIME"] + f[f"{m}_F_WRITE_TIME"] + f[f"{m}_F_META_TIME"]).to_numpy(),
                                     index=f["path"]) for f, m in ((snap.posix, "POSIX"), (snap.stdio, "STDIO"))])
        spent = spent[[not any(c in p for c in ("/.keras/", "/.cache/", "/.config/", "<STD")) for p in spent.index]]
        assert first_path == spent.idxmax()
        # sort by path (the table redraws in path order), then search
        d.find_element(By.CSS_SELECTOR, "th[data-col=path]").click()
        WebDriverWait(d, WAIT).until(lambda _: (lambda p: p and p in (sorted(p), sorted(p, reverse=True)))(
            _shown_paths(d)))
        name = os.path.basename(first_path)
        search = d.find_element(By.ID, "tfd-search")
        search.send_keys(name)
        WebDriverWait(d, WAIT).until(lambda _: (lambda p: p and all(name in x for x in p))(_shown_paths(d)))
        ARTIFACTS.mkdir(exist_ok=True)
        d.switch_to.default_content()
        d.save_screenshot(str(ARTIFACTS / "io_tab.png"))
        severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
    finally:
        d.quit()


HOSTILE = "hostile"      # the run of hostile file names


@pytest.fixture(scope="module")
def hostile_logdir(tab_root, tmp_path_factory):
    """A session that read files whose names hold HTML, quotes, a newline
    and bytes that are not UTF-8: (its data directory, the names)."""
    evil = tmp_path_factory.mktemp("hostile") / "data"
    evil.mkdir()
    # a "/" separates directories, so the closing tag spans one
    names = ['<img src=x onerror="window.__pwned=1">.bin', "<script>window.__pwned=2</script>.bin",
             "quote\"and'apos.bin", "new\nline.bin"]
    for n in names:
        (evil / n).parent.mkdir(parents=True, exist_ok=True)
        (evil / n).write_bytes(b"z" * 4096)
    raw = os.fsencode(str(evil)) + b"/bad\xff\xfe.bin"
    with open(raw, "wb") as f:
        f.write(b"y" * 100)
    was = tfdarshan.is_attached()
    tfdarshan.attach()
    try:
        with tfdarshan.profile(logdir=str(tab_root / HOSTILE)):
            for n in names:
                (evil / n).read_bytes()
            with open(raw, "rb") as f:
                f.read()
    finally:
        if not was:
            tfdarshan.detach()
    return evil, names


def test_html_in_file_names_is_shown_as_text(server, hostile_logdir):
    evil, names = hostile_logdir
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.support.ui import WebDriverWait
    d = browser()
    try:
        open_tab(d, server)
        _show_run(d, HOSTILE)
        wanted = {str(evil / n) for n in names} | {str(evil) + "/bad\\xff\\xfe.bin"}   # undecodable bytes, escaped
        WebDriverWait(d, WAIT).until(lambda _: wanted <= set(_shown_paths(d, "title")))
        assert d.execute_script("return window.__pwned === undefined")
        assert not d.find_elements(By.CSS_SELECTOR, "#tfd-files img, #tfd-files script")
        try:
            d.switch_to.alert
            raise AssertionError("an alert opened")
        except NoAlertPresentException:
            pass
        d.switch_to.default_content()
        ARTIFACTS.mkdir(exist_ok=True)
        d.save_screenshot(str(ARTIFACTS / "io_tab_hostile_names.png"))
    finally:
        d.quit()


# ------------------------------------------- the verdict, the step filter, empty states
# runs, as the server names them (the lead's log directory is tab_root/lead)
LOOP, NO_STEPS, WRITE_ONLY = "lead/loop", "lead/nosteps", "lead/writeonly"
KERNEL = "lead/kernelio"


@pytest.fixture(scope="module")
def lead_logdir(tf, tab_root, tmp_path_factory):
    """Three runs: a custom training loop under tf.profiler with XProf step
    markers (an XProf profile beside our series); a window with no step
    markers that reads a file and pushes bytes through a pipe (the shim
    does not count pipes: low coverage); four marked steps that each write
    one checkpoint file (a write-only log); two steps that each copy a
    file with shutil (the kernel copies it) and read a part of a memmap
    made before the window."""
    root = tmp_path_factory.mktemp("lead")
    logdir = tab_root / "lead"
    files = write_tfrecords(tf, root / "data", files=3)
    profiled_custom_loop(tf, files, tab_root / LOOP)

    small = root / "data" / "small.bin"
    small.write_bytes(b"s" * 4096)
    with tfdarshan.profile(logdir=str(tab_root / NO_STEPS)):
        small.read_bytes()
        r, w = os.pipe()
        try:
            for _ in range(16):
                os.write(w, b"p" * (32 << 10))
                left = 32 << 10
                while left:
                    left -= len(os.read(r, left))
        finally:
            os.close(r)
            os.close(w)

    copied, mapped = root / "data" / "copied.bin", root / "data" / "mapped.bin"
    copied.write_bytes(os.urandom(3 << 20))
    mapped.write_bytes(os.urandom(4 << 20))
    m = np.memmap(mapped, dtype=np.uint8, mode="r")
    with tfdarshan.profile(logdir=str(tab_root / KERNEL)):
        for i in range(2):
            with tfdarshan.step(i):
                shutil.copyfile(copied, root / "data" / f"copy{i}.bin")
                int(m[i << 21:(i + 1) << 21].sum())
    del m

    out = root / "ckpt"
    out.mkdir()
    with tfdarshan.profile(logdir=str(tab_root / WRITE_ONLY)):
        for i in range(4):
            with tfdarshan.step(i):
                (out / f"ckpt{i}").write_bytes(b"c" * ((i + 1) << 14))
    return logdir, out


@pytest.fixture(scope="module")
def lead_server(server):
    return server


def _session(logdir, run):
    """The session of `run` (as the server names it) under logdir: tab_root/lead."""
    [s] = [s for s in find_sessions(logdir.parent) if s.run == run]
    return s, {"run": s.run, "session": s.name}


def _xprof_step_table(xplane, scratch):
    """XProf's per-step table from its overview page (a copy converted in
    scratch: XProf caches its analysis beside the profile)."""
    from xprof.convert import raw_to_tool_data
    copy = scratch / xplane.name
    copy.write_bytes(xplane.read_bytes())
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], "overview_page", {})
    for t in json.loads(data):
        ids = [c.get("id") for c in t.get("cols", [])] if isinstance(t, dict) else []
        if "stepTimeMs" in ids and "infeedTimeMs" in ids:
            return t, [dict(zip(ids, (c.get("v") for c in r["c"]))) for r in t["rows"]]
    raise AssertionError("no step table in XProf's overview page")


def test_verdict_splits_each_step_and_gives_xprofs_input_share(lead_server, lead_logdir, tmp_path):
    logdir, _ = lead_logdir
    s, q = _session(logdir, LOOP)
    steps = read_parquet(s.directory / f"{HOST}.steps.parquet")
    steps = steps[steps["step"] >= 0]
    duration = (steps["end"] - steps["start"]).to_numpy()
    # a step's wait: the wall time a read or metadata call was in flight, never more than the step
    ours = np.minimum(np.minimum(steps["io_wall"], steps["read_time"] + steps["meta_time"]).to_numpy(), duration)
    status, _, v = _get_json(lead_server, "verdict", q)
    assert status == 200, v
    assert v["steps"] == [0, 1, 2, 3]
    assert np.allclose(v["file_io"], ours, rtol=1e-9, atol=1e-12)
    assert v["share"] == pytest.approx(ours.sum() / duration.sum(), rel=1e-9)
    # the three parts make the step, none negative
    parts = np.array([v["file_io"], v["other_input"], v["compute"]])
    assert (parts >= 0).all() and np.allclose(parts.sum(axis=0), duration, rtol=1e-9, atol=1e-12)
    # XProf's input-bound share: its input time over its step time
    table, rows = _xprof_step_table(s.directory / f"{HOST}.xplane.pb", tmp_path)
    assert rows, "XProf found the steps"
    expected = 100 * sum(r["infeedTimeMs"] for r in rows) / sum(r["stepTimeMs"] for r in rows)
    assert v["xprof"]["measured"] and v["xprof"]["input_percent"] == pytest.approx(expected, rel=1e-6)
    stated = __import__("re").search(r"([\d.]+)% of the total step time sampled is waiting for input",
                                     table.get("p", {}).get("input_conclusion", ""))
    if stated:      # XProf's own sentence, when it names the input share, says the same
        assert round(v["xprof"]["input_percent"], 1) == pytest.approx(float(stated.group(1)), abs=0.051)
    # the tab reads the profile, never writes beside it (XProf caches its analysis there)
    assert sorted(p.name for p in s.directory.iterdir()) == sorted(
        p.name for p in s.directory.iterdir() if not p.name.endswith(".op_stats_v2.pb"))
    assert not list(logdir.rglob("*op_stats*"))
    # no step markers: no share, no split
    _, q0 = _session(logdir, NO_STEPS)
    status, _, v0 = _get_json(lead_server, "verdict", q0)
    assert status == 200 and v0["series"] and v0["steps"] == [] and v0["share"] is None


def test_file_table_file_time_default_sort_and_step_filter(lead_server, lead_logdir):
    logdir, out = lead_logdir
    s, q = _session(logdir, WRITE_ONLY)
    snap = load_snapshot(s)
    p = snap.posix
    total = dict(zip(p["path"], p["POSIX_F_READ_TIME"] + p["POSIX_F_WRITE_TIME"] + p["POSIX_F_META_TIME"]))
    status, _, page = _get_json(lead_server, "files", {**q, "limit": 1000})
    assert status == 200, page
    rows = [dict(zip(page["columns"], r)) for r in page["rows"]]
    assert "file_time" in page["columns"]
    for r in rows:
        if r["interface"] == "POSIX":
            assert r["file_time"] == pytest.approx(total[r["path"]], rel=1e-9, abs=1e-15)
    # the default order is by the time a file cost, slowest first, files that are not input after the rest
    assert (page["sort"], page["order"]) == ("file_time", "desc")
    other = [r["kind"] != "" for r in rows]
    assert other == sorted(other)
    for part in (False, True):
        times = [r["file_time"] for r, o in zip(rows, other) if o == part and r["file_time"] is not None]
        assert times == sorted(times, reverse=True)
    ckpts = [r["path"] for r in rows if r["path"].startswith(str(out))]
    assert sorted(ckpts) == [str(out / f"ckpt{i}") for i in range(4)]
    # a session that read is in the same order
    assert _get_json(lead_server, "files", _session(logdir, LOOP)[1])[2]["sort"] == "file_time"
    # step 2 wrote ckpt2 only
    status, _, two = _get_json(lead_server, "files", {**q, "step": 2, "limit": 1000})
    assert status == 200 and two["step"] == 2
    paths = [dict(zip(two["columns"], r))["path"] for r in two["rows"]]
    assert str(out / "ckpt2") in paths and not [x for x in paths if x.startswith(str(out)) and x != str(out / "ckpt2")]
    assert _get_json(lead_server, "files", {**q, "step": 99})[2]["total"] == 0
    for bad in ("x", "1.5", "-2", str(2**70)):
        assert _get_json(lead_server, "files", {**q, "step": bad})[0] == 400


def _show_run(d, run):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
    d.switch_to.default_content()
    d.switch_to.frame(d.find_element(By.CSS_SELECTOR, "iframe"))
    sel = Select(d.find_element(By.ID, "tfd-run"))
    if sel.first_selected_option.get_attribute("value") != run:
        sel.select_by_value(run)       # the body is replaced at once: rows that come back are this run's
    WebDriverWait(d, WAIT).until(lambda drv: drv.find_elements(By.CSS_SELECTOR, "#tfd-files tbody tr"))


def _table_paths(d):
    """The paths in the table, read at once (the table is redrawn under us)."""
    return d.execute_script("return [...document.querySelectorAll('#tfd-files td.path')].map((c) => c.title)")


@pytest.fixture(scope="module")
def lead_tab(lead_server):
    d = browser()
    try:
        open_tab(d, lead_server)
        yield d
        severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
    finally:
        d.quit()


def test_clicking_a_step_filters_the_table_to_its_files(lead_tab, lead_logdir):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    d = lead_tab
    _, out = lead_logdir
    _show_run(d, WRITE_ONLY)
    ckpts = lambda: [p for p in _table_paths(d) if p.startswith(str(out))]
    # sorted by the time each file cost, slowest first, and the header says so
    WebDriverWait(d, WAIT).until(lambda _: sorted(ckpts()) == [str(out / f"ckpt{i}") for i in range(4)])
    head = d.find_element(By.CSS_SELECTOR, "th[data-col=file_time]").text
    assert head.startswith("time in file calls") and head.endswith("▼")
    assert not d.find_elements(By.ID, "tfd-step-chip")
    # step 2's bar in the per-step chart (categories in step order)
    WebDriverWait(d, WAIT).until(lambda drv: len(drv.find_elements(
        By.CSS_SELECTOR, "#tfd-step-chart g.trace.bars g.point path")) >= 4)
    bar = d.find_elements(By.CSS_SELECTOR, "#tfd-step-chart g.trace.bars")[0].find_elements(
        By.CSS_SELECTOR, "g.point path")[2]
    ActionChains(d).move_to_element(bar).click().perform()
    WebDriverWait(d, WAIT).until(lambda drv: drv.find_elements(By.ID, "tfd-step-chip"))
    assert d.find_element(By.ID, "tfd-step-chip").text == "step 2 ×"
    WebDriverWait(d, WAIT).until(lambda _: ckpts() == [str(out / "ckpt2")])
    d.find_element(By.ID, "tfd-step-chip").click()
    WebDriverWait(d, WAIT).until(lambda _: len(ckpts()) == 4 and not d.find_elements(By.ID, "tfd-step-chip"))


def test_verdict_line_and_chart(lead_tab, lead_logdir, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    d = lead_tab
    logdir, _ = lead_logdir
    s, _ = _session(logdir, LOOP)
    steps = read_parquet(s.directory / f"{HOST}.steps.parquet")
    steps = steps[steps["step"] >= 0]
    duration = (steps["end"] - steps["start"]).to_numpy()
    # a step's wait: the wall time a read or metadata call was in flight (io_wall), never more than the step
    wall = np.minimum(steps["io_wall"].to_numpy(), (steps["read_time"] + steps["meta_time"]).to_numpy())
    share = np.minimum(wall, duration).sum() / duration.sum()
    _, rows = _xprof_step_table(s.directory / f"{HOST}.xplane.pb", tmp_path)
    xprof = 100 * sum(r["infeedTimeMs"] for r in rows) / sum(r["stepTimeMs"] for r in rows)
    _show_run(d, LOOP)
    WebDriverWait(d, WAIT).until(lambda drv: drv.find_elements(By.CSS_SELECTOR, "#tfd-verdict-chart .main-svg"))
    text = d.find_element(By.ID, "tfd-verdict-text").text
    assert f"Job input wait: {100 * share:.1f} % of step time" in text, text
    assert f"XProf: {xprof:.1f} % input-bound" in text, text
    assert "decoding and preprocessing" in text and "inside file I/O calls" in text, text
    names = d.execute_script("return document.getElementById('tfd-verdict-chart').data.map((t) => t.name)")
    assert names[0] == "file I/O (ours)" and "other input wait (XProf)" in names, names
    xs = d.execute_script("return Array.from(document.getElementById('tfd-verdict-chart').data[0].x)")
    assert [int(x) for x in xs] == [0, 1, 2, 3]
    # no step markers: a sentence, no share, no chart
    _show_run(d, NO_STEPS)
    text = d.find_element(By.ID, "tfd-verdict-text").text
    assert text == "No step markers were recorded in this session, so no share of step time can be given."
    assert "%" not in text and not d.find_elements(By.ID, "tfd-verdict-chart")


def test_empty_states_name_the_recommend_command_and_the_blind_spots(lead_tab, lead_logdir, tmp_path):
    import shlex
    import subprocess
    import sys
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    d = lead_tab
    logdir, _ = lead_logdir
    s, _ = _session(logdir, NO_STEPS)
    cov = json.loads((s.directory / f"{HOST}.coverage.json").read_text())
    assert cov["share"] < 0.9, cov           # the pipe's bytes are the kernel's, not ours
    assert not (s.directory / "advice.json").exists()
    _show_run(d, NO_STEPS)
    WebDriverWait(d, WAIT).until(lambda drv: drv.find_elements(By.ID, "tfd-recommend"))
    command = d.find_element(By.ID, "tfd-recommend").text
    argv = shlex.split(command)
    assert argv[:2] == ["tfdarshan", "recommend"] and argv[3:6] == ["--session", s.name, "--fast-tier"]
    served = logdir.parent         # the server's log directory
    assert argv[6] == "<path>" and pathlib.Path(argv[2]).resolve() in (served.resolve(), (served / s.run).resolve())
    items = [li.text for li in d.find_elements(By.CSS_SELECTOR, "#tfd-coverage li")]
    assert items == cov["blind_spots"]
    assert f"{100 * cov['share']:.1f} %" in d.find_element(By.ID, "tfd-coverage").text
    # the command, with a fast tier in place of <path>, stores the advice of this session
    fast = tmp_path / "fast"
    fast.mkdir()
    toml = tmp_path / "tiers.toml"
    toml.write_text(f'[[tier]]\npath = "{fast}"\nname = "fast"\ncapacity = "1G"\nbandwidth = "1000G"\n')
    r = subprocess.run([sys.executable, "-m", "tfdarshan", *argv[1:6], str(fast), "--tiers", str(toml)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (s.directory / "advice.json").exists()
    assert not [p for p in logdir.rglob("advice.json") if p.parent != s.directory]


def test_files_read_in_ways_darshan_cannot_see_are_labelled(lead_tab, lead_server, lead_logdir):
    """The copies' and the memmap's files: how they were read, in the table,
    the cards, the per-step chart and the coverage note."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    logdir, _ = lead_logdir
    s, q = _session(logdir, KERNEL)
    snap = load_snapshot(s)
    extra = snap.extra.set_index("path")
    copied = next(p for p in extra.index if p.endswith("/copied.bin"))
    mapped = next(p for p in extra.index if p.endswith("/mapped.bin"))
    # shutil's mechanism, whichever this Python uses: the one that moved the bytes
    used = "sendfile" if extra.at[copied, "SENDFILE_BYTES"] else "copy_file_range"
    assert extra.at[copied, "COPY_BYTES_READ"] == 2 * (3 << 20)
    status, _, page = _get_json(lead_server, "files", {**q, "limit": 1000})
    rows = {r[0]: dict(zip(page["columns"], r)) for r in page["rows"]}
    assert rows[copied]["how"] == used and rows[mapped]["how"] == "mmap"
    assert rows[copied]["copy_bytes_read"] == 2 * (3 << 20) and rows[copied]["bytes_read"] == 0
    assert rows[mapped]["mmap_bytes"] == 4 << 20 and rows[mapped]["reads"] == 0     # all of it, in two steps
    d = lead_tab
    _show_run(d, KERNEL)
    WebDriverWait(d, WAIT).until(lambda drv: drv.find_elements(By.CSS_SELECTOR, "#tfd-beyond-darshan li"))
    cells = d.execute_script("""return [...document.querySelectorAll('#tfd-files tbody tr')].map((tr) => {
        const h = [...document.querySelectorAll('#tfd-files th')].map((th) => th.dataset.col);
        const c = [...tr.children].map((td) => td.title || td.textContent);
        return [c[h.indexOf('path')], c[h.indexOf('how')], c[h.indexOf('mmap_bytes')]]; })""")
    labelled = {p: (how, mm) for p, how, mm in cells}
    assert labelled[copied][0] == used and labelled[mapped][0] == "mmap"
    assert labelled[mapped][1].startswith("~"), labelled[mapped]         # an estimate, and says so
    head = d.find_element(By.CSS_SELECTOR, "th[data-col=mmap_bytes]")
    assert head.text.startswith("read through mmap (estimate)") and "overcounted" in head.get_attribute("title")
    card = d.find_element(By.CSS_SELECTOR, "#tfd-summary [data-key=mmap_bytes]").text
    assert "read through mmap (estimate)" in card and card.startswith("~")
    items = [li.text for li in d.find_elements(By.CSS_SELECTOR, "#tfd-beyond-darshan li")]
    assert any(x.startswith(f"{mapped} (mmap)") for x in items), items
    assert any(x.startswith(f"{copied} ({used})") for x in items), items
    names = d.execute_script("return document.getElementById('tfd-step-chart').data.map((t) => t.name)")
    assert "read through mmap (estimate)" in names and any(n.startswith("copied by the kernel") for n in names)


def test_the_log_directory_itself_is_named_in_words(tmp_path):
    """The run selector showed "." for runs at the top of the log directory
    (issue 22)."""
    top = Session(".", "2026_01_01_00_00_00", tmp_path, ("vm",))
    nested = Session("exp1/train", "2026_01_01_00_00_01", tmp_path, ("vm",))
    labels = {r["run"]: r["label"] for r in views.runs([top, nested])["runs"]}
    assert labels == {".": views.TOP_LEVEL, "exp1/train": "exp1/train"}
    assert "." != views.TOP_LEVEL
