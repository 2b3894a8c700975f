"""The I/O tab's backend: routes that answer JSON for the sessions found in
the log directory, and the ES module that draws them.

Run, session and host names come from the request, so they are only ever
matched against the sessions discovered under the log directory; nothing in
a request is joined into a path. Session directories that resolve outside
the log directory (symlinks) are not served."""
from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.resources
import json
import logging
import os
import pathlib
import threading
import time
import urllib.parse

from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from tfdarshan.analysis.analyze import tables_fresh
from tfdarshan.errors import TfdarshanError
from tfdarshan.logs import live_log
from tfdarshan.logs.logdir import find_sessions
from tfdarshan_tb import downsample, metadata, rank_data, rank_views, session_data, views

STATIC = pathlib.Path(__file__).parent / "static"
# Two of Plotly's bundles, by the name the page asks for: the basic one
# (scatter and bar: every chart of a session but the rank heatmap), which a
# browser evaluates in half the time of the cartesian one (those and the
# heatmap), asked for only by a many-rank session's rank views; each a
# fraction of the 4.8 MB of every trace type that the plotly package ships.
# `make` fetches them from the npm registry (Makefile, CHART_JS); they are
# never committed. Without them (a plain pip install) the tab uses the package's.
CHART_BUNDLES = {"plotly-basic.js": STATIC / "vendor" / "plotly-basic.min.js",
                 "plotly-cartesian.js": STATIC / "vendor" / "plotly-cartesian.min.js"}
# the page's ES modules (no file name from a request is ever opened: only these)
MODULES = ("index.js", "page.js", "util.js", "charts.js", "verdict.js", "table.js", "ranks.js")
# The modules and the chart library are served under an address keyed by
# their content, /m/<version>/<name> (static_version): a browser keeps them a
# year and opens the tab again with no request for any of them (served with
# no-cache, the modules' 25 KB came again on every load), and a new version
# of any of them (an upgrade) is a new address, so a kept copy is never run
# in its place.
VERSIONED = "/m/"
KEEP_SECONDS = 365 * 86400
MAX_PARAM = 512
SESSIONS_TTL = 5.0
CACHE_SIZE = 4
# answers kept per loaded session (routes x parameters): a reload is served from here
ANSWERS_SIZE = 256
# a page of the ranks chart, and the most a client may ask for
RANK_PAGE_MAX = 4096

