"""Staged copies served from inside the shim (`tfdarshan run --staged`),
with the program unchanged: each safety rule.

Files are staged with `tfdarshan stage`; then each copy is rewritten in
place with other bytes of its size and its recorded mtime is put back, so
a read tells where it came from (the check at a source's first use compares
sizes and mtimes, never contents): C is a copy's byte, S a source's. One
`tfdarshan run --staged` of tests/workers/staged_rules.py exercises every
rule on files of its own and writes what it saw; each test reads its part,
and the counts its log kept. Expected counts are the worker's own calls."""
import errno
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from tfdarshan.advice import stager
from tfdarshan.capture import served
from tfdarshan.logs.darshan_log import read_darshan_log
from places import NATIVE, WORKERS

WORKER = WORKERS / "staged_rules.py"
SIZE = 4096
HOST = socket.gethostname()
OTHER_NODE = "some-other-node"
# every file the worker reads, in its own staged part but `elsewhere`
FILES = ("plain", "clib", "fdlink", "written", "truncated", "changed", "missing", "vanishing", "unreadable", "relative",
         "forked", "child", "elsewhere")

pytestmark = [pytest.mark.cost(35), pytest.mark.timeout(600)]


def tfdarshan_cmd(*args):
    return [sys.executable, "-m", "tfdarshan", *args]


def rewrite_copy(copy: str, mtime_ns: int) -> None:
    """The copy's bytes become C's; its size and recorded mtime stay."""
    size = os.path.getsize(copy)
    os.chmod(copy, 0o644)
    with open(copy, "r+b") as fh:
        fh.write(b"C" * size)
    os.utime(copy, ns=(mtime_ns, mtime_ns))


