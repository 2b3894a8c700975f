"""Hostile input everywhere a user or a file can hand us some: mutated step
series, tier TOML and staging manifests, generated command lines for every
subcommand, and hostile query parameters on every route of the I/O tab.

Expected mistakes end in one clear line and a non-zero exit (or a 4xx JSON
answer); nothing raises a stray exception or crashes. The Darshan log reader
is fuzzed in test_darshan_log.py, the tab's routes on a real server in
test_tb_plugin.py; here the routes are driven through the plugin's own WSGI
apps, which is what TensorBoard serves."""
import contextlib
import dataclasses
import io
import json
import math
import os
import pathlib
import shutil
import string
import subprocess
import sys
import types
import urllib.parse

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st
from tensorboard.plugins.base_plugin import TBContext
from werkzeug.test import Client

import tfdarshan
from tfdarshan.tf import runner
from tfdarshan.advice import stager, tiers
from tfdarshan.cli import main
from tfdarshan.errors import TfdarshanError
from tfdarshan.logs.logdir import find_sessions, load_steps
from tfdarshan.tf.steps import AFTER_STEPS, FILE_COLUMNS, SETUP_STEP, STEP_COLUMNS
from tfdarshan_tb.plugin import MAX_PARAM, IOPlugin

pytestmark = pytest.mark.cost(60)

# generated examples share files made once per module, so function-scoped fixtures are fine here
FUZZ = dict(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
JSON_ROUTES = ["summary", "files", "steps", "histograms", "mounts", "timeline", "advice"]
SESSION_PARAMS = ["run", "session", "host"]
FILES_PARAMS = ["sort", "order", "offset", "limit", "q"]


@dataclasses.dataclass
class World:
    root: pathlib.Path
    data: list               # the files the profiled steps read
    logdir: pathlib.Path     # <logdir>/train/plugins/tfdarshan/<session>/<host>.*
    run: str
    session: str
    host: str
    log: pathlib.Path        # a good Darshan log outside any logdir
    truncated_log: pathlib.Path
    fast: pathlib.Path       # a directory declared as a tier in `toml`
    toml: pathlib.Path
    manifest: pathlib.Path   # a good manifest staging `data` under fast/staged
    afile: pathlib.Path      # a plain file where a directory or a log is expected
    adir: pathlib.Path       # an empty directory where a file is expected
    missing: pathlib.Path    # does not exist (nor does anything under it)

    def logdir_copy(self, name: str) -> pathlib.Path:
        dest = self.root / "copies" / name
        shutil.copytree(self.logdir, dest)
        return dest

    def series(self, logdir: pathlib.Path, kind: str) -> pathlib.Path:
        """The session's steps or step_files parquet inside a logdir copy."""
        return logdir / self.run / "plugins" / "tfdarshan" / self.session / f"{self.host}.{kind}.parquet"


@pytest.fixture(scope="module", autouse=True)
def private_stores(tmp_path_factory):
    """The tier store and the staging map live in a temporary directory."""
    d = tmp_path_factory.mktemp("stores")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TFDARSHAN_TIERS", str(d / "tiers.json"))
        mp.setenv("TFDARSHAN_STAGING_MAP", str(d / "staged.json"))
        yield d


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A real profiling session (four steps, each reading one file) and the
    files a command line points at."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "data").mkdir()
    data = []
    for i in range(4):
        p = root / "data" / f"shard-{i}.bin"
        p.write_bytes(os.urandom(4096 * (i + 1)))
        data.append(p)
    logdir = root / "logs"
    with tfdarshan.profile(logdir=str(logdir / "train")):
        for step, p in enumerate(data):
            with tfdarshan.step(step):
                p.read_bytes()
    (s,) = find_sessions(logdir)
    assert s.run == "train" and len(s.hosts) == 1
    log = root / "good.darshan"
    shutil.copyfile(s.directory / f"{s.hosts[0]}.darshan", log)
    truncated = root / "truncated.darshan"
    truncated.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    fast = root / "fast"
    fast.mkdir()
    toml = root / "tiers.toml"
    # so fast that staging any file pays: the advisor then always chooses some
    toml.write_text(f'[[tier]]\npath = "{fast}"\nname = "fast"\ncapacity = "1G"\nbandwidth = "1000G"\n'
                    f'read_latency = 0\nopen_latency = 0\nstat_latency = 0\n')
    manifest = root / "good-manifest.json"
    manifest.write_text(json.dumps(stager.make_manifest([str(p) for p in data], str(fast / "staged"))))
    afile = root / "afile.txt"
    afile.write_text("just some text\n")
    adir = root / "adir"
    adir.mkdir()
    (root / "cwd").mkdir()
    return World(root, data, logdir, s.run, s.name, s.hosts[0], log, truncated, fast, toml, manifest, afile,
                 adir, root / "missing")


def one_line_error(err: str, command: str) -> bool:
    return err.startswith(f"tfdarshan {command}: error: ") and err.endswith("\n") and err.count("\n") == 1


@dataclasses.dataclass
class Outcome:
    code: int
    usage: bool      # refused by argparse (usage line, then "error:")
    out: str
    err: str


def cli(argv) -> Outcome:
    """`tfdarshan ARGV` in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code, usage = main(list(argv)), False
        except SystemExit as e:
            code, usage = e.code, True
    return Outcome(code, usage, out.getvalue(), err.getvalue())


@pytest.fixture
def guarded(monkeypatch, world):
    """Generated command lines must never start a real job; if one did, it
    fails loudly here instead of training, probing or running a script."""
    def refuse(*args, **kwargs):
        raise AssertionError("a command line meant to be wrong started a real job")
    monkeypatch.setattr(runner.WholeRun, "start", refuse)
    monkeypatch.setattr(tiers, "tempfile", types.SimpleNamespace(TemporaryDirectory=refuse))
    monkeypatch.setitem(sys.modules, "tensorflow", None)      # `demo` imports it once its arguments pass
    monkeypatch.chdir(world.root / "cwd")
    return world


def assert_refused(r: Outcome, command: str, argv):
    note = f"argv={argv!r} code={r.code} stderr={r.err!r}"
    assert "Traceback" not in r.err, note
    assert r.code not in (0, None), note
    if r.usage:     # argparse's own message may quote the argument with its newlines
        assert r.code == 2 and any(line.startswith("tfdarshan") and ": error: " in line
                                   for line in r.err.split("\n")), note
    else:
        assert r.code == 2 and one_line_error(r.err, command), note


# ================================================================ step series
def _session(logdir):
    (s,) = find_sessions(logdir)
    return s


def _plugin(logdir) -> IOPlugin:
    """A real plugin once its read-ahead has ended: a profile window opened
    next in this process sees none of its reads."""
    plugin = IOPlugin(TBContext(logdir=str(logdir)))
    plugin.reading_ahead.join(300)
    return plugin


def _get(plugin, route, query: str):
    """(status, JSON body) of one route of a real plugin; an exception
    escaping the route (TensorBoard's 500) fails the test here."""
    r = Client(plugin.get_plugin_apps()["/" + route]).get("/", query_string=query)
    assert r.headers["Content-Type"].startswith("application/json"), (route, query, r.status_code)
    return r.status_code, json.loads(r.get_data())


def _rewrite(path, change):
    change(pd.read_parquet(path)).to_parquet(path, index=False)


SERIES_DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),
    "empty": lambda p: p.write_bytes(b""),
    "text": lambda p: p.write_text("step,start,end\n1,2,3\n"),
    "footer flipped": lambda p: p.write_bytes(p.read_bytes()[:-12] + bytes(b ^ 0xFF for b in p.read_bytes()[-12:])),
    "header zeroed": lambda p: p.write_bytes(b"\0" * 64 + p.read_bytes()[64:]),
    "directory": lambda p: (p.unlink(), p.mkdir()),
    "dangling symlink": lambda p: (p.unlink(), p.symlink_to(p.parent / "nowhere.parquet")),
    "column missing": lambda p: _rewrite(p, lambda df: df.drop(columns=["bytes_read"])),
    "other schema": lambda p: pd.DataFrame({"x": [1, 2]}).to_parquet(p),
    "no columns": lambda p: pd.DataFrame().to_parquet(p),
    "numbers as text": lambda p: _rewrite(p, lambda df: df.assign(read_time=df["read_time"].astype(str))),
    "numbers as booleans": lambda p: _rewrite(p, lambda df: df.assign(bytes_read=df["bytes_read"] > 0)),
    "numbers as lists": lambda p: _rewrite(p, lambda df: df.assign(step=[[int(v)] for v in df["step"]])),
    "numbers as dates": lambda p: _rewrite(p, lambda df: df.assign(reads=pd.Timestamp("2020-01-01"))),
    "NaN": lambda p: _rewrite(p, lambda df: df.assign(read_time=np.nan)),
    "infinity": lambda p: _rewrite(p, lambda df: df.assign(read_time=np.inf)),
    "module as numbers": lambda p: _rewrite(p, lambda df: df.assign(module=1) if "module" in df
                                            else df.assign(step=np.nan)),
}


