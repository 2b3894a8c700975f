"""The wheel ships every package folder: setuptools' build_py (the step that
puts the Python files and package data into a wheel) copies every `.py` under
`tfdarshan/` and every `.py` and `.js` under `tb_plugin/` (as `tfdarshan_tb`),
and says nothing about packages it was not told of. What is expected is
found by walking the source tree, so a new sub-package is covered without
editing this test. (Building the real wheel compiles the shim and takes too
long for the suite; `pip wheel` runs the same build_py.)"""
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# source folder -> the name it is imported by
SOURCES = {"tfdarshan": "tfdarshan", "tb_plugin": "tfdarshan_tb"}
SHIPPED_SUFFIXES = {".py", ".js"}


def source_files():
    """Every file the wheel must hold, as its path inside the wheel."""
    for folder, package in SOURCES.items():
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in SHIPPED_SUFFIXES and "__pycache__" not in path.parts:
                yield pathlib.PurePosixPath(package, *path.relative_to(ROOT / folder).parts)


def test_build_py_ships_every_source_file_without_warning(tmp_path):
    out = tmp_path / "lib"
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # setuptools' warnings are classes (BuildBackendWarning, _Warning...), printed "Name: text";
    # distutils' own lower-case "warning: byte-compiling is disabled" is not one of them
    warnings = re.findall(r"^.*\w*Warning: .*$", proc.stdout + proc.stderr, flags=re.M)
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
