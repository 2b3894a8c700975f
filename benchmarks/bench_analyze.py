"""`tfdarshan analyze` over 1,024 rank logs x 10,000 files (10 M records).

    python benchmarks/bench_analyze.py [--ranks 1024] [--files 10000] [--runs 1]

The logs are written once with the project's own writer into
build/bench_analyze/<ranks>x<files>/ and reused by later runs. Rank r reads
10,000 files of a dataset of ranks x 1,000 files, a window shifted by 1,000
per rank, so every file is read by 10 ranks (files x ranks / 1,000 distinct
paths: 1,024,000 at full size); 8 ranks a node. The logs carry no step series.

Two engines, each timed over --runs runs, interleaved (embedded, cluster,
embedded, ...):
  embedded  `tfdarshan analyze SESSION` in a child process, with no scheduler: it
            starts a local cluster sized to the machine (one single-threaded worker
            process per core), start-up and the summary it prints included. Peak
            memory: the largest peak RSS of that process and its workers (wait4),
            so the client's too
  cluster   a two-worker LocalCluster already running, reached like --scheduler;
            fresh workers every run, so each worker's peak RSS (getrusage, read in
            the worker) is that run's
Reported: wall time (median and range), CPU time of the run's processes
(client and workers: what a busy machine does not change; the embedded
figure includes starting the workers), peak memory per worker, records per
second per worker core (records / time / workers), and the load average
(the machine is shared). Budget (issue 21): 1,024 x 10,000 in <= 60 s on 2
cores, <= 2 GiB a worker."""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time
from multiprocessing import Pool

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHIFT = 1_000           # files between the windows of consecutive ranks
PER_NODE = 8
BUDGET, BUDGET_SECONDS = 2 << 30, 60.0

_template = None


def _write_rank(job) -> None:
    """One rank's log: the synthetic training records of bench_log, renamed to this rank's window."""
    global _template
    r, files, ranks, out = job
    import dataclasses
    import numpy as np
    from bench_log import synthetic_snapshot
    from tfdarshan.capture._native import darshan_hash
    from tfdarshan.logs.darshan_log import write_darshan_log
    if _template is None:
        _template = synthetic_snapshot(files)
    n_files = ranks * SHIFT
    paths = [f"/lustre/data/train/part-{(r * SHIFT + i) % n_files:08d}.tfrecord" for i in range(files)]
    posix = _template.posix
    posix["path"] = paths
    posix["record_id"] = np.array([darshan_hash(p) for p in paths], dtype=np.uint64)
    extra = _template.extra.assign(record_id=posix["record_id"].to_numpy())
    host = f"node{r // PER_NODE:04d}"
    snap = dataclasses.replace(_template, _posix=posix, _extra=extra, meta={**_template.meta, "hostname": host})
    tmp = out / f".{host}.rank{r}.darshan.tmp"
    write_darshan_log(snap, tmp, metadata={"rank": str(r)})
    os.replace(tmp, out / f"{host}.rank{r}.darshan")


def logs(ranks: int, files: int) -> pathlib.Path:
    out = ROOT / "build" / "bench_analyze" / f"{ranks}x{files}"
    out.mkdir(parents=True, exist_ok=True)
    todo = [r for r in range(ranks) if not (out / f"node{r // PER_NODE:04d}.rank{r}.darshan").exists()]
    if todo:
        t = time.perf_counter()
        with Pool(os.cpu_count() or 1) as pool:
            pool.map(_write_rank, [(r, files, ranks, out) for r in todo], chunksize=8)
        print(f"wrote {len(todo)} logs in {time.perf_counter() - t:.0f} s into {out}", flush=True)
    return out


def _peak_rss() -> int:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _cpu() -> float:
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run_embedded(session) -> dict:
    import subprocess
    import tempfile
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "tfdarshan", "analyze", str(session)], stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - t
        if os.waitstatus_to_exitcode(status):
            err.seek(0)
            raise SystemExit(f"tfdarshan analyze failed: {err.read().decode()[-2000:]}")
        out.seek(0)
        where = out.read().decode().split("(", 1)[1].split(")", 1)[0]
    return {"seconds": seconds, "where": where, "workers": os.cpu_count() or 1, "peak": usage.ru_maxrss * 1024,
            "cpu": usage.ru_utime + usage.ru_stime}


def run_cluster(session) -> dict:
    from distributed import Client, LocalCluster
    from tfdarshan.analysis.analyze import analyze
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      host="127.0.0.1") as cluster, Client(cluster) as client:
        client.wait_for_workers(2)
        before = sum(client.run(_cpu).values()) + _cpu()
        t = time.perf_counter()
        r = analyze(session, scheduler=cluster.scheduler_address)
        seconds = time.perf_counter() - t
        cpu = sum(client.run(_cpu).values()) + _cpu() - before
        peaks = client.run(_peak_rss)
    return {"seconds": seconds, "where": r["where"], "workers": 2, "peak": max(peaks.values()),
            "peaks": sorted(peaks.values()), "cpu": cpu}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--engines", default="embedded,cluster")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(pathlib.Path(__file__).parent))
    session = logs(args.ranks, args.files)
    records = args.ranks * args.files
    ok = True
    engines = args.engines.split(",")
    runs = {name: [] for name in engines}
    loads = []
    for _ in range(args.runs):
        for name in engines:
            runs[name].append({"embedded": run_embedded, "cluster": run_cluster}[name](session))
            loads.append(os.getloadavg()[0])
            print(f"  {name}: {runs[name][-1]['seconds']:.1f} s, {runs[name][-1]['cpu']:.1f} s of CPU "
                  f"(load average {loads[-1]:.1f})", flush=True)
    for name in engines:
        secs = [r["seconds"] for r in runs[name]]
        med, workers = statistics.median(secs), runs[name][0]["workers"]
        line = (f"{name} ({runs[name][0]['where']}): {records:,} records from {args.ranks} logs in {med:.1f} s "
                f"(median of {len(secs)}, {min(secs):.1f}-{max(secs):.1f}; budget {BUDGET_SECONDS:.0f} s); "
                f"{records / med / workers:,.0f} records/s per worker core")
        cpus = [r["cpu"] for r in runs[name]]
        line += f"; CPU time {statistics.median(cpus):.1f} s (range {min(cpus):.1f}-{max(cpus):.1f})"
        peaks = [r["peak"] for r in runs[name] if r["peak"]]
        if peaks:
            line += (f"; peak per worker {max(peaks) / 2**30:.2f} GiB (runs: "
                     + ", ".join(f"{p / 2**30:.2f}" for p in peaks) + f"; budget {BUDGET / 2**30:.0f} GiB)")
            ok = ok and max(peaks) <= BUDGET
        print(line, flush=True)
    print(f"load average (1 min) after each run: {min(loads):.1f}-{max(loads):.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
