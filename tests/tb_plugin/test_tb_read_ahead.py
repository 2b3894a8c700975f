"""The tab reads the session its page opens first (the last run's last
session, every host) while TensorBoard starts, before anyone asks for it:
a real TensorBoard, two runs of real sessions, and the load's stages as the
progress route reports them. Decided from what was loaded, never from how
long anything took."""
import json
import shutil
import time
import urllib.parse

import pytest

import tfdarshan
from tfdarshan.logs.logdir import find_sessions
from tb_helpers import fetch, tensorboard

WAIT = 120      # seconds to wait for the read ahead to end (any load of the machine)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Runs "a" and "b", a session each (a's named later in time): the page
    opens b's, the last run's."""
    root = tmp_path_factory.mktemp("read_ahead")
    data = root / "in.bin"
    data.write_bytes(b"x" * 4096)
    for run, name, steps in (("a", "2025_01_01_00_00_09", 3), ("b", "2025_01_01_00_00_01", 5)):
        scratch = root / f"scratch-{run}"
        with tfdarshan.profile(logdir=str(scratch)):
            for step in range(steps):
                with tfdarshan.step(step):
                    data.read_bytes()
        [s] = find_sessions(scratch)
        where = root / "logs" / run / "plugins" / "profile"
        where.mkdir(parents=True)
        shutil.move(str(s.directory), where / name)
    return root / "logs"


def _get(url, route, session):
    q = urllib.parse.urlencode({"run": session.run, "session": session.name})
    status, _, body = fetch(url, f"/data/plugin/tfdarshan/{route}?{q}")
    assert status == 200, body
    return json.loads(body)


def test_the_session_the_page_opens_first_is_read_when_tensorboard_starts(two_runs):
    older, first = find_sessions(two_runs)
    assert (older.run, first.run) == ("a", "b") and older.name > first.name
    with tensorboard(two_runs) as url:
        # nothing of the tab asked for: the page's first session is read all the same
        deadline = time.monotonic() + WAIT
        while True:
            seen = _get(url, "progress", first)
            if seen["stages"] and seen["stages"][-1].endswith(": ready") and not seen["loading"]:
                break
            assert time.monotonic() < deadline, f"the page's first session was not read ahead: {seen}"
            time.sleep(0.2)
        assert _get(url, "progress", older) == {"stages": [], "loading": False}
        # its answers come from that load (no second one), with its figures
        summary = _get(url, "summary", first)
        snap = tfdarshan.read_darshan_log(first.directory / f"{first.hosts[0]}.darshan")
        read = int(snap.posix["POSIX_BYTES_READ"].sum() + snap.stdio["STDIO_BYTES_READ"].sum())
        assert summary["files"] == len(snap.posix) + len(snap.stdio) and summary["bytes_read"] == read >= 5 * 4096
        assert _get(url, "progress", first) == seen