@pytest.mark.parametrize("kind", ["steps", "step_files"])
@pytest.mark.parametrize("damage", list(SERIES_DAMAGE))
def test_damaged_step_series_is_refused_in_one_line(world, kind, damage):
    logdir = world.logdir_copy(f"series-{kind}-{damage.replace(' ', '_')}")
    path = world.series(logdir, kind)
    SERIES_DAMAGE[damage](path)
    with pytest.raises(TfdarshanError) as e:
        load_steps(_session(logdir))
    assert str(path) in str(e.value) and "\n" not in str(e.value)
    status, body = _get(_plugin(logdir), "steps", urllib.parse.urlencode({"run": world.run, "session": world.session}))
    assert status == 422 and str(path) in body["error"]


def test_intact_step_series_still_loads(world, tmp_path):
    """The checks refuse damage, not the series the profiler writes, even
    for a window without steps or without any I/O."""
    steps, files = load_steps(_session(world.logdir))
    assert steps["step"].tolist() == [SETUP_STEP, 0, 1, 2, 3, AFTER_STEPS]
    assert set(STEP_COLUMNS) <= set(steps) and set(FILE_COLUMNS) <= set(files)
    assert int(steps["bytes_read"].sum()) == sum(p.stat().st_size for p in world.data)
    status, body = _get(_plugin(world.logdir), "steps",
                        urllib.parse.urlencode({"run": world.run, "session": world.session}))
    assert status == 200 and body["steps"] == [0, 1, 2, 3]
    with tfdarshan.profile(logdir=str(tmp_path / "idle")):
        pass
    with tfdarshan.profile(logdir=str(tmp_path / "unmarked")):
        world.data[0].read_bytes()
    steps, files = load_steps(_session(tmp_path / "idle"))
    assert len(steps) == 1 and files.empty
    steps, files = load_steps(_session(tmp_path / "unmarked"))
    assert len(steps) == 1 and str(world.data[0]) in set(files["path"])


@st.composite
def mutated_bytes(draw, good: bytes):
    data = bytearray(good)
    kind = draw(st.sampled_from(["flip", "splice", "truncate", "zero run"]))
    if kind == "flip":
        for at in draw(st.lists(st.integers(0, len(data) - 1), min_size=1, max_size=8)):
            data[at] ^= 1 << draw(st.integers(0, 7))
    elif kind == "splice":
        at = draw(st.integers(0, len(data) - 1))
        data[at:at + 16] = draw(st.binary(min_size=1, max_size=16))
    elif kind == "truncate":
        data = data[: draw(st.integers(0, len(data) - 1))]
    else:
        at = draw(st.integers(0, len(data) - 1))
        data[at:at + draw(st.integers(1, 256))] = b""
    return bytes(data)


@pytest.mark.parametrize("kind", ["steps", "step_files"])
def test_fuzzed_step_series_load_or_refuse(world, kind):
    """Random byte damage: the reader gives well-formed frames or our error;
    the /steps route answers 200 with finite JSON or 422, never anything else."""
    logdir = world.logdir_copy(f"fuzz-{kind}")
    path = world.series(logdir, kind)
    good = path.read_bytes()
    query = urllib.parse.urlencode({"run": world.run, "session": world.session})
    outcomes = {"loaded": 0, "refused": 0}

    @settings(max_examples=60, **FUZZ)           # the same 60 every run (derandomized: tests/conftest.py)
    @given(mutated_bytes(good))
    def check(data):
        path.write_bytes(data)
        try:
            steps, files = load_steps(_session(logdir))
        except TfdarshanError as e:
            assert str(path) in str(e) and "\n" not in str(e)
            outcomes["refused"] += 1
            expected = {422}
        else:
            for frame, columns in ((steps, STEP_COLUMNS), (files, FILE_COLUMNS)):
                assert set(columns) <= set(frame)
                numeric = [c for c in columns if c != "module"]
                assert np.isfinite(frame[numeric].to_numpy(dtype=np.float64)).all()
            outcomes["loaded"] += 1
            expected = {200}
        status, body = _get(_plugin(logdir), "steps", query)
        assert status in expected, body
        if status == 200:
            assert all(math.isfinite(v) for v in body.get("bytes_read", []) + body.get("duration", []))

    check()
    assert outcomes["refused"] > 0


