"""python -m evaluation.report RESULTS_DIR: see evaluation/report/command.py."""
import sys

from .command import main

sys.exit(main())
