"""The step series: a window's I/O cut at its training steps. Its tables
(columns, the labels of what is not a step, the Parquet files beside each
Darshan log, read back checked) and the bookkeeping that builds them from
events, which the live process (tf/steps.py) and a replay of a killed
process's journal (logs/live_series.py) feed alike.

May import: tfdarshan.measures, tfdarshan.capture, tfdarshan.errors."""