# ==================================================================== tier TOML
def _tier_ok(t: tiers.Tier) -> bool:
    nums = [t.open_latency, t.stat_latency, t.read_latency, t.bandwidth]
    return (isinstance(t.path, str) and t.path != "" and all(isinstance(v, float) and 0 <= v < math.inf
                                                              for v in nums)
            and (t.capacity is None or isinstance(t.capacity, int) and 0 <= t.capacity <= 1 << 63))


def _load_toml_or_refuse(path):
    """The tiers, or None when refused with our one-line error naming the file."""
    try:
        loaded = tiers.load_toml(path)
    except TfdarshanError as e:
        assert str(path) in str(e) and "\n" not in str(e), str(e)
        return None
    assert loaded and all(_tier_ok(t) for t in loaded), loaded
    return loaded


@pytest.mark.parametrize("text", [
    "", "\n", "[[tier]]", "tier = 1", "tier = []", "[tier]\npath = '/x'", "[[tier]]\nname = 'no path'",
    "[[tier]]\npath = ''", "[[tier]]\npath = 5", "[[tier]]\npath = ['/x']", "tier = [1, 2]", "tier = ['/x']",
    "[[tier]]\npath = '/x'\nbandwidth = -1", "[[tier]]\npath = '/x'\nbandwidth = nan",
    "[[tier]]\npath = '/x'\nbandwidth = inf", "[[tier]]\npath = '/x'\nread_latency = -inf",
    "[[tier]]\npath = '/x'\nopen_latency = 1e400", "[[tier]]\npath = '/x'\nstat_latency = true",
    "[[tier]]\npath = '/x'\nbandwidth = '12Q'", "[[tier]]\npath = '/x'\nbandwidth = '-3G'",
    "[[tier]]\npath = '/x'\nbandwidth = '" + "9" * 400 + "'", "[[tier]]\npath = '/x'\ncapacity = -5",
    "[[tier]]\npath = '/x'\ncapacity = 1e400", "[[tier]]\npath = '/x'\ncapacity = nan",
    "[[tier]]\npath = '/x'\ncapacity = '10%'", "[[tier]]\npath = '/x'\ncapacity = " + "9" * 30,
    "[[tier]]\npath = '/x'\ncapacity = 1979-05-27", "[[tier]]\npath = '/x'\nname = 3",
    "[[tier]]\npath = '/x'\nbandwidth = {a = 1}", "[[tier]]\npath = '/x'\n[[tier]]\npath = 7",
    "a = " + "[" * 5000, "a = " + "{b = " * 5000, "[[tier]\npath = '/x'", "path = \"/x\nbandwidth = 1",
])
def test_wrong_tier_toml_is_refused_in_one_line(tmp_path, text):
    f = tmp_path / "tiers.toml"
    f.write_text(text)
    with pytest.raises(TfdarshanError) as e:
        tiers.load_toml(f)
    assert str(f) in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("make", [lambda p: p.write_bytes(b"[[tier]]\npath = '/\xff\xfe'\n"),
                                  lambda p: p.write_bytes(b"\xef\xbb\xbf\x00\x00[[tier]]"),
                                  lambda p: p.mkdir(), lambda p: None, lambda p: p.symlink_to(p)],
                         ids=["not UTF-8", "NUL bytes", "directory", "missing", "symlink loop"])
def test_unreadable_tier_files_are_refused_in_one_line(tmp_path, make):
    f = tmp_path / "tiers.toml"
    make(f)
    with pytest.raises(TfdarshanError) as e:
        tiers.load_toml(f)
    assert str(f) in str(e.value) and "\n" not in str(e.value)


@settings(max_examples=100, **FUZZ)
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300).map(lambda s: s.encode("utf-8", "surrogatepass"))))
def test_random_bytes_as_tier_toml(tmp_path, data):
    f = tmp_path / "random.toml"
    f.write_bytes(data)
    _load_toml_or_refuse(f)


def toml_value():
    scalar = st.one_of(
        st.text(max_size=12), st.sampled_from(["3G", "64M", "12Q", "-1G", "1.5TiB", "10%", "", "9" * 40]),
        st.integers(), st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=True, allow_infinity=True), st.booleans(), st.just("1979-05-27T07:32:00Z"))
    return st.one_of(scalar, st.lists(scalar, max_size=3), st.dictionaries(st.sampled_from("ab"), scalar,
                                                                              max_size=2))


