"""The console scripts pip installs (pyproject ``[project.scripts]``): ``cupid-eval``,
``cupid-synth`` and ``cupid-report``, the same programs as ``python -m evaluation.run``,
``python -m synthesis.run`` and ``python -m evaluation.report``. A console script starts
with its bin directory first on ``sys.path``, so a ``config.py`` or ``utils/`` in the
working directory cannot take the place of the harness's own modules."""
from __future__ import annotations

import sys


def _interrupted_before_work() -> None:
    print("\ninterrupted before any work; nothing to resume", file=sys.stderr)
    sys.exit(130)


def cupid_eval() -> None:
    from cupid.evaluation.run import main

    try:
        sys.exit(main())
    except KeyboardInterrupt:  # during setup, before any instance started
        _interrupted_before_work()


def cupid_synth() -> None:
    from cupid.synthesis.run import main

    try:
        sys.exit(main())
    except KeyboardInterrupt:  # a batch run has said where its batches are listed
        sys.exit(130)


def cupid_report() -> None:
    from cupid.evaluation.report.command import main

    sys.exit(main())
