"""Where the pipeline's added CPU goes, by sampling: bench_pipeline.py's
tf.data pipeline (3,000 files of about 88 KB through tf.io.read_file in a
parallel map), attached, under `perf record -e cpu-clock` switched on only
around the measured passes. Prints, per run, the CPU of a pass and the
samples in the shim's library per pass, by function.

    python benchmarks/bench_pipeline_profile.py --runs 5

Sampling needs no hardware counters (this VM gives none). A run is one
process; the runs' spread is the figure's spread."""
import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
SHIM = "_native_shim.abi3.so"

# the measured process: passes over the files, attached, with perf switched
# on through its control FIFO around them only
PASSES = """
import gc, os, pathlib, resource, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)
import tfdarshan
files, passes, ctl, here = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, here)
from bench_pipeline import pipeline
ds = pipeline(tf, sorted(str(p) for p in pathlib.Path(files).glob("*/*.jpg")))
tfdarshan.attach()
for _ in range(2):                      # every file's record, cached path and shard exist
    sum(int(tf.reduce_sum(x)) for x in ds)
control = os.open(ctl, os.O_WRONLY)
cpu = 0.0
for _ in range(passes):
    gc.collect()
    os.write(control, b"enable\\n")
    c0 = resource.getrusage(resource.RUSAGE_SELF)
    sum(int(tf.reduce_sum(x)) for x in ds)
    c1 = resource.getrusage(resource.RUSAGE_SELF)
    os.write(control, b"disable\\n")
    cpu += (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
print(cpu / passes)
"""


def samples(data: pathlib.Path, *sort: str) -> dict:
    """perf report's sample counts, keyed by the sort keys' text."""
    out = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "-q", "-n", "--sort", ",".join(sort)],
                         capture_output=True, text=True, check=True).stdout
    got = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) >= 3 and f[0].endswith("%"):
            got[" ".join(f[2:])] = int(f[1])
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--passes", type=int, default=40)
    ap.add_argument("--files", type=int, default=3_000)
    ap.add_argument("--freq", type=int, default=2999, help="samples a second")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE))
    from bench_pipeline import make_files
    with tempfile.TemporaryDirectory(prefix="tfd-pipe-prof-", dir=os.environ.get("TFD_BENCH_DIR")) as d:
        d = pathlib.Path(d)
        (d / "files").mkdir()
        make_files(d / "files", args.files)
        (d / "passes.py").write_text(PASSES)
        shares, by_function = [], {}
        for run in range(args.runs):
            ctl, data = d / f"ctl{run}", d / f"perf{run}.data"
            os.mkfifo(ctl)
            r = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-F", str(args.freq), "-D", "-1",
                                f"--control=fifo:{ctl}", "-o", str(data), sys.executable, str(d / "passes.py"),
                                str(d / "files"), str(args.passes), str(ctl), str(HERE)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stderr[-2000:], file=sys.stderr)
                return 1
            cpu_per_pass = float(r.stdout.split()[-1])
            dsos = samples(data, "dso")
            shim = sum(n for k, n in dsos.items() if SHIM in k)
            shim_ms = shim / args.freq / args.passes * 1e3
            shares.append(100 * shim_ms / (cpu_per_pass * 1e3))
            for k, n in samples(data, "dso", "sym").items():
                if SHIM in k:
                    by_function.setdefault(k.split()[-1], []).append(n / args.passes)
            print(f"run {run + 1}: {cpu_per_pass * 1e3:.0f} ms of CPU a pass, the shim's code {shim_ms:.1f} ms "
                  f"({shares[-1]:.2f} %, {shim / args.passes:.1f} samples a pass)", flush=True)
            data.unlink()
        print(f"the shim's code, share of the pipeline's CPU: median {statistics.median(shares):.2f} % "
              f"(runs {min(shares):.2f} to {max(shares):.2f} %)")
        print("samples a pass by function (median of runs):")
        for name, v in sorted(by_function.items(), key=lambda kv: -statistics.median(kv[1]))[:10]:
            print(f"  {statistics.median(v):6.2f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
