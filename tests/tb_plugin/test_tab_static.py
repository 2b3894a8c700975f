"""The tab's modules and chart library are kept by the browser between
loads, and a changed module (a user upgrading tfdarshan) is never run
from that copy.

A copy of the tab's package, first on the path of a real TensorBoard,
stands for the installed one. Headless Chromium opens the tab twice: the
second time every module and the library come from its cache (Resource
Timing: no byte transferred). Then a module of the copy changes, as an
upgrade changes it: the address TensorBoard is given for the tab moves, the
server's bytes at the new address are the new file's, its bytes at the old
address are the new file's too and are not to be kept, and the browser,
opening the tab again, runs the new module."""
import json
import os
import shutil
import sys

import pytest

from places import ROOT
from tb_helpers import browser, fetch, open_tab, static_address, tensorboard

pytestmark = pytest.mark.cost(20)

MODULES = ("index.js", "page.js", "util.js", "charts.js", "verdict.js", "table.js", "ranks.js")
A_YEAR = 365 * 86400
# what the tab's frame fetched: each file's name, its address and the bytes that crossed the network for it
FETCHED_JS = """
const w = document.querySelector('iframe').contentWindow;
return w.performance.getEntriesByType('resource').map((e) => ({url: e.name, sent: e.transferSize}));
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(log directory, the copy of the tab's package that TensorBoard runs)."""
    root = tmp_path_factory.mktemp("tab_static")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_tab import build_logdir
    logdir = build_logdir(root / "data", 300, 40)
    copy = root / "site" / "tfdarshan_tb"
    shutil.copytree(ROOT / "tfdarshan_tb", copy, ignore=shutil.ignore_patterns("__pycache__"))
    return logdir, copy


def max_age(headers) -> int:
    """How long a browser may keep a response (0: not at all)."""
    cache = headers.get("Cache-Control", "")
    if "no-cache" in cache or "no-store" in cache:
        return 0
    ages = [int(p.split("=", 1)[1]) for p in cache.replace(" ", "").split(",") if p.startswith("max-age=")]
    return ages[0] if ages else 0


def open_again(driver, url):
    driver.switch_to.default_content()
    driver.get("about:blank")
    open_tab(driver, url)
    driver.switch_to.default_content()


def test_modules_kept_by_the_browser_and_a_changed_one_never_served_stale(installed, monkeypatch):
    logdir, copy = installed
    static = copy / "static"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(copy.parent), os.environ.get("PYTHONPATH")])))
    # (`python -m` puts its working directory first on the path: not the checkout's tfdarshan_tb)
    monkeypatch.chdir(copy.parent)
    with tensorboard(logdir) as url:
        entry = static_address(url)
        base = entry.rsplit("/", 1)[0] + "/"
        assert entry.endswith("/index.js") and "/m/" in entry, entry
        # the server serves the copy's files, to be kept
        for name in MODULES:
            status, headers, body = fetch(url, base + name)
            assert status == 200 and body == (static / name).read_bytes(), name
            assert max_age(headers) >= A_YEAR / 2, headers

        d = browser()
        try:
            d.set_window_size(1400, 1000)
            open_again(d, url)
            open_again(d, url)
            fetched = {e["url"].split("?")[0]: e["sent"] for e in d.execute_script(FETCHED_JS)}
            kept = {n: fetched.get(url + base + n) for n in (*MODULES, "plotly-basic.js")}
            assert all(v is not None for v in kept.values()), (kept, sorted(fetched))
            # the second opening: not a byte of any of them over the network (no request, no 304)
            assert all(v == 0 for v in kept.values()), kept

            # an upgrade changes a module
            page = static / "page.js"
            page.write_text(page.read_text() + "\nwindow.__tfdUpgraded = 'yes';\n")
            new = page.read_bytes()
            moved = static_address(url)
            assert moved != entry
            new_base = moved.rsplit("/", 1)[0] + "/"
            status, headers, body = fetch(url, new_base + "page.js")
            assert status == 200 and body == new and max_age(headers) >= A_YEAR / 2
            # the old address: today's bytes, not to be kept
            status, headers, body = fetch(url, base + "page.js")
            assert status == 200 and body == new and max_age(headers) == 0, headers

            # the browser that kept the old version runs the new one
            open_again(d, url)
            frame = d.execute_script("return document.querySelector('iframe').contentWindow.__tfdUpgraded")
            assert frame == "yes"
            severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
            assert not severe, severe
        finally:
            d.quit()


def test_a_name_outside_the_modules_is_not_served(installed):
    from tensorboard.plugins import base_plugin
    from werkzeug.test import Client
    from tfdarshan_tb.plugin import IOPlugin, static_version
    logdir, _ = installed
    app = IOPlugin(base_plugin.TBContext(logdir=""))
    client = Client(app.get_plugin_apps()["/m/*"])
    for name in ("plugin.py", "__init__.py", "vendor/plotly-cartesian.min.js", "vendor/plotly-basic.min.js",
                 "plotly.js", "../plugin.py", "", "index.js/x"):
        response = client.get(f"/data/plugin/tfdarshan/m/{static_version()}/{name}")
        assert response.status_code == 404, name
        assert "error" in json.loads(response.get_data())
