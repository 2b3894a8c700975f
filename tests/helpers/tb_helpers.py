"""A real TensorBoard server on loopback, and headless Chromium driving it."""
import contextlib
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from places import ROOT

ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def tensorboard(logdir, *, python_flags=(), output=None):
    """TensorBoard for logdir on 127.0.0.1; stopped when the block ends.
    python_flags go to its interpreter (e.g. "-X", "importtime"); output: a
    file that takes what it prints (else a pipe, read only if it fails to start)."""
    port = free_port()
    sink = open(output, "w") if output else subprocess.PIPE
    proc = subprocess.Popen([sys.executable, *python_flags, "-m", "tensorboard.main", "--logdir", str(logdir),
                             "--host", "127.0.0.1", "--port", str(port)],
                            stdout=sink, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(url + "/data/plugins_listing", timeout=5).read()
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if proc.poll() is not None or time.time() > deadline:
                    out = proc.stdout.read() if proc.stdout else pathlib.Path(output).read_text()
                    raise RuntimeError(f"TensorBoard did not start: {out[-2000:]}")
                time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        if output:
            sink.close()


def fetch(url, path):
    """(status, headers, body bytes) without raising on HTTP errors."""
    try:
        with urllib.request.urlopen(url + path, timeout=60) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def static_address(url, plugin="tfdarshan"):
    """The address (from the server's root) TensorBoard loads `plugin`'s entry module from."""
    import json
    status, _, body = fetch(url, "/data/plugins_listing")
    assert status == 200, body
    return json.loads(body)[plugin]["loading_mechanism"]["module_path"]


def browser():
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip("needs Debian's chromium and chromium-driver (make test installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,2200", "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--no-first-run", "--disable-quic"):
        opts.add_argument(a)
    opts.binary_location = CHROMIUM
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def open_tab(driver, url, timeout=60):
    """TensorBoard's UI with our tab selected, switched into its iframe,
    waiting until the file table has rows."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get(url + "/#tfdarshan")
    WebDriverWait(driver, timeout).until(EC.frame_to_be_available_and_switch_to_it((By.CSS_SELECTOR, "iframe")))
    WebDriverWait(driver, timeout).until(EC.presence_of_element_located((By.CSS_SELECTOR, "#tfd-files tbody tr")))


def show_run(driver, run, chart, *also, timeout=60):
    """Switch the tab to `run` (the run selector's value) and wait until its
    file table, the chart `chart` and the elements whose ids are in `also`
    are drawn."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
    driver.switch_to.default_content()
    driver.switch_to.frame(driver.find_element(By.CSS_SELECTOR, "iframe"))
    sel = Select(driver.find_element(By.ID, "tfd-run"))
    if sel.first_selected_option.get_attribute("value") != run:
        sel.select_by_value(run)
    WebDriverWait(driver, timeout).until(
        lambda drv: drv.find_elements(By.CSS_SELECTOR, "#tfd-files tbody tr")
        and drv.find_elements(By.CSS_SELECTOR, f"#{chart} .main-svg")
        and all(drv.find_elements(By.ID, e) for e in also))


def chart_libraries(driver):
    """The chart bundles the tab's frame has loaded so far, by file name, in
    the order asked for (its script elements: one a bundle loaded), the
    driver switched into the frame."""
    return driver.execute_script(
        "return [...document.querySelectorAll('script[src]')].map((s) => new URL(s.src).pathname.split('/').pop())"
        ".filter((n) => n.startsWith('plotly'));")
