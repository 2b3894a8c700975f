"""The wheel ships every package folder: setuptools' build_py (the step that
puts the Python files and package data into a wheel) copies every `.py` under
`tfdarshan/` and every `.py` and `.js` under `tfdarshan_tb/`, and says nothing
about packages it was not told of. What is expected is found by walking the
source tree, so a new sub-package is covered without editing this test.
An editable install (`pip install -e .`) maps each package to the folder of
the same name, and setuptools says nothing of that mapping but the notice it
prints for every project whose packages sit beside setup.py. (Building the
real wheel compiles the shim and takes too long for the suite; `pip wheel`
runs the same build_py, `pip install -e .` the same editable_wheel.)"""
import ast
import pathlib
import re
import subprocess
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
# source folder -> the name it is imported by
SOURCES = {"tfdarshan": "tfdarshan", "tfdarshan_tb": "tfdarshan_tb"}
SHIPPED_SUFFIXES = {".py", ".js"}


def source_files():
    """Every file the wheel must hold, as its path inside the wheel."""
    for folder, package in SOURCES.items():
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in SHIPPED_SUFFIXES and "__pycache__" not in path.parts:
                yield pathlib.PurePosixPath(package, *path.relative_to(ROOT / folder).parts)


def setuptools_warnings(output: str):
    """setuptools' warnings are classes (SetuptoolsDeprecationWarning, _Warning...), printed "Name: text";
    distutils' own lower-case "warning: byte-compiling is disabled" is not one of them."""
    return re.findall(r"^.*\w*Warning: .*$", output, flags=re.M)


def test_build_py_ships_every_source_file_without_warning(tmp_path):
    out = tmp_path / "lib"
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    warnings = setuptools_warnings(proc.stdout + proc.stderr)
    assert not warnings, "\n".join(warnings)
    shipped = {pathlib.PurePosixPath(p.relative_to(out).as_posix()) for p in out.rglob("*") if p.is_file()}
    expected = set(source_files())
    assert expected, "found no source files"
    assert {p.parts[0] for p in expected} == set(SOURCES.values())
    missing = sorted(str(p) for p in expected - shipped)
    assert not missing, f"left out of the wheel: {missing}"
    # every package folder of the source tree is a package of the wheel
    folders = {p.parent for p in expected}
    assert folders <= {p.parent for p in shipped}


# the hook `pip install -e .` calls (PEP 660), without the cffi extension: the shim's build is
# not what is checked here (build_ext runs apart from the mapping) and would take a minute
EDITABLE_WITHOUT_SHIM = """
import sys, setuptools
from setuptools import build_meta
build = setuptools.setup
setuptools.setup = lambda **kw: build(**{k: v for k, v in kw.items() if k != "cffi_modules"})
build_meta.build_editable(sys.argv[1])
"""
# what setuptools 84 prints for every editable install whose packages sit beside setup.py
# (editable_wheel._TopLevelFinder), mapped or not; anything else it says is about this project
LAYOUT_NOTICES = ("Editable install will be performed using a meta path finder",
                  "Editable installation.")


def test_editable_install_maps_each_package_to_its_own_folder(tmp_path):
    proc = subprocess.run([sys.executable, "-c", EDITABLE_WITHOUT_SHIM, str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    warnings = [w for w in setuptools_warnings(output) if not any(n in w for n in LAYOUT_NOTICES)]
    assert not warnings, "\n".join(warnings)
    # no folder named apart from its package, nor any mapping of one, is mentioned
    assert not re.search(r"tb_plugin|package.dir|distributed as data", output), output[-3000:]
    (wheel,) = tmp_path.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        (finder,) = [n for n in z.namelist() if n.endswith("_finder.py")]
        source = z.read(finder).decode()
    # the finder's table: {package: the folder it is imported from}
    (mapping,) = [node.value for node in ast.walk(ast.parse(source)) if isinstance(node, (ast.Assign, ast.AnnAssign))
                  and getattr(node.target if isinstance(node, ast.AnnAssign) else node.targets[0], "id", "") == "MAPPING"]
    mapping = ast.literal_eval(mapping)
    assert mapping == {name: str(ROOT / name) for name in SOURCES.values()}, mapping
    assert all(pathlib.Path(folder).name == name for name, folder in mapping.items())
