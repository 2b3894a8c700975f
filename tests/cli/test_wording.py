"""Sentences a user reads, from issue 29: `tfdarshan run -- python
train.py` runs train.py (and says in which Python) or says what to type;
a per-node comparison never says a plan "saves -27 µs more (-0 %)". The
re-read finding's "all input is" in human units, analyze's most shared
file and Keras' shuffle warning are held by test_tfdata_files,
test_spawn_session and test_case_studies."""
import os
import subprocess
import sys

import pytest

SCRIPT = "import sys\nprint('ran', sys.argv[1:])\n"


def run(tmp_path, *argv):
    return subprocess.run([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(tmp_path / "logs"), *argv],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)


@pytest.mark.parametrize("python", ["python3", sys.executable])
def test_run_accepts_the_interpreter_before_the_script(tmp_path, python):
    (tmp_path / "train.py").write_text(SCRIPT)
    r = run(tmp_path, "--", python, "train.py", "--epochs", "3")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[0] == "ran ['--epochs', '3']"
    assert "no such script" not in r.stderr
    # said when the Python named is not the one that runs it
    named = python if os.sep in python else __import__("shutil").which(python)
    same = named is not None and os.path.realpath(named) == os.path.realpath(sys.executable)
    assert ("in this Python" in r.stderr) == (not same)


def test_run_accepts_python_dash_m(tmp_path):
    (tmp_path / "trainmod.py").write_text(SCRIPT)
    r = run(tmp_path, "--", "python", "-m", "trainmod", "x")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[0] == "ran ['x']"


@pytest.mark.parametrize("argv", [["--", "python", "-u", "train.py"], ["--", "python"]])
def test_run_says_what_to_type_for_what_it_cannot_take(tmp_path, argv):
    (tmp_path / "train.py").write_text(SCRIPT)
    r = run(tmp_path, *argv)
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("tfdarshan run: error:") and "tfdarshan run [options] script.py args" in line
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").rglob("*.darshan"))


def test_a_missing_script_says_what_to_type(tmp_path):
    r = run(tmp_path, "nope.py")
    assert r.returncode == 2
    assert "nope.py: no such script (usage: tfdarshan run [options] script.py args..." in r.stderr


@pytest.mark.parametrize("sharded, replicated, said", [
    (0.002, 0.001, "Sharded saves 1.0 ms more (100 %)."),
    (0.001, 0.001027, "Replicated saves 27 µs more (3 %)."),
    (1.0, 1.000027, "Replicated saves 27 µs more (under 1 %)."),
    (0.5, 0.5, "Both save the same."),
    (0.001, 0.0, "Sharded saves 1.0 ms more."),
])
def test_the_per_node_comparison_names_the_plan_that_saves_more(sharded, replicated, said):
    from tfdarshan.advice.per_node import _which_saves_more
    assert _which_saves_more(sharded, replicated) == said
    assert "-" not in said
