"""The I/O tab at scale: a synthetic log directory with 100,000 files and
10,000 steps, served by a real TensorBoard and drawn by headless Chromium.

    python benchmarks/bench_tab.py [--files 100000] [--steps 10000] [--runs 5]

Prints, for --runs rounds of a cold load (a TensorBoard just started, an
empty browser cache), a warm one and a third, interleaved (tab_loads.py):
the tab's own part (its frame's start -> every chart drawn) and
TensorBoard's own page apart, and navigation -> every chart drawn; then
the per-file table route's time per page. Budgets (issue 31): the tab's
own part <= 1 s cold, <= 0.5 s warm; navigation -> every chart drawn
<= 1.5 s warm; under 100 ms a page."""
from __future__ import annotations

import argparse
import pathlib
import socket
import statistics
import sys
import tempfile
import time
import urllib.request

import numpy as np
import pandas as pd

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "helpers"))


def build_logdir(root: pathlib.Path, n_files: int, n_steps: int) -> pathlib.Path:
    from bench_log import synthetic_snapshot
    from tfdarshan.logs.darshan_log import write_darshan_log
    from tfdarshan.steps.series import write_parquet as _write_parquet
    from tfdarshan.tf.steps import FIELDS
    snap = synthetic_snapshot(n_files)
    run = root / "logs" / "train" / "plugins" / "profile" / "2026_01_01_00_00_00"
    run.mkdir(parents=True)
    host = socket.gethostname()
    write_darshan_log(snap, run / f"{host}.darshan")
    rng = np.random.default_rng(1)
    steps = pd.DataFrame({"step": np.arange(n_steps), "start": np.arange(n_steps) * 0.015,
                          "end": np.arange(1, n_steps + 1) * 0.015, "files": 10})
    for f in FIELDS:
        steps[f] = rng.integers(0, 1 << 20, n_steps)
    for f in ("read_time", "write_time", "meta_time"):
        steps[f] = rng.random(n_steps) * 1e-3
    _write_parquet(steps, run / f"{host}.steps.parquet")
    rows = n_steps * 10
    files = pd.DataFrame({"step": np.repeat(np.arange(n_steps), 10),
                          "record_id": snap.posix["record_id"].to_numpy()[rng.integers(0, n_files, rows)],
                          "module": "POSIX"})
    for f in FIELDS:
        files[f] = rng.integers(0, 1 << 16, rows)
    files["path"] = pd.Series(["/data/x"] * rows, dtype=object)
    files["mount"] = "/"
    _write_parquet(files, run / f"{host}.step_files.parquet")
    return root / "logs"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    import tab_loads
    from tb_helpers import tensorboard
    from tfdarshan.logs.logdir import find_sessions
    with tempfile.TemporaryDirectory() as d:
        logdir = build_logdir(pathlib.Path(d), args.files, args.steps)
        s = find_sessions(logdir)[0]
        results = tab_loads.rounds(logdir, args.runs)
        with tensorboard(logdir) as url:
            page = []
            q = f"run={s.run}&session={s.name}"
            for i in range(30):
                t0 = time.perf_counter()
                urllib.request.urlopen(f"{url}/data/plugin/tfdarshan/files?{q}&sort=bandwidth&order=asc"
                                       f"&offset={i * 50}&limit=50").read()
                page.append(time.perf_counter() - t0)
    tab_loads.report(results, f"{args.files} files, {args.steps} steps")
    print(f"files route: median {1e3 * statistics.median(page):.1f} ms per page of 50, sorted by bandwidth "
          f"({1e3 * min(page):.1f}-{1e3 * max(page):.1f}; the first builds the session; budget 100 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
