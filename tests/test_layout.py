"""The layout keeps itself: imports run one way between the sub-packages
(cli -> advice / analysis / tf -> logs -> steps -> measures -> capture), no module imports another that
imports it back, the TensorBoard plugin reads logs, advice and analysis tables and never the
TensorFlow hooks, and no module grows past what one can read in a sitting. In the C shim,
each object file takes symbols only from the files below it (native/build_shim.py lists
them from the bottom up), and each piece of state is named only by the file that owns it."""
import ast
import importlib.util
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tfdarshan"
PLUGIN = ROOT / "tfdarshan_tb"

# what each room of tfdarshan may import (errors and _version are leaves every room may use)
LEAVES = {"errors", "_version"}
SHIM = "tfdarshan._native_shim"            # the compiled cffi module: only the binding touches it
SHIM_USERS = {"tfdarshan.capture._native"}
# measures: every figure a user reads, defined once; arithmetic on frames that any room above may use.
# steps: the step series' tables and the bookkeeping that builds them, which logs write beside each log
ALLOWED = {
    "capture": {"capture"},
    "measures": {"capture", "measures"},
    "steps": {"capture", "measures", "steps"},
    "logs": {"capture", "measures", "steps", "logs"},
    "tf": {"capture", "measures", "steps", "logs", "tf"},
    "advice": {"capture", "measures", "steps", "logs", "advice"},
    "analysis": {"capture", "measures", "steps", "logs", "analysis"},
    "cli": {"capture", "measures", "steps", "logs", "tf", "advice", "analysis", "cli", "top"},
    "top": {"capture", "measures", "steps", "logs", "tf", "advice", "top"},   # the public API: __init__, api, keras
}
PLUGIN_ALLOWED = {"capture", "measures", "steps", "logs", "advice", "analysis"}
# the tab's loaders (a session read into frames) and its presenters (frames into JSON): loaders never
# import a presenter
TAB_LOADERS = {"tfdarshan_tb.session_data", "tfdarshan_tb.rank_data"}
TAB_PRESENTERS = {"tfdarshan_tb.views", "tfdarshan_tb.rank_views", "tfdarshan_tb.plugin"}
MAX_PY_LINES = 450
MAX_C_LINES = 600


def module_name(path: pathlib.Path, root: pathlib.Path, package: str) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join([package, *parts])


