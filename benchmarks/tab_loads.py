"""Shared by the tab benchmarks: open the I/O tab in headless Chromium and
time navigation -> every chart drawn, in rounds of a cold load (a
TensorBoard just started, a browser with an empty cache), a warm one (the
same server and browser, loading the page again) and a third.

Navigation is the top page's time origin. TensorBoard's share is from
there to the start of the tab's frame (its document's time origin); the
tab's own part is from the frame's start on: its modules, the chart
library, the data and the drawing. index.js records in
window.__tfdTimings when the first chart is drawn, the first screen's
charts ("in view": those whose box starts above the window's foot), every
chart ("every chart drawn": draw() has drawn its last; below the fold
they are drawn when the browser is idle, without scrolling), and the file
table ("complete")."""
from __future__ import annotations

import pathlib
import statistics
import sys
from typing import Dict, List

HERE = pathlib.Path(__file__).parent
TESTS = HERE.parent / "tests"
for _p in (HERE, TESTS):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import conftest  # noqa: E402,F401  (this checkout's tab first on the path, as the tests have it)
from intervals import median_interval  # noqa: E402
from tb_helpers import browser, tensorboard  # noqa: E402

# the iframe's clock against the top page's: both origins are epoch milliseconds
TIMES_JS = """
const frame = document.querySelector('iframe');
const w = frame && frame.contentWindow;
const t = w && w.__tfdTimings;
if (!t || !t.rendered) return null;
const nav = performance.timeOrigin, origin = w.performance.timeOrigin;
const at = (x) => x == null ? null : (origin + x - nav) / 1e3;      // seconds from navigation
return {frame: (origin - nav) / 1e3, tab: at(t.start), first: at(t.first), view: at(t.view), charts: at(t.charts),
        complete: at(t.rendered), data: (t.data - t.start) / 1e3, draw: (t.charts - t.data) / 1e3,
        plotly: t.plotly ? (t.plotly - t.start) / 1e3 : null};
"""


def load_once(driver, url: str, timeout: float) -> Dict[str, float]:
    """Seconds from navigating to the tab to its charts drawn and to the page complete."""
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get("about:blank")           # a real navigation each time, never a same-URL no-op
    driver.get(url + "/#tfdarshan")
    return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: d.execute_script(TIMES_JS))


KINDS = ("cold", "warm", "again")


def rounds(logdir, runs: int, timeout: float = 600, width: int = 1600, height: int = 1200) -> List[Dict]:
    """`runs` rounds of a cold load (fresh TensorBoard, fresh browser), a
    warm load (the same again: the server's answers and the browser's copy
    of Plotly cached) and a warm load again (Chromium compiles a script it
    has run twice once and keeps that code from the third load on); their timings."""
    out = []
    for i in range(runs):
        with tensorboard(logdir) as url:
            d = browser()
            try:
                d.set_window_size(width, height)
                times = {kind: load_once(d, url, timeout) for kind in KINDS}
            finally:
                d.quit()
        out.append(times)
        print(f"  round {i + 1}: " + ", ".join(f"{k} {t['charts']:.2f} s" for k, t in times.items())
              + " to every chart", flush=True)
        for kind, t in times.items():
            plotly = f" (Plotly ready at {t['plotly']:.2f} s)" if t["plotly"] is not None else ""
            print(f"    {kind}: TensorBoard's page until the tab's frame starts {t['frame']:.2f} s, then render() "
                  f"at {t['tab']:.2f} s, the tab's data {t['data']:.2f} s{plotly}, first chart at {t['first']:.2f} s, "
                  f"every chart in view {t['view']:.2f} s, every chart {t['charts']:.2f} s, complete "
                  f"{t['complete']:.2f} s", flush=True)
    return out


def report(results: List[Dict], what: str, own_budget=(1.0, 0.5), nav_budget: float = 1.5) -> None:
    """Median, its 95 % interval and the range of each measure over the
    rounds; the tab's own part apart from TensorBoard's page."""
    def stat(kind, f):
        xs = [f(r[kind]) for r in results]
        lo, hi = median_interval(xs)
        return f"{statistics.median(xs):.2f} s [{lo:.2f}, {hi:.2f}] ({min(xs):.2f}-{max(xs):.2f})"
    n = len(results)
    print(f"{what}: {n} rounds of a cold, a warm and a third load, interleaved; median [95 % interval of the "
          f"median] (range)")
    budgets = {"cold": f"budget {own_budget[0]:g} s", "warm": f"budget {own_budget[1]:g} s", "again": ""}
    for kind in KINDS:
        print(f"  {kind}:")
        print(f"    the tab's own part, its frame's start -> every chart drawn: "
              f"{stat(kind, lambda t: t['charts'] - t['frame'])} {budgets[kind]}")
        print(f"    the tab's own part, its frame's start -> every chart in view drawn: "
              f"{stat(kind, lambda t: t['view'] - t['frame'])}; -> the first chart: "
              f"{stat(kind, lambda t: t['first'] - t['frame'])}")
        print(f"    TensorBoard's own page, navigation -> the tab's frame starts: {stat(kind, lambda t: t['frame'])}")
        print(f"    navigation -> every chart drawn: {stat(kind, lambda t: t['charts'])}"
              + (f" (budget {nav_budget:g} s)" if kind == "warm" else ""))
        print(f"    navigation -> complete with the file table: {stat(kind, lambda t: t['complete'])}")
        if all(r[kind]["plotly"] is not None for r in results):
            print(f"    Plotly ready, after render() starts: {stat(kind, lambda t: t['plotly'])}")
