"""A count and its noun agree wherever a user reads one: "1 file", never
"1 files" (measures/human.py's count), in the commands' own output."""
import json
import os
import re
import subprocess
import sys

import tfdarshan
from tfdarshan.advice.manifest import make_manifest
from tfdarshan.logs.darshan_log import write_darshan_log
from tfdarshan.measures.human import count, noun

ONE_PLURAL = re.compile(r"(?<![\d.,])1 (files|logs|ranks|reads|steps|opens|stats|nodes|copies|runs|writes)\b")


def tfd(*args, env=None):
    return subprocess.run([sys.executable, "-m", "tfdarshan", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def test_count_agrees_with_its_number():
    assert [count(n, "file") for n in (0, 1, 2, 1024)] == ["0 files", "1 file", "2 files", "1,024 files"]
    assert count(1, "copy", "copies") == "1 copy" and count(3, "copy", "copies") == "3 copies"
    assert noun(1.0, "rank") == "rank" and noun(0.5, "rank") == "ranks"


def test_analyze_of_one_log_of_one_file(tmp_path, attached):
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(5000))
    with tfdarshan.profile() as prof:
        data.read_bytes()
    logs = tmp_path / "logs"
    logs.mkdir()
    log = write_darshan_log(prof.snapshot, logs / "run1.darshan")
    files = len(tfdarshan.read_darshan_log(log).posix)
    r = tfd("analyze", logs)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"analyzed 1 log in {logs}" in r.stdout, r.stdout
    assert f": {count(files, 'file')};" in r.stdout, r.stdout
    assert not ONE_PLURAL.search(r.stdout + r.stderr), r.stdout


def test_stage_of_one_file(tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(5000))
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(make_manifest([str(data)], str(tmp_path / "fast"))))
    r = tfd("stage", manifest, "--quiet", env={"TFDARSHAN_STAGING_MAP": str(tmp_path / "map.json")})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("staged 1 file, 0 already staged, 0 failed;"), r.stdout
    assert (tmp_path / "fast" / str(data).lstrip("/")).read_bytes() == data.read_bytes()
