"""`tfdarshan joblog` over 1,024 rank logs x 10,000 files (10.24 M records).

    python benchmarks/bench_joblog.py [--ranks 1024] [--files 10000] [--runs 3] [--check-ranks 64]

The rank logs are bench_analyze.py's, written once into
build/bench_analyze/<ranks>x<files>/ (every file read by 10 ranks, so none
by all: every record is written per rank). Each run is `tfdarshan joblog
SESSION` in a child process: its wall time, CPU time and peak RSS
(getrusage of the child, from wait4); the median and range of --runs runs,
with the load average (the CPU time is what a busy machine does not change). Budget (issue 21): <= 60 s and <= 2 GiB at 1,024 x 10,000.

Then, on --check-ranks ranks, the job log is compared counter by counter
with the job log as it was written before it streamed (every rank log read
whole, reduced file by file: tests/oracles/reduction_oracle.py), for
bench_analyze's logs and for a variant in which every rank also reads 200
files in common (their bytes, read time and access sizes varying by rank),
so the shared-file reduction is checked at scale too; both are timed.
--all-shared also times 1,024 ranks that all read the same 10,000 files
(every record folded into 10,000: the reduction's worst case; its logs,
1 GB, are written once into build/bench_joblog/)."""
from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import Pool

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests" / "helpers"), str(ROOT / "tests" / "oracles")]
BUDGET_SECONDS, BUDGET_RSS = 60.0, 2 << 30
COMMON = 200            # files every rank of the checked shared variant reads (the oracle takes ~0.5 s a file)


def load() -> str:
    return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())


def remove_job_logs(session: pathlib.Path) -> None:
    for old in session.glob("*.job.darshan"):
        old.chmod(0o600)
        old.unlink()


def run_joblog(session: pathlib.Path) -> dict:
    """One `tfdarshan joblog` in a child process: seconds, peak RSS, job log size."""
    remove_job_logs(session)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "tfdarshan", "joblog", str(session)], stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - t
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode:
            raise SystemExit(f"tfdarshan joblog failed ({child.returncode}): {err.read().decode()[-2000:]}")
        said = out.read().decode().strip()
    (job,) = session.glob("*.job.darshan")
    return {"seconds": seconds, "cpu": usage.ru_utime + usage.ru_stime, "rss": usage.ru_maxrss * 1024,
            "size": job.stat().st_size, "said": said}


def _shared_rank(job) -> None:
    """One rank log of a shared variant (in a worker process)."""
    import numpy as np
    from tfdarshan.capture._native import darshan_hash
    from tfdarshan.logs.darshan_log import read_darshan_log, write_darshan_log
    log, target, common = job
    r = int(log.name.split(".rank")[1].split(".")[0])
    snap = read_darshan_log(log)
    posix = snap.posix
    n = min(common, len(posix))
    common = [f"/lustre/data/common/shard-{i:05d}.tfrecord" for i in range(n)]
    posix.loc[:n - 1, "path"] = common
    posix.loc[:n - 1, "record_id"] = np.array([darshan_hash(p) for p in common], dtype=np.uint64)
    posix["POSIX_BYTES_READ"] *= 1 + r % 7
    posix["POSIX_F_READ_TIME"] *= (1 + r % 5) / 3
    posix["POSIX_ACCESS1_ACCESS"], posix["POSIX_ACCESS1_COUNT"] = 262144, posix["POSIX_READS"] - 1
    posix["POSIX_ACCESS2_ACCESS"], posix["POSIX_ACCESS2_COUNT"] = 4096 * (1 + r % 3), 1
    tmp = target.with_name(f".{target.name}.tmp")
    write_darshan_log(dataclasses.replace(snap, _posix=posix), tmp, metadata=snap.meta["job_metadata"],
                      jobid=snap.meta["jobid"])
    os.replace(tmp, target)


def shared_variant(src: pathlib.Path, ranks: int, files: int, common: int) -> pathlib.Path:
    """bench_analyze's logs with their first `common` files renamed to files
    every rank reads, each rank's bytes, read time and access sizes its own
    (written once, by worker processes: this one stays small, for the peak
    RSS of the children it starts is measured from their start)."""
    out = ROOT / "build" / "bench_joblog" / f"shared{common}-{ranks}x{files}"
    out.mkdir(parents=True, exist_ok=True)
    todo = [(log, out / log.name, common) for log in sorted(src.glob("*.rank*.darshan"))
            if not (out / log.name).exists()]
    if todo:
        t = time.perf_counter()
        with Pool(os.cpu_count() or 1) as pool:
            pool.map(_shared_rank, todo, chunksize=4)
        print(f"wrote {len(todo)} logs in {time.perf_counter() - t:.0f} s into {out}", flush=True)
    return out


