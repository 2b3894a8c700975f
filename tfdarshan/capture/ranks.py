"""Which rank of which job this process is, from the launcher's environment.

Launchers tell each process its place in the job through environment
variables; no MPI call is needed (nor wanted: profiling must not depend on
the job's MPI library, or initialise it). The first launcher found wins, in
the order below, which puts the most specific ones first."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from typing import Mapping, Optional


@dataclasses.dataclass(frozen=True)
class Rank:
    rank: int
    size: int
    job: str          # identifies the job's processes to each other; file-name safe
    launcher: str     # where rank and size came from
    # the launcher names each run afresh (a re-run gets another `job`), so a
    # rank that comes late still joins its run; False where re-runs share the
    # name (TF_CONFIG, torchrun's default rendezvous): logs/jobdir.py then also
    # judges by time and by whether the run's ranks have finished
    per_run: bool = True

    @property
    def stem_suffix(self) -> str:
        """The part of a file name that tells ranks apart."""
        return f"rank{self.rank}"


def _int(env: Mapping[str, str], key: str) -> Optional[int]:
    v = env.get(key, "").strip()
    return int(v) if re.fullmatch(r"\d{1,9}", v) else None


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)[:80]


def _digest(*parts: str) -> str:
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()[:12]


def _requeued(env: Mapping[str, str]) -> str:
    """Slurm keeps a requeued job's id and numbers its steps from 0 again;
    SLURM_RESTART_COUNT tells the attempts apart."""
    n = _int(env, "SLURM_RESTART_COUNT")
    return f".r{n}" if n else ""


def _tf_config(env: Mapping[str, str]) -> Optional[Rank]:
    """TF_CONFIG's task: its global rank is its position among all tasks,
    in the cluster spec's order (chief first, then workers). Nothing in it
    changes between runs: every re-run has the same job name."""
    try:
        cfg = json.loads(env.get("TF_CONFIG", ""))
        cluster, task = cfg["cluster"], cfg["task"]
        order = sorted(cluster, key=lambda t: (t not in ("chief", "master"), t != "worker", t))
        rank, size = None, 0
        for kind in order:
            if kind == task["type"]:
                rank = size + int(task["index"])
            size += len(cluster[kind])
    except (ValueError, KeyError, TypeError):
        return None
    if rank is None or not 0 <= rank < size:
        return None
    spec = json.dumps(cluster, sort_keys=True)
    return Rank(rank, size, f"tfconfig-{_digest(spec)}", "TF_CONFIG", per_run=False)


def detect(env: Optional[Mapping[str, str]] = None) -> Optional[Rank]:
    """This process's rank, or None when no launcher says it is one of
    several (or says something impossible, such as rank 4 of 4)."""
    found = _detect(os.environ if env is None else env)
    return found if found and 0 <= found.rank < found.size else None


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _detect(env: Mapping[str, str]) -> Optional[Rank]:
    # Open MPI's mpirun: its job id (PMIx namespace) is made from mpirun's pid,
    # and the transport key it gives every rank is random per run
    rank, size = _int(env, "OMPI_COMM_WORLD_RANK"), _int(env, "OMPI_COMM_WORLD_SIZE")
    if rank is not None and size:
        job = env.get("OMPI_MCA_ess_base_jobid") or env.get("PMIX_NAMESPACE") or ""
        key = env.get("OMPI_MCA_orte_precondition_transports", "")
        name = "-".join(filter(None, ["ompi", _safe(job), _digest(key)[:8] if key else ""]))
        return Rank(rank, size, name, "OMPI_COMM_WORLD_RANK")
    # PMIx and PMI launchers (MPICH's Hydra, Intel MPI, srun --mpi=pmix: slurm.pmix.<job>.<step>)
    rank = _int(env, "PMIX_RANK")
    size = _int(env, "PMIX_SIZE") or _int(env, "PMI_SIZE") or _int(env, "SLURM_NTASKS")
    if rank is not None and size:
        job = env.get("PMIX_NAMESPACE", "")
        return Rank(rank, size, (f"pmix-{_safe(job)}" if job else "pmix") + _requeued(env), "PMIX_RANK")
    rank, size = _int(env, "PMI_RANK"), _int(env, "PMI_SIZE")
    if rank is not None and size:
        job = env.get("PMI_KVSNAME") or env.get("PMI_JOBID") or env.get("SLURM_JOB_ID") or ""
        return Rank(rank, size, (f"pmi-{_safe(job)}" if job else "pmi") + _requeued(env), "PMI_RANK")
    # Slurm's srun: one task per process; every srun is a step of its own
    rank, size = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS") or _int(env, "SLURM_NPROCS")
    if rank is not None and size:
        job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID", "")
        step = env.get("SLURM_STEP_ID") or env.get("SLURM_STEPID", "")
        ident = f"{job}.{step}" if step else job
        return Rank(rank, size, (f"slurm-{_safe(ident)}" if ident else "slurm") + _requeued(env), "SLURM_PROCID")
    # torchrun-style launchers. torchrun's run id is a fresh UUID with
    # --standalone (and a single node by default), else what --rdzv-id says:
    # "none" unless given, on every run, as MASTER_PORT is with a static rendezvous
    rank, size = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is not None and size:
        run_id = env.get("TORCHELASTIC_RUN_ID", "")
        where = _digest(env.get("MASTER_ADDR", ""), env.get("MASTER_PORT", ""), str(size))
        restart = _int(env, "TORCHELASTIC_RESTART_COUNT")
        name = "-".join(filter(None, ["world", _safe(run_id)[:40], where])) + (f".r{restart}" if restart else "")
        return Rank(rank, size, name, "RANK", per_run=bool(_UUID.fullmatch(run_id)))
    return _tf_config(env)
