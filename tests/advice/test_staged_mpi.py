"""A job of 4 ranks under mpirun, rank 3's data on the slow FUSE tier, the
script unchanged between runs: run, recommend, stage, then run again with
`--staged`; `recommend --compare` shows the staged files served from the
fast tier and the job time saved. What is asserted comes from counts (the
opens and bytes the script makes, the mounts its step series name), and
from what the slow tier's sleeps guarantee; never from which run was faster."""
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile

import pandas as pd
import pytest

import slow_tier
from mpi_env import MPI_ENV, needs_mpi
from places import WORKERS

WORKER = WORKERS / "staged_rank.py"
HOST = socket.gethostname()
SIZE = 64 * 1024
STEPS, FILES = 5, 2
META, READ = 0.004, 0.003          # the slow tier's latencies (a lookup or open; a read request)

pytestmark = [pytest.mark.cost(25), needs_mpi, pytest.mark.timeout(900)]


@pytest.fixture(autouse=True)
def _needs_tier():
    slow_tier.skip_unless_available()


def cli(*args, env, timeout=600):
    p = subprocess.run([sys.executable, "-m", "tfdarshan", *args], env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, f"tfdarshan {args[0]}: {p.stderr[-3000:]}"
    return p


def job(logdir, env, *options):
    p = subprocess.run(["mpirun", "-np", "4", sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir),
                        *options, str(WORKER), str(env["DATA"]), str(env["SLOW"])],
                       env={**env, **MPI_ENV}, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return p


def step_files(logdir) -> pd.DataFrame:
    session = next(d for d in (pathlib.Path(logdir) / "plugins" / "tfdarshan").iterdir() if not d.name.startswith("."))
    return pd.concat([pd.read_parquet(f).assign(rank=int(f.name.split(".rank")[1].split(".")[0]))
                      for f in session.glob("*.rank*.step_files.parquet")], ignore_index=True)


def test_four_ranks_staged_without_changing_the_script(tmp_path):
    from case_studies.slowfs import mounted
    data, slow_root = tmp_path / "data", tmp_path / "slow-root"
    data.mkdir()
    slow_root.mkdir()
    for r in range(4):
        for i in range(FILES):
            ((slow_root if r == 3 else data) / f"r{r}_{i}.bin").write_bytes(os.urandom(SIZE))
    fast = tempfile.mkdtemp(prefix="tfd-staged-mpi-", dir="/dev/shm")
    (tmp_path / "fast.toml").write_text(f'[[tier]]\npath = "{fast}"\nname = "fast"\nbandwidth = "10000G"\n'
                                        "read_latency = 1e-9\nopen_latency = 1e-9\nstat_latency = 1e-9\n")
    try:
        with mounted(str(slow_root), str(tmp_path / "slow"), meta_latency=META, read_latency=READ,
                     bandwidth="0") as slow:
            env = {**os.environ, "TFDARSHAN_STAGING_MAP": str(tmp_path / "map" / "staged.json"),
                   "DATA": str(data), "SLOW": str(slow)}
            slow_files = sorted(os.path.join(slow, f"r3_{i}.bin") for i in range(FILES))
            job(tmp_path / "before", env)
            manifest = tmp_path / "stage.json"
            cli("recommend", str(tmp_path / "before"), "--fast-tier", fast, "--tiers", str(tmp_path / "fast.toml"),
                "--capacity", f"{FILES * SIZE}B", "--manifest", str(manifest), env=env)
            # every step waits for rank 3: its files are the plan
            assert sorted(e["source"] for e in json.loads(manifest.read_text())["entries"]) == slow_files
            cli("stage", str(manifest), "--quiet", env=env)
            job(tmp_path / "after", env, "--staged", str(manifest))
            text = cli("recommend", "--compare", str(tmp_path / "before"), str(tmp_path / "after"), env=env).stdout
            r = json.loads(cli("recommend", "--compare", str(tmp_path / "before"), str(tmp_path / "after"),
                               "--format", "json", env=env).stdout)
            before, after = step_files(tmp_path / "before"), step_files(tmp_path / "after")
    finally:
        shutil.rmtree(fast, ignore_errors=True)
    # served from the fast tier: each staged file opened once a step, every byte of it from its copy
    s = r["served"]
    assert (s["served_from"], s["opens"], s["bytes"], s["files_throughout"]) == \
        ("/dev/shm", STEPS * FILES, STEPS * FILES * SIZE, FILES)
    assert (r["copies_read"], r["sources_read"]) == (FILES, 0)
    assert [x for x in text.splitlines() if x.startswith("served from /dev/shm: 10 opens, 640.0 KiB")]
    # the step series say where each step's bytes came from: rank 3's from /dev/shm after, the slow tier before
    # (MPI maps its own segments on /dev/shm: rows without bytes read)
    steps = lambda f: f[(f["step"] >= 0) & (f["rank"] == 3) & (f["bytes_read"] > 0)]
    assert steps(before).groupby("mount")["bytes_read"].sum().to_dict() == {str(slow): STEPS * FILES * SIZE}
    assert steps(after).groupby("mount")["bytes_read"].sum().to_dict() == {"/dev/shm": STEPS * FILES * SIZE}
    # the job time: the training time before holds rank 3's sleeps on the slow tier
    # (an open pays two lookups and the open; a read, one request), and --compare says what it saved
    w = r["wall"]["training_time"]
    assert w["before"] >= STEPS * FILES * (3 * META + READ) * 0.98
    assert w["change"] == pytest.approx((w["after"] - w["before"]) / w["before"])
    line = [x for x in text.splitlines() if x.startswith("training time")]
    assert len(line) == 1 and f"{100 * w['change']:+.0f} %" in line[0], text
