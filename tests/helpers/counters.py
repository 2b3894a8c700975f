"""Reading a snapshot's counters in the capture tests: one file's row, and
counters compared by name with every mismatch named."""


def row(frame, path):
    """The one row of a snapshot frame for a path, as a dict."""
    sel = frame[frame["path"] == str(path)]
    assert len(sel) == 1, f"expected one row for {path}, found {len(sel)} in {list(frame['path'])}"
    return sel.iloc[0].to_dict()


def assert_counters(actual: dict, expected: dict, keys=None):
    keys = keys or expected.keys()
    diffs = {k: (actual.get(k, 0), expected.get(k, 0)) for k in keys
             if actual.get(k, 0) != expected.get(k, 0)}
    assert not diffs, f"counter mismatches (actual, expected): {diffs}"