def can_make_unreadable(path: str):
    """The command prefix under which a mode-000 file cannot be read (root
    keeps reading it unless its DAC override is dropped), or None."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv"):
        return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
    return None


def stage_files(tmp: pathlib.Path, names, env, other=()):
    """Sources of S bytes staged with `tfdarshan stage` (a per-node manifest:
    `other` is another node's part, staged here with --node); their copies
    rewritten to C bytes. Returns (sources, copies, manifest path)."""
    data = tmp / "data"
    data.mkdir()
    sources = {}
    for n in names:
        p = data / f"{n}.bin"
        p.write_bytes(b"S" * SIZE)
        sources[n] = str(p)
    root = tempfile.mkdtemp(prefix="tfd-staged-test-", dir="/dev/shm")
    mine = [sources[n] for n in names if n not in other]
    m = stager.make_node_manifest({HOST: mine, OTHER_NODE: [sources[n] for n in other]}, root)
    mpath = tmp / "stage.json"
    mpath.write_text(json.dumps(m))
    for node in ([HOST, OTHER_NODE] if other else [HOST]):
        p = subprocess.run(tfdarshan_cmd("stage", str(mpath), "--quiet", "--node", node), env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
    copies = {n: e["destination"] for e in m["entries"] for n, s in sources.items() if s == e["source"]}
    held = served.read_held()
    for n, copy in copies.items():
        rewrite_copy(copy, held[sources[n]]["copy_mtime_ns"])
    return sources, copies, mpath, root


@pytest.fixture(scope="module")
def helper(tmp_path_factory):
    if not shutil.which("gcc"):
        pytest.skip("gcc is needed to build tests/native/staged_calls.c")
    so = tmp_path_factory.mktemp("native") / "libstaged_calls.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(NATIVE / "staged_calls.c"), "-o", str(so)],
                   check=True)
    return str(so)


@pytest.fixture(scope="module")
def run(tmp_path_factory, helper):
    """One `tfdarshan run --children --staged MANIFEST` of the worker."""
    tmp = tmp_path_factory.mktemp("staged")
    env = {**os.environ, "TFDARSHAN_STAGING_MAP": str(tmp / "map" / "staged.json")}
    os.environ["TFDARSHAN_STAGING_MAP"] = env["TFDARSHAN_STAGING_MAP"]     # served.read_held() here
    root = None
    try:
        sources, copies, mpath, root = stage_files(tmp, FILES, env, other=("elsewhere",))
        # after staging: a source regenerated (same size, new bytes and mtime), a copy removed
        st = os.stat(sources["changed"])
        pathlib.Path(sources["changed"]).write_bytes(b"S" * SIZE)
        os.utime(sources["changed"], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        os.unlink(copies["missing"])
        prefix = can_make_unreadable(copies["unreadable"])
        files = dict(sources)
        if prefix is None:
            del files["unreadable"]
        else:
            os.chmod(copies["unreadable"], 0)
        cfg = tmp / "cfg.json"
        cfg.write_text(json.dumps({"files": files, "copies": copies, "helper": helper}))
        report, logdir = tmp / "report.json", tmp / "logs"
        p = subprocess.run((prefix or []) + tfdarshan_cmd("run", "--children", "--logdir", str(logdir), "--staged",
                                                          str(mpath), str(WORKER), str(cfg), str(report)),
                           env=env, capture_output=True, text=True, timeout=500)
        assert p.returncode == 0, p.stderr[-3000:]
        session = next((logdir / "plugins" / "tfdarshan").iterdir())
        logs = {}
        for log in session.glob("*.darshan"):
            meta = served.read_beside(log)
            logs[log.name] = (read_darshan_log(log), served.frame(meta).set_index("path") if meta else None)
        yield {"seen": json.loads(report.read_text()), "sources": sources, "copies": copies, "logs": logs,
               "session": session, "unreadable": prefix is not None, "root": root, "stderr": p.stderr}
    finally:
        os.environ.pop("TFDARSHAN_STAGING_MAP", None)
        if root:
            shutil.rmtree(root, ignore_errors=True)


def parent(run):
    """The worker's own log and served table (not its children's)."""
    name = f"{HOST}.darshan"
    return run["logs"][name]


def counts(run, name):
    return parent(run)[1].loc[run["sources"][name]]


def test_reads_of_staged_sources_come_from_their_copies(run):
    s = run["seen"]
    assert s["plain"] == ["C", "C", "C"]
    assert s["clib"] == ["C"] * 5              # open, open64, openat, fopen, fopen64 of a C library
    assert s["relative"] == ["C"]              # a path relative to the working directory
    plain = counts(run, "plain")
    assert (plain["served_opens"], plain["served_stats"], plain["state"]) == (3, 2, "serving")
    clib = counts(run, "clib")
    assert (clib["served_opens"], clib["served_fopens"], clib["served_stats"]) == (3, 2, 1)
    assert plain["throughout"] and plain["bytes"] == 3    # one byte a read, every open served


def test_the_log_records_the_programs_paths_and_the_tier(run):
    snap, table = parent(run)
    paths = set(snap.posix["path"]) | set(snap.stdio["path"])
    assert not [p for p in paths if p.startswith(run["root"])], "a record under a copy's path"
    row = snap.posix.set_index("path").loc[run["sources"]["plain"]]
    assert row["POSIX_OPENS"] == 3 and row["POSIX_BYTES_READ"] == 3
    assert set(table.loc[table["served_opens"] + table["served_fopens"] > 0, "served_from"]) == {"/dev/shm"}


def test_writes_go_to_the_source_and_end_serving(run):
    s, src, cp = run["seen"], run["sources"], run["copies"]
    # the update in place reached the source; the read after it is the source's
    assert s["written"] == ["X"]
    assert pathlib.Path(src["written"]).read_bytes() == b"X" + b"S" * (SIZE - 1)
    assert s["truncated"] == [""] and os.path.getsize(src["truncated"]) == 0
    for n in ("written", "truncated"):
        assert pathlib.Path(cp[n]).read_bytes() == b"C" * SIZE, f"the copy of {n} was written"
        c = counts(run, n)
        assert (c["served_opens"], c["source_opens"], c["state"]) == (0, 2, "source written")


def test_a_directory_open_and_errno_are_the_sources(run):
    src = run["sources"]["plain"]
    for key, call in (("plain_as_directory", lambda: os.open(src, os.O_RDONLY | os.O_DIRECTORY)),
                      ("plain_as_parent", lambda: os.stat(src + "/inside"))):
        with pytest.raises(OSError) as e:
            call()
        assert run["seen"][key] == errno.errorcode[e.value.errno]


def test_a_source_changed_after_staging_is_read_from_itself(run):
    assert run["seen"]["changed"] == ["S"]
    c = counts(run, "changed")
    assert (c["served_opens"], c["source_opens"], c["state"]) == (0, 1, "source changed")


def test_a_copy_this_node_does_not_hold_is_never_served(run):
    s = run["seen"]
    assert s["missing"] == ["S"]
    assert counts(run, "missing")["state"] == "copy missing"
    # another node's part: its copy is here (staged with --node), but not this node's to serve
    assert s["elsewhere"] == ["S"] and os.path.exists(run["copies"]["elsewhere"])
    assert run["sources"]["elsewhere"] not in parent(run)[1].index


def test_an_error_on_the_copy_falls_back_to_the_source_and_is_counted(run):
    s = run["seen"]
    assert s["vanishing"] == ["C", "S"]
    c = counts(run, "vanishing")
    assert (c["served_opens"], c["fallback_opens"], c["state"]) == (1, 1, "copy failed")
    assert not c["throughout"] and c["bytes"] == 0
    if not run["unreadable"]:
        pytest.skip("running as root without setpriv: a mode-000 copy stays readable")
    assert s["unreadable"] == ["S"]
    u = counts(run, "unreadable")
    assert (u["served_opens"], u["fallback_opens"], u["state"]) == (0, 1, "copy failed")


def test_stat_of_a_staged_path_answers_for_the_copy(run):
    src, cp = run["sources"]["plain"], run["copies"]["plain"]
    ino, size, mtime, mode, lino = run["seen"]["plain_stat"]
    c, s = os.stat(cp), os.stat(src)
    assert ino == lino == c.st_ino != s.st_ino
    # what a program compares: the size, mtime and permissions are the source's
    assert (size, mtime, mode) == (s.st_size, s.st_mtime_ns, s.st_mode)
    assert run["seen"]["clib_stat_ino"] == os.stat(run["copies"]["clib"]).st_ino


def test_proc_self_fd_and_realpath_name_the_source(run):
    s, src = run["seen"], run["sources"]["fdlink"]
    assert counts(run, "fdlink")["served_opens"] == 1
    assert s["fd_link"] == src
    assert s["fd_realpath"] == os.path.realpath(src)
    assert s["fd_c_realpath"] == [0, os.path.realpath(src)]


def test_fork_and_child_processes(run):
    s = run["seen"]
    assert s["forked"] == ["C"]
    # the Python child attached (--children) and was served; `head` is not Python: it read the source
    assert s["child"] == ["C", "S"]
    others = {name: t for name, (_, t) in run["logs"].items() if name != f"{HOST}.darshan"}
    forked = [t for t in others.values() if t is not None and run["sources"]["forked"] in t.index]
    child = [t for t in others.values() if t is not None and run["sources"]["child"] in t.index]
    # each process counts its own opens (a fork's child afresh): one each, none in the parent
    assert len(forked) == 1 and forked[0].loc[run["sources"]["forked"], "served_opens"] == 1
    assert len(child) == 1 and child[0].loc[run["sources"]["child"], "served_opens"] == 1
    assert run["sources"]["forked"] not in parent(run)[1].index


def test_a_run_that_served_nothing_says_so_and_keeps_its_status(tmp_path):
    env = {**os.environ, "TFDARSHAN_STAGING_MAP": str(tmp_path / "map" / "staged.json")}
    os.environ["TFDARSHAN_STAGING_MAP"] = env["TFDARSHAN_STAGING_MAP"]
    root = None
    try:
        sources, copies, mpath, root = stage_files(tmp_path, ["only"], env)
        os.unlink(copies["only"])
        script = tmp_path / "exits.py"
        script.write_text(f"open({sources['only']!r}, 'rb').read()\nraise SystemExit(3)\n")
        p = subprocess.run(tfdarshan_cmd("run", "--logdir", str(tmp_path / "logs"), "--staged", str(script)),
                           env=env, capture_output=True, text=True, timeout=300)
    finally:
        os.environ.pop("TFDARSHAN_STAGING_MAP", None)
        if root:
            shutil.rmtree(root, ignore_errors=True)
    assert p.returncode == 3
    lines = [x for x in p.stderr.splitlines() if "served none" in x]
    assert len(lines) == 1 and "1 copy missing" in lines[0], p.stderr


CHANGES_A_SOURCE = """
import os, sys
# the source's mtime changes after serving started and before its first open
os.utime(sys.argv[1], ns=(0, 123_456_789))
with open(sys.argv[1], "rb") as f:
    print(f.read(1).decode())