def toml_literal(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if v != v else ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_literal(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {toml_literal(x)}" for k, x in v.items()) + "}"
    if v.endswith("Z") and v[:4].isdigit():
        return v                                        # a TOML date-time
    return json.dumps(v, ensure_ascii=False)


TIER_KEYS = ["path", "name", "capacity", "open_latency", "stat_latency", "read_latency", "bandwidth", "fstype",
             "source", "measured_at", "bandwith"]


@settings(max_examples=150, **FUZZ)
@given(st.lists(st.dictionaries(st.sampled_from(TIER_KEYS), toml_value(), max_size=6), max_size=3),
       st.sampled_from(["tier", "tiers", "Tier"]))
def test_plausible_but_wrong_tier_toml(tmp_path, tables, table_name):
    """[[tier]] tables with keys missing, misspelt, of the wrong type,
    negative, huge, NaN or infinite: loaded tiers are sane, the rest refused."""
    text = "\n".join(f"[[{table_name}]]\n" + "".join(f"{k} = {toml_literal(v)}\n" for k, v in t.items())
                     for t in tables)
    f = tmp_path / "plausible.toml"
    f.write_text(text, encoding="utf-8", errors="surrogatepass")
    loaded = _load_toml_or_refuse(f)
    if loaded is not None:
        assert table_name == "tier"
        for t, table in zip(loaded, tables):
            assert t.path == table["path"]


def test_recommend_with_wrong_tier_toml_exits_in_one_line(world, tmp_path, guarded):
    bad = tmp_path / "bad.toml"
    for text in ("[[tier]]\npath = '/x'\nbandwidth = inf", "[[tier]]\npath = '/x'\ncapacity = 1e400",
                 "a = " + "[" * 5000, "[[tier]]\nbandwidth = '3G'"):
        bad.write_text(text)
        r = cli(["recommend", str(world.log), "--fast-tier", str(world.fast), "--tiers", str(world.toml),
                 "--tiers", str(bad)])
        assert not r.usage and r.code == 2 and one_line_error(r.err, "recommend"), (text[:40], r.err)
        assert str(bad) in r.err


# ==================================================================== manifests
def _good_manifest(world) -> dict:
    return json.loads(world.manifest.read_text())


def _manifest_invariants(m: dict):
    """What stage() relies on once load_manifest accepted a manifest."""
    root = m.get("root")
    for e in m["entries"]:
        for p in (e["source"], e["destination"]):
            assert os.path.isabs(p) and ".." not in p.split("/") and "\0" not in p
        if root is not None:
            assert os.path.normpath(e["destination"]).startswith(os.path.normpath(root) + "/")
        assert type(e["size"]) is int and 0 <= e["size"] < 1 << 63
        assert all(c in "0123456789abcdef" for c in e["sha256"]) and len(e["sha256"]) == 64


def _set(path, value):
    """A change putting value at path (keys and indices) in a manifest."""
    def change(m):
        node = m
        for k in path[:-1]:
            node = node[k]
        node[path[-1]] = value
        return m
    return change


def _mutations(world):
    """(name, path, value): values that make the manifest wrong where put."""
    outside = str(world.root / "elsewhere" / "x.bin")
    fast = str(world.fast / "staged")
    out = []
    for value in (None, 1, 1.5, True, [], {}, "", "relative/x.bin", "/a/../../etc/passwd", f"{fast}/../../x",
                  "/with\0nul", outside, "\udcff"):
        for field in ("source", "destination"):
            if field == "source" and value in ("\udcff", outside):
                continue                      # a source may be anywhere (the recorded path)
            out.append((f"{field}={value!r}", ("entries", 0, field), value))
    for value in (None, -1, 1.5, True, "12", 10**30, 10**400, 2**63, [1]):
        out.append((f"size={value!r}", ("entries", 1, "size"), value))
    for value in (None, "", "zz" * 32, "A" * 64, "0" * 63, 5, "0" * 65):
        out.append((f"sha256={value!r}", ("entries", 0, "sha256"), value))
    for value in (5, "", "relative", "/a/../b", ["x"], str(world.root / "elsewhere")):
        out.append((f"root={value!r}", ("root",), value))
    for value in ("tfdarshan.manifest/2", None, 1):
        out.append((f"format={value!r}", ("format",), value))
    for value in ({}, "x", None, [1], [None], [[]]):
        out.append((f"entries={value!r}", ("entries",), value))
    for value in ([1], "x", {"predicted_saving": "x"}, {"predicted_saving": [1]}, {"predicted_saving": True}):
        out.append((f"advice={value!r}", ("advice",), value))
    return out


def _dropped(m, key):
    del m["entries"][0][key]
    return m


def _manifest_cases(world):
    """(name, change) pairs; each change makes a good manifest wrong."""
    cases = [(name, _set(path, value)) for name, path, value in _mutations(world)]
    for key in ("source", "destination", "size", "sha256"):
        cases.append((f"no {key}", lambda m, key=key: _dropped(m, key)))
    cases.append(("duplicate destination", lambda m: {**m, "entries": m["entries"] + m["entries"][:1]}))
    cases.append(("destination is its source",
                  lambda m: {**m, "root": "/", "entries": [{**m["entries"][0],
                                                            "destination": m["entries"][0]["source"]}]}))
    cases.append(("not an object", lambda m: [m]))
    return cases


def _write_json(path, m):
    path.write_text(json.dumps(m, allow_nan=True), encoding="utf-8", errors="surrogatepass")


RAW_MANIFESTS = {
    "empty": b"", "truncated": None, "not JSON": b"staging plan", "non-UTF-8": b'{"format": "\xff\xfe"}',
    "nested deeply": b"[" * 100000, "NaN size": None, "huge number": None,
}


def _raw_manifest(world, name) -> bytes:
    good = world.manifest.read_bytes()
    if name == "truncated":
        return good[: len(good) // 2]
    if name == "NaN size":
        return good.replace(b'"size": 4096', b'"size": NaN', 1)
    if name == "huge number":
        return good.replace(b'"size": 4096', b'"size": 1' + b"0" * 400, 1)
    return RAW_MANIFESTS[name]


def test_every_wrong_manifest_is_refused_in_one_line(world, tmp_path, guarded):
    """Each mutation through load_manifest and through `tfdarshan stage`:
    our error naming the file, exit 2, one line, nothing copied."""
    staged = world.fast / "staged"
    cases = [(name, lambda p, c=change: _write_json(p, c(_good_manifest(world))))
             for name, change in _manifest_cases(world)]
    cases += [(name, lambda p, n=name: p.write_bytes(_raw_manifest(world, n))) for name in RAW_MANIFESTS]
    assert len(cases) > 50
    for name, make in cases:
        m = tmp_path / "m.json"
        make(m)
        with pytest.raises(TfdarshanError) as e:
            stager.load_manifest(m)
        assert str(m) in str(e.value) and "\n" not in str(e.value), name
        r = cli(["stage", str(m), "--quiet"])
        assert r.code == 2 and one_line_error(r.err, "stage"), (name, r.err)
        assert not staged.exists(), name


@settings(max_examples=120, **FUZZ)
@given(st.data())
def test_fuzzed_manifests_load_or_refuse(world, tmp_path, guarded, data):
    """Random edits of a good manifest: refused in one line, or accepted only
    when every entry stays absolute, inside its root and well-typed; then
    staging writes nowhere but under the root."""
    m = _good_manifest(world)
    m["root"] = str(tmp_path / "staged")
    for e in m["entries"]:
        e["destination"] = stager.destination_for(e["source"], m["root"])
    hostile = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=30),
                        st.sampled_from(["..", "/..", "/a/../b", "", "/", "//x", "/./x", "\0", "\udcff", "x/y"]),
                        st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                                              max_size=2))
    fields = st.sampled_from(["source", "destination", "size", "sha256"])
    for _ in range(data.draw(st.integers(1, 3))):
        where = data.draw(st.sampled_from(["format", "root", "entries", "advice", "entry", "entry key"]))
        entries = m.get("entries")
        if where.startswith("entry") and not (isinstance(entries, list) and entries
                                              and all(isinstance(e, dict) for e in entries)):
            continue                            # the entries themselves were replaced already
        if where == "entry":
            e, field = data.draw(st.sampled_from(entries)), data.draw(fields)
            old = e.get(field)
            # replaced, or (for a path) something appended: "/..", a NUL, a newline, ...
            e[field] = data.draw(st.one_of(hostile, any_text(20).map(lambda s: old + s)) if isinstance(old, str)
                                 else hostile)
        elif where == "entry key":
            data.draw(st.sampled_from(entries)).pop(data.draw(fields), None)
        else:
            m[where] = data.draw(hostile)
    f = tmp_path / "fuzzed.json"
    _write_json(f, m)
    before = sorted(str(p) for p in world.root.rglob("*") if "staged" not in p.parts and "stores" not in p.parts)
    try:
        loaded = stager.load_manifest(f)
    except TfdarshanError as e:
        assert str(f) in str(e) and "\n" not in str(e)
        r = cli(["stage", str(f), "--quiet"])
        assert r.code == 2 and one_line_error(r.err, "stage"), r.err
        return
    _manifest_invariants(loaded)
    if not all(e["destination"].startswith(str(tmp_path) + "/") for e in loaded["entries"]):
        return      # a root moved elsewhere along with its destinations: the user's choice, not staged here
    r = cli(["stage", str(f), "--quiet"])
    assert "Traceback" not in r.err and r.code in (0, 1, 2), r.err
    assert r.err == "" or r.err.endswith("\n") and all(line.startswith("tfdarshan stage: ")
                                                      for line in r.err[:-1].split("\n")), r.err
    after = sorted(str(p) for p in world.root.rglob("*") if "staged" not in p.parts and "stores" not in p.parts)
    assert [p for p in after if p not in before and not p.startswith(str(tmp_path))] == []


