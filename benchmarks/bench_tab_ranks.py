"""The I/O tab on a 1,024-rank session: how long it takes to open once
`tfdarshan analyze` has written the session's tables. The session is 4
real ranks under `tfdarshan run`, scaled to --ranks with the project's own
log writer (as the tests' 64-rank session is).

    python benchmarks/bench_tab_ranks.py [--ranks 1024] [--runs 5]

Prints the time to build the ranks, to analyze them, and, for each run, a
fresh TensorBoard's tab from render() to a complete page (cards, charts,
rank views, file table) in headless Chromium, then their median. Budget
(issue 14): a 1,024-rank session opens in <= 3 s after analyze."""
from __future__ import annotations

import argparse
import pathlib
import shutil
import statistics
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE.parent / "tests"))


def open_once(logdir: pathlib.Path) -> float:
    """Seconds from render() to the complete page, on a TensorBoard just started."""
    import conftest  # noqa: F401  (this checkout's tab first on the path)
    from selenium.webdriver.support.ui import WebDriverWait
    from tb_helpers import browser, open_tab, tensorboard
    with tensorboard(logdir) as url:
        d = browser()
        try:
            d.set_window_size(1600, 1200)
            open_tab(d, url, timeout=600)
            WebDriverWait(d, 600).until(lambda drv: drv.execute_script(
                "return window.__tfdTimings && window.__tfdTimings.rendered"))
            t = d.execute_script("return window.__tfdTimings")
            return (t["rendered"] - t["start"]) / 1e3
        finally:
            d.quit()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    from rank_sessions import real_ranks, scale
    from tfdarshan.analysis.analyze import analyze
    root = pathlib.Path(tempfile.mkdtemp(prefix="bench-tab-ranks-"))
    try:
        t0 = time.perf_counter()
        real = real_ranks(root / "real", 4)
        logdir = root / "tb"
        session = logdir / "job" / "plugins" / "tfdarshan" / real.name
        shutil.copytree(real, session)
        scale(session, 4, args.ranks)
        t1 = time.perf_counter()
        print(f"{args.ranks} rank logs written in {t1 - t0:.1f} s")
        where = analyze(session)["where"]
        t2 = time.perf_counter()
        print(f"analyze: {t2 - t1:.1f} s ({where})")
        times = []
        for i in range(args.runs):
            times.append(open_once(logdir))
            print(f"run {i + 1}: tab complete in {times[-1]:.2f} s")
        print(f"median of {len(times)}: {statistics.median(times):.2f} s (budget 3 s)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
