"""One rank of a test job: reads its own shard and the file all ranks share
(with tf.io.read_file when TensorFlow is asked for, else open().read())."""
import os
import sys

data, use_tf = sys.argv[1], sys.argv[2] == "tf"
rank = int(sys.argv[3]) if len(sys.argv) > 3 else None
comm = None
if rank is None:            # under mpirun: MPI_Init through mpi4py
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
files = sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith(f"shard{rank}_"))
files.append(os.path.join(data, "shared.bin"))
if use_tf:
    import tensorflow as tf
    ds = tf.data.Dataset.from_tensor_slices(files).map(tf.io.read_file)
    total = sum(len(x.numpy()) for x in ds)
else:
    total = 0
    for f in files:
        with open(f, "rb") as fh:
            total += len(fh.read())
expected = sum(os.path.getsize(f) for f in files)
if total != expected:
    sys.exit(f"rank {rank} read {total} bytes of {expected}")
if comm is not None:
    assert comm.allreduce(1) == comm.Get_size()
    comm.Barrier()
