import atexit
import importlib.util
import os
import pathlib
import shutil
import sys
import tempfile
import threading

import pytest

# the shared helpers (helpers/) and the regression oracles (oracles/) import by
# their module names from a test in any folder, and from the benchmarks that load this file
_TESTS = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(_TESTS / "helpers"), str(_TESTS / "oracles")]

from places import NATIVE  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Hypothesis: `make test` tries the same examples on every run, so a CI run
# never fails on an input no run before it tried; exploring new ones is
# benchmarks/reliability.py's job (TFDARSHAN_FUZZ_SCALE > 1: random, ten
# times as many), and a failure it finds becomes a fixed example here
from hypothesis import settings as _hypothesis  # noqa: E402
from fuzz_scale import SCALE as _FUZZ_SCALE  # noqa: E402

_hypothesis.register_profile("suite", derandomize=True)
_hypothesis.register_profile("explore", derandomize=False)
_hypothesis.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or
                         ("explore" if _FUZZ_SCALE > 1 else "suite"))
# probes the tests make go to a store of their own, never the user's ~/.config
if "TFDARSHAN_TIERS" not in os.environ:
    _tiers = tempfile.mkdtemp(prefix="tfd-tiers-")
    atexit.register(shutil.rmtree, _tiers, True)
    os.environ["TFDARSHAN_TIERS"] = os.path.join(_tiers, "tiers.json")


def _tab_from_this_checkout():
    """An editable install maps the tab's package, tfdarshan_tb, to the
    checkout it was made from: a second worktree sharing the virtualenv
    would test the other checkout's tab, even with itself on PYTHONPATH. A link named tfdarshan_tb, first on the path of this process
    and of the TensorBoard servers the tests start, makes it this checkout's."""
    mine = pathlib.Path(__file__).resolve().parent.parent / "tfdarshan_tb"
    spec = importlib.util.find_spec("tfdarshan_tb")
    if spec and spec.origin and pathlib.Path(spec.origin).resolve().parent == mine:
        return
    where = mine.parent / "build" / "test-path"
    where.mkdir(parents=True, exist_ok=True)
    try:
        (where / "tfdarshan_tb").symlink_to(mine, target_is_directory=True)
    except FileExistsError:
        pass
    sys.path.insert(0, str(where))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(where), os.environ.get("PYTHONPATH")]))


_tab_from_this_checkout()


def pytest_configure(config):
    # xdist's loadfile hands the files out in the order collected below (by
    # default it reorders them by their number of tests, whatever they cost:
    # the long files of few tests then start last and one worker runs alone)
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    """The longest files first (their `cost` marker: seconds measured in the
    suite), each file's tests in their own order: a long file that a worker
    starts last sets the suite's wall time, while short ones fill the gaps."""
    cost = {}
    for item in items:
        marker = item.get_closest_marker("cost")
        cost[item.path] = max(cost.get(item.path, 0), marker.args[0] if marker else 0)
    items.sort(key=lambda item: -cost[item.path])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test's captured output as UTF-8 text: a path that is not UTF-8 in a
    log line (the hostile-name tests make such paths) must not stop xdist's
    worker from sending the report (execnet refuses lone surrogates)."""
    report = (yield).get_result()
    report.sections = [(title, text.encode("utf-8", "backslashreplace").decode("utf-8"))
                       for title, text in report.sections]


@pytest.fixture(scope="session")
def tf():
    """TensorFlow, imported once for the session."""
    tensorflow = pytest.importorskip(
        "tensorflow", reason="TensorFlow is not installed (make test installs tensorflow-cpu)")
    return tensorflow


@pytest.fixture(autouse=True)
def _shim_left_as_found(request):
    """A test that leaves the shim attached is named (TFDARSHAN_LEAKS: a file
    to list them in) and the shim detached, so the next test in this worker
    starts detached whichever test ran before it."""
    import tfdarshan
    was = tfdarshan.is_attached()
    yield
    if tfdarshan.is_attached() and not was:
        leaks = os.environ.get("TFDARSHAN_LEAKS")
        if leaks:
            with open(leaks, "a") as f:
                f.write(request.node.nodeid + "\n")
        tfdarshan.detach()


@pytest.fixture(autouse=True)
def _tab_read_ahead_ended():
    """No tab plugin's read-ahead thread (tfdarshan_tb.plugin) outlives the
    test that made the plugin: its reads would land in the next test's
    profile window in this worker (a process-wide profiler counts them)."""
    yield
    for thread in threading.enumerate():
        if thread.name == "tfdarshan-tab-read-ahead":
            thread.join(300)


@pytest.fixture
def attached():
    """The shim attached for a test (left attached if it already was)."""
    import tfdarshan
    was = tfdarshan.is_attached()
    tfdarshan.attach()
    yield tfdarshan
    if not was:
        tfdarshan.detach()


@pytest.fixture(scope="session")
def pipeline_ranks(tmp_path_factory):
    """The session directory of 4 real ranks of rank_session.PIPELINE under
    `tfdarshan run`, made once for the whole run and shared by every module
    that reads such a session (each pays 4 processes otherwise). Read it,
    never change it: a test that changes or analyses a session works on a
    copy (rank_session.copy_session, scaled_copy)."""
    import pathlib

    from rank_session import PIPELINE, made_once, pipeline_inputs, real_session

    def make(root):
        return real_session(root, PIPELINE, pipeline_inputs(root, 4), 4)
    return pathlib.Path(made_once("pipeline_ranks", tmp_path_factory, make))


@pytest.fixture(scope="session")
def mpi_tf_job(tmp_path_factory):
    """The job of four TensorFlow ranks under mpirun (helpers/mpi_tf_job.py),
    run once for the whole run, whichever worker asks first: a dict of its
    log directory, its data and its ranks' own figures, as strings. Read
    it, never change it."""
    import importlib.util

    from mpi_env import needs_mpi
    if needs_mpi.args[0]:
        pytest.skip(needs_mpi.kwargs["reason"])
    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed (make test installs tensorflow-cpu)")
    from mpi_tf_job import run_job
    from rank_session import made_once
    return made_once("mpi_tf_job", tmp_path_factory, run_job)


@pytest.fixture(scope="session")
def iostress(tmp_path_factory):
    """tests/native/iostress.c built into a shared library, loaded with ctypes."""
    import ctypes
    import subprocess
    out = tmp_path_factory.mktemp("native") / "libiostress.so"
    src = NATIVE / "iostress.c"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-pthread", str(src), "-o", str(out)], check=True)
    lib = ctypes.CDLL(str(out))
    lib.run_preads.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_long,
                               ctypes.c_void_p, ctypes.POINTER(ctypes.c_long)]
    lib.read_whole.argtypes = [ctypes.c_char_p]
    lib.read_whole.restype = ctypes.c_long
    lib.link_tree.restype = lib.read_tree.restype = ctypes.c_long
    lib.link_tree.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_long]
    return lib
