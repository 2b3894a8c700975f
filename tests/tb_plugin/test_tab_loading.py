"""The tab opens a many-rank session whose analysis tables are current
without starting a Dask run. A real session (two ranks under `tfdarshan
run`), its tables built by `tfdarshan analyze`, served by a real TensorBoard
whose interpreter reports every module it imports (-X importtime): every
JSON route the tab has is asked for the whole session, and afterwards no
module of Dask was ever imported in the server (the analysis imports Dask
only to run), and no file of the tables was replaced. The same server, once
a rank log is newer than the tables, does import Dask and rebuild them: the
observation can see what it rules out. The plugin reads such a session
ahead when TensorBoard starts, and one whose tables need building not."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import urllib.parse

import pytest

from rank_session import PIPELINE, pipeline_inputs, real_session
from tb_helpers import fetch, tensorboard

pytestmark = [pytest.mark.cost(35), pytest.mark.timeout(400)]

REAL = 2
# a line of -X importtime: "import time: <self us> | <cumulative us> | <module, indented by depth>"
DASK_IMPORT = re.compile(r"^import time:\s*\d+\s*\|\s*\d+\s*\|\s*(dask|distributed)(\.\S+)?\s*$", re.M)


def tables_state(session_dir: pathlib.Path) -> dict:
    """Every file and directory of the analysis tables: (inode, mtime in ns)."""
    root = session_dir / "analysis"
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in [root, *root.rglob("*")]}


def tab_routes(logdir) -> list:
    """The tab's JSON routes, as its plugin registers them (not its scripts, under /m/*)."""
    from tensorboard.plugins import base_plugin
    from tfdarshan_tb.plugin import IOPlugin
    apps = IOPlugin(base_plugin.TBContext(logdir=str(logdir))).get_plugin_apps()
    return sorted(r for r in apps if not r.endswith(".js") and not r.endswith("/*"))


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = tmp_path_factory.mktemp("tab_loading")
    session = real_session(root, PIPELINE, pipeline_inputs(root / "data", REAL), REAL)
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "analyze", str(session)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return root / "logs", session


def _ask(url, route, query):
    status, _, body = fetch(url, f"/data/plugin/tfdarshan{route}?{urllib.parse.urlencode(query)}")
    return status, json.loads(body)


def test_opening_a_session_with_current_tables_starts_no_dask_run(analysed, tmp_path):
    logdir, session = analysed
    before = tables_state(session)
    routes = tab_routes(logdir)
    assert {"/summary", "/files", "/rank_wait", "/rank_heatmap", "/advice"} <= set(routes), routes
    output = tmp_path / "tensorboard.out"
    with tensorboard(logdir, python_flags=("-X", "importtime"), output=output) as url:
        status, runs = _ask(url, "/runs", {})
        assert status == 200, runs
        (run,) = runs["runs"]
        (listed,) = run["sessions"]
        assert listed["session"] == session.name and len(listed["hosts"]) == REAL
        query = {"run": run["run"], "session": listed["session"]}
        for route in routes:
            status, body = _ask(url, route, query)
            assert status == 200, (route, body)
        status, wait = _ask(url, "/rank_wait", query)
        assert sorted(wait["ranks"]) == list(range(REAL))
        time.sleep(0.5)                     # (the server writes its lines as it imports; let them land)
        served = output.read_text()
        assert "tfdarshan_tb" in served, "the import report does not show the tab's own modules"
        assert not DASK_IMPORT.findall(served), DASK_IMPORT.findall(served)
        assert tables_state(session) == before

        # the control: tables older than a rank log, and the same request builds them on Dask (a log
        # touched is a new load for the tab; the tables dated back make them stale, once)
        log = next(session.glob("*.rank0.darshan"))
        os.utime(log)
        past = log.stat().st_mtime - 60
        os.utime(session / "analysis", (past, past))
        status, body = _ask(url, "/summary", query)
        assert status == 200, body
        time.sleep(0.5)
        assert DASK_IMPORT.findall(output.read_text())
    after = tables_state(session)
    assert after["."][0] != before["."][0]      # the tables' directory was built again (a new inode)


def _read_ahead(logdir):
    """A plugin made as TensorBoard makes it, once its read ahead has ended."""
    from tensorboard.plugins import base_plugin
    from tfdarshan_tb.plugin import IOPlugin
    plugin = IOPlugin(base_plugin.TBContext(logdir=str(logdir)))
    plugin.reading_ahead.join(300)
    assert not plugin.reading_ahead.is_alive()
    return plugin


def test_a_session_with_current_tables_is_read_ahead_and_one_without_is_not(analysed, tmp_path):
    logdir, session = analysed
    fresh = tmp_path / "fresh"
    shutil.copytree(logdir, fresh, symlinks=True)
    [copy] = [p.parent for p in fresh.rglob("analysis") if p.parent.name == session.name]
    before = tables_state(copy)
    plugin = _read_ahead(fresh)
    # the tables are current: read ahead (the page's first view, the whole session), none replaced
    assert [(k[0], k[1]) for k in plugin._data.keys()] == [(str(copy), None)]
    assert tables_state(copy) == before
    # a rank log newer than the tables: building them waits for someone to open the tab
    stale = tmp_path / "stale"
    shutil.copytree(logdir, stale, symlinks=True)
    [copy] = [p.parent for p in stale.rglob("analysis") if p.parent.name == session.name]
    log = next(copy.glob("*.rank0.darshan"))
    past = log.stat().st_mtime - 60
    os.utime(copy / "analysis", (past, past))
    before = tables_state(copy)
    plugin = _read_ahead(stale)
    assert not plugin._data and tables_state(copy) == before
