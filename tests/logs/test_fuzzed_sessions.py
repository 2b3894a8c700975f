"""Hostile and damaged session files, fuzzed: truncated, bit-flipped and
length-lying Darshan logs (rank, job and partial logs), live logs, Parquet
step series and analysis tables, and the session's JSON files (coverage,
advice, the analysis's own), fed to `analyze`, `joblog`, `recommend`,
`import` and the tab's routes.

Each command gives a one-line error (exit 2), or skips what it cannot read
and says so; none raises, hangs or crashes. The files start real: a
three-rank job run once for the module under `tfdarshan run` (its rank 2
killed with SIGKILL, so it leaves a live log), as the job left it and after
`joblog`, `analyze` and `recommend`; hypothesis mutates their bytes. The
commands run in this process (main(), as `tfdarshan` calls it; the tab's
routes through the plugin's WSGI apps, as TensorBoard serves them), and a
few in real processes, for their exit status and stderr."""
import contextlib
import dataclasses
import io
import json
import os
import pathlib
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import urllib.parse

import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from tensorboard.plugins.base_plugin import TBContext
from werkzeug.test import Client

from fuzz_scale import SCALE

from tfdarshan.capture import live
from tfdarshan.analysis.analyze import read_table
from tfdarshan.cli import main
from tfdarshan.errors import TfdarshanError
from tfdarshan.logs.darshan_format import HEADER
from tfdarshan.logs.darshan_log import read_darshan_log
from tfdarshan.logs.darshan_reader import read_job_record
from tfdarshan.steps.series import STEP_COLUMNS
from tfdarshan_tb.plugin import IOPlugin

# examples a run, by how long one takes: the whole file stays well under a
# minute at SCALE 1 (fuzz_scale.py)
EXAMPLES = {k: n * SCALE for k, n in {"joblog": 15, "import": 15, "analyze": 5, "recommend": 4, "tab": 6}.items()}
FUZZ = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
HANG = 60                   # seconds: an example taking longer has hung
RANK_LOG = re.compile(r".*\.rank\d+\.darshan")
RANKS = 3
SCRIPT = """
import os, signal, sys, tfdarshan
rank = int(os.environ["SLURM_PROCID"])
shared, own = sys.argv[1], sys.argv[2:]
for step in range(3):
    with tfdarshan.step(step):
        with open(shared, "rb") as f:
            f.read()
        with open(own[rank], "rb") as f:
            f.read(40_000 * (rank + 1))
if rank == %d:
    os.kill(os.getpid(), signal.SIGKILL)        # no log: its live log is what is left
""" % (RANKS - 1)


@dataclasses.dataclass
class Made:
    raw: pathlib.Path       # a log directory as the job left it: rank logs, a live log, step series
    done: pathlib.Path      # ... after joblog, analyze and recommend: job log, analysis tables, advice
    root: pathlib.Path


