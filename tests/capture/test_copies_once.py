"""A kernel-side copy is counted once wherever a total is shown: the tab's
card, the step series' per-step totals and tfdarshan.stats(); per file it
stays on both of its files (read from one, written to the other). A user's
script under `tfdarshan run` copies an 8 MiB file with shutil.copyfile in
step 0 and sends a 4 MiB file with os.sendfile in step 1; the expected
bytes are what the calls returned (the sendfile return values, the copy's
size from os.stat), never the tool's figures."""
import json
import os
import subprocess
import sys
import urllib.parse

import pytest

from tb_helpers import browser, fetch, open_tab, tensorboard
from tfdarshan.logs.logdir import find_sessions, load_snapshot, load_steps

MIB = 1 << 20
pytestmark = pytest.mark.cost(25)

SCRIPT = """
import json, os, shutil, sys
import tfdarshan
big, small, out, record = sys.argv[1:5]
with tfdarshan.step(0):
    shutil.copyfile(big, os.path.join(out, "big-copy.bin"))
sent = []
with tfdarshan.step(1):
    with open(small, "rb") as fi, open(os.path.join(out, "small-copy.bin"), "wb") as fo:
        size = os.fstat(fi.fileno()).st_size
        while sum(sent) < size:
            sent.append(os.sendfile(fo.fileno(), fi.fileno(), sum(sent), size - sum(sent)))
last = tfdarshan.stats()["last_step"]              # step 1's totals, as a progress line would show them
json.dump({"sent": sent, "last_step": last}, open(record, "w"))
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("copies-once")
    big, small, out = root / "big.bin", root / "small.bin", root / "out"
    big.write_bytes(os.urandom(8 * MIB))
    small.write_bytes(os.urandom(4 * MIB + 123))
    out.mkdir()
    (root / "copy.py").write_text(SCRIPT)
    logdir = root / "logs"
    p = subprocess.run([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir), str(root / "copy.py"),
                        str(big), str(small), str(out), str(root / "record.json")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    record = json.loads((root / "record.json").read_text())
    # what the calls returned: the copy made a file of the source's size, sendfile said what it sent
    copied = os.stat(out / "big-copy.bin").st_size
    assert copied == 8 * MIB and sum(record["sent"]) == 4 * MIB + 123
    (session,) = find_sessions(logdir)
    return {"logdir": logdir, "session": session, "copied": copied, "sent": sum(record["sent"]),
            "last_step": record["last_step"], "paths": (str(big), str(out / "big-copy.bin"), str(small),
                                                        str(out / "small-copy.bin"))}


def test_the_step_series_totals_are_what_the_calls_returned(run):
    steps, files = load_steps(run["session"])
    steps = steps.set_index("step")
    moved = steps["copy_file_range_bytes"] + steps["sendfile_bytes"] + steps["splice_bytes"]
    # shutil.copyfile uses sendfile or copy_file_range (Python's choice): either way, once
    assert int(moved.loc[0]) == run["copied"]
    assert int(steps.at[1, "sendfile_bytes"]) == run["sent"]
    assert int(moved.loc[1]) == run["sent"]
    # the read and write sides are each what the calls moved, as ever
    assert [int(steps.at[i, "copy_bytes_read"]) for i in (0, 1)] == [run["copied"], run["sent"]]
    assert [int(steps.at[i, "copy_bytes_written"]) for i in (0, 1)] == [run["copied"], run["sent"]]
    # per file, a copy is on both of its files: read from the source, written to the copy
    big, big_copy, small, small_copy = run["paths"]
    per_file = files.groupby("path")["sendfile_bytes"].sum()
    assert int(per_file[small]) == int(per_file[small_copy]) == run["sent"]


def test_stats_last_step_counts_a_copy_once(run):
    last = run["last_step"]
    assert last["step"] == 1
    assert last["sendfile_bytes"] == run["sent"]
    assert last["copy_bytes_read"] == last["copy_bytes_written"] == run["sent"]


def test_the_session_counts_each_copy_once_and_the_tab_card_says_so(run):
    from tfdarshan.capture import kernel_io as K
    snap = load_snapshot(run["session"])
    assert K.copied_bytes(snap.extra) == run["copied"] + run["sent"]
    s = run["session"]
    q = urllib.parse.urlencode({"run": s.run, "session": s.name})
    with tensorboard(run["logdir"]) as url:
        status, _, body = fetch(url, "/data/plugin/tfdarshan/summary?" + q)
        assert status == 200, body[:300]
        assert json.loads(body)["copy_bytes"] == run["copied"] + run["sent"]
        status, _, body = fetch(url, "/data/plugin/tfdarshan/steps?" + q)
        assert status == 200, body[:300]
        per_step = json.loads(body)
        assert per_step["copy_bytes"][per_step["steps"].index(0)] == run["copied"]
        assert per_step["copy_bytes"][per_step["steps"].index(1)] == run["sent"]
        from selenium.webdriver.common.by import By
        driver = browser()
        try:
            open_tab(driver, url)
            card = driver.find_element(By.CSS_SELECTOR, '.card[data-key="copy_bytes"] .v').text
        finally:
            driver.quit()
    assert card == f"{(run['copied'] + run['sent']) / MIB:.1f} MiB"