# a line per stage of a long first load, beside TensorBoard's own log lines
logger = logging.getLogger("tfdarshan.tab")
if not logger.handlers:
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("tfdarshan tab: %(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


class BadRequest(Exception):
    pass


class NotFound(Exception):
    pass


class IOPlugin(base_plugin.TBPlugin):
    plugin_name = metadata.PLUGIN_NAME

    def __init__(self, context):
        self._logdir = context.logdir or ""
        self._lock = threading.Lock()
        self._sessions = (0.0, [])
        # loaded sessions, and the answers given of them (keyed by the session's key:
        # an answer of a session no longer kept is never asked again, and ages out)
        self._data = session_data.Memo(CACHE_SIZE)
        self._answers = session_data.Memo(ANSWERS_SIZE)
        # (session directory, host) -> the stages of its last load, for the page to show
        self._progress = {}
        self._loading_now = set()
        # the session the page opens first, read while TensorBoard starts and
        # draws its own page (as TensorBoard reads its event files), so that
        # opening the tab does not wait for it
        self.reading_ahead = threading.Thread(target=self._read_ahead, name="tfdarshan-tab-read-ahead", daemon=True)
        if self._logdir:
            self.reading_ahead.start()

    # ------------------------------------------------------------ TBPlugin
    def get_plugin_apps(self):
        routes = {VERSIONED + "*": self._serve_static, "/runs": self._serve_runs, "/progress": self._serve_progress}
        for name in ("summary", "verdict", "files", "steps", "histograms", "mounts", "timeline", "advice",
                     "rank_heatmap", "rank_wait"):
            routes["/" + name] = self._json_route(name)
        return routes

    def is_active(self):
        return bool(self._logdir) and bool(self._find())

    def frontend_metadata(self):
        return base_plugin.FrontendMetadata(es_module_path=f"{VERSIONED}{static_version()}/index.js", tab_name="I/O")

    # ------------------------------------------------------------ sessions
    def _find(self):
        with self._lock:
            when, found = self._sessions
            if time.monotonic() - when < SESSIONS_TTL:
                return found
        root = os.path.realpath(self._logdir)
        try:
            # a process killed before writing its log: its live log becomes a partial log, so its session shows
            said = live_log.summary_line(live_log.recover_all(self._logdir))
            if said:
                logger.info("%s", said)
        except OSError as e:
            logger.info("could not convert the live logs of killed processes: %s", e)
        ok = []
        for s in find_sessions(self._logdir):
            real = os.path.realpath(s.directory)
            if not (real == root or real.startswith(root + os.sep)):
                continue            # a symlink out of the log directory
            if all(os.path.realpath(s.directory / f"{h}.darshan").startswith(real + os.sep) for h in s.hosts):
                ok.append(s)
        with self._lock:
            self._sessions = (time.monotonic(), ok)
        return ok

    def _named(self, request, whole=False):
        """(session, host) the request names; host None for the whole session.
        whole: the whole session whatever host the request names."""
        run = _param(request, "run")
        name = _param(request, "session")
        host = _param(request, "host", required=False) or None
        session = next((s for s in self._find() if s.run == run and s.name == name), None)
        if session is None:
            raise NotFound("no such run and session")
        if host is not None and host not in session.hosts:
            raise NotFound("no such host in this session")
        return session, None if whole else host

    def _session_data(self, request, whole=False):
        """(key, data): the session the request names, loaded once: one
        process's log, all of them, or (a many-rank session as a whole) its
        analysis tables. The key changes when a log or the stored advice does."""
        return self._load(*self._named(request, whole))

    def _load(self, session, host):
        """(key, data) of a session (host None: the whole of it), loaded once
        however many ask at the same time."""
        hosts = [host] if host else list(session.hosts)
        # every request of a page stats every log: a string path, not a
        # pathlib one, is a third of the cost (1,024 rank logs: ≈ 12 → 4 ms a request)
        directory = str(session.directory)
        stamp = tuple(os.stat(f"{directory}/{h}.darshan").st_mtime_ns for h in hosts)
        try:
            advice = os.stat(session.directory / "advice.json").st_mtime_ns
        except OSError:
            advice = None
        key = (str(session.directory), host, stamp, advice)
        return key, self._data.get(key, lambda: self._load_now(session, host))

    def _load_now(self, session, host):
        """A session's data read from its logs, its stages kept for /progress."""
        stages = []
        named = (str(session.directory), host)
        with self._lock:
            self._progress[named] = stages
            self._loading_now.add(named)
        started = time.monotonic()

        def say(line):
            # paths that are not UTF-8 shown as \xNN: a log handler or a
            # pipe that writes UTF-8 must not fail on a directory's name
            line = session_data.display_path(f"{time.monotonic() - started:.1f} s: {line}")
            stages.append(line)
            logger.info("%s: %s", session_data.display_path(
                f"{session.run}/{session.name}{f' ({host})' if host else ''}"), line)
        many = host is None and rank_data.is_many_ranks(session)
        try:
            data = rank_data.RankSessionData(session, say) if many else session_data.SessionData(session, host, say)
            say("ready")
            return data
        except Exception as e:
            say(f"could not load: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            raise
        finally:
            with self._lock:
                self._loading_now.discard(named)

    def _read_ahead(self):
        """Compress the chart library, and load the session the page shows
        first (page.js: the last run's last session, every host) with what
        its first views need (views.first_views), unless
        that needs its analysis tables built: no Dask run starts before
        someone opens the tab."""
        try:
            for name in CHART_BUNDLES:
                chart_library_gzipped(name)
            sessions = self._find()         # (sorted by run, then session: the page's last is the last)
            if not sessions:
                return
            session = sessions[-1]
            if rank_data.is_many_ranks(session) and not tables_fresh(session.directory):
                return
            _, data = self._load(session, None)
            if isinstance(data, session_data.SessionData):
                # and what its first views need (the summary, the per-step series, the
                # file table's order): a cold page's requests find them worked out
                views.first_views(data)
        except Exception as e:      # the request that asks for it says what is wrong
            logger.info("could not read the newest session ahead: %s",
                        session_data.display_path(str(e).splitlines()[0] if str(e) else type(e).__name__))

    def _recommend_target(self, session):
        """What to hand `tfdarshan recommend` to find this session: the log
        directory, or the run's directory when another run has a session of
        the same name (recommend's --session matches names only)."""
        same = [s for s in self._find() if s.name == session.name]
        if session.run == "." or len(same) <= 1:
            return self._logdir
        return os.path.join(self._logdir, session.run)

    # -------------------------------------------------------------- routes
    @wrappers.Request.application
    def _serve_static(self, request):
        """A module or the chart library at /m/<version>/<name>: kept by the
        browser when <version> is the one of what is served now; asked for
        under another (a page opened before the files changed), today's
        bytes, which no browser keeps."""
        version, _, name = request.path.rpartition(VERSIONED)[2].partition("/")
        modules = _modules()
        keep = KEEP_SECONDS if version == static_version(modules) else 0
        if name in CHART_BUNDLES:
            # compressed once (a browser that takes no gzip gets it uncompressed from Respond)
            return http_util.Respond(request, chart_library_gzipped(name), "text/javascript", expires=keep,
                                     content_encoding="gzip")
        if name not in modules:
            return _json(request, {"error": "no such file"}, code=404)
        return http_util.Respond(request, modules[name], "text/javascript", expires=keep)

    @wrappers.Request.application
    def _serve_runs(self, request):
        return _json(request, views.runs(self._find()))

    @wrappers.Request.application
    def _serve_progress(self, request):
        """The stages of the named session's last load, and whether it is
        loading now (its first opening can take a while: analysis tables
        are built then)."""
        try:
            session, host = self._named(request)
        except BadRequest as e:
            return _json(request, {"error": str(e)}, code=400)
        except NotFound as e:
            return _json(request, {"error": str(e)}, code=404)
        with self._lock:
            stages = list(self._progress.get((str(session.directory), host), []))
            loading = (str(session.directory), host) in self._loading_now
        return _json(request, {"stages": stages, "loading": loading})

    def _json_route(self, name):
        ranked = name.startswith("rank_")

        @wrappers.Request.application
        def route(request):
            try:
                key, data = self._session_data(request, whole=ranked)
                # the same question of the same loaded session: the same answer
                asked = (key, name, tuple(sorted(request.args.items(multi=True))))
                body = self._answers.get(asked, lambda: json.dumps(
                    self._answer(name, ranked, data, request), allow_nan=False))
                return http_util.Respond(request, body, "application/json")
            except BadRequest as e:
                return _json(request, {"error": str(e)}, code=400)
            except NotFound as e:
                return _json(request, {"error": str(e)}, code=404)
            except ValueError as e:
                return _json(request, {"error": str(e)}, code=400)
            except TfdarshanError as e:
                return _json(request, {"error": str(e)}, code=422)
        return route

    def _answer(self, name, ranked, data, request):
        """The payload of route `name` for a loaded session."""
        many = isinstance(data, rank_data.RankSessionData)
        view = getattr(rank_views if many else views, name, None)
        width = _int(request, "width", None, downsample.MIN_WIDTH, downsample.MAX_WIDTH)
        if ranked:
            node = _param(request, "node", required=False)
            ranks = _param(request, "ranks", required=False)
            if not many:
                return rank_views.no_ranks()
            if name == "rank_wait":
                return view(data, node=node, ranks=ranks or None, offset=_int(request, "offset", 0, 0, 10**9),
                            limit=_int(request, "limit", None, 1, RANK_PAGE_MAX))
            return view(data, node=node, ranks=ranks or None, width=width)
        if name in ("steps", "verdict"):
            return view(data, width=width)
        if name == "mounts":
            return view(data, offset=_int(request, "offset", 0, 0, 10**9), limit=_int(request, "limit", None, 1, 1000))
        if name == "files":
            # (no sort: the view picks the column that matters for the session)
            return view(data, sort=_param(request, "sort", required=False) or None,
                        order=_param(request, "order", required=False) or "desc",
                        offset=_int(request, "offset", 0, 0, 10**9), limit=_int(request, "limit", 50, 1, 1000),
                        query=_param(request, "q", required=False) or "",
                        step=_int(request, "step", None, -1, 2**62))
        if name == "advice":
            return views.advice(data, target=self._recommend_target(data.session))
        return view(data)


def chart_library(name: str) -> bytes:
    """The Plotly bundle named (a key of CHART_BUNDLES) when the build
    fetched it; else the cartesian one, which draws everything the basic
    one does (a checkout built before the basic one was fetched); else the
    whole library the plotly package ships."""
    for path in (CHART_BUNDLES[name], CHART_BUNDLES["plotly-cartesian.js"]):
        try:
            return path.read_bytes()
        except OSError:
            pass
    return (importlib.resources.files("plotly") / "package_data" / "plotly.min.js").read_bytes()


# V8's explicit compile hint (Chromium 136 on; to other browsers, a comment):
# every function of the bundle compiled as the script loads, rather than each
# when first called. A cold load's own part: 0.69 s against 0.86 (medians of
# four A/B pairs of benchmarks/bench_tab.py, not resolved; docs/performance.md).
COMPILE_HINT = b"//# allFunctionsCalledOnLoad\n"


@functools.lru_cache(maxsize=len(CHART_BUNDLES))
def chart_library_gzipped(name: str) -> bytes:
    """What the tab's address for the bundle serves (the compile hint, then
    chart_library(name)), compressed once (1.2 and 1.5 MB: each request
    compressed it again before, holding the server's interpreter meanwhile)."""
    return _gzipped(COMPILE_HINT + chart_library(name))


@functools.lru_cache(maxsize=len(CHART_BUNDLES))
def _gzipped(body: bytes) -> bytes:
    # by content: where both names fall back to the same bundle, it is compressed once
    return gzip.compress(body, compresslevel=6, mtime=0)


def _modules() -> dict:
    """The page's modules as they are on disk now, by name."""
    return {m: (STATIC / m).read_bytes() for m in MODULES}


def static_version(modules=None) -> str:
    """What the tab's static address is keyed by: a digest of its modules (as
    on disk now: `modules` when read already) and of the chart libraries served."""
    digest = hashlib.sha256(chart_library_digest())
    for name, body in sorted((modules or _modules()).items()):
        digest.update(f"{name}\0{len(body)}\0".encode())
        digest.update(body)
    return digest.hexdigest()[:20]


@functools.lru_cache(maxsize=1)
def chart_library_digest() -> bytes:
    digest = hashlib.sha256()
    for name in sorted(CHART_BUNDLES):
        digest.update(hashlib.sha256(chart_library_gzipped(name)).digest())
    return digest.digest()


def _json(request, payload, code=200):
    return http_util.Respond(request, json.dumps(payload, allow_nan=False), "application/json", code=code)


def _param(request, name, required=True):
    _check_utf8(request)
    value = request.args.get(name)
    if value is None:
        if required:
            raise BadRequest(f"missing parameter {name!r}")
        return None
    if len(value) > MAX_PARAM:
        raise BadRequest(f"parameter {name!r} is too long")
    # U+FFFD is what some werkzeug versions make of undecodable bytes: names must be clean text
    if "\ufffd" in value or any(ord(c) < 0x20 for c in value):
        raise BadRequest(f"parameter {name!r} is not valid text")
    return value


def _check_utf8(request):
    """Names are UTF-8. werkzeug 3 leaves percent-escapes that are not UTF-8
    as text ("%FF"), which would then name a run literally called "%FF"."""
    try:
        urllib.parse.unquote_to_bytes(request.query_string).decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the query is not valid UTF-8") from None


def _int(request, name, default, lo, hi):
    v = _param(request, name, required=False)
    if v is None or v == "":
        return default
    try:
        n = int(v)
    except ValueError:
        raise BadRequest(f"parameter {name!r} must be an integer") from None
    if not lo <= n <= hi:
        raise BadRequest(f"parameter {name!r} must be between {lo} and {hi}")
    return n
