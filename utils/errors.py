"""The one small hierarchy of what stops a run (both pipelines, the command lines and the
Python API): ``str(exc)`` is the one line the command prints, ``exit_code`` its exit status.

    CupidError
      BadInput        (a ValueError) an argument, a flag, a data file's row and field, a setting
      SetupError      a model, key, server, run or output directory that cannot be used as it is
      StorageError    (an OSError) the file system refused a write or a read; exit status 3
    Interrupted       (a KeyboardInterrupt) Ctrl-C, SIGTERM or SIGHUP; exit status 128 + signal

A step that fails is none of these: it is recorded in the results and counted (exit status 1).
"""
from __future__ import annotations


class CupidError(Exception):
    exit_code = 2


class BadInput(CupidError, ValueError):
    """Bad input: the message names the argument, or the file, row and field."""


class SetupError(CupidError):
    """The run cannot start as set up (a missing key, an unreachable server, a run directory
    made with other settings, an output directory in use): nothing was asked."""


class Interrupted(KeyboardInterrupt):
    """The run was stopped by a signal; every finished step is kept, a rerun resumes.
    ``results``: results.json's content written before the stop (at ``results_path``), if any."""

    def __init__(self, message: str, exit_code: int = 130):
        super().__init__(message)
        self.message, self.exit_code = message, exit_code
        self.results: dict | None = None
        self.results_path = None
