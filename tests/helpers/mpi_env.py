"""What the multi-rank tests need of Open MPI: a mark that skips them, saying
why, where mpirun or mpi4py is missing, and the environment mpirun runs
ranks with here (as root, more ranks than cores)."""
import importlib.util
import shutil

import pytest

needs_mpi = pytest.mark.skipif(
    not shutil.which("mpirun") or importlib.util.find_spec("mpi4py") is None,
    reason="needs Open MPI's mpirun and mpi4py (make test installs openmpi-bin and the test extra)")
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1", "TF_CPP_MIN_LOG_LEVEL": "2"}
