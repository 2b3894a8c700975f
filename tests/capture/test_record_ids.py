"""Record ids equal Darshan's, and paths are cleaned the way Darshan cleans them."""
import glob
import os

import darshan
import pytest

from tfdarshan.capture import _native


def _example_logs():
    logs = glob.glob(os.path.join(darshan.__path__[0], "examples", "**", "*.darshan"), recursive=True)
    return [p for p in logs if "noposix" not in p]    # that one names Lustre objects, not paths


def test_ids_match_real_darshan_logs():
    checked = 0
    for log in _example_logs():
        # closed at once: a report left to the garbage collector can run its
        # __del__ inside cffi's type parser and deadlock on cffi's lock
        with darshan.DarshanReport(log, read_all=True) as report:
            names = dict(report.name_records)
        for rid, name in names.items():
            assert _native.darshan_hash(name.encode()) == rid, (log, name)
            checked += 1
    assert checked > 2000    # sample-badost.darshan alone has 2052 names


@pytest.mark.parametrize("path, expected", [
    ("/a//b///c", "/a/b/c"),
    ("/a/./b/./c", "/a/b/c"),
    ("/a/../b", "/a/../b"),           # Darshan does not resolve ".."
    ("/a/b/.", "/a/b/."),             # nor a trailing "/."
    ("<STDIN>", "<STDIN>"),
])
def test_clean_path_like_darshan(path, expected):
    assert _native.clean_path(path) == expected.encode()


def test_relative_paths_are_joined_to_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _native.clean_path("x/./y") == os.fsencode(f"{os.getcwd()}/x/y")
    assert _native.clean_path("./z") == os.fsencode(f"{os.getcwd()}/z")
