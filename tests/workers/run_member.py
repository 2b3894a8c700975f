"""One rank of a test run: reads the files of its run and rank, then waits
at a barrier for the run's other ranks, as a distributed job's rendezvous
(MultiWorkerMirroredStrategy's, torch.distributed's) makes them wait.

argv: data directory, run label, rank (a number, or the name of the
environment variable the launcher puts it in), size, barrier directory."""
import os
import sys
import time

data, run, rank, size, barrier = sys.argv[1:6]
rank = int(rank) if rank.isdigit() else int(os.environ[rank])
size = int(size)
total = 0
for name in (f"{run}_rank{rank}.bin", f"{run}_shared.bin"):
    with open(os.path.join(data, name), "rb") as f:
        total += len(f.read())
os.makedirs(barrier, exist_ok=True)
with open(os.path.join(barrier, str(rank)), "w") as f:
    f.write(str(os.getpid()))
deadline = time.monotonic() + 300
while len(os.listdir(barrier)) < size:
    if time.monotonic() > deadline:
        sys.exit(f"rank {rank} of run {run}: the other ranks never came")
    time.sleep(0.02)
print(rank, total)
