"""Every figure a user reads has one definition (tfdarshan/measures/), and
the tab's two readers agree on it: a four-rank session read as one set of
logs (views.py, the one-process reader) and from its analysis tables
(rank_views.py, the many-rank reader) gives the same time in reads, in
writes, in metadata calls, their named sums, bandwidth and time per file,
with the same words, and each equals what this test adds up itself from
the Darshan logs (PyDarshan's frames) and the step series (pandas). Once
the one-process steps chart's `io_time` was reads and writes and the
many-rank one's reads, writes and metadata, and its bandwidth divided
bytes read alone by that.

And the old ambiguous names are gone from the package and the tab: no
`io_time`, no unnamed `input_wait` column, no second definition of the
formatting or of bandwidth."""
import pathlib
import re

import numpy as np
import pandas as pd
import pytest

import tfdarshan
from rank_session import copy_session, rank_of
from tfdarshan.logs.logdir import find_sessions
from tfdarshan_tb import rank_data, rank_views, session_data, views

ROOT = pathlib.Path(__file__).resolve().parents[2]
RANKS = 4
TIMES = ("read_time", "write_time", "meta_time", "data_time")


@pytest.fixture(scope="module")
def session(tmp_path_factory, pipeline_ranks):
    root = tmp_path_factory.mktemp("measures")
    d = copy_session(pipeline_ranks, root)
    [sess] = find_sessions(root / "logs")
    # the one-process reader over every rank's log, and the many-rank reader over the tables
    return d, session_data.SessionData(sess, None), rank_data.RankSessionData(sess)


def from_logs(d):
    """Per file and rank, Darshan's counters as PyDarshan reads them."""
    rows = []
    for log in sorted(d.glob("*.rank*.darshan")):
        snap = tfdarshan.read_darshan_log(log)
        for m, f in (("POSIX", snap.posix), ("STDIO", snap.stdio)):
            rows.append(pd.DataFrame({"path": f["path"], "rank": rank_of(log),
                                      "bytes_read": f[f"{m}_BYTES_READ"], "bytes_written": f[f"{m}_BYTES_WRITTEN"],
                                      "read": f[f"{m}_F_READ_TIME"], "write": f[f"{m}_F_WRITE_TIME"],
                                      "meta": f[f"{m}_F_META_TIME"]}))
    return pd.concat(rows, ignore_index=True)


def from_series(d):
    """Per training step, summed over ranks, from each rank's step series."""
    s = pd.concat([pd.read_parquet(p) for p in sorted(d.glob("*.rank*.steps.parquet"))], ignore_index=True)
    return s[s["step"] >= 0].groupby("step")[["bytes_read", "bytes_written", "read_time", "write_time",
                                              "meta_time"]].sum()


def test_one_process_and_many_rank_summaries_agree(session):
    d, one, many = session
    f = from_logs(d)
    read, write, meta = f["read"].sum(), f["write"].sum(), f["meta"].sum()
    moved = f["bytes_read"].sum() + f["bytes_written"].sum()
    want = {"read_time": read, "write_time": write, "meta_time": meta, "data_time": read + write,
            "bandwidth": moved / (read + write)}
    assert read > 0 and meta > 0, "the pipeline reads and opens files"
    a, b = views.summary(one), rank_views.summary(many)
    for k, v in want.items():
        assert a[k] == pytest.approx(v, rel=1e-9), k
        assert b[k] == pytest.approx(v, rel=1e-9), k
    # the same words, but for who the figures are summed over
    assert set(a["labels"]) == set(b["labels"]) >= {*TIMES, "bandwidth"}
    for k in a["labels"]:
        assert a["labels"][k].replace("processes", "ranks") == b["labels"][k], k
    assert "reads and writes" in b["labels"]["data_time"] and "ranks" in b["labels"]["data_time"]
    assert "metadata" not in b["labels"]["bandwidth"] and "reads and writes" in b["labels"]["bandwidth"]


def test_one_process_and_many_rank_step_charts_agree(session):
    d, one, many = session
    s = from_series(d)
    data = s["read_time"] + s["write_time"]
    a, b = views.steps(one), rank_views.steps(many)
    assert len(s) >= 3, "every rank ran its steps"
    assert a["steps"] == b["steps"] == [int(x) for x in s.index]
    for got in (a, b):
        assert "io_time" not in got
        assert np.allclose(got["data_time"], data, rtol=1e-9)
        assert np.allclose(got["meta_time"], s["meta_time"], rtol=1e-9)
        assert got["bytes_read"] == [int(x) for x in s["bytes_read"]]
        assert got["bytes_written"] == [int(x) for x in s["bytes_written"]]
        bw = [(r + w) / t if t > 0 else None for r, w, t in zip(s["bytes_read"], s["bytes_written"], data)]
        assert [x is None for x in got["bandwidth"]] == [x is None for x in bw]
        assert np.allclose([x for x in got["bandwidth"] if x is not None], [x for x in bw if x is not None],
                           rtol=1e-9)


