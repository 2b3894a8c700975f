"""One definition of input wait (measures/input_wait.py): the tab's verdict and
cards (one rank's view and the job's), the ranks chart, `analyze`'s ranks
table, the straggler finding and `recommend`'s text give the same share for
the same session, and it is the one computed here: per rank and step, read
plus metadata time capped at the step's length (these series' times are
rebuilt, so they hold no wall-time measure); over steps and ranks, waits
over lengths. Once the tab's verdict capped and the rest did not: one
session read 5.6 % or 8.8 % for the job, 17.2 % or 29.3 % for rank 3. The
job's figure is printed word for word alike by `analyze` and `recommend`
and headlines the tab (in a browser); once only the tab had it.

The session: four real ranks of a small pipeline under `tfdarshan run`
(tests/helpers/rank_session.py), their step series then given I/O times built from
counts with the project's writer, so that rank 3's first step holds more
I/O time (summed over threads) than its length."""
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from rank_session import copy_session, set_waits
from tfdarshan.advice import distributed
from tfdarshan.analysis.analyze import analyze, read_table, tables_of
from tfdarshan.logs.logdir import find_sessions
from tfdarshan_tb import rank_data, rank_views, session_data, views

pytestmark = pytest.mark.cost(40)

RANKS = 4
# per rank, each step's read time as a multiple of the step's length (rank 3's first: 2.5x, parallel reads)
FACTORS = {0: [0.10, 0.05, 0.05], 1: [0.10, 0.10, 0.05], 2: [0.05, 0.10, 0.10], 3: [2.5, 0.9, 0.8]}
META = 0.02
LENGTH = 0.1


@pytest.fixture(scope="module")
def session(tmp_path_factory, pipeline_ranks):
    root = tmp_path_factory.mktemp("wait")
    d = copy_session(pipeline_ranks, root)
    set_waits(d, FACTORS, LENGTH, META)
    analyze(d)
    [sess] = find_sessions(root / "logs")
    return d, sess


def expected(d):
    """Per rank (waits, lengths) over its training steps, from the series, with pandas."""
    out = {}
    for path in sorted(d.glob("*.rank*.steps.parquet")):
        r = int(path.name.split(".rank")[1].split(".")[0])
        s = pd.read_parquet(path)
        s = s[(s["step"] >= 0) & ~s["cut_by_window_end"]]
        length = (s["end"] - s["start"]).to_numpy()
        out[r] = (float(np.minimum(s["read_time"] + s["meta_time"], length).sum()), float(length.sum()))
    return out


def test_every_view_gives_the_one_share(session):
    d, sess = session
    per_rank = expected(d)
    share = {r: w / t for r, (w, t) in per_rank.items()}
    job = sum(w for w, _ in per_rank.values()) / sum(t for _, t in per_rank.values())
    # uncapped, rank 3 would read otherwise: the session tests the cap
    s3 = pd.read_parquet(next(d.glob("*.rank3.steps.parquet")))
    s3 = s3[s3["step"] >= 0]
    assert float((s3["read_time"] + s3["meta_time"]).sum() / (s3["end"] - s3["start"]).sum()) > share[3] + 0.1
    # analyze's ranks table
    table = read_table(d, "ranks").set_index("rank")
    for r in range(RANKS):
        assert table.at[r, "input_wait_share"] == pytest.approx(share[r], rel=1e-9)
    # the tab: the job's verdict and card, the ranks chart
    many = rank_data.RankSessionData(sess)
    verdict = rank_views.verdict(many)
    assert verdict["share"] == pytest.approx(job, rel=1e-9)
    assert rank_views.summary(many)["input_share"] == pytest.approx(job, rel=1e-9)
    bars = sum(verdict["file_io"]) / sum(verdict["duration"])          # the bars give the same share
    assert bars == pytest.approx(job, rel=1e-9)
    wait = rank_views.rank_wait(many)
    for r, x in zip(wait["ranks"], wait["input_wait_share"]):
        assert x == pytest.approx(share[r], rel=1e-9)
    # each rank's own view in the tab
    for host in sess.hosts:
        r = int(host.rsplit(".rank", 1)[1])
        one = session_data.SessionData(sess, host)
        assert views.verdict(one)["share"] == pytest.approx(share[r], rel=1e-9)
        assert views.summary(one)["input_share"] == pytest.approx(share[r], rel=1e-9)
    # the straggler finding: rank 3, at its share, against the median rank's
    f = distributed.stragglers(tables_of(d)["ranks"], tables_of(d)["rank_mounts"])
    assert f is not None and set(f.evidence["stragglers"]) == {3}
    assert f.evidence["stragglers"][3]["input_wait_share"] == pytest.approx(share[3], rel=1e-9)
    assert f.evidence["median_input_wait_share"] == pytest.approx(float(np.median(list(share.values()))), rel=1e-9)