def imports(path: pathlib.Path, name: str):
    """Every module a file imports, at any depth (function-local too)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
            # `from tfdarshan.tf import session` imports the module tfdarshan.tf.session;
            # `from tfdarshan import __version__` a name of tfdarshan/__init__ (resolve() tells them apart)
            for alias in node.names:
                yield f"{base}.{alias.name}", node.lineno


def room(module: str) -> str:
    """capture, logs, tf, advice, cli, a leaf (errors, _version), shim or top for a tfdarshan module."""
    if module == SHIM:
        return "shim"
    parts = module.split(".")
    if len(parts) > 1 and (PACKAGE / parts[1]).is_dir():
        return parts[1] if parts[1] != "_autostart" else "top"
    if len(parts) > 1 and parts[1] in LEAVES:
        return parts[1]
    return "top"


def our_modules():
    files = sorted(PACKAGE.rglob("*.py"))
    return {module_name(p, PACKAGE, "tfdarshan"): p for p in files}


MODULES = our_modules()


def resolve(target: str):
    """The tfdarshan module an import names (a name inside a module resolves to the module)."""
    if target == SHIM or target.startswith(SHIM + "."):
        return SHIM
    while target and target not in MODULES:
        if "." not in target:
            return None
        target = target.rsplit(".", 1)[0]
    return target


def ours(target: str) -> bool:
    return target == "tfdarshan" or target.startswith("tfdarshan.")


def wrong_way(name: str, path: pathlib.Path):
    """The imports of tfdarshan module `name` (at any depth) that run against the layout."""
    src = room(name)
    allowed = set() if src in LEAVES else ALLOWED.get(src, set()) | LEAVES
    if name == "tfdarshan.__main__":
        allowed = allowed | {"cli"}
    if name in SHIM_USERS:
        allowed = allowed | {"shim"}
    bad = []
    for target, line in imports(path, name):
        if target.split(".")[0] in ("tfdarshan_tb", "case_studies"):
            bad.append(f"line {line}: {target} (nothing in tfdarshan imports the tab or the case studies)")
            continue
        if not ours(target):
            continue
        dst = resolve(target)
        if dst and dst != name and room(dst) not in allowed:
            bad.append(f"line {line}: {dst} ({src} may import {sorted(allowed)})")
    return bad


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_run_one_way(name):
    bad = wrong_way(name, MODULES[name])
    assert not bad, f"{name} imports against the layout:\n" + "\n".join(bad)


def test_no_import_cycles():
    # edges are explicit imports only: importing tfdarshan.logs.x runs
    # tfdarshan/__init__ first, so an explicit `from tfdarshan import ...`
    # inside a sub-package is an edge (and a cycle), but a sub-package's own
    # import of its sibling through the parent (`from tfdarshan.tf import
    # session`) is an edge to the sibling only
    graph = {}
    for name, path in MODULES.items():
        deps = {resolve(t) for t, _ in imports(path, name) if ours(t)}
        graph[name] = {d for d in deps if d and d != name and d != SHIM}
    seen, stack, cycles = set(), [], []

    def visit(n):
        if n in stack:
            cycles.append(stack[stack.index(n):] + [n])
            return
        if n in seen:
            return
        seen.add(n)
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            visit(d)
        stack.pop()

    for n in sorted(graph):
        visit(n)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("path", sorted(PLUGIN.rglob("*.py")), ids=lambda p: p.name)
def test_tab_reads_logs_and_advice_only(path):
    # the tab never imports the TensorFlow hooks (tfdarshan.tf), nor the
    # public API that installs them (tfdarshan, api, keras), nor the shim
    name = module_name(path, PLUGIN, "tfdarshan_tb")
    bad = [f"line {line}: {t}" for t, line in imports(path, name)
           if ours(t) and room(resolve(t) or "tfdarshan") not in PLUGIN_ALLOWED | LEAVES]
    bad += [f"line {line}: {t} (the case studies)" for t, line in imports(path, name)
            if t.split(".")[0] == "case_studies"]
    assert not bad, f"{path.name} imports outside logs/advice/analysis/capture:\n" + "\n".join(bad)


def presenters_imported(path: pathlib.Path, name: str):
    """The imports of a tab module that name a presenter."""
    bad = []
    for target, line in imports(path, name):
        parts = target.split(".")
        if parts[0] == "tfdarshan_tb" and len(parts) > 1 \
                and f"tfdarshan_tb.{parts[1]}" in TAB_PRESENTERS:
            bad.append(f"line {line}: {target}")
    return bad


@pytest.mark.parametrize("name", sorted(TAB_LOADERS))
def test_the_tab_loads_data_apart_from_its_views(name):
    path = PLUGIN / (name.split(".")[1] + ".py")
    assert path.exists(), f"{name}: no such loader"
    bad = presenters_imported(path, name)
    assert not bad, f"{name} (a loader) imports a presenter:\n" + "\n".join(bad)


def test_the_checker_sees_a_loader_import_a_view(tmp_path):
    bad = tmp_path / "loader.py"
    bad.write_text("from tfdarshan_tb.views import display_path\n\n\ndef f():\n    from tfdarshan_tb import rank_views\n"
                   "    from tfdarshan_tb import downsample\n")
    found = presenters_imported(bad, "tfdarshan_tb.rank_data")
    assert [x.split(":")[0] for x in found] == ["line 1", "line 5"], found


FINDING_FIELDS = {"level", "title", "detail", "suggestion"}


def finding_look_alikes(path: pathlib.Path):
    """Where a module defines a Finding class or builds a dict with a finding's
    fields: findings.py's Finding is the one type every producer returns."""
    bad = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ClassDef) and node.name == "Finding":
            bad.append(f"line {node.lineno}: class Finding")
        elif isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if FINDING_FIELDS <= keys:
                bad.append(f"line {node.lineno}: a dict with a finding's fields")
    return bad