@pytest.fixture(scope="module", autouse=True)
def private_store(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TFDARSHAN_TIERS", str(tmp_path_factory.mktemp("store") / "tiers.json"))
        yield


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzzed")
    data = root / "data"
    data.mkdir()
    (data / "shared.bin").write_bytes(os.urandom(150_000))
    for r in range(RANKS):
        (data / f"shard-{r}.bin").write_bytes(os.urandom(150_000))
    (root / "train.py").write_text(SCRIPT)
    raw = root / "raw"
    procs = [subprocess.Popen([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(raw), str(root / "train.py"),
                               str(data / "shared.bin"), *[str(data / f"shard-{i}.bin") for i in range(RANKS)]],
                              env={**os.environ, "SLURM_PROCID": str(r), "SLURM_NTASKS": str(RANKS),
                                   "SLURM_JOB_ID": "4711", "SLURM_STEP_ID": "0"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(RANKS)]
    for r, p in enumerate(procs):
        _, err = p.communicate(timeout=300)
        assert p.returncode == (-signal.SIGKILL if r == RANKS - 1 else 0), err[-2000:]
    (session,) = raw.glob("plugins/tfdarshan/*/")
    assert sorted(x.name for x in session.glob(f"*{live.SUFFIX}")) == [f"{_host(session)}.rank{RANKS - 1}.live"]
    done = root / "done"
    shutil.copytree(raw, done)
    (dsession,) = done.glob("plugins/tfdarshan/*/")
    for argv in (["joblog", dsession], ["analyze", done], ["recommend", done, "--fast-tier", "/dev/shm"]):
        r = cli([str(a) for a in argv])
        assert r.code == 0, r.err
    names = {x.name for x in dsession.rglob("*")}
    assert {"advice.json", "skipped.json", "schema.json", "slurm-4711.0.job.darshan"} <= names
    return Made(raw, done, root)


def _host(session: pathlib.Path) -> str:
    return next(session.glob("*.rank0.darshan")).name.split(".rank0")[0]


# ------------------------------------------------------------- outcomes
@dataclasses.dataclass
class Outcome:
    code: int
    out: str
    err: str


class Hung(Exception):
    pass


@contextlib.contextmanager
def no_hang(seconds=HANG):
    def ring(*_):
        raise Hung(f"no answer after {seconds} s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def cli(argv) -> Outcome:
    """`tfdarshan ARGV` in this process; anything it raises fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with no_hang(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:
            code = e.code
    return Outcome(code, out.getvalue(), err.getvalue())


def assert_refused_or_said(r: Outcome, command: str, victim: pathlib.Path, note):
    """Exit 2 with one error line, or 0; a rank log left out is named."""
    assert "Traceback" not in r.err, note
    assert r.code in (0, 2), note
    if r.code == 2:
        last = r.err.rstrip("\n").split("\n")[-1]
        assert last.startswith(f"tfdarshan {command}: error: "), note
    elif RANK_LOG.fullmatch(victim.name) and victim.exists() and victim.name not in r.err + r.out:
        # not named: then it was used. joblog and analyze read only the regions
        # they need (a damaged heatmap does not stop them); recommend reads it whole
        session = victim.parent
        if command == "joblog":
            (job,) = session.glob("*.job.darshan")
            ranks = len([p for p in session.glob("*.darshan") if RANK_LOG.fullmatch(p.name)])
            assert read_job_record(job)["metadata"]["ranks"] == str(ranks), f"{note}: left out without a word"
        elif command == "analyze":
            assert victim.name[: -len(".darshan")] in set(read_table(session, "ranks")["log"]), \
                f"{note}: left out without a word"
        elif command == "recommend":
            assert _readable(victim), f"{note}: an unreadable rank log was left out without a word"


def _readable(log: pathlib.Path) -> bool:
    try:
        read_darshan_log(log)
        return True
    except (TfdarshanError, OSError):
        return False


# -------------------------------------------------------------- mutations
LIES = [0, 1, 2 ** 31 - 1, 2 ** 32 - 1, 2 ** 63 - 1, 2 ** 64 - 1]


def _length_fields(path: pathlib.Path, data: bytes):
    """(offset, width) of the words that say where something is or how long:
    a Darshan header's region map, a live log's layout and its slots' path
    offsets, a Parquet footer's length."""
    name = path.name
    if name.endswith(".darshan") and len(data) >= HEADER.size:
        return [(32 + 16 * i + w, 8) for i in range(65) for w in (0, 8)
                if struct.unpack_from("<Q", data, 32 + 16 * i + 8)[0]]
    if name.endswith(live.SUFFIX) and len(data) >= live.HEADER_BYTES:
        words = [live.H_CAPACITY, live.H_HEAP, live.H_ROW, live.H_VALUES, live.H_SLOTS_AT, live.H_HEAP_AT,
                 live.H_AREA0, live.H_AREA1, live.H_AREA_BYTES, live.H_IDENTITY,
                 *[live.AREA_INFO_AT + a * live.AREA_INFO_WORDS + live.A_RECORDS for a in (0, 1)],
                 *[live.AREA_INFO_AT + a * live.AREA_INFO_WORDS + live.A_HEAP_USED for a in (0, 1)]]
        slots = [(live.HEADER_BYTES + (s * live.SLOT_WORDS + w) * 8) // 8 for s in range(4) for w in (2, 3)]
        return [(8 * w, 8) for w in words + slots if 8 * w + 8 <= len(data)]
    if name.endswith(".parquet") and len(data) >= 12:
        return [(len(data) - 8, 4)]
    return []


@st.composite
def damage(draw, path: pathlib.Path):
    """(the damaged bytes, what was done) for one of the session's files."""
    data = path.read_bytes()
    kinds = ["truncate", "flip"] + (["lie"] if _length_fields(path, data) else []) + \
        (["json"] if path.suffix == ".json" else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "truncate" or not data:
        n = draw(st.integers(0, max(0, len(data) - 1)))
        return data[:n], f"truncated to {n} of {len(data)} bytes"
    if kind == "flip":
        b = bytearray(data)
        flips = draw(st.lists(st.tuples(st.integers(0, len(b) - 1), st.integers(0, 7)), min_size=1, max_size=8))
        for at, bit in flips:
            b[at] ^= 1 << bit
        return bytes(b), f"bits flipped at {sorted(a for a, _ in flips)}"
    if kind == "lie":
        at, width = draw(st.sampled_from(_length_fields(path, data)))
        old = int.from_bytes(data[at:at + width], "little")
        value = draw(st.sampled_from(LIES + [old + 1, max(old - 1, 0), old * 2])) % (1 << (8 * width))
        return data[:at] + value.to_bytes(width, "little") + data[at + width:], f"{width}-byte word at {at}: {value}"
    doc = json.loads(data)
    return json.dumps(_replace(doc, draw)).encode(), "a JSON value replaced"


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats() | st.text(max_size=8),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                     max_size=3), max_leaves=6)


def _replace(doc, draw):
    """The document with one value (any depth, the whole included) replaced."""
    paths = []

    def walk(o, at):
        paths.append(at)
        items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
        for k, v in items:
            walk(v, at + [k])
    walk(doc, [])
    at = draw(st.sampled_from(paths))
    new = draw(JSON_VALUES)
    if not at:
        return new
    o = doc
    for k in at[:-1]:
        o = o[k]
    o[at[-1]] = new
    return doc


def session_files(logdir: pathlib.Path, suffixes=None):
    """The session's files (relative to the log directory), done markers aside."""
    out = sorted(p.relative_to(logdir) for p in logdir.glob("plugins/tfdarshan/*/**/*")
                 if p.is_file() and not p.name.startswith(".tfdarshan-done"))
    return [p for p in out if not suffixes or p.name.endswith(suffixes)]


@contextlib.contextmanager
def damaged_copy(base: pathlib.Path, rel: pathlib.Path, draw):
    """A copy of a log directory with one file damaged: (copy, that file, what was done)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        copy = pathlib.Path(tmp) / "logs"
        shutil.copytree(base, copy)
        victim = copy / rel
        bad, how = draw(damage(victim))
        victim.chmod(0o600)             # (logs are written read-only, as Darshan's)
        victim.write_bytes(bad)
        yield copy, victim, how


def _session_dir(logdir: pathlib.Path) -> pathlib.Path:
    (s,) = [p for p in logdir.glob("plugins/tfdarshan/*") if p.is_dir()]
    return s


# ------------------------------------------------------------ the commands
def test_joblog_of_a_damaged_session(made):
    files = session_files(made.raw)

    @settings(max_examples=EXAMPLES["joblog"], **FUZZ)
    @given(st.sampled_from(files), st.data())
    def check(rel, data):
        with damaged_copy(made.raw, rel, data.draw) as (logdir, victim, how):
            r = cli(["joblog", str(_session_dir(logdir))])
            assert_refused_or_said(r, "joblog", victim, f"{rel}: {how}: {r.err[-2000:]}")
            if r.code == 0:     # a job log was written, of the ranks it names
                assert list(_session_dir(logdir).glob("*.job.darshan"))
    check()


def test_import_of_damaged_logs(made):
    logs = [(made.raw, rel) for rel in session_files(made.raw, (".darshan", live.SUFFIX))] + \
        [(made.done, rel) for rel in session_files(made.done, (".darshan",))]

    @settings(max_examples=EXAMPLES["import"], **FUZZ)
    @given(st.sampled_from(logs), st.data())
    def check(which, data):
        base, rel = which
        with damaged_copy(base, rel, data.draw) as (logdir, victim, how):
            target = logdir.parent / "imported"
            r = cli(["import", str(victim), "--logdir", str(target)])
            assert_refused_or_said(r, "import", victim, f"{rel}: {how}: {r.err[-2000:]}")
            # every log is checked before any is copied: refused, nothing is left
            if r.code == 2:
                assert not list(target.rglob("*.darshan")) if target.exists() else True
            else:
                assert len(list(target.rglob("*.darshan"))) == 1
    check()


@pytest.mark.parametrize("command", ["analyze", "recommend"])
def test_analyze_and_recommend_of_a_damaged_session(made, command):
    files = [(made.raw, rel) for rel in session_files(made.raw)] + \
        [(made.done, rel) for rel in session_files(made.done)]
    extra = ["--fast-tier", "/dev/shm", "--no-store"] if command == "recommend" else []

    @settings(max_examples=EXAMPLES[command], **FUZZ)
    @given(st.sampled_from(files), st.data())
    def check(which, data):
        base, rel = which
        with damaged_copy(base, rel, data.draw) as (logdir, victim, how):
            r = cli([command, str(logdir), *extra])
            assert_refused_or_said(r, command, victim, f"{base.name}/{rel}: {how}: {r.err[-2000:]}")
    check()


# ----------------------------------------------------------------- the tab
JSON_ROUTES = ["summary", "verdict", "files", "steps", "histograms", "mounts", "timeline", "advice", "rank_heatmap",
               "rank_wait"]


def test_the_tabs_routes_on_a_damaged_session(made):
    files = [(made.raw, rel) for rel in session_files(made.raw)] + \
        [(made.done, rel) for rel in session_files(made.done)]

    @settings(max_examples=EXAMPLES["tab"], **FUZZ)
    @given(st.sampled_from(files), st.data())
    def check(which, data):
        base, rel = which
        with damaged_copy(base, rel, data.draw) as (logdir, victim, how):
            note = f"{base.name}/{rel}: {how}"
            apps = IOPlugin(TBContext(logdir=str(logdir))).get_plugin_apps()
            with no_hang():
                r = Client(apps["/runs"]).get("/")
                assert r.status_code == 200, note
                sessions = [(x["session"], x["hosts"]) for run in json.loads(r.get_data())["runs"]
                            for x in run["sessions"]]
                for name, hosts in sessions:
                    for host in [None, *[h for h in hosts if victim.name.startswith(h + ".")][:1]]:
                        query = urllib.parse.urlencode({"run": ".", "session": name, **({"host": host} if host else {})})
                        for route in JSON_ROUTES:
                            # an exception escaping a route is TensorBoard's 500: it fails here
                            a = Client(apps["/" + route]).get("/", query_string=query)
                            assert a.headers["Content-Type"].startswith("application/json"), (note, route)
                            body = json.loads(a.get_data())
                            assert a.status_code in (200, 400, 404, 422), (note, route, a.status_code, body)
                            if a.status_code != 200:
                                assert isinstance(body.get("error"), str) and "\n" not in body["error"], (note, body)
                            elif route == "advice":
                                _advice_is_drawable(body, victim, note)
    check()


def _advice_is_drawable(body, victim, note):
    """The page draws stored advice as text and lists: of that shape, or
    said to be unreadable (with the command that makes it again)."""
    if body["available"]:
        a = body["advice"]
        assert isinstance(a, dict) and all(isinstance(a.get(k, []), list) for k in ("selection", "findings")), note
        assert all(isinstance(x, dict) for k in ("selection", "findings", "left_out") for x in a.get(k, [])), note
    elif victim.name == "advice.json":
        assert body.get("problem") and body.get("command"), (note, body)


# ------------------------------------------------ said, not taken as true
def flip_in_a_page(path: pathlib.Path, column: int) -> None:
    """Flip a bit in the last byte of a column's last page (its data, not
    its header): what a page checksum is for."""
    chunk = pq.ParquetFile(path).metadata.row_group(0).column(column)
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    b = bytearray(path.read_bytes())
    b[start + chunk.total_compressed_size - 1] ^= 0x10
    path.write_bytes(bytes(b))

def test_a_flipped_bit_in_a_step_series_page_is_said_not_counted(made, tmp_path):
    # Parquet pages carry a CRC: a flipped bit in a step's numbers makes the
    # series unreadable (the rank is named) instead of a wrong figure
    logdir = tmp_path / "logs"
    shutil.copytree(made.raw, logdir)
    series = next(_session_dir(logdir).glob("*.rank0.steps.parquet"))
    series.chmod(0o600)
    flip_in_a_page(series, STEP_COLUMNS.index("bytes_read"))
    r = cli(["analyze", str(logdir)])
    assert r.code == 0, r.err
    (warning,) = [line for line in r.err.splitlines() if "warning" in line]
    assert series.name in warning and "rank0" in warning


def test_damaged_analysis_tables_are_built_again_and_said(made, tmp_path):
    # the tables are derived from the rank logs: one failing its page checksum
    # is built again (recommend --per-node plans from the rank table)
    logdir = tmp_path / "logs"
    shutil.copytree(made.done, logdir)
    session = _session_dir(logdir)
    per_node = ["recommend", str(logdir), "--fast-tier", "/dev/shm", "--per-node", "--no-store", "--format", "json"]
    want = cli(per_node)
    part = next((session / "analysis" / "ranks").glob("*.parquet"))
    flip_in_a_page(part, 4)
    with pytest.raises(OSError):
        read_table(session, "ranks")
    got = cli(per_node)
    assert got.code == want.code == 0, got.err
    assert _gist(json.loads(got.out)) == _gist(json.loads(want.out))
    assert len(read_table(session, "ranks")) == RANKS      # built again
    # the tab, too, and says so while it loads
    flip_in_a_page(part, 4)
    apps = IOPlugin(TBContext(logdir=str(logdir))).get_plugin_apps()
    query = urllib.parse.urlencode({"run": ".", "session": session.name})
    r = Client(apps["/summary"]).get("/", query_string=query)
    assert r.status_code == 200, r.get_data()
    stages = json.loads(Client(apps["/progress"]).get("/", query_string=query).get_data())["stages"]
    assert any("unreadable" in line and "building them again" in line for line in stages), stages
    assert len(read_table(session, "ranks")) == RANKS


def _gist(plan):
    """What a per-node plan decides (its figures follow the fast tier's latest probe)."""
    return (sorted(plan["nodes"]), {(f["level"], f["title"]) for f in plan["findings"]},
            sorted(map(str, plan["replicated_files"])))


# ------------------------------------------------------- real processes
def test_damaged_files_in_real_processes(made, tmp_path):
    """Exit status and stderr as a shell sees them: a length-lying rank log
    and a truncated live log in one session (analyze skips and names the
    log, converts nothing it cannot read), and a live log given to import."""
    logdir = tmp_path / "logs"
    shutil.copytree(made.raw, logdir)
    session = _session_dir(logdir)
    rank1 = next(session.glob("*.rank1.darshan"))
    data = bytearray(rank1.read_bytes())
    field = _length_fields(rank1, bytes(data))[-1][0]       # the last module region's length
    data[field:field + 8] = (2 ** 63 - 1).to_bytes(8, "little")
    rank1.chmod(0o600)
    rank1.write_bytes(bytes(data))
    livelog = next(session.glob(f"*{live.SUFFIX}"))
    livelog.write_bytes(livelog.read_bytes()[: live.HEADER_BYTES + 100])
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "analyze", str(logdir)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    (warning,) = [line for line in r.stderr.splitlines() if "warning" in line]
    assert rank1.name in warning
    assert livelog.name in r.stderr
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "import", str(livelog), "--logdir", str(tmp_path / "imp")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("tfdarshan import: error: "), \
        r.stderr
    assert not list(tmp_path.glob("imp/**/*.darshan"))
