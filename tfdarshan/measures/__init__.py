"""Every figure a user reads, defined once, with its label: the tab (one
rank or many), `analyze`'s tables, `recommend`'s report and `--compare`
import these and never compute them on their own.

- `input_wait`: input wait, as the job's figure (a share of step time over
  every rank's counted steps), each rank's own share, and the seconds of
  one step of one process;
- `time_in_calls`: time inside file calls, its parts (reads, writes,
  metadata) kept apart, and each sum named for what it adds up;
- `bandwidth`: bytes moved over the time in the calls that moved them;
- `human`: how a figure is written for a person (sizes, durations, shares).

Below `logs` (which may use them) and above `capture`: a measure is
arithmetic on frames and arrays, and reads no file."""