def test_one_process_and_many_rank_file_tables_agree(session):
    d, one, many = session
    f = from_logs(d)
    want = (f["read"] + f["write"] + f["meta"]).groupby(f["path"]).sum()
    a = views.files(one, limit=10_000)
    b = rank_views.files(many, limit=10_000)
    assert a["sort"] == b["sort"] == "file_time"
    rows_a = pd.DataFrame(a["rows"], columns=a["columns"]).groupby("path")["file_time"].sum()
    rows_b = pd.DataFrame(b["rows"], columns=b["columns"]).set_index("path")["file_time"]
    assert set(rows_a.index) == set(rows_b.index) == set(want.index)
    assert np.allclose(rows_a[want.index], want, rtol=1e-9, atol=1e-15)
    assert np.allclose(rows_b[want.index], want, rtol=1e-9, atol=1e-15)
    # per mount, read bandwidth over read time alone, alike
    ta = {m["mount"]: m for m in views.mounts(one)["mounts"]}
    tb = {m["mount"]: m for m in rank_views.mounts(many)["mounts"]}
    assert ta and set(ta) == set(tb)
    for mount in ta:
        for k in ("bytes_read", "read_time", "write_time", "meta_time", "read_bandwidth"):
            x, y = ta[mount][k], tb[mount][k]
            assert (x is None) == (y is None) and (x is None or x == pytest.approx(y, rel=1e-9)), (mount, k)


# ------------------------------------------------------------- one definition
SOURCES = sorted((ROOT / "tfdarshan").rglob("*.py")) + sorted((ROOT / "tfdarshan_tb").rglob("*.py")) \
    + sorted((ROOT / "tfdarshan_tb" / "static").glob("*.js"))
MEASURES = ROOT / "tfdarshan" / "measures"
# names that meant different sums in different places, or a share here and seconds there
AMBIGUOUS = {
    "io_time": re.compile(r"\bio_time\b"),
    "total_time (a column)": re.compile(r"[\"']total_time[\"']|\btotal_time:"),
    "input_wait as a column or key": re.compile(r"[\"']input_wait[\"']|(?<!measures)\.input_wait\b(?!\.)|\binput_wait:"),
    "wait_seconds": re.compile(r"\bwait_seconds\b(?!:)"),
}
# each definition lives in measures/ only
DEFINED_ONCE = {n: re.compile(rf"^\s*def {n}\(", re.M)
                for n in ("human_bytes", "human_time", "percent", "bandwidth", "step_wait_time", "data_time", "input_io_time",
                          "file_time")}


def offences(paths, rules):
    out = []
    for p in paths:
        text = p.read_text()
        where = p.relative_to(ROOT) if ROOT in p.parents else p.name
        for name, rule in rules.items():
            out += [f"{where}:{text.count(chr(10), 0, m.start()) + 1}: {name}"
                    for m in rule.finditer(text)]
    return out


# the words: "tier" is a tier `tfdarshan probe` measured (or a TOML file declared), so where
# no tier is known (the tab, the per-file table, capture, the logs, the analysis tables) a
# file's place is its mount; "log" is a log, so a logger is not named log
MOUNT_PLACES = [p for p in SOURCES if not any(part in ("advice", "cli", "tf") for part in p.relative_to(ROOT).parts)] \
    + [ROOT / "tfdarshan" / "advice" / "file_table.py"]
WORDS = {
    # (a line that names the fast tier or a probe speaks of a tier)
    "tier where a mount is meant": re.compile(r"(?im)^(?!.*(fast.tier|probe)).*?(?<![a-z])tier"),
    "a logger named log": re.compile(r"^\s*log = logging\.getLogger", re.M),
}


def test_words_mean_one_thing():
    bad = offences(MOUNT_PLACES, {k: v for k, v in WORDS.items() if k.startswith("tier")})
    bad += offences(SOURCES, {k: v for k, v in WORDS.items() if not k.startswith("tier")})
    assert not bad, "a word used for another thing:\n" + "\n".join(bad)
    moved = {"series.py", "step_entries.py", "input_wait.py"}      # step tables and a metric, not logs
    assert not moved & {p.name for p in (ROOT / "tfdarshan" / "logs").iterdir()}, "logs/ holds logs only"


def test_no_ambiguous_names():
    bad = offences([p for p in SOURCES if MEASURES not in p.parents], AMBIGUOUS)
    assert not bad, "ambiguous names of a measure:\n" + "\n".join(bad)


def test_each_measure_defined_once_in_measures():
    defined = offences(SOURCES, DEFINED_ONCE)
    outside = [x for x in defined if not x.startswith("tfdarshan/measures/")]
    assert not outside, "a measure defined outside tfdarshan/measures/:\n" + "\n".join(outside)
    assert len(defined) == len(DEFINED_ONCE), defined
    assert not (ROOT / "tfdarshan" / "logs" / "input_wait.py").exists(), "logs/ holds logs only"


def test_the_checks_can_fail(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text('x = {"io_time": 1, "input_wait": 2}\nwait.input_wait\ndef human_time(s):\n    pass\n')
    found = "\n".join(offences([bad], AMBIGUOUS) + offences([bad], DEFINED_ONCE))
    assert found.count("io_time") == 1 and found.count("input_wait") == 2 and "human_time" in found
    # the named figures pass
    good = tmp_path / "good.py"
    good.write_text('x = {"data_time": 1, "input_wait_share": 2, "input_wait_time": 3}\n'
                    'from tfdarshan.measures import input_wait\ninput_wait.share(1, 2)\n')
    assert not offences([good], AMBIGUOUS)
    words = tmp_path / "words.js"
    words.write_text("const TIER_PAGE = 50;\nrow.tier = 'x';\n// copy to the fast tier\n// probe the tier first\n"
                     "log = logging.getLogger('x')\nlogger = logging.getLogger('x')\n")
    found = offences([words], WORDS)
    assert [x.split(": ", 1)[1] for x in found] == ["tier where a mount is meant"] * 2 + ["a logger named log"], found
