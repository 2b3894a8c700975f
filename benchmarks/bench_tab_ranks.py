"""The I/O tab on a 1,024-rank session, once `tfdarshan analyze` has written
the session's tables. The session is 4 real ranks under `tfdarshan run`,
scaled to --ranks with the project's own log writer (tests/helpers/rank_session.py,
as the tests' 64-rank session is).

    python benchmarks/bench_tab_ranks.py [--ranks 1024] [--runs 5]

Prints the time to build the ranks and to analyze them, then, for --runs
rounds of a cold load (a TensorBoard just started, an empty browser
cache), a warm one and a third, interleaved (tab_loads.py): the tab's own
part (its frame's start -> every chart drawn: cards, charts, rank views)
and TensorBoard's own page apart, and navigation -> every chart drawn.
Budgets (issue 31): the tab's own part <= 1 s cold, <= 0.5 s warm;
navigation <= 1.5 s warm."""
from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(HERE))


def build_session(root: pathlib.Path, ranks: int):
    """(log directory, session directory) of one session of `ranks` rank logs, 4 of them real."""
    import tab_loads  # noqa: F401  (tests/helpers/ on the path)
    from rank_session import PIPELINE, pipeline_inputs, real_session, scale, scaled_host
    (root / "real").mkdir(parents=True)
    real = real_session(root / "real", PIPELINE, pipeline_inputs(root / "data", 4), 4)
    logdir = root / "tb"
    session = logdir / "job" / "plugins" / "tfdarshan" / real.name
    shutil.copytree(real, session)
    scale(session, 4, ranks, host_of=scaled_host)
    return logdir, session


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    import tab_loads
    from tfdarshan.analysis.analyze import analyze
    root = pathlib.Path(tempfile.mkdtemp(prefix="bench-tab-ranks-"))
    try:
        t0 = time.perf_counter()
        logdir, session = build_session(root, args.ranks)
        t1 = time.perf_counter()
        print(f"{args.ranks} rank logs written in {t1 - t0:.1f} s", flush=True)
        where = analyze(session)["where"]
        t2 = time.perf_counter()
        print(f"analyze: {t2 - t1:.1f} s ({where})", flush=True)
        results = tab_loads.rounds(logdir, args.runs)
        tab_loads.report(results, f"{args.ranks} ranks")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
