"""One rank of a test job, told its rank on the command line (as Slurm's
variables tell `tfdarshan run`): reads its own shards and the file all
ranks share with open().read(), and checks it got every byte."""
import os
import sys

data, rank = sys.argv[1], int(sys.argv[3])
files = sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith(f"shard{rank}_"))
files.append(os.path.join(data, "shared.bin"))
total = 0
for f in files:
    with open(f, "rb") as fh:
        total += len(fh.read())
expected = sum(os.path.getsize(f) for f in files)
if total != expected:
    sys.exit(f"rank {rank} read {total} bytes of {expected}")