def test_relative_fast_tier_still_gives_a_manifest_stage_accepts(world, tmp_path, guarded, monkeypatch):
    monkeypatch.chdir(world.root)
    out = tmp_path / "m.json"
    r = cli(["recommend", str(world.log), "--fast-tier", "fast", "--tiers", str(world.toml), "--no-store",
             "--manifest", str(out)])
    assert r.code == 0, r.err
    m = stager.load_manifest(out)
    assert m["entries"] and all(e["destination"].startswith(str(world.fast) + "/") for e in m["entries"])


@pytest.mark.parametrize("where, content", [("state", b'{"done": [1]}'), ("state", b"[1]"), ("map", b"[1, 2]"),
                                            ("map", b'"x"'), ("state", b"[" * 50000), ("map", b"\xff")],
                         ids=["done a list", "state a list", "map a list", "map a string", "nested", "not UTF-8"])
def test_damaged_state_or_map_stops_before_copying(world, tmp_path, private_stores, where, content):
    m = tmp_path / "m.json"
    good = _good_manifest(world)
    good["root"] = str(tmp_path / "staged")
    for e in good["entries"]:
        e["destination"] = stager.destination_for(e["source"], good["root"])
    m.write_text(json.dumps(good))
    target = m.with_name(m.name + ".state.json") if where == "state" else stager.staging_map_path()
    target.write_bytes(content)
    try:
        with pytest.raises(TfdarshanError) as e:
            stager.stage(m, progress=False)
        assert str(target) in str(e.value) and "\n" not in str(e.value)
        assert not (tmp_path / "staged").exists()
    finally:
        if where == "map":
            target.unlink()


# ========================================================================= CLI
def any_text(max_size=12):
    return st.text(max_size=max_size)


def not_int(s: str) -> bool:
    try:
        int(s)
    except ValueError:
        return True
    return False


BAD_INT = st.one_of(st.sampled_from(["", "x", "1.5", "12Q", "0x10", "1e3", "nan", "inf", "--"]),
                    any_text(6).filter(not_int))
BAD_SIZE = st.one_of(st.sampled_from(["12Q", "-5", "", "lots", "10%", "1e3", "9" * 400, "1.5.5", "inf", "nan",
                                      "4 G B", "-1G", "0x10"]),
                     st.from_regex(r"[0-9]{1,3}(\.[0-9])?[QWXYZ]", fullmatch=True))
# junk options: never a prefix of a real one (argparse accepts abbreviations)
UNKNOWN_OPTION = st.one_of(st.text(alphabet=string.ascii_lowercase + "-_=", max_size=8).map(lambda s: ["--zz" + s]),
                           st.sampled_from([["-Z"], ["-Q", "1"], ["---"], ["--=x"]]))
JUNK_POSITIONAL = any_text().map(lambda s: ["x" + s])


def nowhere(world):
    """Paths that do not exist, named by hypothesis."""
    return any_text().map(lambda s: str(world.missing / ("x" + s)))


def build(draw, command, extras: dict, mistake_key, mistake_units, tail=()):
    """[command, *options in random order (extras, minus the mistaken
    option, so nothing overrides the mistake), *tail]."""
    units = [list(u) for k, u in extras.items() if k != mistake_key and draw(st.booleans())]
    units += [list(u) for u in mistake_units]
    units = draw(st.permutations(units))
    return [command] + [t for u in units for t in u] + list(tail)


@st.composite
def demo_argv(draw, w):
    key = draw(st.sampled_from(["--files", "--steps", "--batch", "--logdir", "option", "positional"]))
    bad = {"--files": st.one_of(st.integers(max_value=0).map(str), BAD_INT),
           "--steps": st.one_of(st.integers(max_value=2).map(str), BAD_INT),
           "--batch": st.one_of(st.integers(max_value=0).map(str), BAD_INT),
           "--logdir": st.sampled_from([str(w.afile), ""]),
           "option": UNKNOWN_OPTION, "positional": JUNK_POSITIONAL}[key]
    units = [[key, draw(bad)]] if key.startswith("--") else [draw(bad)]
    extras = {"--files": ["--files", "2"], "--steps": ["--steps", "3"], "--batch": ["--batch", "1"],
              "--logdir": ["--logdir", str(w.adir)]}
    return build(draw, "demo", extras, key, units)


@st.composite
def import_argv(draw, w, fresh):
    key = draw(st.sampled_from(["log", "twice", "--logdir", "no logdir", "option"]))
    logs, units = [str(w.log)], []
    if key == "log":
        logs.insert(draw(st.integers(0, 1)), draw(st.one_of(
            nowhere(w), st.sampled_from([str(w.adir), str(w.afile), str(w.truncated_log), ""]))))
    elif key == "twice":
        logs.append(str(w.log))          # both would become the same session
    elif key == "option":
        units.append(draw(UNKNOWN_OPTION))
    if key == "--logdir":
        units.append(["--logdir", draw(st.sampled_from([str(w.afile), ""]))])
    elif key != "no logdir":
        units.append(["--logdir", str(fresh)])
    units.append(logs)
    return build(draw, "import", {"--run": ["--run", "x" + draw(any_text())]}, key, units)


