"""In Chromium, on one four-rank session: the verdict's share of step time
and the ranks chart agree (the job's share is every rank's wait over every
rank's step time, read from the chart's own data), as do the verdict's
bars, the heatmap and, with one rank chosen, that rank's verdict and its
bar. Once the verdict capped each step's I/O time at the step's length and
the ranks chart did not, and the same session read 5.6 % or 8.8 %.
Every chart says whether it shows a sum or a mean over ranks; the job view
has a coverage card; the selector names the top-level run in words; the
file table's text headers sit over their values."""
import re

import pytest

from rank_session import copy_session, set_waits
from tb_helpers import ARTIFACTS, browser, chart_libraries, open_tab, tensorboard

pytestmark = pytest.mark.cost(30)

FACTORS = {0: [0.10, 0.05, 0.05], 1: [0.10, 0.10, 0.05], 2: [0.05, 0.10, 0.10], 3: [2.5, 0.9, 0.8]}
WAIT = 120


@pytest.fixture(scope="module")
def logdir(tmp_path_factory, pipeline_ranks):
    root = tmp_path_factory.mktemp("verdict")
    d = copy_session(pipeline_ranks, root)
    set_waits(d, FACTORS, 0.1, 0.02)           # rank 3's first step: more I/O time than wall time
    return root / "logs"


@pytest.fixture(scope="module")
def page(logdir):
    with tensorboard(logdir) as url:
        d = browser()
        try:
            open_tab(d, url, timeout=WAIT)
            yield d
        finally:
            ARTIFACTS.mkdir(exist_ok=True)
            d.save_screenshot(str(ARTIFACTS / "tab_verdict_ranks.png"))
            d.quit()


def plotted(d, chart):
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(d, WAIT).until(lambda drv: drv.execute_script(
        f"const e = document.getElementById('{chart}'); return !!(e && e.data);"))
    return d.execute_script(f"return document.getElementById('{chart}').data;")


def verdict_share(d):
    from selenium.webdriver.common.by import By
    text = d.find_element(By.ID, "tfd-verdict-text").text
    from tfdarshan.measures import input_wait
    # the job's figure, or a chosen rank's own (their one definition, with their labels)
    labels = "|".join(re.escape(x) for x in (input_wait.JOB, input_wait.ONE_OF))
    m = re.search(rf"(?:{labels}): ([\d.]+) % of step time", text)
    assert m, text
    return float(m.group(1)) / 100, text


def test_verdict_and_ranks_chart_agree(page):
    from selenium.webdriver.common.by import By
    d = page
    share, text = verdict_share(d)
    # the rank views' own data: each rank's wait (the heatmap's row) and its share (the bar), so its step time
    [bars] = plotted(d, "tfd-rank-wait")
    [heat] = plotted(d, "tfd-rank-heatmap")
    waits = {int(r): sum(v for v in row if v is not None) for r, row in zip(heat["y"], heat["z"])}
    shares = {int(x): y / 100 for x, y in zip(bars["x"], bars["y"])}
    assert sorted(waits) == sorted(shares) == [0, 1, 2, 3]
    lengths = {r: waits[r] / shares[r] for r in waits}
    job = sum(waits.values()) / sum(lengths.values())
    assert share == pytest.approx(job, abs=0.0005)       # the verdict's one decimal
    # the bars' hover says the same seconds
    for x, c in zip(bars["x"], bars["customdata"]):
        assert c[3] == pytest.approx(waits[int(x)], rel=1e-9) and c[4] == pytest.approx(lengths[int(x)], rel=1e-9)
    # the verdict's bars give the same share, and say they are means over ranks
    verdict = plotted(d, "tfd-verdict-chart")
    io = sum(sum(t["y"]) for t in verdict if t["name"].startswith("file I/O"))
    total = sum(sum(t["y"]) for t in verdict)
    assert io / total == pytest.approx(job, rel=1e-6)
    assert "capped at the step's length" in text and "mean over ranks" in text
    titles = [h.text for h in d.find_elements(By.TAG_NAME, "h2")]
    assert "Per step, mean over ranks: where the time went" in titles
    assert "Per step, summed over ranks: bytes and bandwidth" in titles
    assert "Mounts: bytes moved, summed over ranks" in titles
    # a coverage card over the job's ranks
    card = d.find_element(By.CSS_SELECTOR, "#tfd-summary [data-key=coverage]").text
    assert "4 ranks added up" in card and "%" in card


def test_one_rank_chosen_reads_as_its_bar(page):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
    d = page
    [bars] = plotted(d, "tfd-rank-wait")
    rank3 = [y for x, y in zip(bars["x"], bars["y"]) if str(x) == "3"][0]
    host = Select(d.find_element(By.ID, "tfd-host"))
    [label] = [o.text for o in host.options if o.text.endswith("rank 3")]
    host.select_by_visible_text(label)
    WebDriverWait(d, WAIT).until(lambda drv: not drv.find_elements(By.ID, "tfd-rank-wait")
                                 and drv.find_elements(By.ID, "tfd-verdict-text"))
    WebDriverWait(d, WAIT).until(lambda drv: "%" in drv.find_element(By.ID, "tfd-verdict-text").text)
    share, text = verdict_share(d)
    assert 100 * share == pytest.approx(rank3, abs=0.05), text
    host.select_by_index(0)                  # back to the job, for the other tests
    WebDriverWait(d, WAIT).until(lambda drv: drv.find_elements(By.ID, "tfd-rank-wait"))


def test_selector_and_table_headers(page):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    d = page
    runs = [o.text for o in d.find_elements(By.CSS_SELECTOR, "#tfd-run option")]
    assert runs == ["(top level of the log directory)"]
    WebDriverWait(d, WAIT).until(lambda drv: drv.find_elements(By.CSS_SELECTOR, "#tfd-files tbody tr"))
    # where each column's text starts: the header's and the first row's
    lefts = d.execute_script("""
        const text = (e) => { const r = document.createRange(); r.selectNodeContents(e);
                              return r.getBoundingClientRect().left; };
        const heads = [...document.querySelectorAll('#tfd-files th')];
        const cells = [...document.querySelector('#tfd-files tbody tr').children];
        return heads.map((h, i) => [h.dataset.col, text(h), text(cells[i]), h.getBoundingClientRect().left,
                                    h.getBoundingClientRect().right]);""")
    cols = {c: (head, cell, lo, hi) for c, head, cell, lo, hi in lefts}
    for col in ("path", "mount"):
        head, cell, lo, hi = cols[col]
        assert abs(head - cell) < 4 and lo <= cell < hi, (col, cols[col])


def test_a_many_rank_session_asks_for_the_heatmaps_bundle_alone(page):
    # opened at a four-rank session's rank views: Plotly's cartesian bundle (the
    # heatmap's), and not the basic one as well, whatever view is chosen after
    plotted(page, "tfd-rank-heatmap")
    assert chart_libraries(page) == ["plotly-cartesian.js"]
