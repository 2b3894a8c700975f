"""A many-rank session as the tab loads it: from the analysis tables
(`tfdarshan analyze`), built on first use when they are missing or older than
a rank's log, so that opening a 1,024-rank session never reads every rank's
records into one frame."""
from __future__ import annotations

import re
from typing import List, Tuple


from tfdarshan.analysis.analyze import rank_logs, read_table, skipped_logs, tables_fresh, with_tables
from tfdarshan.capture import kernel_io as K
from tfdarshan.capture import mounts as M
from tfdarshan.capture import served as SV
from tfdarshan.logs.darshan_log import read_job_record
from tfdarshan.logs.logdir import Session, partial_logs
from tfdarshan.advice import training_input as TI
from tfdarshan.analysis.tables import COVERAGE
from tfdarshan.measures.time_in_calls import FILE_TIME, file_time
from tfdarshan_tb.session_data import Progress, quiet, coverage_card, display_path, stored_advice, mount_names

RANK_STEM = re.compile(r"(.*)\.rank(\d+)")


def rank_stems(session: Session) -> List[Tuple[str, int]]:
    """(host, rank) of each rank log, from its file name."""
    return [(m.group(1), int(m.group(2))) for m in map(RANK_STEM.fullmatch, session.hosts) if m]


def is_many_ranks(session: Session) -> bool:
    """A session of several rank logs (and nothing else) is read from tables."""
    return len(session.hosts) > 1 and len(rank_stems(session)) == len(session.hosts)


def say_tables(session: Session, progress: Progress = quiet) -> None:
    """Tell whether the session's analysis tables are current, or are about
    to be built (with_tables builds them: once, never here)."""
    if tables_fresh(session.directory):
        progress("the analysis tables are up to date")
    else:
        progress(f"building the analysis tables from {len(rank_logs(session.directory))} rank logs "
                 "(tfdarshan analyze; once per session)")


class RankSessionData:
    """Everything the tab shows for a many-rank session, from its tables.
    Only reading them goes through with_tables, which builds them on Dask
    once when missing or stale, and again when one is damaged; what is
    derived from them afterwards never does, so a load of a session whose
    tables are current starts no Dask run."""

    def __init__(self, session: Session, progress: Progress = quiet):
        self.session = session
        say_tables(session, progress)
        # a damaged table (truncated, a page failing its checksum, a column gone) is built again
        files, self.ranks, self.steps, self.mounts_table = with_tables(
            session.directory, lambda where: self._read(progress),
            rebuilt=lambda why: progress(f"an analysis table is unreadable ({why}); building them again "
                                         "from the rank logs"))
        self._derive(files, progress)

    def _read(self, progress: Progress):
        progress("reading the analysis tables")
        return tuple(read_table(self.session.directory, t) for t in ("files", "ranks", "steps", "mounts"))

    def _derive(self, files, progress: Progress) -> None:
        session = self.session
        progress(f"read {len(files)} files, {len(self.ranks)} ranks, {len(self.steps)} rank steps; naming mounts")
        # the logs the tables left out as unreadable ({"log", "reason"})
        self.skipped_logs = skipped_logs(session.directory)
        # one rank's mount table names the mounts (a job's ranks see the same ones): a readable one's
        named = self.ranks["log"].iat[0] if len(self.ranks) else None
        first = session.directory / f"{named if named in session.hosts else session.hosts[0]}.darshan"
        record = read_job_record(first)
        self.mounts = [M.Mount(p, t) for p, t in record["mounts"]] or M.current()
        self.files = files.assign(mount=mount_names(M.labels(files["path"], self.mounts)), **{FILE_TIME: file_time(files)},
                                  path=files["path"].map(display_path),
                                  how=K.how_of_table(files), kind=TI.kinds(files["path"]))
        self.job_metadata = record["metadata"]
        # the job's coverage card: every rank's buckets added up
        cov = self.ranks[list(COVERAGE)].dropna(subset=["counted_bytes", "kernel_bytes"])
        self.coverage = coverage_card([{k: v for k, v in r.items() if v == v} for r in cov.to_dict("records")])
        self.advice, self.advice_problem = stored_advice(session.directory / "advice.json")
        # the ranks killed before writing their logs, named with why (their metadata; few)
        self.partial_logs = partial_logs(session, list(self.ranks.loc[self.ranks["partial"], "log"]))
        # what serving staged copies did, beside each rank's log (a few KB each)
        self.served = SV.combine([SV.read_beside(session.directory / f"{log}.darshan") for log in self.ranks["log"]])