@st.composite
def run_argv(draw, w):
    key = draw(st.sampled_from(["--steps", "script", "-m", "--logdir", "option"]))
    units, tail = [], [str(w.afile.with_name("ok.py"))]
    if key == "--steps":
        units.append(["--steps", draw(st.one_of(
            st.sampled_from(["", ":", "a:b", "1:", ":3", "1:2:3", "x", "1.5:2", "0x1:2"]),
            st.tuples(st.integers(0, 99), st.integers(0, 99)).filter(lambda t: t[0] > t[1]).map(
                lambda t: f"{t[0]}:{t[1]}"),
            st.integers(max_value=-1).map(lambda a: f"{a}:{a + 5}")))])
    elif key == "script":
        tail = [draw(st.one_of(nowhere(w), st.sampled_from([str(w.adir), ""])))]
    elif key == "-m":
        units.append(["-m", draw(st.one_of(st.sampled_from([".", "..x", "os.nope", "json..x", "a-b", "x y"]),
                                           st.text(alphabet=string.ascii_lowercase + "_", max_size=8).map(
                                               lambda s: "no_such_module_" + s)))])
        tail = []
    elif key == "--logdir":
        units.append(["--logdir", draw(st.sampled_from([str(w.afile), ""]))])
    else:
        units.append(draw(UNKNOWN_OPTION))
    tail = tail + draw(st.lists(any_text(), max_size=2)) if tail else tail      # the script's own arguments
    extras = {"--steps": ["--steps", "0:1"], "--trace": ["--trace"], "--children": ["--children"],
              "--logdir": ["--logdir", str(w.adir)]}
    return build(draw, "run", extras, key, units, tail)


@st.composite
def probe_argv(draw, w):
    key = draw(st.sampled_from(["path", "--size", "too big", "option", "positional"]))
    path = str(w.adir)
    units = []
    if key == "path":
        path = draw(st.one_of(nowhere(w), st.sampled_from([str(w.afile), ""])))
    elif key == "--size":
        units.append(["--size", draw(BAD_SIZE)])
    elif key == "too big":
        units.append(["--size", draw(st.sampled_from(["999T", "800TiB", "9000000G"]))])
        key = "--size"
    elif key == "option":
        units.append(draw(UNKNOWN_OPTION))
    else:
        units.append(draw(JUNK_POSITIONAL))
    units.append([path])
    extras = {"--size": ["--size", "1M"], "--json": ["--json"], "--no-save": ["--no-save"]}
    return build(draw, "probe", extras, key, units)


BAD_TOML_TEXT = ["not toml ===", "[[tier]]\npath = '/x'\nbandwidth = inf", "tier = 3", "[[tier]]\nname = 'x'",
                 "[[tier]]\npath = '/x'\ncapacity = 1e400"]


@st.composite
def recommend_argv(draw, w, logdir, bad_tomls, broken_logdir):
    key = draw(st.sampled_from(["source", "--fast-tier", "--tiers", "--capacity", "--session", "--granularity",
                                "--format", "--output", "--manifest", "--compare", "option", "positional"]))
    source = draw(st.sampled_from([str(w.log), str(logdir)]))
    fast, units = str(w.fast), []
    if key == "source":
        source = draw(st.one_of(nowhere(w), st.sampled_from([str(w.afile), str(w.adir), str(w.truncated_log),
                                                             str(broken_logdir), ""])))
    elif key == "--fast-tier":
        fast = draw(st.one_of(nowhere(w), st.sampled_from([str(w.afile), ""])))
    elif key == "--tiers":
        units.append(["--tiers", draw(st.one_of(nowhere(w), st.sampled_from(
            [str(w.afile), str(w.adir), ""] + [str(p) for p in bad_tomls])))])
    elif key == "--capacity":
        units.append(["--capacity", draw(st.one_of(BAD_SIZE.filter(lambda v: not v.endswith("%")),
                                                   st.sampled_from(["x%", "%", "-10%", "101%", "inf%", "nan%",
                                                                    "1e400%", "%%"])))])
    elif key == "--session":
        session = draw(st.one_of(any_text().map(lambda s: "x" + s),
                                 st.sampled_from(["..", "../train", w.session + "/"])))
        if source == str(w.log):
            session = draw(st.sampled_from([session, w.session]))   # a session of a log file: a mistake
        units.append(["--session", session])
    elif key in ("--granularity", "--format"):
        units.append([key, draw(any_text().filter(lambda s: s not in ("file", "dataset", "text", "json", "html")))])
    elif key in ("--output", "--manifest"):
        units.append([key, draw(st.one_of(nowhere(w).map(lambda p: p + "/out"), st.sampled_from([str(w.adir), ""])))])
    elif key == "--compare":
        before, after = draw(st.sampled_from([(str(w.log), str(w.log)), (str(w.missing / "a"), str(w.log)),
                                              (str(w.log), str(w.afile)), (str(w.adir), str(w.log))]))
        units.append(["--compare", before, after])
    elif key == "option":
        units.append(draw(UNKNOWN_OPTION))
    else:
        units.append([str(w.log)])              # a second source
    # the declared tier always comes along: without it the fast tier would be probed
    units += [["--fast-tier", fast], [source], ["--tiers", str(w.toml)]]
    extras = {"--capacity": ["--capacity", draw(st.sampled_from(["1M", "50%"]))],
              "--granularity": ["--granularity", "dataset", "--dataset", "*/shard-[01]*"],
              "--format": ["--format", draw(st.sampled_from(["text", "json", "html"]))], "--no-store": ["--no-store"],
              "--output": ["--output", str(w.root / "cwd" / "report.out")],
              "--manifest": ["--manifest", str(w.root / "cwd" / "manifest.out")]}
    if key == "--compare":
        extras.pop("--manifest")        # with a manifest, comparing two good logs is no mistake
    return build(draw, "recommend", extras, key, units)


@st.composite
def stage_argv(draw, w, bad_manifests):
    key = draw(st.sampled_from(["manifest", "option", "positional"]))
    manifest = draw(st.one_of(nowhere(w), st.sampled_from([str(w.afile), str(w.adir), ""] +
                                                           [str(p) for p in bad_manifests])))
    units = [[manifest]] if key == "manifest" else [[str(w.manifest)], draw(UNKNOWN_OPTION if key == "option"
                                                                                 else JUNK_POSITIONAL)]
    return build(draw, "stage", {"--quiet": ["--quiet"]}, key, units)


