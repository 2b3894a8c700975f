"""The I/O tab's charts in a real browser: they fit their grid cells, every
axis says what it measures, and a mount looks the same in every chart,
for sessions that read and write, only read, or only write."""
import pathlib
import shutil
import subprocess
import tempfile

import pytest

import tfdarshan
from tfdarshan.logs.logdir import find_sessions
from tb_helpers import ARTIFACTS, browser, open_tab, tensorboard

pytestmark = pytest.mark.cost(30)

# session names sort in this order; the tab opens the last
MIXED, READ_ONLY, WRITE_ONLY = "2024_01_01_00_00_01", "2024_01_01_00_00_02", "2024_01_01_00_00_03"
STEPS = 4
WAIT = 60

# every plot in the page: its grid cell, main SVG, axes (title, type, tick
# labels), legend (name, swatch colour) and traces, as drawn
REPORT_JS = """
const out = [];
for (const gd of document.querySelectorAll('#tfd-body .js-plotly-plot')) {
  let cell = gd;
  while (cell.parentElement && !cell.parentElement.classList.contains('grid')) cell = cell.parentElement;
  const svg = gd.querySelector('svg.main-svg');
  const fl = gd._fullLayout || {_subplots: {}};
  const axes = [...(fl._subplots.xaxis || []), ...(fl._subplots.yaxis || [])].map((id) => {
    const ax = fl[id[0] + 'axis' + id.slice(1)] || {};
    const title = gd.querySelector(`text.${id}title`);
    return {id, type: ax.type, title: title ? title.textContent : '',
            ticks: [...gd.querySelectorAll(`g.${id}tick text`)].map((t) => t.textContent)};
  });
  const legend = [...gd.querySelectorAll('.legend .traces')].map((t) => {
    const mark = t.querySelector('.legendpoints path, .legendfill path, .legendlines path');
    const style = mark ? getComputedStyle(mark) : null;
    const fill = style && style.fill !== 'none' ? style.fill : null;
    return {name: t.querySelector('.legendtext').textContent, colour: fill || (style && style.stroke)};
  });
  out.push({id: gd.id, cell: cell.getBoundingClientRect().width, left: cell.getBoundingClientRect().left,
            svg: svg ? svg.getBoundingClientRect().width : null, axes, legend,
            traces: (gd.data || []).map((t) => ({name: t.name, y: Array.from(t.y || [])}))});
}
return out;
"""


def mount_point(path) -> str:
    """The mount point holding path, as util-linux finds it (a point mounted
    over twice is listed twice)."""
    return subprocess.run(["findmnt", "-n", "-o", "TARGET", "-T", str(path)], check=True,
                          capture_output=True, text=True).stdout.splitlines()[0].strip()


@pytest.fixture(scope="module")
def mounts_logdir(tmp_path_factory):
    """One run, three sessions of STEPS marked steps over two mounts
    (the test's directory and /dev/shm): reads and writes on both; reads on
    the disk only; writes (a checkpoint) on /dev/shm only."""
    if not shutil.which("findmnt") or not pathlib.Path("/dev/shm").is_dir():
        pytest.skip("needs findmnt and /dev/shm")
    root = tmp_path_factory.mktemp("mounts")
    disk = root / "disk"
    disk.mkdir()
    shm = pathlib.Path(tempfile.mkdtemp(prefix="tfd-tab-", dir="/dev/shm"))
    mounts = {"disk": mount_point(disk), "shm": mount_point(shm)}
    if mounts["disk"] == mounts["shm"]:
        shutil.rmtree(shm)
        pytest.skip("the test directory and /dev/shm are on one mount")
    profile_dir = root / "logs" / "train" / "plugins" / "profile"
    profile_dir.mkdir(parents=True)

    def session(name, body):
        scratch = root / f"scratch-{name}"
        with tfdarshan.profile(logdir=str(scratch)):
            for step in range(STEPS):
                with tfdarshan.step(step):
                    body(step)
        [s] = find_sessions(scratch)
        shutil.move(str(s.directory), profile_dir / name)

    def mixed(step):
        (disk / f"in{step}").read_bytes()
        (shm / f"in{step}").read_bytes()
        (disk / f"out{step}").write_bytes(b"o" * 8192)

    def read_only(step):
        (disk / f"in{step}").read_bytes()

    def write_only(step):
        (shm / f"ckpt{step}").write_bytes(b"c" * (32 << 10))

    try:
        for i in range(STEPS):
            (disk / f"in{i}").write_bytes(b"d" * (64 << 10) * (i + 1))
            (shm / f"in{i}").write_bytes(b"s" * (16 << 10) * (i + 1))
        session(MIXED, mixed)
        session(READ_ONLY, read_only)
        session(WRITE_ONLY, write_only)
    finally:
        shutil.rmtree(shm)
    return root / "logs", mounts


