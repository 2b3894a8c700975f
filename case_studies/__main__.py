"""Run the case studies and write case_studies/RESULTS.md.

    python -m case_studies [--scale tiny|small|paper] [--study imagenet|malware|checkpoint|all]
                           [--workdir DIR] [--results FILE]

--scale small (the default) runs every configuration 5 times, interleaved,
in under 30 minutes on a 2-core machine; --scale tiny runs each once (the
mechanics, for the tests); --scale paper generates the papers' sizes
(128,000 images; 10,868 malware samples)."""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).parent


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m case_studies", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=["tiny", "small", "paper"], default="small")
    ap.add_argument("--study", choices=["imagenet", "malware", "checkpoint", "all"], default="all")
    ap.add_argument("--workdir", default=str(HERE / "work"), help="where data sets are generated")
    ap.add_argument("--results", default=str(HERE / "RESULTS.md"))
    args = ap.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from case_studies import results as R
    from case_studies import checkpointing
    from case_studies.runner import SCALES, STUDIES, run_study
    if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
        print("case studies need root and /dev/fuse to mount the slow FUSE tier", file=sys.stderr)
        return 2
    start = time.time()
    out = []
    for study in (STUDIES + ("checkpoint",) if args.study == "all" else [args.study]):
        if study == "checkpoint":
            out.append(checkpointing.run_study(checkpointing.SCALES[args.scale], pathlib.Path(args.workdir)))
        else:
            out.append(run_study(SCALES[args.scale][study], pathlib.Path(args.workdir)))
    elapsed = time.time() - start
    res = pathlib.Path(args.results)
    (res.parent / "results").mkdir(parents=True, exist_ok=True)
    stored = res.parent / "results" / f"results-{args.scale}.json"
    images = R.plots(out, res.parent / "results")
    if args.study != "all" and stored.exists():
        # one study re-run: the others' results (and plots) stay as they were
        ran = {r["config"]["study"]: r for r in out}
        kept = json.loads(stored.read_text())
        out = [ran.pop(r["config"]["study"], r) for r in kept] + list(ran.values())
        images = {r["config"]["study"]: f"{r['config']['study']}.png" for r in out}
    stored.write_text(json.dumps(out, indent=1))
    command = "make case-studies" if args.scale == "small" and args.study == "all" else \
        f"python -m case_studies --scale {args.scale} --study {args.study}"
    res.write_text(R.markdown(out, command, images, elapsed))
    print(f"wrote {res}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
