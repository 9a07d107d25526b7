"""python -m evaluation.report RESULTS_DIR: see evaluation/report/cli.py."""
import sys

from evaluation.report.cli import main

sys.exit(main())