def test_findings_have_one_type():
    bad = {str(p.relative_to(ROOT)): found for p in PACKAGE.rglob("*.py")
           if p != PACKAGE / "advice" / "findings.py" and (found := finding_look_alikes(p))}
    assert not bad, f"findings built outside advice/findings.py's Finding: {bad}"
    assert finding_look_alikes(PACKAGE / "advice" / "findings.py")      # (the check sees the one there is)


def test_modules_stay_readable():
    long_py = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
               if (n := len(p.read_text().splitlines())) > MAX_PY_LINES}
    long_c = {str(p.relative_to(ROOT)): n for p in (ROOT / "native").glob("*.[ch]")
              if (n := len(p.read_text().splitlines())) > MAX_C_LINES}
    assert not long_py, f"Python modules over {MAX_PY_LINES} lines: {long_py}"
    assert not long_c, f"native files over {MAX_C_LINES} lines: {long_c}"


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")) + sorted(PLUGIN.rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_says_what_it_is_for(path):
    assert ast.get_docstring(ast.parse(path.read_text())), f"{path.relative_to(ROOT)} has no docstring"


def test_the_checker_sees_a_wrong_way_import(tmp_path):
    # the rules above must be able to fail: a function-local import of tf from
    # capture, a name from tfdarshan/__init__ inside logs, the shim outside
    # the binding, the tab from tfdarshan
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f():\n    from tfdarshan.tf import session\n"
                   "    from tfdarshan import __version__\n    import tfdarshan._native_shim\n"
                   "    import tfdarshan_tb.views\n")
    found = "\n".join(wrong_way("tfdarshan.capture.recorder", bad))
    for needle in ("tfdarshan.tf.session", "line 6: tfdarshan ", SHIM, "tfdarshan_tb.views"):
        assert needle in found, (needle, found)
    assert SHIM not in "\n".join(wrong_way("tfdarshan.capture._native", bad))
    # a leaf imports nothing of tfdarshan
    assert wrong_way("tfdarshan.errors", bad)
    assert room(resolve("tfdarshan.tf.session.open_session")) == "tf"


# ---------------------------------------------------------------- the C shim

NATIVE = ROOT / "native"
# built only into the benchmarks' copy of the shim, above everything it calls
NATIVE_EXTRA = [ROOT / "benchmarks" / "shim_stubs.c"]
# the originals the wrappers forward to are called by name in every wrapper;
# only hooks.c may store one
CALLED_BY_NAME = re.compile(r"tfd_real_")


