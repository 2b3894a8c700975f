"""Every chart of the tab is laid out once. Plotly's automargin, when what
it draws (a legend that wraps to several rows, long tick labels) needs a
wider margin than the layout gave, lays the plot out and draws it all over
again; the tab gives each chart's foot what its legend needs before
drawing. A session like benchmarks/bench_tab.py's (every per-step series
present, so the per-step chart's legend has five entries, one of them
long), drawn in real Chromium at window widths that put three, two and
one chart to a row: Plotly records a redraw from automargin on the plot
(`_fullLayout._redrawFromAutoMarginCount` appears on the first), and the
margins it settled on are the ones it was given. The legend still sits
under the x axis's title, as when automargin placed it."""
import sys

import pytest

from places import ROOT
from tb_helpers import browser, open_tab, tensorboard

pytestmark = pytest.mark.cost(25)

# each plot: whether automargin redrew it, the margins given and settled on,
# its legend's entries and height, and where the legend and the x axis's title are
LAYOUT_JS = """
const out = [];
for (const gd of document.querySelectorAll('#tfd-body .js-plotly-plot')) {
  const fl = gd._fullLayout;
  const box = (sel) => { const n = gd.querySelector(sel); return n ? n.getBoundingClientRect().toJSON() : null; };
  out.push({id: gd.id, redrawn: '_redrawFromAutoMarginCount' in fl, given: gd.layout.margin,
            settled: {l: fl._size.l, r: fl._size.r, t: fl._size.t, b: fl._size.b},
            entries: gd.querySelectorAll('.legend .traces').length, legendHeight: fl.showlegend ? fl.legend._height : 0,
            legend: box('.legend'), xtitle: box('.xtitle'), svg: box('svg.main-svg')});
}
return {charts: out, columns: new Set(out.map((c) => Math.round(c.svg.left))).size};
"""


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_tab import build_logdir
    logdir = build_logdir(tmp_path_factory.mktemp("tab_layout"), 2000, 3000)
    with tensorboard(logdir) as url:
        d = browser()
        try:
            yield d, url
            severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
            assert not severe, severe
        finally:
            d.quit()


# window widths that put three charts to a row (a ~510 px cell: the legend wraps to one entry a
# row), two, and one wide chart (its legend in two columns)
@pytest.mark.parametrize("width, columns", [(1600, 3), (1000, 2), (900, 1)])
def test_every_chart_is_laid_out_once(served, width, columns):
    d, url = served
    d.switch_to.default_content()
    d.set_window_size(width, 1200)
    d.get("about:blank")
    open_tab(d, url)
    seen = d.execute_script(LAYOUT_JS)
    charts = {c["id"]: c for c in seen["charts"]}
    assert seen["columns"] == columns, seen
    step = charts["tfd-step-chart"]
    # bytes read, written, copied by the kernel, read through mmap, bandwidth: a legend that wraps
    assert step["entries"] == 5 and step["legendHeight"] > 2 * 29, step
    for c in seen["charts"]:
        assert not c["redrawn"], f"{c['id']} was laid out again by automargin: {c}"
        assert c["settled"] == {k: c["given"][k] for k in "lrtb"}, c
        if c["legendHeight"]:
            # under the plot and its x axis's title, inside the figure
            assert c["legend"]["top"] >= c["xtitle"]["bottom"] - 0.5, c
            assert c["legend"]["bottom"] <= c["svg"]["bottom"] + 0.5, c