@pytest.fixture(scope="module")
def tab(mounts_logdir):
    """The tab in a 1600x1200 window, and a function that shows a session
    and returns its charts once the page is complete."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
    logdir, mounts = mounts_logdir
    with tensorboard(logdir) as url:
        d = browser()
        try:
            d.set_window_size(1600, 1200)
            open_tab(d, url)

            def show(session):
                d.switch_to.default_content()         # (a test may have left the frame for a screenshot)
                d.switch_to.frame(d.find_element(By.CSS_SELECTOR, "iframe"))
                sel = Select(d.find_element(By.ID, "tfd-session"))
                if sel.first_selected_option.get_attribute("value") != session:
                    # the page replaces its body at once: the table that comes back is the new session's
                    sel.select_by_value(session)
                    WebDriverWait(d, WAIT).until(
                        lambda drv: drv.find_elements(By.CSS_SELECTOR, "#tfd-files tbody tr"))
                return d.execute_script(REPORT_JS)
            yield d, show, mounts
            severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
            assert not severe, severe
        finally:
            d.quit()


def wait_for(d, show, session, check, what):
    """show(session) until check(charts) holds; fails with the last charts seen."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait
    seen = []

    def ok(_):
        seen[:] = [show(session)]
        return check(seen[0])
    try:
        WebDriverWait(d, WAIT, poll_frequency=0.2).until(ok)
    except TimeoutException:
        pytest.fail(f"{what}: {seen[0] if seen else 'no charts'}")
    return seen[0]


def drawn(charts):
    return bool(charts) and all(c["svg"] is not None for c in charts)


def fits(charts):
    return bool(charts) and all(c["svg"] is not None and c["svg"] <= c["cell"] + 1.5 for c in charts)


def test_every_chart_fits_its_grid_cell_on_load_and_after_a_session_switch(tab):
    d, show, _ = tab
    for session in (WRITE_ONLY, MIXED, READ_ONLY):      # the tab opens the last session
        charts = wait_for(d, show, session, fits, f"{session}: a chart is wider than its grid cell")
        if session == MIXED:
            # the case that clipped: several charts to a row
            assert len({round(c["left"]) for c in charts}) > 1, charts
            assert len(charts) >= 5, [c["id"] for c in charts]
    d.switch_to.default_content()
    ARTIFACTS.mkdir(exist_ok=True)
    d.save_screenshot(str(ARTIFACTS / "io_tab_charts.png"))


def test_every_axis_has_a_title(tab):
    d, show, _ = tab
    for session in (MIXED, READ_ONLY, WRITE_ONLY):
        charts = wait_for(d, show, session, drawn, f"{session}: charts not complete")
        untitled = [(c["id"], a["id"]) for c in charts for a in c["axes"] if not a["title"].strip()]
        assert not untitled, f"{session}: axes without a title: {untitled}"
        assert all(c["axes"] for c in charts), charts


def mount_name(name, point):
    """Whether a legend name names the mount at this point ("/dev/shm (tmpfs)")."""
    return name == point or name.startswith(point + " (")