def build_shim():
    spec = importlib.util.spec_from_file_location("tfd_build_shim_layout", NATIVE / "build_shim.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def nm(args, obj):
    out = subprocess.run(["nm", *args, str(obj)], check=True, capture_output=True, text=True).stdout
    return [line.split() for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def native_objects(tmp_path_factory):
    """{source: (layer, symbols it defines globally, symbols it leaves undefined,
    global data symbols it defines)}, from objects compiled as the build compiles
    them (without link-time optimisation, which would leave no symbols to read)."""
    if not (shutil.which("gcc") and shutil.which("nm")):
        pytest.skip("gcc and nm are needed to read the shim's object files")
    shim = build_shim()
    sources = [(i, NATIVE / s) for i, layer in enumerate(shim.LAYERS) for s in layer]
    sources += [(len(shim.LAYERS), p) for p in NATIVE_EXTRA]
    out = tmp_path_factory.mktemp("native-objects")
    jobs = []
    for layer, src in sources:
        obj = out / (src.stem + ".o")
        cmd = ["gcc", *shim.COMPILE_ARGS, "-I", str(NATIVE), "-c", str(src), "-o", str(obj)]
        jobs.append((layer, src, obj, subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)))
    found = {}
    for layer, src, obj, proc in jobs:
        _, err = proc.communicate()
        assert proc.returncode == 0, f"{src.name} does not compile:\n{err}"
        defined = {f[2] for f in nm(["--defined-only", "-g"], obj) if len(f) == 3}
        data = {f[2] for f in nm(["--defined-only", "-g"], obj) if len(f) == 3 and f[1] in "BDRGSV"}
        undefined = {f[-1] for f in nm(["-u"], obj)}
        found[src] = (layer, defined, undefined, data)
    return found


def calls_against_layers(objects):
    """Every symbol an object takes from one at its own layer or above."""
    owner = {sym: (src, layer) for src, (layer, defined, _, _) in objects.items() for sym in defined}
    bad = []
    for src, (layer, _, undefined, _) in sorted(objects.items()):
        for sym in sorted(undefined):
            if sym in owner and owner[sym][1] >= layer:
                bad.append(f"{src.name} (layer {layer}) uses {sym} of {owner[sym][0].name} (layer {owner[sym][1]})")
    return bad


def test_every_native_source_has_a_layer():
    listed = set(build_shim().SOURCES)
    on_disk = {p.name for p in NATIVE.glob("*.c")}
    assert listed == on_disk, f"not in build_shim.LAYERS: {sorted(on_disk - listed)}; gone: {sorted(listed - on_disk)}"


def test_native_objects_take_symbols_only_from_below(native_objects):
    bad = calls_against_layers(native_objects)
    assert not bad, "native calls that run up or sideways:\n" + "\n".join(bad)


def test_native_state_is_named_only_by_its_owner(native_objects):
    # a global variable of the shim is named only in the file that defines it
    # and its header (whose inline functions are how others read it)
    texts = {p: p.read_text() for p in [*NATIVE.glob("*.[ch]"), *NATIVE_EXTRA]}
    bad = []
    for src, (_, _, _, data) in native_objects.items():
        own = {src, src.with_suffix(".h")}
        for sym in sorted(data):
            word = re.compile(rf"\b{re.escape(sym)}\b")
            if CALLED_BY_NAME.match(sym):
                stored = re.compile(rf"\b{re.escape(sym)}\s*=[^=]")
                bad += [f"{p.name} stores {sym} (owned by {src.name})" for p, t in texts.items()
                        if p not in own and stored.search(t)]
                continue
            bad += [f"{p.name} names {sym} (owned by {src.name})" for p, t in texts.items()
                    if p not in own and word.search(t)]
    assert not bad, "native state named outside its owner:\n" + "\n".join(bad)


def test_the_native_checker_sees_a_call_up(native_objects):
    # the layering rule must be able to fail: the clock (the bottom) calling
    # the threads' list, and a rule calling another rule of its own layer
    objects = dict(native_objects)
    clock = NATIVE / "clock.c"
    layer, defined, undefined, data = objects[clock]
    objects[clock] = (layer, defined, undefined | {"threads_first"}, data)
    posix = NATIVE / "rules_posix.c"
    layer, defined, undefined, data = objects[posix]
    objects[posix] = (layer, defined, undefined | {"tfd_stdio_read"}, data)
    bad = "\n".join(calls_against_layers(objects))
    assert "clock.c (layer 0) uses threads_first of threads.c" in bad
    assert "rules_posix.c" in bad and "tfd_stdio_read" in bad
    assert not calls_against_layers(native_objects)


def test_benchmark_stubs_are_not_shipped():
    # the stubs that replace pread's original (benchmarks/shim_stubs.c) are
    # built only into the benchmarks' own copy of the shim
    from tfdarshan._native_shim import lib
    assert not hasattr(lib, "tfd_bench_stub")
    so = next((ROOT / "tfdarshan").glob("_native_shim*.so"), None)
    if so is None:
        pytest.skip("the shim is not built in this checkout")
    assert b"tfd_bench_stub" not in so.read_bytes()
