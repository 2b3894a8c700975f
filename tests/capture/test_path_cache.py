"""Which paths are recorded, and under which record, does not depend on what
the shim has seen before. Opens and stats of an absolute path the shim has
already resolved go through a cache (native/paths.c) that skips
cleaning, the include/exclude rules and Darshan's hash; these tests hold the
cache to the answers the rules give afresh: after the rules change at a new
attach, for every spelling of a path, for excluded paths seen twice, and in
a forked child, whose records are its own."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import tfdarshan


def bytes_read(path) -> int:
    """POSIX bytes read of path since the first attach (0: no record)."""
    posix = tfdarshan.snapshot().posix
    return int(posix.loc[posix["path"] == str(path), "POSIX_BYTES_READ"].sum())


def read(path) -> int:
    with open(path, "rb") as f:
        return len(f.read())


@pytest.fixture
def detached():
    """Starts detached; put back attached if it was."""
    was = tfdarshan.is_attached()
    tfdarshan.detach()
    yield
    tfdarshan.detach()
    if was:
        tfdarshan.attach()


def test_rules_given_at_a_new_attach_apply_to_paths_seen_before(tmp_path, detached):
    data = tmp_path / "data"
    data.mkdir()
    f = data / "a.bin"
    f.write_bytes(os.urandom(3000))
    tfdarshan.attach(exclude=[str(data)])
    read(f); read(f)                      # seen twice while excluded
    tfdarshan.detach()
    assert bytes_read(f) == 0
    tfdarshan.attach()                    # the default rules record it
    read(f)
    tfdarshan.detach()
    assert bytes_read(f) == 3000
    tfdarshan.attach(exclude=[str(data)])  # excluded again: no more bytes
    read(f)
    tfdarshan.detach()
    assert bytes_read(f) == 3000


def test_every_spelling_of_a_path_counts_under_its_clean_name(tmp_path, detached):
    f = tmp_path / "b.bin"
    f.write_bytes(os.urandom(1000))
    spellings = [str(f), f"{tmp_path}//b.bin", f"{tmp_path}/./b.bin", f"{tmp_path}/.//./b.bin"]
    tfdarshan.attach()
    for _ in range(2):                    # the second round finds them in the cache
        for s in spellings:
            read(s)
    tfdarshan.detach()
    posix = tfdarshan.snapshot().posix
    mine = posix[posix["path"].str.startswith(str(tmp_path))]
    assert list(mine["path"]) == [str(f)]
    assert int(mine["POSIX_OPENS"].iloc[0]) == 2 * len(spellings)
    assert int(mine["POSIX_BYTES_READ"].iloc[0]) == 2 * len(spellings) * 1000


def test_an_excluded_path_stays_excluded_when_seen_again(tmp_path, detached):
    py = tmp_path / "module.py"           # *.py is excluded by default
    py.write_text("x = 1\n" * 100)
    tfdarshan.attach()
    for _ in range(3):
        read(py)
        os.stat(py)
    tfdarshan.detach()
    posix = tfdarshan.snapshot().posix
    assert str(py) not in set(posix["path"])


def test_a_forked_child_resolves_a_path_its_parent_cached_to_its_own_record(tmp_path):
    """The child starts with fresh records. Darshan's open resets the file's
    shared position, so a read() on a descriptor inherited from the parent
    right after the child opens the file again is counted at offset 0: a
    cached path that still led to the parent's record would reset that
    record instead, and the read would be counted at the parent's offset."""
    f = tmp_path / "seen.bin"
    f.write_bytes(os.urandom(4000))
    script = textwrap.dedent(f"""
        import json, os
        import tfdarshan
        path = {str(f)!r}
        tfdarshan.attach()
        for _ in range(2):                # resolved and cached in the parent
            os.close(os.open(path, os.O_RDONLY))
        inherited = os.open(path, os.O_RDONLY)
        os.read(inherited, 1000)
        pid = os.fork()
        if pid == 0:
            again = os.open(path, os.O_RDONLY)
            os.read(inherited, 500)
            p = tfdarshan.snapshot().posix
            p = p[p["path"] == path]
            print(json.dumps({{"bytes": int(p["POSIX_BYTES_READ"].sum()),
                              "max_byte": int(p["POSIX_MAX_BYTE_READ"].max()),
                              "opens": int(p["POSIX_OPENS"].sum())}}), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(next(line for line in r.stdout.splitlines() if line.startswith("{")))
    assert got == {"bytes": 500, "max_byte": 499, "opens": 1}
