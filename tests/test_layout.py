"""The layout keeps itself: imports run one way between the sub-packages
(cli -> advice / analysis / tf / logs -> capture), no module imports another that
imports it back, the TensorBoard plugin reads logs, advice and analysis tables and never the
TensorFlow hooks, and no module grows past what one can read in a sitting."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tfdarshan"
PLUGIN = ROOT / "tb_plugin"

# what each room of tfdarshan may import (errors and _version are leaves every room may use)
LEAVES = {"errors", "_version"}
SHIM = "tfdarshan._native_shim"            # the compiled cffi module: only the binding touches it
SHIM_USERS = {"tfdarshan.capture._native"}
ALLOWED = {
    "capture": {"capture"},
    "logs": {"capture", "logs"},
    "tf": {"capture", "logs", "tf"},
    "advice": {"capture", "logs", "advice"},
    "analysis": {"capture", "logs", "analysis"},
    "cli": {"capture", "logs", "tf", "advice", "analysis", "cli", "top"},
    "top": {"capture", "logs", "tf", "advice", "top"},      # the public API: __init__, api, keras
}
PLUGIN_ALLOWED = {"capture", "logs", "advice", "analysis"}
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
        if target.split(".")[0] in ("tfdarshan_tb", "tb_plugin", "case_studies"):
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