def test_a_mount_has_one_colour_and_one_name_in_every_chart(tab):
    d, show, mounts = tab
    charts = wait_for(d, show, MIXED, drawn, "charts not complete")
    by_id = {c["id"]: c for c in charts}
    colours = {}        # mount -> {colour: [charts]}
    mount_charts = set()
    for c in charts:
        for entry in c["legend"]:
            for mount, point in mounts.items():
                if mount_name(entry["name"], point):
                    colours.setdefault(mount, {}).setdefault(entry["colour"], []).append(c["id"])
                    mount_charts.add(c["id"])
    # both mounts were read in every step: the per-step chart and the mount chart name both
    assert {"tfd-step-mounts", "tfd-mounts"} <= mount_charts, {c["id"]: c["legend"] for c in charts}
    for cid in ("tfd-step-mounts", "tfd-mounts"):
        names = [e["name"] for e in by_id[cid]["legend"]]
        assert len(names) == 2 and all(any(mount_name(n, p) for p in mounts.values()) for n in names), (cid, names)
    for mount, seen in colours.items():
        assert len(seen) == 1, f"{mount} has several colours: {seen}"
    assert len({next(iter(seen)) for seen in colours.values()}) == 2, colours
    # a mount legend entry in any chart is a mount; nothing unnamed or unknown
    for cid in mount_charts:
        assert all(any(mount_name(e["name"], p) for p in mounts.values()) for e in by_id[cid]["legend"]), by_id[cid]


def value_ticks(charts):
    return [(c["id"], a["id"], t) for c in charts for a in c["axes"] if a["type"] != "category" for t in a["ticks"]]


@pytest.mark.parametrize("session, mount", [(WRITE_ONLY, "shm"), (READ_ONLY, "disk"), (MIXED, "disk")])
def test_one_way_sessions_have_sound_axes_and_no_empty_series(tab, session, mount):
    d, show, mounts = tab
    charts = wait_for(d, show, session, drawn, f"{session}: charts not complete")
    assert not d.find_elements("css selector", "#tfd-body .error")
    ticks = value_ticks(charts)
    assert ticks
    # an axis with no data gets ticks from -1 to 1 ("-1.00", "250m" in SI format)
    bad = [t for t in ticks if "NaN" in t[2] or t[2].lstrip()[:1] in ("-", "\u2212") or t[2].rstrip().endswith("m")]
    assert not bad, f"{session}: {bad}"
    empty = [(c["id"], t["name"]) for c in charts for t in c["traces"] if not any(v for v in t["y"] if v is not None)]
    assert not empty, f"{session}: empty series {empty}"
    mount_chart = next((c for c in charts if c["id"] == "tfd-mounts"), None)
    assert mount_chart, [c["id"] for c in charts]
    names = [e["name"] for e in mount_chart["legend"]]
    assert any(mount_name(n, mounts[mount]) for n in names), (names, mounts[mount])


# the order the page drew its plots in, and which of them start above the window's foot
ORDER_JS = """
const t = window.__tfdTimings || {};
const boxes = [...document.querySelectorAll('#tfd-body > .grid .chart')];
return {order: t.order || [], page: boxes.map((b) => b.id),
        inView: boxes.filter((b) => b.getBoundingClientRect().top < window.innerHeight).map((b) => b.id)};
"""


def test_charts_in_view_are_drawn_first_in_page_order(tab):
    d, show, _ = tab
    # a fresh load, unscrolled: the order is its first draw's
    d.switch_to.default_content()
    d.refresh()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(d, WAIT).until(EC.frame_to_be_available_and_switch_to_it((By.CSS_SELECTOR, "iframe")))
    WebDriverWait(d, WAIT).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#tfd-files tbody tr")))
    seen = d.execute_script(ORDER_JS)
    assert sorted(seen["order"]) == sorted(seen["page"]) and seen["inView"], seen
    # every plot in view before any below it, each group top to bottom, left to right
    below = [b for b in seen["page"] if b not in seen["inView"]]
    assert seen["order"][:len(seen["inView"])] == seen["inView"], seen
    assert seen["order"][len(seen["inView"]):] == below, seen
