"""A worker that starts TensorFlow's profiler server and reads a file in
4 KiB pieces every 10 ms (with a TensorFlow op each time) until told to stop (a file appears), logging the
time of each read. argv: port, data file, stop file, read log (JSON)."""
import json
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

import tfdarshan  # noqa: E402,F401  (the import hooks the profiler server)

port, data, stop, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
tf.profiler.experimental.server.start(port)
reads = []
fd = os.open(data, os.O_RDONLY)
size = os.fstat(fd).st_size
print("ready", flush=True)
offset = 0
while not os.path.exists(stop):
    t = time.time()
    n = len(os.pread(fd, 4096, offset))
    reads.append((t, n))
    tf.add(tf.constant(n), 1)           # TensorFlow work, so the capture has events to send back
    offset = (offset + 4096) % (size - 4096)
    time.sleep(0.01)
os.close(fd)
with open(out, "w") as f:
    json.dump(reads, f)
