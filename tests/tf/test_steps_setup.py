"""Steps are batches under every launcher: what happens before the first
step begins is the set-up, an entry of its own (series.SETUP_STEP), and
what follows the last step's end is the wind-down (AFTER_STEPS); neither
is added to step 1 or to the last step. Once, in MPI runs, step 1 started
at the first collect after the window opened and swallowed up to 20 s of
set-up, and the last step lasted until the process exited, so the step
series summed to 3-4x model.fit()'s time.

Assertions hold for any latency: durations are compared with wall times
measured around them (a step lies inside fit(), so their sum is at most
fit's time), and set-up is at least the time slept in it."""
import json
import pathlib
import time

import pytest

import tfdarshan
from tfdarshan.measures import input_wait
from tfdarshan.logs.logdir import find_sessions, load_steps
from tfdarshan.steps.series import AFTER_STEPS, SETUP_STEP
from mpi_env import needs_mpi
from mpi_tf_job import FIT_FILES, NRANKS, PAUSE, batch_size

pytestmark = pytest.mark.cost(45)

SLACK = 0.010        # two monotonic clocks read microseconds apart: a step sum may exceed fit by that


def _read(path):
    with open(path, "rb") as f:
        return len(f.read())


def test_setup_and_wind_down_are_apart_in_one_process(tmp_path):
    # given files read before, inside and after three marked steps, with pauses around the steps
    before, inside, after = (tmp_path / n for n in ("config.json", "shard.bin", "summary.txt"))
    before.write_bytes(b"c" * 1234)
    inside.write_bytes(b"d" * 50_000)
    after.write_bytes(b"a" * 777)
    logdir = tmp_path / "logs"
    # when
    with tfdarshan.profile(logdir=str(logdir)):
        t0 = time.perf_counter()
        _read(before)
        time.sleep(0.3)
        t1 = time.perf_counter()
        for i in range(3):
            with tfdarshan.step(i):
                _read(inside)
        t2 = time.perf_counter()
        time.sleep(0.2)
        _read(after)
    # then: the set-up holds the first read and at least its pause, the steps only theirs
    [s] = find_sessions(logdir)
    steps, files = load_steps(s)
    by = steps.set_index("step")
    assert list(steps["step"]) == [SETUP_STEP, 0, 1, 2, AFTER_STEPS]
    assert by.at[SETUP_STEP, "bytes_read"] == 1234 and by.at[AFTER_STEPS, "bytes_read"] == 777
    assert [by.at[i, "bytes_read"] for i in range(3)] == [50_000] * 3
    assert by.at[SETUP_STEP, "end"] - by.at[SETUP_STEP, "start"] >= 0.3 - 1e-3
    assert by.at[AFTER_STEPS, "end"] - by.at[AFTER_STEPS, "start"] >= 0.2 - 1e-3
    real = steps[steps["step"] >= 0]
    assert float((real["end"] - real["start"]).sum()) <= (t2 - t1) + SLACK
    assert float(real["start"].min()) >= float(by.at[SETUP_STEP, "end"]) - 1e-9
    # the files of each entry, by path
    per = files.groupby("step")["path"].apply(set)
    assert per[SETUP_STEP] == {str(before)} and per[AFTER_STEPS] == {str(after)}
    assert all(per[i] == {str(inside)} for i in range(3))
    # the share of step time counts training steps only
    counted = input_wait.of_series(steps)
    assert set(counted.loc[counted["counted"], "step"]) == {0, 1, 2}
    assert t2 - t0 >= 0.3


@needs_mpi
def test_mpirun_four_ranks_keras_steps_are_fits_batches(mpi_tf_job):
    # given four ranks under mpirun that set up for PAUSE s (and read a config file) before fit()
    # (the shared job: helpers/mpi_tf_job.py)
    nranks, pause = NRANKS, PAUSE
    data, config, out = (pathlib.Path(mpi_tf_job[k]) for k in ("batches", "config", "out"))
    logdir = pathlib.Path(mpi_tf_job["logdir"])
    # then: each rank's steps are its batches, inside its own fit()
    [s] = find_sessions(logdir)
    assert len(s.hosts) == nranks
    for host in s.hosts:
        r = int(host.rsplit(".rank", 1)[1])
        own = json.loads((out / f"rank{r}.json").read_text())
        steps, files = load_steps(s, host)
        real = steps[steps["step"] >= 0]
        assert sorted(real["step"]) == list(range(1, own["batches"] + 1)), (r, list(steps["step"]))
        step_sum = float((real["end"] - real["start"]).sum())
        assert step_sum <= own["fit"] + SLACK, (r, step_sum, own["fit"])
        # the set-up is recorded apart: at least the pause, with the config file's bytes
        setup = steps[steps["step"] == SETUP_STEP]
        assert len(setup) == 1 and float(setup["end"].iat[0] - setup["start"].iat[0]) >= pause - 1e-3
        setup_files = files[files["step"] == SETUP_STEP]
        assert str(config) in set(setup_files["path"])
        assert str(config) not in set(files.loc[files["step"] >= 0, "path"])
        # and so are the shards its set-up read through tf.data before fit()
        shards = {p for p, (owner, _) in mpi_tf_job["sizes"].items() if owner == r}
        assert shards <= set(setup_files["path"]) and not shards & set(files.loc[files["step"] >= 0, "path"])
        # every byte of the rank's own batch files was read in the window, prefetch included
        mine = files[files["path"].str.startswith(str(data))]
        assert int(mine["bytes_read"].sum()) == 2 * FIT_FILES * batch_size(r)