"""


@pytest.mark.parametrize("check", ["first-use", "ahead"])
def test_staged_check_first_use_or_ahead(tmp_path, check):
    """--staged-check: at its first open (the default) a source changed
    since the run started is read from itself; checked ahead, before the
    script started, it was unchanged then, and its copy is served (what the
    docs say ahead gives up). Decided by what the script read and the
    served table's state, never by time."""
    env = {**os.environ, "TFDARSHAN_STAGING_MAP": str(tmp_path / "map" / "staged.json")}
    env.pop("TFDARSHAN_STAGED_CHECK", None)
    os.environ["TFDARSHAN_STAGING_MAP"] = env["TFDARSHAN_STAGING_MAP"]
    root = None
    try:
        sources, copies, mpath, root = stage_files(tmp_path, ["later"], env)
        script = tmp_path / "changes.py"
        script.write_text(CHANGES_A_SOURCE)
        p = subprocess.run(tfdarshan_cmd("run", "--logdir", str(tmp_path / "logs"), "--staged-check", check,
                                         "--staged", str(script), sources["later"]),
                           env=env, capture_output=True, text=True, timeout=300)
    finally:
        os.environ.pop("TFDARSHAN_STAGING_MAP", None)
        if root:
            shutil.rmtree(root, ignore_errors=True)
    assert p.returncode == 0, p.stderr[-2000:]
    log = next((tmp_path / "logs" / "plugins" / "tfdarshan").glob("*/*.darshan"))
    state = served.frame(served.read_beside(log)).set_index("path").loc[sources["later"], "state"]
    if check == "first-use":
        assert (p.stdout.strip(), state) == ("S", "source changed")
    else:
        assert (p.stdout.strip(), state) == ("C", "serving")


