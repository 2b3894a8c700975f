"""Analysis that outgrows one process: a session's logs (one per rank)
reduced on Dask into partitioned Parquet tables per file, rank, step and
rank, and mount. engine.py picks where the graph runs; tables.py reduces one
log; analyze.py builds and writes the graph."""
