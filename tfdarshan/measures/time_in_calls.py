"""Time inside file calls, as Darshan's counters keep it (F_READ_TIME,
F_WRITE_TIME, F_META_TIME: summed over threads and calls, so it can exceed
the wall time it overlaps). The three parts stay apart in every table; a
sum of them is named for what it adds up, never "I/O time" alone:

- data_time = reads + writes: what bandwidth divides by;
- input_io_time = reads + metadata (open, stat, seek, close): what reading
  input costs, what input wait is made of and what staging saves;
- file_time = reads + writes + metadata: every second in file calls."""
from __future__ import annotations

READ_TIME, WRITE_TIME, META_TIME = "read_time", "write_time", "meta_time"
PARTS = (READ_TIME, WRITE_TIME, META_TIME)
DATA_TIME, INPUT_IO_TIME, FILE_TIME = "data_time", "input_io_time", "file_time"
# each figure's words, as the tab's cards, the tables and the reports print them
LABELS = {READ_TIME: "time in reads", WRITE_TIME: "time in writes",
          META_TIME: "time in opens, stats, seeks and closes",
          DATA_TIME: "time in reads and writes", INPUT_IO_TIME: "time in reads and metadata calls",
          FILE_TIME: "time in file calls (reads, writes and metadata)"}
# Darshan's counter of each part (prefixed by the module: POSIX_F_READ_TIME)
DARSHAN = {READ_TIME: "F_READ_TIME", WRITE_TIME: "F_WRITE_TIME", META_TIME: "F_META_TIME"}


def parts_of(records, module: str) -> dict:
    """{read_time, write_time, meta_time} of a module's Darshan records (a
    frame of one row per file, as Snapshot.posix): one column each."""
    return {part: records[f"{module}_{counter}"] for part, counter in DARSHAN.items()}


def data_time(t):
    """Reads + writes of a frame (or dict) holding the parts."""
    return t[READ_TIME] + t[WRITE_TIME]


def input_io_time(t):
    """Reads + metadata calls of a frame (or dict) holding the parts."""
    return t[READ_TIME] + t[META_TIME]


def file_time(t):
    """Reads + writes + metadata calls of a frame (or dict) holding the parts."""
    return t[READ_TIME] + t[WRITE_TIME] + t[META_TIME]
