"""Staging many small files, against `cp` plus `sha256sum` of the copies.

    python benchmarks/bench_stage.py [--files N] [--size BYTES] [--rounds R]

Interleaved rounds on the same files (page cache warm for both); reports
the median and range of each and the ratio of medians. Run it where the
staging directory is on disk (it uses a directory under the current one)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=2744)
    ap.add_argument("--size", type=int, default=8 << 10)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    from tfdarshan.advice import stager
    base = tempfile.mkdtemp(prefix="bench-stage-", dir=".")
    os.environ["TFDARSHAN_STAGING_MAP"] = os.path.join(base, "map.json")
    src = os.path.join(base, "src")
    os.makedirs(src)
    paths = []
    for i in range(args.files):
        paths.append(os.path.join(src, f"img_{i:05d}.jpg"))
        with open(paths[-1], "wb") as f:
            f.write(os.urandom(args.size))
    times = {"stage": [], "cp+sha256sum": []}
    try:
        for r in range(args.rounds):
            order = ["stage", "cp+sha256sum"] if r % 2 == 0 else ["cp+sha256sum", "stage"]
            for what in order:
                dst = os.path.join(base, f"dst-{r}-{what}")
                if what == "stage":
                    manifest = os.path.join(base, f"manifest-{r}.json")
                    with open(manifest, "w") as f:
                        json.dump(stager.make_manifest(paths, dst), f)
                    t = time.perf_counter()
                    assert stager.stage(manifest, progress=False).ok
                else:
                    t = time.perf_counter()
                    subprocess.run(["cp", "-r", src, dst], check=True)
                    subprocess.run(f"cd {dst} && sha256sum * > /dev/null", shell=True, check=True)
                times[what].append(time.perf_counter() - t)
                shutil.rmtree(dst)
    finally:
        shutil.rmtree(base)
    for what, v in times.items():
        print(f"{what:13s} median {statistics.median(v):.2f} s  (range {min(v):.2f}-{max(v):.2f}, {len(v)} rounds)")
    print(f"stage / (cp+sha256sum): {statistics.median(times['stage']) / statistics.median(times['cp+sha256sum']):.1f}x"
          f" for {args.files} files of {args.size} B")
    return 0


if __name__ == "__main__":
    sys.exit(main())
