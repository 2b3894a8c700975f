"""The TensorBoard I/O tab: its routes on a real server, and the page in a
real browser."""
import json
import os
import pathlib
import socket
import time
import urllib.parse

import numpy as np
import pytest

import tfdarshan
from tfdarshan.logs.logdir import find_sessions, load_snapshot
from tb_helpers import ARTIFACTS, browser, fetch, open_tab, tensorboard
from test_tf_integration import dataset, model, write_tfrecords

HOST = socket.gethostname()
ROUTES = ["summary", "files", "steps", "histograms", "mounts", "timeline", "advice"]


@pytest.fixture(scope="module")
def trained_logdir(tf, tmp_path_factory):
    """A log directory from a real (small) training run, profiled by Keras."""
    root = tmp_path_factory.mktemp("tb")
    files = write_tfrecords(tf, root / "data", files=4)
    m = model(tf)
    m.fit(dataset(tf, files), epochs=1, verbose=0,
          callbacks=[tf.keras.callbacks.TensorBoard(str(root / "logs"), profile_batch=(2, 6))])
    return root / "logs"


@pytest.fixture(scope="module")
def server(trained_logdir):
    with tensorboard(trained_logdir) as url:
        yield url


def _session_query(logdir):
    s = find_sessions(logdir)[0]
    return s, {"run": s.run, "session": s.name}


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
                "/data/plugin/tfdarshan/%2e%2e/%2e%2e/etc/passwd"):
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
def test_tab_renders_in_chromium(server, trained_logdir):
    from selenium.webdriver.common.by import By
    s, _ = _session_query(trained_logdir)
    snap = load_snapshot(s)
    d = browser()
    try:
        open_tab(d, server)
        summary = d.find_element(By.ID, "tfd-summary")
        cards = {c.get_attribute("data-key"): c.text for c in summary.find_elements(By.CLASS_NAME, "card")}
        assert {"bytes_read", "bandwidth", "io_time", "input_share", "files", "steps"} <= set(cards)
        assert cards["files"].split("\n")[0] == str(len(snap.posix) + len(snap.stdio))
        assert cards["steps"].split("\n")[0] == "5"
        for chart in ("tfd-step-chart", "tfd-hist", "tfd-mounts", "tfd-timeline"):
            node = d.find_element(By.ID, chart)
            assert node.find_elements(By.CSS_SELECTOR, ".main-svg"), f"{chart} has no plot"
        rows = d.find_elements(By.CSS_SELECTOR, "#tfd-files tbody tr")
        assert len(rows) == min(50, len(snap.posix))
        first_path = rows[0].find_element(By.CSS_SELECTOR, "td.path").text
        assert first_path == snap.posix.sort_values("POSIX_BYTES_READ", ascending=False)["path"].iloc[0]
        # sort by path, then search
        d.find_element(By.CSS_SELECTOR, "th[data-col=path]").click()
        time.sleep(1)
        name = os.path.basename(first_path)
        search = d.find_element(By.ID, "tfd-search")
        search.send_keys(name)
        time.sleep(1.5)
        rows = d.find_elements(By.CSS_SELECTOR, "#tfd-files tbody tr")
        assert rows and all(name in r.find_element(By.CSS_SELECTOR, "td.path").text for r in rows)
        ARTIFACTS.mkdir(exist_ok=True)
        d.switch_to.default_content()
        d.save_screenshot(str(ARTIFACTS / "io_tab.png"))
        severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
    finally:
        d.quit()


def test_html_in_file_names_is_shown_as_text(tmp_path, attached):
    evil = tmp_path / "data"
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
    logdir = tmp_path / "logs"
    with tfdarshan.profile(logdir=str(logdir)):
        for n in names:
            (evil / n).read_bytes()
        with open(raw, "rb") as f:
            f.read()
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import NoAlertPresentException
    with tensorboard(logdir) as url:
        d = browser()
        try:
            open_tab(d, url)
            time.sleep(1)
            cells = [c.get_attribute("title") for c in d.find_elements(By.CSS_SELECTOR, "#tfd-files td.path")]
            for n in names:
                assert str(evil / n) in cells, (n, cells)
            assert str(evil) + "/bad\\xff\\xfe.bin" in cells      # undecodable bytes, escaped
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
