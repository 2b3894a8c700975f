"""The reliability table: what the hardening tests tried, and what happened.

    python benchmarks/reliability.py [--update-docs]

Runs the hardening tests with pytest (the same tests `make test` runs),
reads pytest's JUnit report, and prints one Markdown row per scenario with
its scale, the cases run, passed, failed and skipped, and the time taken.
With --update-docs the table replaces the one in docs/reliability.md between
the reliability markers."""
from __future__ import annotations

import argparse
import collections
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parent.parent
START, END = "<!-- reliability:start -->", "<!-- reliability:end -->"

# (area, what was tried, test ids selected by prefix)
SCENARIOS = [
    ("scale", "1,000,000 distinct files opened and read twice, record cap 65,536: nothing lost, "
              "memory bounded, log and tab work", ["test_scale.py::test_files_far_past_the_record_cap"]),
    ("threads", "64 threads of open/read/pread/write/close/dup/fstat under an attach, "
                "snapshot, detach loop (3 windows, 6 live snapshots): every window exact", ["test_concurrency.py::"]),
    ("threads", "16 threads x 100,000 preads exact; attach/detach while 8 threads read; "
                "Python threads", ["test_stress.py::"]),
    ("processes", "fork without exec, fork in a thread, multiprocessing fork and spawn, exec of a "
                  "non-Python program, a SIGKILLed child, os._exit", ["test_processes.py::test_fork",
                                                                      "test_processes.py::test_multi",
                                                                      "test_processes.py::test_exec",
                                                                      "test_processes.py::test_os_exit"]),
    ("processes", "tfdarshan run: exception, SIGTERM, subprocess/spawn children, two "
                  "MultiWorkerMirroredStrategy workers", ["test_tf_integration.py::test_tfdarshan_run",
                                                         "test_tf_integration.py::test_run_children",
                                                         "test_tf_integration.py::test_two_workers"]),
    ("semantics", "return values and errno with and without the shim: bad fd, EINTR, EAGAIN, short "
                  "and past-EOF reads, zero-length reads, random call sequences (hypothesis)",
     ["test_semantics.py::", "test_bad_input.py::test_errno"]),
    ("coverage", "bytes seen against /proc/self/io, with a dlsym blind spot",
     ["test_processes.py::test_coverage"]),
    ("faults", "Darshan logs: 300 mutated logs, truncations, wrong files", ["test_darshan_log.py::test_bad",
                                                                           "test_darshan_log.py::test_fuzzed"]),
    ("faults", "step series, tier TOML, staging manifest: damaged and random files",
     ["test_hostile_input.py::test_damaged", "test_hostile_input.py::test_fuzzed",
      "test_hostile_input.py::test_intact", "test_hostile_input.py::test_wrong_tier",
      "test_hostile_input.py::test_unreadable", "test_hostile_input.py::test_random",
      "test_hostile_input.py::test_plausible", "test_hostile_input.py::test_recommend",
      "test_hostile_input.py::test_manifest", "test_hostile_input.py::test_fuzzed_manifest",
      "test_hostile_input.py::test_damaged_stage"]),
    ("faults", "every CLI command with generated wrong arguments (hypothesis) and in real processes",
     ["test_hostile_input.py::test_cli", "test_hostile_input.py::test_generated",
      "test_hostile_input.py::test_real", "test_cli_import.py::"]),
    ("faults", "every tab route and parameter: traversal, encoded traversal, symlinks, oversized and "
               "non-UTF-8 values, hostile file names in Chromium",
     ["test_hostile_input.py::test_route", "test_hostile_input.py::test_tab", "test_hostile_input.py::test_non",
      "test_tb_plugin.py::test_path", "test_tb_plugin.py::test_encoded", "test_tb_plugin.py::test_symlink",
      "test_tb_plugin.py::test_html"]),
    ("faults", "damaged session files, fuzzed (hypothesis, TFDARSHAN_FUZZ_SCALE examples: 10 here, 1 in "
               "make test): truncated, bit-flipped and length-lying rank, job and partial Darshan logs, live logs, "
               "Parquet step series and analysis tables, JSON files, into joblog (150 examples), import (150), "
               "analyze (50), recommend (40) and every tab route (60); a flipped page bit and damaged analysis "
               "tables; real processes", ["test_fuzzed_sessions.py::"]),
    ("faults", "stager: changed, unreadable, vanishing sources; full or existing destinations",
     ["test_advisor.py::test_stage", "test_advisor.py::test_changed", "test_advisor.py::test_existing",
      "test_advisor.py::test_unreadable", "test_advisor.py::test_full"]),
]


def _test_file(name: str) -> str:
    """A test file named by its base name, in whichever folder of tests/ it is."""
    found = sorted(ROOT.glob(f"tests/**/{name}"))
    if len(found) != 1:
        raise SystemExit(f"reliability.py: expected one tests/**/{name}, found {len(found)}")
    return str(found[0].relative_to(ROOT))


def run_tests(files, extra) -> ET.Element:
    with tempfile.TemporaryDirectory() as tmp:
        report = pathlib.Path(tmp) / "junit.xml"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
               *[_test_file(f) for f in files], *extra]
        # the fuzzed session files at ten times the examples `make test` tries
        # and a million files past the record cap, against make test's 150,000
        subprocess.run(cmd, cwd=ROOT, env={**os.environ,
                                           "TFDARSHAN_FUZZ_SCALE": os.environ.get("TFDARSHAN_FUZZ_SCALE", "10"),
                                           "TFDARSHAN_SCALE_FILES": os.environ.get("TFDARSHAN_SCALE_FILES",
                                                                                   "1000000")})
        return ET.parse(report).getroot()


def cases(root: ET.Element):
    """(test id relative to tests/, outcome, seconds) for every case run."""
    for tc in root.iter("testcase"):
        module = tc.get("classname", "").split(".")[-1]
        outcome = "passed"
        for child in tc:
            if child.tag in ("failure", "error"):
                outcome = "failed"
            elif child.tag == "skipped":
                outcome = "skipped"
        yield f"{module}.py::{tc.get('name')}", outcome, float(tc.get("time", 0))


def table(results) -> str:
    rows = ["| area | what was tried | cases | passed | failed | skipped | time |",
            "|---|---|---|---|---|---|---|"]
    for area, what, prefixes in SCENARIOS:
        hit = [r for r in results if any(r[0].startswith(p) for p in prefixes)]
        n = collections.Counter(outcome for _, outcome, _ in hit)
        secs = sum(t for _, _, t in hit)
        rows.append(f"| {area} | {what} | {len(hit)} | {n['passed']} | {n['failed']} | {n['skipped']} "
                    f"| {secs:.0f} s |")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update-docs", "--update-readme", action="store_true",
                    help="replace the table in docs/reliability.md")
    args, extra = ap.parse_known_args(argv)
    files = sorted({p[0].split("::")[0] for _, _, p in [(a, w, [x]) for a, w, ps in SCENARIOS for x in ps]})
    results = list(cases(run_tests(files, extra)))
    text = table(results)
    print(text)
    if args.update_docs:
        page = ROOT / "docs" / "reliability.md"
        body = page.read_text()
        if START not in body or END not in body:
            print(f"{page.relative_to(ROOT)} has no reliability markers", file=sys.stderr)
            return 2
        body = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: f"{START}\n{text}\n{END}", body,
                      flags=re.S)
        page.write_text(body)
    return 1 if any(outcome == "failed" for _, outcome, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main())