@pytest.fixture(scope="module")
def bad_inputs(world):
    """Wrong tier files and manifests for the recommend and stage command lines,
    and a log directory whose step series is damaged."""
    d = world.root / "bad-inputs"
    d.mkdir()
    tomls = []
    for i, t in enumerate(BAD_TOML_TEXT):
        tomls.append(d / f"bad{i}.toml")
        tomls[-1].write_text(t)
    manifests = []
    for i, (name, change) in enumerate(_manifest_cases(world)[::7]):
        manifests.append(d / f"bad{i}.json")
        _write_json(manifests[-1], change(_good_manifest(world)))
    broken = world.logdir_copy("broken-series")
    world.series(broken, "steps").write_bytes(b"PAR1 and then nothing")
    return tomls, manifests, broken


def test_generated_demo_command_lines_are_refused(guarded):
    @settings(max_examples=40, **FUZZ)
    @given(demo_argv(guarded))
    def check(argv):
        assert_refused(cli(argv), "demo", argv)
    check()


def test_generated_import_command_lines_are_refused_and_copy_nothing(guarded):
    fresh = guarded.root / "import-target"

    @settings(max_examples=40, **FUZZ)
    @given(import_argv(guarded, fresh))
    def check(argv):
        assert_refused(cli(argv), "import", argv)
        assert not fresh.exists(), argv
    check()


def test_generated_run_command_lines_are_refused(guarded):
    guarded.afile.with_name("ok.py").write_text("print('the script ran')\n")

    @settings(max_examples=50, **FUZZ)
    @given(run_argv(guarded))
    def check(argv):
        r = cli(argv)
        assert_refused(r, "run", argv)
        assert "the script ran" not in r.out
    check()
    assert not (guarded.root / "cwd" / "tfdarshan_logs").exists()


def test_generated_probe_command_lines_are_refused(guarded):
    @settings(max_examples=40, **FUZZ)
    @given(probe_argv(guarded))
    def check(argv):
        assert_refused(cli(argv), "probe", argv)
    check()
    assert list(guarded.adir.iterdir()) == []


def test_generated_recommend_command_lines_are_refused(guarded, bad_inputs):
    tomls, _, broken = bad_inputs

    logdir = guarded.logdir_copy("recommend-fuzz")    # advice.json is stored beside the session

    @settings(max_examples=80, **FUZZ)
    @given(recommend_argv(guarded, logdir, tomls, broken))
    def check(argv):
        assert_refused(cli(argv), "recommend", argv)
    check()


def test_generated_stage_command_lines_are_refused(guarded, bad_inputs):
    _, manifests, _ = bad_inputs

    @settings(max_examples=40, **FUZZ)
    @given(stage_argv(guarded, manifests))
    def check(argv):
        assert_refused(cli(argv), "stage", argv)
    check()
    assert not (guarded.fast / "staged").exists()


@settings(max_examples=60, **FUZZ)
@given(st.lists(any_text(), max_size=4))
def test_generated_command_lines_without_a_command(guarded, argv):
    assume(not argv or argv[0] not in ("demo", "import", "run", "probe", "recommend", "stage"))
    assume(not any(a.startswith("-") for a in argv))       # -h and --version exit 0, rightly
    r = cli(argv)
    assert r.usage and r.code == 2 and "Traceback" not in r.err
    assert any(line.startswith("tfdarshan: error: ") for line in r.err.split("\n")), r.err


def test_the_generators_do_make_valid_command_lines_without_their_mistake(guarded, bad_inputs):
    """The mistake is what fails: with the same extras and no mistake the
    cheap commands succeed (so the refusals above are not for another reason)."""
    w = guarded
    r = cli(["recommend", str(w.logdir_copy("valid-recommend")), "--fast-tier", str(w.fast), "--tiers", str(w.toml),
             "--capacity", "50%", "--granularity", "dataset", "--dataset", "*/shard-[01]*", "--format", "json",
             "--output", str(w.root / "cwd" / "report.json")])
    assert r.code == 0, r.err
    assert json.loads((w.root / "cwd" / "report.json").read_text())["fast_tier"]["path"] == str(w.fast)
    target = w.root / "valid-import"
    r = cli(["import", str(w.log), "--logdir", str(target), "--run", "xyz"])
    assert r.code == 0 and len(list(target.glob("xyz/plugins/tfdarshan/good/*.darshan"))) == 1, r.err


# ------------------------------------------------------------ real processes
def test_mistakes_in_real_processes_exit_2_with_one_line(world, bad_inputs, tmp_path):
    """A few through the real entry point: the exit status and stderr a
    shell sees, with bytes that are not UTF-8 and a newline in a name."""
    _, manifests, broken = bad_inputs
    cases = [
        ("stage", [os.fsencode(str(world.missing)) + b"/bad\xff\xfe.json"]),
        ("stage", [str(world.missing / "new\nline.json")]),
        ("stage", [str(manifests[0])]),
        ("recommend", [str(broken), "--fast-tier", str(world.fast), "--tiers", str(world.toml)]),
        ("run", ["-m", "no_such_module_anywhere"]),
        ("demo", ["--logdir", str(world.afile)]),
        ("probe", [str(world.adir), "--size", "9" * 400]),
    ]
    for i in range(0, len(cases), 2):           # two at a time: the machine has two cores
        batch = [(command, args, subprocess.Popen([sys.executable, "-m", "tfdarshan", command, *args], cwd=tmp_path,
                                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE))
                 for command, args in cases[i:i + 2]]
        for command, args, p in batch:
            _, err = p.communicate(timeout=120)
            err = err.decode("utf-8", "backslashreplace")
            assert p.returncode == 2 and one_line_error(err, command), (command, args, p.returncode, err)
    assert list(tmp_path.iterdir()) == []                   # `run` left no log behind


# ================================================================ the I/O tab
@pytest.fixture(scope="module")
def tab(world):
    """The plugin on the real session; (plugin, query of the good session)."""
    plugin = _plugin(world.logdir)
    good = {"run": world.run, "session": world.session}
    for route in JSON_ROUTES:
        status, body = _get(plugin, route, urllib.parse.urlencode(good))
        assert status == 200, (route, body)
    return plugin, good


TRAVERSAL = ["../../../../etc/passwd", "..", "../train", "train/..", "./train", "train/", "/etc/passwd", "/",
             "....//....//etc", "..\\..\\windows", "%2e%2e%2f%2e%2e", "%252e%252e", "train/../../", "~root",
             "file:///etc/passwd", "\\\\server\\share", ".%2e/.%2e/etc"]
