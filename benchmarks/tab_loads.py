"""Shared by the tab benchmarks: open the I/O tab in headless Chromium and
time navigation -> every chart drawn, in rounds of a cold load (a
TensorBoard just started, a browser with an empty cache), a warm one (the
same server and browser, loading the page again) and a third.

Navigation is the top page's time origin; "every chart drawn" is when the
tab's draw() has drawn its last chart, and "complete" when the file table
is in (index.js records both in window.__tfdTimings)."""
from __future__ import annotations

import pathlib
import statistics
import sys
from typing import Dict, List

HERE = pathlib.Path(__file__).parent
TESTS = HERE.parent / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import conftest  # noqa: E402,F401  (this checkout's tab first on the path, as the tests have it)
from tb_helpers import browser, tensorboard  # noqa: E402

# the iframe's clock against the top page's: both origins are epoch milliseconds
TIMES_JS = """
const frame = document.querySelector('iframe');
const w = frame && frame.contentWindow;
const t = w && w.__tfdTimings;
if (!t || !t.rendered) return null;
const nav = performance.timeOrigin, origin = w.performance.timeOrigin;
return {charts: (origin + t.charts - nav) / 1e3, complete: (origin + t.rendered - nav) / 1e3,
        tab: (origin + t.start - nav) / 1e3, data: (t.data - t.start) / 1e3, draw: (t.charts - t.data) / 1e3,
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
            print(f"    {kind}: TensorBoard's page until the tab starts {t['tab']:.2f} s, the tab's data "
                  f"{t['data']:.2f} s{plotly}, drawing {t['draw']:.2f} s, complete {t['complete']:.2f} s", flush=True)
    return out


def report(results: List[Dict], what: str, cold_budget: float = 2.0, warm_budget: float = 1.0) -> None:
    """Median and range of each measure over the rounds."""
    def line(kind, key):
        xs = [r[kind][key] for r in results]
        return f"median {statistics.median(xs):.2f} s ({min(xs):.2f}-{max(xs):.2f})"
    n = len(results)
    print(f"{what}: navigation -> every chart drawn, {n} cold / {n} warm loads interleaved")
    print(f"  cold: {line('cold', 'charts')}; complete with the file table: {line('cold', 'complete')} "
          f"(budget {cold_budget:g} s)")
    print(f"  warm: {line('warm', 'charts')}; complete with the file table: {line('warm', 'complete')} "
          f"(budget {warm_budget:g} s)")
    print(f"  warm, third load: {line('again', 'charts')}; complete: {line('again', 'complete')}")
    for kind in KINDS:
        print(f"  {kind}, of which TensorBoard's own page until the tab starts: {line(kind, 'tab')}")
