"""One rank of tests/advice/test_staged_mpi.py's job, the same script before and
after staging: five synchronous steps, each reading the rank's two files
(rank 3's sit on the slow tier), then a barrier."""
import os
import sys

import tfdarshan
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
data = sys.argv[2] if rank == 3 else sys.argv[1]
mine = sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith(f"r{rank}_"))
total = 0
for step in range(5):
    with tfdarshan.step(step):
        for path in mine:
            with open(path, "rb") as fh:
                total += len(fh.read())
        comm.Barrier()              # every rank waits for the slowest
expected = 5 * sum(os.path.getsize(p) for p in mine)
if total != expected:
    sys.exit(f"rank {rank} read {total} bytes of {expected}")
