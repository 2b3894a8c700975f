"""Genuine Darshan logs: written with Darshan's own log library (the
libdarshan-util inside the `darshan` wheel), checked, and read back.

The public face of darshan_writer, darshan_checker and darshan_reader."""
from tfdarshan.logs.darshan_checker import check_log
from tfdarshan.logs.darshan_format import darshan_util_version, library_path
from tfdarshan.logs.darshan_reader import read_darshan_log, read_job_record
from tfdarshan.logs.darshan_writer import job_id_from_environment, write_darshan_log

__all__ = ["check_log", "darshan_util_version", "job_id_from_environment", "library_path", "read_darshan_log",
           "read_job_record", "write_darshan_log"]