def test_labels_say_what_is_capped_summed_and_averaged(session):
    d, sess = session
    many = rank_data.RankSessionData(sess)
    v = rank_views.verdict(many)
    assert "capped at the step's length" in v["label"] and v["over"] == "mean over ranks"
    assert rank_views.steps(many)["over"] == "summed over ranks"
    one = session_data.SessionData(sess, sess.hosts[0])
    assert "capped at the step's length" in views.verdict(one)["label"] and views.verdict(one)["over"] is None


def test_recommend_says_the_same_figure(session, tmp_path):
    d, _ = session
    per_rank = expected(d)
    w, t = per_rank[3]
    fast = tmp_path / "fast"
    fast.mkdir()
    toml = tmp_path / "tiers.toml"
    toml.write_text(f'[[tier]]\npath = "{fast}"\nname = "fast"\ncapacity = "1G"\nbandwidth = "100G"\n')
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "recommend", str(d), "--fast-tier", str(fast),
                        "--tiers", str(toml), "--capacity", "1G", "--no-store"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"rank 3 (host " in r.stdout and f") {100 * w / t:.1f} %" in r.stdout, r.stdout


def _line(text: str, start: str) -> str:
    lines = [x for x in text.splitlines() if x.startswith(start)]
    assert len(lines) == 1, text
    return lines[0]


def test_one_job_figure_in_analyze_recommend_and_the_tab(session, tmp_path):
    # the job's input wait, by this test's own arithmetic: every rank's waits over every rank's step time
    d, _ = session
    per_rank = expected(d)
    job = sum(w for w, _ in per_rank.values()) / sum(t for _, t in per_rank.values())
    figure = f"Job input wait: {100 * job:.1f} % of step time"
    run = lambda *a: subprocess.run([sys.executable, "-m", "tfdarshan", *a], capture_output=True,  # noqa: E731
                                    text=True, timeout=300)
    a = run("analyze", str(d))
    assert a.returncode == 0, a.stderr[-2000:]
    fast = tmp_path / "fast"
    fast.mkdir()
    toml = tmp_path / "tiers.toml"
    toml.write_text(f'[[tier]]\npath = "{fast}"\nname = "fast"\ncapacity = "1G"\nbandwidth = "100G"\n')
    r = run("recommend", str(d), "--fast-tier", str(fast), "--tiers", str(toml), "--capacity", "1G", "--no-store")
    assert r.returncode == 0, r.stderr[-2000:]
    # the same line, word for word, in both commands
    line = _line(a.stdout, "Job input wait:")
    assert line == _line(r.stdout, "Job input wait:") and line.startswith(figure + " ("), (line, figure)
    assert f"all {RANKS} ranks' steps" in line
    # each rank's own figure stays, named for what it is
    ranks = _line(a.stdout, "per-rank input wait (each rank's own steps)")
    assert f"rank 3 {100 * per_rank[3][0] / per_rank[3][1]:.1f} %" in ranks
    # the tab's headline, in a browser
    from selenium.webdriver.common.by import By
    from tb_helpers import browser, open_tab, tensorboard
    with tensorboard(d.parents[2]) as url:
        driver = browser()
        try:
            open_tab(driver, url, timeout=180)
            head = driver.find_element(By.CSS_SELECTOR, "#tfd-verdict-text b").text
            label = driver.find_element(By.ID, "tfd-verdict-label").text
        finally:
            driver.quit()
    assert head == figure, (head, figure)
    assert label.startswith(line[len(figure):].strip().rstrip(")")), (label, line)