def test_staged_check_needs_staged(tmp_path):
    script = tmp_path / "nothing.py"
    script.write_text("pass\n")
    p = subprocess.run(tfdarshan_cmd("run", "--logdir", str(tmp_path / "logs"), "--staged-check", "ahead",
                                     str(script)), capture_output=True, text=True, timeout=300)
    said = p.stderr.strip().splitlines()
    assert p.returncode == 2 and said == ["tfdarshan run: error: --staged-check: needs --staged"], p.stderr


TF_WORKER = """
import json, sys
import tensorflow as tf
cfg = json.load(open(sys.argv[1]))
seen = {"gfile": tf.io.gfile.GFile(cfg["plain"], "rb").read(1).decode(),
        "gfile_size": tf.io.gfile.stat(cfg["plain"]).length, "exists": tf.io.gfile.exists(cfg["plain"]),
        "read_file": tf.io.read_file(cfg["plain"]).numpy()[:1].decode(),
        "records": [r.numpy()[:1].decode() for r in tf.data.TFRecordDataset([cfg["records"]])]}
json.dump(seen, open(sys.argv[2], "w"))
"""


def test_tensorflow_reads_through_gfile_and_tfrecorddataset_are_served(tmp_path, tf):
    env = {**os.environ, "TFDARSHAN_STAGING_MAP": str(tmp_path / "map" / "staged.json"), "TF_CPP_MIN_LOG_LEVEL": "2"}
    os.environ["TFDARSHAN_STAGING_MAP"] = env["TFDARSHAN_STAGING_MAP"]
    root = None
    try:
        sources, copies, mpath, root = stage_files(tmp_path, ["plain"], env)
        # a TFRecord file of S records staged, its copy rewritten with C records of the same lengths
        rec = str(tmp_path / "data" / "records.tfrecord")
        for path, byte in ((rec, b"S"), (rec + ".copy", b"C")):
            with tf.io.TFRecordWriter(path) as w:
                for _ in range(5):
                    w.write(byte * 100)
        m = stager.make_manifest([rec], root + "-rec")
        (tmp_path / "rec.json").write_text(json.dumps(m))
        p = subprocess.run(tfdarshan_cmd("stage", str(tmp_path / "rec.json"), "--quiet"), env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        copy = m["entries"][0]["destination"]
        assert os.path.getsize(rec + ".copy") == os.path.getsize(copy)
        shutil.copyfile(rec + ".copy", copy)
        os.utime(copy, ns=(0, served.read_held()[rec]["copy_mtime_ns"]))
        script, cfg, report = tmp_path / "tf_reads.py", tmp_path / "cfg.json", tmp_path / "seen.json"
        script.write_text(TF_WORKER)
        cfg.write_text(json.dumps({"plain": sources["plain"], "records": rec}))
        p = subprocess.run(tfdarshan_cmd("run", "--logdir", str(tmp_path / "logs"), "--staged", str(script),
                                         str(cfg), str(report)), env=env, capture_output=True, text=True, timeout=500)
        assert p.returncode == 0, p.stderr[-3000:]
    finally:
        os.environ.pop("TFDARSHAN_STAGING_MAP", None)
        for r in (root, root and root + "-rec"):
            if r:
                shutil.rmtree(r, ignore_errors=True)
    seen = json.loads(report.read_text())
    assert seen == {"gfile": "C", "gfile_size": SIZE, "exists": True, "read_file": "C", "records": ["C"] * 5}
    log = next((tmp_path / "logs" / "plugins" / "tfdarshan").glob("*/*.darshan"))
    t = served.frame(served.read_beside(log)).set_index("path")
    for path in (sources["plain"], rec):
        # TensorFlow's own C++ file system: every open of both files served
        assert t.loc[path, "state"] == "serving" and t.loc[path, "throughout"], t
    # every byte TensorFlow read of the records came from the copy: the whole file, as Darshan counts it
    assert t.loc[rec, "bytes"] >= os.path.getsize(rec)
