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


def _tf_config(env: Mapping[str, str]) -> Optional[Rank]:
    """TF_CONFIG's task: its global rank is its position among all tasks,
    in the cluster spec's order (chief first, then workers)."""
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
    return Rank(rank, size, f"tfconfig-{_digest(spec)}", "TF_CONFIG")


def detect(env: Optional[Mapping[str, str]] = None) -> Optional[Rank]:
    """This process's rank, or None when no launcher says it is one of
    several (or says something impossible, such as rank 4 of 4)."""
    found = _detect(os.environ if env is None else env)
    return found if found and 0 <= found.rank < found.size else None


def _detect(env: Mapping[str, str]) -> Optional[Rank]:
    # Open MPI's mpirun (and its PMIx namespace, unique per job)
    rank, size = _int(env, "OMPI_COMM_WORLD_RANK"), _int(env, "OMPI_COMM_WORLD_SIZE")
    if rank is not None and size:
        job = env.get("OMPI_MCA_ess_base_jobid") or env.get("PMIX_NAMESPACE") or ""
        return Rank(rank, size, f"ompi-{_safe(job)}" if job else "ompi", "OMPI_COMM_WORLD_RANK")
    # PMIx and PMI launchers (MPICH's Hydra, Intel MPI, srun --mpi=pmix)
    rank = _int(env, "PMIX_RANK")
    size = _int(env, "PMIX_SIZE") or _int(env, "PMI_SIZE") or _int(env, "SLURM_NTASKS")
    if rank is not None and size:
        job = env.get("PMIX_NAMESPACE", "")
        return Rank(rank, size, f"pmix-{_safe(job)}" if job else "pmix", "PMIX_RANK")
    rank, size = _int(env, "PMI_RANK"), _int(env, "PMI_SIZE")
    if rank is not None and size:
        job = env.get("PMI_KVSNAME") or env.get("PMI_JOBID") or env.get("SLURM_JOB_ID") or ""
        return Rank(rank, size, f"pmi-{_safe(job)}" if job else "pmi", "PMI_RANK")
    # Slurm's srun: one task per process
    rank, size = _int(env, "SLURM_PROCID"), _int(env, "SLURM_NTASKS") or _int(env, "SLURM_NPROCS")
    if rank is not None and size:
        job = env.get("SLURM_JOB_ID", "")
        step = env.get("SLURM_STEP_ID", "")
        ident = f"{job}.{step}" if step else job
        return Rank(rank, size, f"slurm-{_safe(ident)}" if ident else "slurm", "SLURM_PROCID")
    # torchrun-style launchers
    rank, size = _int(env, "RANK"), _int(env, "WORLD_SIZE")
    if rank is not None and size:
        ident = env.get("TORCHELASTIC_RUN_ID") or \
            _digest(env.get("MASTER_ADDR", ""), env.get("MASTER_PORT", ""), str(size))
        return Rank(rank, size, f"world-{_safe(ident)}", "RANK")
    return _tf_config(env)
