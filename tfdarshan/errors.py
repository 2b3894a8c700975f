"""Errors users can act on: the CLI prints them as one line and exits non-zero."""


class TfdarshanError(Exception):
    """Base class for expected failures (bad input, missing files, refusals)."""


class DarshanLogError(TfdarshanError):
    """A Darshan log could not be read or written; the message names the file."""
