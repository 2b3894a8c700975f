"""A log's record of the CPUs its process could run on (capture/cores.py):
ranges written and read back, and this process's own affinity."""
import os

from hypothesis import given, strategies as st

from tfdarshan.capture import cores


@given(st.sets(st.integers(0, 300)))
def test_ranges_read_back_as_the_same_cpus(cpus):
    text = cores.ranges(cpus)
    assert cores.parse(text) == (frozenset(cpus) if cpus else None)
    # ranges are as short as the set allows: one part per run of consecutive CPUs
    runs = sum(1 for c in cpus if c - 1 not in cpus)
    assert (text.count(",") + 1 if text else 0) == runs


def test_text_that_is_not_ranges_reads_as_unknown():
    for bad in ("", None, "a-b", "3-1", "-1", "0-", "1,,2", "0-99999999"):
        assert cores.parse(bad) is None, bad


def test_this_process_records_its_affinity_and_the_nodes_count():
    m = cores.metadata()
    assert cores.parse(m["cpus"]) == frozenset(os.sched_getaffinity(0))
    assert int(m["node_cpus"]) == os.cpu_count()