OVERSIZED = ["a" * (MAX_PARAM + 1), "../" * 2000, "x" * 100_000]
# raw query bytes: not UTF-8 (lone continuation, overlong "..", a surrogate, past U+10FFFF), control characters
NOT_TEXT = ["%ff", "%ff%fe", "%c0%ae%c0%ae", "%ed%a0%80", "%80", "train%ff", "%f4%90%80%80", "%ef%bf%bd", "%00",
            "a%00b", "%0a", "train%0d%0a", "%1b%5b31m"]


def _param_names(route):
    return SESSION_PARAMS + (FILES_PARAMS if route == "files" else [])


def _query(good, param, raw_value: str) -> str:
    """The good query with `param` replaced by an already-encoded value."""
    parts = [f"{k}={urllib.parse.quote(v, safe='')}" for k, v in good.items() if k != param]
    return "&".join(parts + [f"{param}={raw_value}"])


def test_every_parameter_of_every_route_refuses_hostile_values(world, tab):
    plugin, good = tab
    wrong = []
    for route in JSON_ROUTES:
        for param in _param_names(route):
            values = [(v, urllib.parse.quote(v, safe=""), "traversal") for v in TRAVERSAL]
            values += [(v, urllib.parse.quote(v, safe=""), "oversized") for v in OVERSIZED]
            values += [(v, v, "not text") for v in NOT_TEXT]
            for value, raw, kind in values:
                status, body = _get(plugin, route, _query(good, param, raw))
                if param == "q" and kind == "traversal":
                    # the search box: text matched against recorded paths, never a path itself
                    ok = status == 200 and all(value in r[0] for r in body["rows"])
                elif param in SESSION_PARAMS and kind == "traversal":
                    ok = status == 404 and isinstance(body.get("error"), str)
                else:
                    ok = status == 400 and isinstance(body.get("error"), str)
                if not ok:
                    wrong.append((route, param, value[:40], status, str(body)[:80]))
    assert not wrong, wrong


def test_hostile_parameters_do_not_reach_other_routes(world, tab):
    """/runs and the JSON routes ignore what they do not read; oversized
    unknown parameters change nothing either."""
    plugin, good = tab
    _, summary = _get(plugin, "summary", urllib.parse.urlencode(good))
    runs = Client(plugin.get_plugin_apps()["/runs"])
    baseline = json.loads(runs.get("/").get_data())
    assert [r["run"] for r in baseline["runs"]] == [world.run]
    for raw in [urllib.parse.quote(v, safe="") for v in TRAVERSAL + OVERSIZED] + NOT_TEXT:
        r = runs.get("/", query_string=f"run={raw}&session={raw}&{raw}={raw}")
        assert r.status_code == 200 and json.loads(r.get_data()) == baseline
    junk = "&".join(f"p{i}={'y' * 200}" for i in range(2000))
    status, body = _get(plugin, "summary", urllib.parse.urlencode(good) + "&" + junk + "&" + "z" * 100_000 + "=1")
    assert status == 200 and body == summary


@settings(max_examples=150, **FUZZ)
@given(st.sampled_from(JSON_ROUTES), st.data())
def test_random_bytes_in_any_parameter(world, tab, route, data):
    plugin, good = tab
    param = data.draw(st.sampled_from(_param_names(route)))
    value = data.draw(st.one_of(st.binary(max_size=40), st.text(max_size=40).map(str.encode),
                                st.sampled_from([b"..", b"../", b"%2e", b"a" * (MAX_PARAM + 1)]),
                                st.sampled_from([world.run, world.session, world.host]).map(str.encode).flatmap(
                                    lambda b: st.binary(max_size=3).map(lambda x: b + x))))
    status, body = _get(plugin, route, _query(good, param, urllib.parse.quote_from_bytes(value, safe="")))
    assert status in (200, 400, 404), body
    if status != 200:
        assert isinstance(body.get("error"), str)
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or len(text) > MAX_PARAM or "\ufffd" in text or any(ord(c) < 0x20 for c in text):
        assert status == 400, (param, value)
    if status == 200 and param in SESSION_PARAMS:
        real = {"run": world.run, "session": world.session, "host": world.host}[param]
        assert text == real or (param == "host" and text == ""), (param, value)


def test_run_directories_with_hostile_names_on_disk(world, tmp_path):
    """Run names that are not UTF-8 or hold a newline: listed without
    breaking /runs, and no request for them is served."""
    logdir = tmp_path / "logs"
    names = [os.fsencode(str(logdir)) + b"/run-\xff\xfe", os.fsencode(str(logdir)) + b"/new\nline"]
    for n in names:
        shutil.copytree(world.logdir / world.run, os.fsdecode(n))
    plugin = _plugin(logdir)
    r = Client(plugin.get_plugin_apps()["/runs"]).get("/")
    assert r.status_code == 200
    listed = [x["run"] for x in json.loads(r.get_data())["runs"]]
    assert sorted(listed) == sorted(os.fsdecode(os.path.basename(n)) for n in names)
    for raw in ("run-%ff%fe", "run-%ef%bf%bd%ef%bf%bd", "run-%5cxff%5cxfe", "run-%5cudcff%5cudcfe", "new%0aline",
                "new%5cnline"):
        status, body = _get(plugin, "summary", f"run={raw}&session={urllib.parse.quote(world.session)}")
        assert status in (400, 404) and "error" in body, raw


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=12).filter(lambda b: b"/" not in b and b"\0" not in b),
                min_size=1, max_size=6))
def test_names_that_are_not_utf8_pass_the_vectorised_path_tests(names):
    # given paths under /dev/shm and a .cache directory whose last part is any bytes
    from tfdarshan.advice import training_input as TI
    from tfdarshan.capture import mounts as M
    from tfdarshan.capture.arrow_text import arrow_paths
    # (a name that is itself a config directory or one of tfdarshan's own files says so, rightly)
    assume(not any(os.fsdecode(n) in TI.CONFIG_PARTS or os.fsdecode(b"/" + n).endswith(TI.OWN_SUFFIXES)
                   for n in names))
    data = [os.fsdecode(b"/dev/shm/tfd/" + n) for n in names]
    cache = [os.fsdecode(b"/home/u/.cache/" + n) for n in names]
    # when / then: the mount of each is its prefix's, and the cache files are configuration
    points = M.points_of(data, [M.Mount("/", "ext4"), M.Mount("/dev/shm", "tmpfs")])
    assert list(points) == ["/dev/shm"] * len(names)
    assert list(TI.reasons(data + cache)) == [""] * len(names) + [TI.CONFIG] * len(names)
    # and the text says whether it is exact: exact exactly when every name is UTF-8
    _, exact = arrow_paths(data)
    assert exact == all(_utf8(n) for n in names)


def _utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False