def check(session: pathlib.Path, what: str) -> None:
    """The job log `session` has against the old reduction, counter by counter."""
    from job_records import assert_same_counters, job_log_records, old_job_records
    from tfdarshan.capture import counters as C
    logs = {int(p.name.split(".rank")[1].split(".")[0]): p for p in session.glob("*.rank*.darshan")
            if not p.name.endswith(".job.darshan")}
    (job,) = session.glob("*.job.darshan")
    got, want = job_log_records(job), old_job_records(logs, len(logs))
    for module in C.MODULES:
        assert_same_counters(got[module], want[module], module)
    shared = int((got["POSIX"]["rank"] == -1).sum())
    print(f"  {what}: equal to the old reduction counter by counter ({len(got['POSIX']):,} POSIX records, "
          f"{shared:,} of them files every rank read)", flush=True)


def measure(session: pathlib.Path, records: int, runs: int, what: str) -> bool:
    results = []
    for i in range(runs):
        before = load()
        results.append(run_joblog(session))
        r = results[-1]
        print(f"  run {i + 1}: {r['seconds']:.1f} s ({r['cpu']:.1f} s of CPU), peak RSS {r['rss'] / 2**30:.2f} GiB "
              f"({before} before, {load()} after)", flush=True)
    secs, rss = [r["seconds"] for r in results], [r["rss"] for r in results]
    med = statistics.median(secs)
    cpu = [r["cpu"] for r in results]
    print(f"{what}: {records:,} records in {med:.1f} s (median of {runs}, {min(secs):.1f}-{max(secs):.1f}), "
          f"{records / med:,.0f} records/s; CPU {statistics.median(cpu):.1f} s ({min(cpu):.1f}-{max(cpu):.1f}); peak RSS {statistics.median(rss) / 2**30:.2f} GiB "
          f"({min(rss) / 2**30:.2f}-{max(rss) / 2**30:.2f}); job log {results[-1]['size'] / 2**20:,.0f} MiB "
          f"[{results[-1]['said']}]", flush=True)
    return med <= BUDGET_SECONDS and max(rss) <= BUDGET_RSS


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--check-ranks", type=int, default=64, help="0 skips the check against the old reduction")
    ap.add_argument("--all-shared", action="store_true",
                    help="also time a job whose every rank reads the same files (every record folded)")
    args = ap.parse_args(argv)
    from bench_analyze import logs
    print(f"{os.cpu_count()} cores, {load()}", flush=True)
    ok = True
    checks = []
    if args.check_ranks:
        plain = logs(args.check_ranks, args.files)
        checks = [(plain, "files read by 10 ranks"),
                  (shared_variant(plain, args.check_ranks, args.files, COMMON), f"{COMMON:,} read by all")]
    session = logs(args.ranks, args.files)
    timed = [(session, "files read by 10 ranks")]
    if args.all_shared:
        timed.append((shared_variant(session, args.ranks, args.files, args.files), "every file read by all"))
    # a child's peak RSS counts this process's at the fork: it must stay small (the checks run in a child)
    print(f"(this process: peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB)")
    for where, what in checks:
        ok &= measure(where, args.check_ranks * args.files, 1, f"{args.check_ranks} ranks, {what}")
        with ProcessPoolExecutor(1) as child:
            child.submit(check, where, what).result()
        remove_job_logs(where)
    within = True
    for where, what in timed:
        within &= measure(where, args.ranks * args.files, args.runs,
                          f"{args.ranks} ranks x {args.files:,} files, {what}")
        remove_job_logs(where)      # bench_analyze reads these directories too
    print(f"budget: {BUDGET_SECONDS:.0f} s and {BUDGET_RSS / 2**30:.0f} GiB: {'met' if within else 'NOT met'}")
    return 0 if ok and within else 1


if __name__ == "__main__":
    sys.exit(main())
