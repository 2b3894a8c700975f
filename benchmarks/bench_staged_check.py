"""When does `tfdarshan run --staged` check a source? Job time saved by
serving the staged copies with the default check (each source's size and
mtime at its first open, inside the training steps) against the check made
ahead (TFDARSHAN_STAGED_CHECK=ahead: every source when serving starts,
before the script runs), beside the unstaged run and the edited script
(`staged_paths()`, which stats each source before fit()).

    python benchmarks/bench_staged_check.py [--rounds 5] [--share 0.43]

The malware-like study's data set (case_studies, scale small: 160 files)
on the slow FUSE tier (4 ms a metadata request, 0.5 ms a read request),
the smallest `--share` of its files staged to /dev/shm; each round runs
the four routes as whole `tfdarshan run`s of case_studies/malware/train.py
in a shuffled order, the data set's page cache dropped before each, and
`recommend --compare` gives each staged run's job time saved against the
round's unstaged run (job_time.py's rule: the training steps). Printed:
per route the median saving with its 95 % interval, and the paired
differences. Needs root and /dev/fuse."""
from __future__ import annotations

import argparse
import os
import pathlib
import random
import shutil
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from intervals import median_interval  # noqa: E402

ROUTES = ("unstaged", "served", "ahead", "edited")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--share", type=float, default=0.43, help="share of the files staged, smallest first")
    args = ap.parse_args()
    import numpy as np

    from case_studies import routes as R, runner
    from case_studies.slowfs import mounted
    cfg = runner.SCALES["small"]["malware"]
    work = pathlib.Path(tempfile.mkdtemp(prefix="tfd-staged-check-"))
    fast = tempfile.mkdtemp(prefix="tfd-staged-check-", dir="/dev/shm")
    mnt = str(work / "slow")
    try:
        local = runner.generate(cfg, work / "data")
        with mounted(str(work / "data"), mnt, meta_latency=cfg.meta_latency, read_latency=cfg.read_latency,
                     bandwidth=cfg.bandwidth) as tier:
            slow = [os.path.join(mnt, os.path.relpath(p, work / "data")) for p in local]
            chosen = sorted(slow, key=os.path.getsize)[: int(len(slow) * args.share)]
            runner.stage_selection(chosen, fast)
            manifest = os.path.join(fast, "manifest.json")
            env = R.environment(os.path.join(fast, "staged.json"))
            saved = {r: [] for r in ROUTES[1:]}
            order_rng = random.Random(7)
            for i in range(args.rounds):
                order = list(ROUTES)
                order_rng.shuffle(order)
                for route in order:
                    runner.drop_cache(local)
                    cmd = R.command("served" if route == "ahead" else route, str(work / f"{i}-{route}"), manifest,
                                    mnt, cfg.batch, cfg.readers)
                    R.timed_run(cmd, dict(env, TFDARSHAN_STAGED_CHECK="ahead") if route == "ahead" else env,
                                tier.pid)
                for route in ROUTES[1:]:
                    c = R.compare(str(work / f"{i}-unstaged"), str(work / f"{i}-{route}"), manifest, env)
                    saved[route].append(c["job"]["achieved"])
                print(f"round {i + 1}/{args.rounds} ({', '.join(order)}): "
                      + ", ".join(f"{r} saved {saved[r][-1]:.2f} s" for r in ROUTES[1:]), flush=True)
        print(f"{len(chosen)} of {len(slow)} files staged; job time saved against the unstaged run, "
              f"median [95 % interval] of {args.rounds} rounds:")
        for r in ROUTES[1:]:
            lo, hi = median_interval(saved[r])
            print(f"  {r:8s} {np.median(saved[r]):.2f} s [{lo:.2f}, {hi:.2f}]")
        for a, b in (("ahead", "served"), ("ahead", "edited")):
            d = np.subtract(saved[a], saved[b])
            lo, hi = median_interval(d)
            print(f"  {a} - {b}: {np.median(d):+.2f} s [{lo:+.2f}, {hi:+.2f}] (paired within rounds)")
    finally:
        shutil.rmtree(fast, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
